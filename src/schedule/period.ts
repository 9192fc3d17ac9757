/**
 * Periods, period keys and cron fire times, all in a schedule's IANA time zone. Pure: no clock,
 * no database.
 *
 * Fire times: croner parses the expression and walks the *wall clock* (dialect.ts decides what
 * the text means, Vixie cron's way); this module turns each matching wall time into instants
 * itself (zone.ts), which costs two Intl calls a fire away from offset changes. The DST rules
 * are Vixie cron's (cronie's cron.c), with dialect.ts saying which jobs are interval jobs, but
 * for two of cronq's own (README, Cron dialect): several matches skipped by one jump fire once
 * (cronie starts the job once for each), and a jump of any size is a clock change (cronie takes
 * one over 3 hours for the clock being set, and runs nothing for it):
 *
 * - A *fixed-time* job fires once per matching wall time. One that occurs twice (an overlap)
 *   fires at its first occurrence; one that does not exist (a gap) fires once, at the instant
 *   the clock jumps, even when the jump crosses midnight (America/Nuuk, 28 March 2026, 23:00 →
 *   00:00) or skips a whole day (Pacific/Apia, 30 December 2011). Several skipped matches of one
 *   gap fire once. So every local day of a daily schedule fires exactly once.
 * - An *interval* job (`0 * * * *`, `*\/15 2 * * *`) fires at every real instant whose wall time
 *   matches: both occurrences in an overlap (hourly fires 25 times on Berlin's autumn day, both
 *   02:00 fires sharing an `hour` key), none in a gap (23 hourly fires in spring).
 *
 * A fire at a jump is keyed by the wall time it was meant for (periodKeyOfFire): `0 23 * * *`
 * with `period: 'day'` in Nuuk keys its 28 March 2026 fire, which happens on the 29th at
 * 00:00, `2026-03-28`. When a real match falls on the same instant, the instant fires once,
 * under the earlier (skipped) wall time.
 */
import { compileCron, type CompiledCron } from './dialect.ts';
import { UsageError } from '../errors.ts';
import { formatterFor, localFields, mod, requireFormatter, transitionAt, wallInstants, wallOf, type LocalFields } from './zone.ts';

/** Every period a schedule can key its jobs by, shortest first, `tick` last. */
export const PERIODS = ['minute', 'hour', 'day', 'week', 'month', 'year', 'tick'] as const;

/**
 * How a schedule names one run. Calendar periods are named in the schedule's time zone; `tick`
 * names the fire instant itself, so every fire is its own period.
 */
export type Period = (typeof PERIODS)[number];

const MINUTE_MS = 60_000;
const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;

/** True if `value` is one of PERIODS. */
export function isPeriod(value: unknown): value is Period {
  return typeof value === 'string' && (PERIODS as readonly string[]).includes(value);
}

/** True if `timezone` is a zone name this runtime's Intl knows (e.g. `Europe/Berlin`, `UTC`). */
export function isValidTimeZone(timezone: string): boolean {
  return formatterFor(timezone) !== null;
}

// ---------------------------------------------------------------------------------------------
// Period keys

const pad = (n: number, width = 2): string => String(n).padStart(width, '0');

/**
 * The key naming the period that contains `instant`, in `timezone`:
 * minute `2026-11-30T06:15`, hour `2026-11-30T06`, day `2026-11-30`, week `2026-W49` (ISO
 * week-year and week), month `2026-11`, year `2026`; tick: the instant in UTC to the second,
 * `2026-11-30T06:15:00Z` (milliseconds dropped). In a DST overlap the repeated local minutes
 * and hours get the same key twice. Throws UsageError for an unknown zone, RangeError for an
 * invalid Date.
 */
export function periodKey(period: Period, instant: Date, timezone: string): string {
  const formatter = requireFormatter(timezone);
  const ms = msOf(instant, 'periodKey');
  if (period === 'tick') return new Date(ms - mod(ms, 1000)).toISOString().replace('.000Z', 'Z');
  return keyOfFields(period, localFields(formatter, ms));
}

/** The calendar period key of local fields `f` (any period but tick). */
function keyOfFields(period: Exclude<Period, 'tick'>, f: LocalFields): string {
  const date = `${pad(f.year, 4)}-${pad(f.month)}-${pad(f.day)}`;
  switch (period) {
    case 'minute':
      return `${date}T${pad(f.hour)}:${pad(f.minute)}`;
    case 'hour':
      return `${date}T${pad(f.hour)}`;
    case 'day':
      return date;
    case 'week': {
      const { weekYear, week } = isoWeek(f.year, f.month, f.day);
      return `${pad(weekYear, 4)}-W${pad(week)}`;
    }
    case 'month':
      return `${pad(f.year, 4)}-${pad(f.month)}`;
    case 'year':
      return pad(f.year, 4);
    default:
      throw new UsageError(`unknown period '${String(period)}' (use one of ${PERIODS.join(', ')})`);
  }
}

