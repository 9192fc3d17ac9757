/**
 * Periods, period keys and cron fire times, all in a schedule's IANA time zone. Pure: no clock,
 * no database.
 *
 * Fire times: croner parses the expression and walks the *wall clock* (it runs with utcOffset 0,
 * so a Date's UTC fields are local fields and no DST exists there); this module turns wall times
 * into instants itself. Croner can do that conversion too (its `timezone` option), but it costs
 * ~75 µs a fire, so a year of hourly fires takes ~650 ms; the wall walk plus cached offset
 * transitions takes about a tenth of that. The DST rules below are croner 11's own rules (verified in
 * test/period.test.ts, which checks this module against croner's zone-aware enumeration):
 *
 * - A *fixed-time* expression (seconds, minutes and hours without `*`, `?` or `/`, so lists and
 *   ranges count: croner's `fixedTimeRule: 'no-wildcard'`, close to Vixie cron) fires once in a
 *   DST overlap, at the first occurrence; a time inside a DST gap fires once, at the instant the
 *   clock jumps to, if that is still the same local day. So a daily schedule fires exactly once
 *   on every local day. Croner's default rule ('single-value') would make `30 2,14 * * *` skip
 *   02:30 on the spring day and fire it twice in autumn, which breaks that promise.
 * - Any other expression (`0 * * * *`, `*\/15 2 * * *`) is an *interval* job: it fires at every
 *   real instant whose wall time matches. In an overlap that is both occurrences (hourly fires
 *   25 times on the autumn day, and both fires share an `hour` period key, the second being a
 *   duplicate the key absorbs); in a gap the missing wall times do not fire (23 hourly fires).
 *
 * Day-of-month and day-of-week combine with OR, as in Vixie cron (croner's default).
 */
import { Cron, CronPattern } from 'croner';
import { UsageError } from '../errors.ts';

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

// ---------------------------------------------------------------------------------------------
// Time zones and local fields