/** ISO 8601: weeks start on Monday and belong to the year that holds their Thursday. */
function isoWeek(year: number, month: number, day: number): { weekYear: number; week: number } {
  const date = Date.UTC(year, month - 1, day);
  const mondayBased = mod(new Date(date).getUTCDay() - 1, 7);
  const thursday = date + (3 - mondayBased) * DAY_MS;
  const weekYear = new Date(thursday).getUTCFullYear();
  const week = 1 + Math.floor((thursday - Date.UTC(weekYear, 0, 1)) / (7 * DAY_MS));
  return { weekYear, week };
}

/**
 * A nominal upper bound on the length of one period, for checking that a retention covers
 * the catch-up window plus one period: minute 60 s, hour 1 h, day 25 h, week 7 d + 1 h,
 * month 31 d + 1 h, year 366 d + 1 h (the extra hour is the longest DST day). `tick` is 0: its
 * period is a single instant. Nominal because a DST overlap repeats a minute or hour key one
 * hour later; the second fire under that key is the duplicate the key exists to absorb.
 */
export function periodLengthMs(period: Period): number {
  switch (period) {
    case 'minute':
      return MINUTE_MS;
    case 'hour':
      return HOUR_MS;
    case 'day':
      return 25 * HOUR_MS;
    case 'week':
      return 7 * DAY_MS + HOUR_MS;
    case 'month':
      return 31 * DAY_MS + HOUR_MS;
    case 'year':
      return 366 * DAY_MS + HOUR_MS;
    case 'tick':
      return 0;
    default:
      throw new UsageError(`unknown period '${String(period)}' (use one of ${PERIODS.join(', ')})`);
  }
}

// ---------------------------------------------------------------------------------------------
// Cron fire times

/** Milliseconds of a Date argument; an invalid Date would otherwise read as "no fires". */
function msOf(date: Date, what: string): number {
  const ms = date.getTime();
  if (Number.isNaN(ms)) throw new RangeError(`${what}: invalid Date`);
  return ms;
}

function requireCron(expr: string, timezone: string): { cron: CompiledCron; formatter: Intl.DateTimeFormat } {
  const formatter = requireFormatter(timezone);
  const cron = compileCron(expr);
  if (typeof cron === 'string') throw new UsageError(cron);
  return { cron, formatter };
}

/**
 * Why `expr` cannot be used in `timezone`, or null if it can. Accepts 5 fields (minute first),
 * 6 (seconds first) and @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly.
 * Rejects unknown zones ("unknown time zone 'X'"), bad syntax and expressions that never fire
 * (`0 0 30 2 *`).
 */
export function validateCron(expr: string, timezone: string): string | null {
  if (!isValidTimeZone(timezone)) return `unknown time zone '${timezone}'`;
  const cron = compileCron(expr);
  return typeof cron === 'string' ? cron : null;
}

/** The first match strictly after wall ms `wall`, or null past croner's horizon. */
function nextWall(cron: CompiledCron, wall: number): number | null {
  const next = cron.walker.nextRun(new Date(wall));
  return next === null ? null : next.getTime();
}

/**
 * Fire instants in (fromMs, toMs], ascending, at most `limit`: the heart of the module. Walks
 * wall-clock matches and maps each onto instants (zone.ts), applying the rules in the header.
 * Offset changes between two matches need no attention: the wall walk passes over their
 * skipped or repeated wall times and found no match there. The one exception is a search
 * starting inside the first pass of a repeated range, whose second pass lies behind the walk.
 */
function collect(formatter: Intl.DateTimeFormat, cron: CompiledCron, fromMs: number, toMs: number, limit: number): number[] {
  const fires: number[] = [];
  if (!(limit > 0) || !(fromMs < toMs)) return fires;
  let done = false;
  /** Records a fire; false once the walk must stop. */
  const emit = (at: number): boolean => {
    if (at > toMs) done = true;
    else if (at > fromMs && at > (fires.at(-1) ?? -Infinity)) done = fires.push(at) >= limit;
    return !done;
  };

  // Wall times are whole seconds; `cursor` is the last wall time the walk has decided.
  let cursor = wallOf(formatter, fromMs) + mod(fromMs, 1000);
  const start = wallInstants(formatter, cursor - mod(cursor, 1000));
  if (start.kind === 'two' && fromMs < start.transition.at) {
    cursor = walkOverlap(cron, start.transition, cursor, emit);
  }
  while (!done) {
    const wall = nextWall(cron, cursor);
    if (wall === null) break;
    const instants = wallInstants(formatter, wall);
    if (instants.kind === 'one') {
      emit(instants.at);
      cursor = wall;
    } else if (instants.kind === 'two') {
      cursor = walkOverlap(cron, instants.transition, cursor, emit);
    } else {
      const gap = instants.transition;
      if (!cron.interval) emit(gap.at);
      cursor = gap.at + gap.after - 1; // the gap's other matches fire with this one, or never
    }
  }
  return fires;
}

/**
 * Emits the fires of a repeated range whose walk has reached `cursor` (exclusive): first-pass
 * matches, then for an interval job the whole range again on the second pass. Returns the new
 * cursor: the last wall time of the range.
 */
function walkOverlap(
  cron: CompiledCron,
  overlap: { at: number; before: number; after: number },
  cursor: number,
  emit: (at: number) => boolean,
): number {
  const rangeStart = overlap.at + overlap.after; // first repeated wall time
  const rangeEnd = overlap.at + overlap.before; // first wall time after the range
  for (let wall = nextWall(cron, cursor); wall !== null && wall < rangeEnd; wall = nextWall(cron, wall)) {
    if (!emit(wall - overlap.before)) return rangeEnd - 1;
  }
  if (cron.interval) {
    for (let wall = nextWall(cron, rangeStart - 1); wall !== null && wall < rangeEnd; wall = nextWall(cron, wall)) {
      if (!emit(wall - overlap.after)) break;
    }
  }
  return rangeEnd - 1;
}

/**
 * The key of the period a fire of `expr` at `fireAt` belongs to. Like periodKey, except that a
 * fixed-time job's fire at a gap (the instant the clock jumps) is keyed by the first skipped
 * wall time it stands for: Nuuk's `0 23 * * *` firing at 00:00 on 29 March 2026 has day key
 * `2026-03-28`, hour key `2026-03-28T23`. `tick` keys are the instant, as always. Throws
 * UsageError for anything validateCron rejects, RangeError for an invalid Date.
 */
export function periodKeyOfFire(period: Period, expr: string, timezone: string, fireAt: Date): string {
  const { cron, formatter } = requireCron(expr, timezone);
  const ms = msOf(fireAt, 'periodKeyOfFire');
  if (period === 'tick' || cron.interval || mod(ms, 1000) !== 0) return periodKey(period, fireAt, timezone);
  const gap = transitionAt(formatter, ms);
  if (gap && gap.after > gap.before) {
    const meant = nextWall(cron, gap.at + gap.before - 1);
    if (meant !== null && meant < gap.at + gap.after) {
      const d = new Date(meant);
      return keyOfFields(period, {
        year: d.getUTCFullYear(),
        month: d.getUTCMonth() + 1,
        day: d.getUTCDate(),
        hour: d.getUTCHours(),
        minute: d.getUTCMinutes(),
        second: d.getUTCSeconds(),
      });
    }
  }
  return periodKey(period, fireAt, timezone);
}

/**
 * The first fire instant strictly after `after`, or null if none before croner's year-3000
 * horizon. Throws UsageError for anything validateCron rejects, RangeError for an invalid Date
 * (so do the other fire-time functions).
 */
export function nextFireAfter(expr: string, timezone: string, after: Date): Date | null {
  const { cron, formatter } = requireCron(expr, timezone);
  const [first] = collect(formatter, cron, msOf(after, 'nextFireAfter'), Number.POSITIVE_INFINITY, 1);
  return first === undefined ? null : new Date(first);
}

/**
 * Fire instants in (fromExclusive, toInclusive], ascending, at most `limit` (default: all).
 * To page, call again with the last instant returned as `fromExclusive`: the fire set does not
 * depend on where a search starts. Costs about one croner step and two Intl calls a fire
 * (`npm run bench`, section periods); a year of minutely fires (525,600) is better paged.
 * Throws UsageError for anything validateCron rejects.
 */
export function fireTimesBetween(
  expr: string,
  timezone: string,
  fromExclusive: Date,
  toInclusive: Date,
  limit = Number.POSITIVE_INFINITY,
): Date[] {
  const { cron, formatter } = requireCron(expr, timezone);
  const fromMs = msOf(fromExclusive, 'fireTimesBetween');
  const toMs = msOf(toInclusive, 'fireTimesBetween');
  return collect(formatter, cron, fromMs, toMs, limit).map((ms) => new Date(ms));
}

/**
 * How far back latestFireAtOrBefore looks: 8 × 366 days, enough for `0 0 29 2 *`, whose longest
 * gap is 8 years (2096 → 2104, 2100 not being a leap year).
 */
export const LATEST_FIRE_LOOKBACK_MS = 8 * 366 * DAY_MS;

/**
 * The latest fire instant ≤ `at` (a fire exactly at `at` counts), or null if there is none in
 * the LATEST_FIRE_LOOKBACK_MS before it. Searches backwards in windows growing eightfold from
 * one minute, each enumerated forwards, so dense schedules stay cheap. Throws UsageError for
 * anything validateCron rejects.
 */
export function latestFireAtOrBefore(expr: string, timezone: string, at: Date): Date | null {
  const { cron, formatter } = requireCron(expr, timezone);
  const atMs = msOf(at, 'latestFireAtOrBefore');
  const floor = atMs - LATEST_FIRE_LOOKBACK_MS;
  let hi = atMs;
  for (let span = MINUTE_MS; hi > floor; span *= 8) {
    const lo = Math.max(floor, hi - span);
    const fires = collect(formatter, cron, lo, hi, Number.POSITIVE_INFINITY);
    if (fires.length > 0) return new Date(fires[fires.length - 1]);
    hi = lo;
  }
  return null;
}