interface LocalFields {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

// Building a DateTimeFormat costs far more than formatting with one.
const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(timezone: string): Intl.DateTimeFormat | null {
  if (typeof timezone !== 'string' || timezone === '') return null;
  let formatter = formatters.get(timezone);
  if (formatter) return formatter;
  try {
    formatter = new Intl.DateTimeFormat('en-US', {
      timeZone: timezone,
      calendar: 'gregory',
      numberingSystem: 'latn',
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
  } catch {
    return null;
  }
  formatters.set(timezone, formatter);
  return formatter;
}

function requireFormatter(timezone: string): Intl.DateTimeFormat {
  const formatter = formatterFor(timezone);
  if (!formatter) throw new UsageError(`unknown time zone '${timezone}'`);
  return formatter;
}

/** True if `timezone` is a zone name this runtime's Intl knows (e.g. `Europe/Berlin`, `UTC`). */
export function isValidTimeZone(timezone: string): boolean {
  return formatterFor(timezone) !== null;
}

function localFields(formatter: Intl.DateTimeFormat, ms: number): LocalFields {
  const fields: LocalFields = { year: 0, month: 0, day: 0, hour: 0, minute: 0, second: 0 };
  for (const part of formatter.formatToParts(ms)) {
    if (part.type in fields) fields[part.type as keyof LocalFields] = Number(part.value);
  }
  // Some ICU versions still say 24 for midnight despite h23.
  if (fields.hour === 24) fields.hour = 0;
  return fields;
}

/** Local wall time minus UTC at `ms`, in milliseconds (Berlin in summer: +2 h). */
function offsetAt(formatter: Intl.DateTimeFormat, ms: number): number {
  const f = localFields(formatter, ms);
  const wall = Date.UTC(f.year, f.month - 1, f.day, f.hour, f.minute, f.second);
  return wall - (ms - mod(ms, 1000));
}

function mod(a: number, b: number): number {
  return ((a % b) + b) % b;
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
  const f = localFields(formatter, ms);
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
// Offset transitions, found by sampling and cached per zone and UTC month

interface Transition {
  /** First instant with the new offset. */
  at: number;
  before: number;
  after: number;
}

// Every zone in tzdata keeps an offset for far longer than this, so a sample interval holds at
// most one transition.
const SAMPLE_MS = 6 * HOUR_MS;
const MAX_CACHED_MONTHS = 20_000;
const transitionCache = new Map<string, Map<number, Transition[]>>();
let cachedMonths = 0;

function monthIndex(ms: number): number {
  const d = new Date(ms);
  return d.getUTCFullYear() * 12 + d.getUTCMonth();
}

function monthStart(index: number): number {
  return Date.UTC(Math.floor(index / 12), mod(index, 12), 1);
}

/** Transitions in (start of month, start of next month]. */
function monthTransitions(
  timezone: string,
  formatter: Intl.DateTimeFormat,
  index: number,
): Transition[] {
  let zone = transitionCache.get(timezone);
  if (!zone) transitionCache.set(timezone, (zone = new Map()));
  const cached = zone.get(index);
  if (cached) return cached;

  const found: Transition[] = [];
  const end = monthStart(index + 1);
  let lo = monthStart(index);
  let loOffset = offsetAt(formatter, lo);
  while (lo < end) {
    const hi = Math.min(lo + SAMPLE_MS, end);
    const hiOffset = offsetAt(formatter, hi);
    if (hiOffset !== loOffset) {
      // Bisect to the whole second: the first instant that has left loOffset.
      let a = lo;
      let b = hi;
      while (b - a > 1000) {
        const mid = a + Math.floor((b - a) / 2000) * 1000;
        if (offsetAt(formatter, mid) === loOffset) a = mid;
        else b = mid;
      }
      found.push({ at: b, before: loOffset, after: offsetAt(formatter, b) });
    }
    lo = hi;
    loOffset = hiOffset;
  }

  if (++cachedMonths > MAX_CACHED_MONTHS) {
    transitionCache.clear();
    cachedMonths = 1;
    transitionCache.set(timezone, (zone = new Map()));
  }
  zone.set(index, found);
  return found;
}

/** The first transition in (from, to], or null. */
function firstTransitionIn(
  timezone: string,
  formatter: Intl.DateTimeFormat,
  from: number,
  to: number,
): Transition | null {
  for (let index = monthIndex(from); from < to && monthStart(index) < to; index++) {
    for (const t of monthTransitions(timezone, formatter, index)) {
      if (t.at > from && t.at <= to) return t;
    }
  }
  return null;
}

/** The last transition in (from, to], or null. */
function lastTransitionIn(
  timezone: string,
  formatter: Intl.DateTimeFormat,
  from: number,
  to: number,
): Transition | null {
  let last: Transition | null = null;
  for (let index = monthIndex(from); monthStart(index) < to; index++) {
    for (const t of monthTransitions(timezone, formatter, index)) {
      if (t.at > from && t.at <= to) last = t;
    }
  }
  return last;
}

// ---------------------------------------------------------------------------------------------
// Cron expressions

interface CompiledCron {
  /** Walks wall-clock matches: a returned Date's UTC fields are the local fields. */
  walker: Cron;
  fixedTime: boolean;
}

const NICKNAMES = ['@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly'];
const MAX_COMPILED = 1_000;
const compiledCache = new Map<string, CompiledCron | string>();

/** The compiled expression, or the reason it cannot be used. */
function compile(expr: string): CompiledCron | string {
  if (typeof expr !== 'string') return 'cron expression must be a string';
  const cached = compiledCache.get(expr);
  if (cached !== undefined) return cached;
  const result = compileUncached(expr);
  if (compiledCache.size >= MAX_COMPILED) compiledCache.clear();
  compiledCache.set(expr, result);
  return result;
}

function compileUncached(expr: string): CompiledCron | string {
  const trimmed = expr.trim();
  const fields = trimmed === '' ? [] : trimmed.split(/\s+/);
  const nickname = fields.length === 1 && NICKNAMES.includes(trimmed.toLowerCase());
  if (!nickname && fields.length !== 5 && fields.length !== 6) {
    if (fields.length === 1 && trimmed.startsWith('@')) {
      return `invalid cron expression '${expr}': unknown nickname (use one of ${NICKNAMES.join(', ')})`;
    }
    return (
      `invalid cron expression '${expr}': expected 5 fields (minute hour day-of-month month ` +
      `day-of-week) or 6 (seconds first), got ${fields.length}`
    );
  }
  try {
    const options = { mode: '5-or-6-parts', fixedTimeRule: 'no-wildcard' } as const;
    const walker = new Cron(trimmed, { ...options, utcOffset: 0, paused: true });
    const { isFixedTime } = new CronPattern(trimmed, undefined, options);
    // Feb 30 parses fine but would make every search run to croner's year-3000 limit.
    if (walker.nextRun(new Date(0)) === null) return `cron expression '${expr}' never fires`;
    return { walker, fixedTime: isFixedTime };
  } catch (error) {
    const reason = error instanceof Error ? error.message.replace(/^CronPattern:\s*/, '') : String(error);
    return `invalid cron expression '${expr}': ${reason}`;
  }
}

/** Milliseconds of a Date argument; an invalid Date would otherwise read as "no fires". */
function msOf(date: Date, what: string): number {
  const ms = date.getTime();
  if (Number.isNaN(ms)) throw new RangeError(`${what}: invalid Date`);
  return ms;
}

function requireCron(
  expr: string,
  timezone: string,
): { cron: CompiledCron; formatter: Intl.DateTimeFormat } {
  const formatter = requireFormatter(timezone);
  const cron = compile(expr);
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
  const cron = compile(expr);
  return typeof cron === 'string' ? cron : null;
}

/**
 * Fire instants in (fromMs, toMs], ascending, at most `limit`. The heart of the module: walks
 * wall-clock matches and turns each into an instant with the offset in force, stopping at every
 * offset transition on the way to apply the DST rules in the header comment.
 */
function collect(
  timezone: string,
  formatter: Intl.DateTimeFormat,
  cron: CompiledCron,
  fromMs: number,
  toMs: number,
  limit: number,
): number[] {
  const fires: number[] = [];
  if (!(limit > 0) || !(fromMs < toMs)) return fires;

  let cursor = fromMs; // fires are > cursor
  let offset = offsetAt(formatter, cursor);
  let scannedTo = cursor; // transitions up to here are handled
  if (cron.fixedTime) {
    // A fixed-time job fired in the first pass of a repeated hour; starting inside the second
    // pass, the rest of it must not fire again.
    const recent = lastTransitionIn(timezone, formatter, cursor - 2 * DAY_MS, cursor);
    if (recent && recent.before > recent.after && cursor < recent.at + recent.before - recent.after) {
      cursor = recent.at + recent.before - recent.after - 1;
      scannedTo = cursor;
    }
  }

  const emit = (at: number): boolean => {
    if (fires[fires.length - 1] !== at) fires.push(at);
    return fires.length >= limit;
  };

  for (;;) {
    const wall = cron.walker.nextRun(new Date(cursor + offset));
    if (wall === null) return fires;
    const at = wall.getTime() - offset;
    const horizon = Math.min(at, toMs);
    const transition = firstTransitionIn(timezone, formatter, Math.max(cursor, scannedTo), horizon);
    if (transition) {
      // The candidate was computed with a stale offset: resume from the transition.
      scannedTo = transition.at;
      if (transition.after > transition.before) {
        if (cron.fixedTime && gapHasFire(cron, transition) && emit(transition.at)) return fires;
        cursor = transition.at - 1;
      } else {
        // Overlap: the wall times just before the change come round again for
        // (before - after); a fixed-time job already fired in the first pass and skips them.
        const repeat = transition.before - transition.after;
        cursor = cron.fixedTime ? transition.at + repeat - 1 : transition.at - 1;
      }
      offset = transition.after;
      continue;
    }
    if (at > toMs) return fires;
    if (emit(at)) return fires;
    cursor = at;
  }
}

/** Whether a fixed-time job has a wall time in this gap on the day the clock jumps to. */
function gapHasFire(cron: CompiledCron, gap: Transition): boolean {
  const resumeWall = gap.at + gap.after;
  const dayStart = Math.floor(resumeWall / DAY_MS) * DAY_MS;
  const next = cron.walker.nextRun(new Date(Math.max(gap.at + gap.before, dayStart) - 1));
  return next !== null && next.getTime() < resumeWall;
}

/**
 * The first fire instant strictly after `after`, or null if none before croner's year-3000
 * horizon. Throws UsageError for anything validateCron rejects, RangeError for an invalid Date
 * (so do the other fire-time functions).
 */
export function nextFireAfter(expr: string, timezone: string, after: Date): Date | null {
  const { cron, formatter } = requireCron(expr, timezone);
  const [first] = collect(timezone, formatter, cron, msOf(after, 'nextFireAfter'), Number.POSITIVE_INFINITY, 1);
  return first === undefined ? null : new Date(first);
}

/**
 * Fire instants in (fromExclusive, toInclusive], ascending, at most `limit` (default: all).
 * To page, call again with the last instant returned as `fromExclusive`: the fire set does not
 * depend on where a search starts. A year of hourly fires takes well under 200 ms; a year of
 * minutely ones (525,600) is better paged. Throws UsageError for anything validateCron rejects.
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
  return collect(timezone, formatter, cron, fromMs, toMs, limit).map((ms) => new Date(ms));
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
    const fires = collect(timezone, formatter, cron, lo, hi, Number.POSITIVE_INFINITY);
    if (fires.length > 0) return new Date(fires[fires.length - 1]);
    hi = lo;
  }
  return null;
}
