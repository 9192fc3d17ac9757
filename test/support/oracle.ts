/**
 * An independent oracle for simulated scheduler runs: from schedule descriptions and the
 * history of when schedulers were up, it says which fire instants must be in the tick
 * ledger, which of them must have been enqueued, and which job keys must therefore exist.
 *
 * It is written from the product's stated rules, not from src/schedule: it does not import
 * period.ts, plan.ts or the ticker. Fire instants and period keys come from plain Intl
 * arithmetic. The rules it encodes:
 *
 * Fire instants
 * - `daily` (fixed local time HH:MM, optionally only on some ISO weekdays): every local day
 *   fires exactly once. A local time that does not exist (spring forward) fires at the next
 *   valid instant, the moment the clock jumps, even when that is the next local day; a local
 *   time that occurs twice (fall back) fires once, at its first occurrence.
 * - `hourly` (minute M of every hour, or of some local hours: an interval job): every real
 *   instant whose local wall time matches, so both passes of a repeated hour fire and the
 *   hour that a spring-forward skips does not.
 * - `cron` (five numeric fields: `*`, lists, ranges, steps), read as Vixie cron reads them:
 *   a day field whose text starts with `*` is unrestricted; the day of month and the weekday
 *   are ORed when both are restricted, else ANDed. A job whose minute or hour text starts with
 *   `*` is an interval job (as `hourly`); any other is a fixed-time job (as `daily`, for each
 *   of its local times). Several local times of one job landing on the same instant (times
 *   skipped by one jump) fire once, meant for the earliest of them.
 *
 * Period keys, in the schedule's zone: minute-less `hour` `2026-11-30T06`, `day`
 * `2026-11-30`, ISO `week` `2026-W49`, `month` `2026-11`; `tick` is the UTC instant
 * `2026-11-30T06:15:00Z`. A fire is keyed by the local time it was meant for, so a skipped
 * time firing at the jump keeps its own date and hour. Job keys are `<name>:<entity>:<period>`
 * (fan-out) or `<name>:<period>`.
 *
 * Decisions (a "pass" is a moment a scheduler looks at the clock and the ledger)
 * - First pass ever of a schedule (no ledger row): only its latest fire ≤ now is recorded,
 *   enqueued if at most `toleranceMs` old, else skipped ("before the schedule was first
 *   started"); nothing earlier is backfilled and nothing earlier is in the ledger.
 * - Every later pass at `now` decides the fires in (previous pass, now]:
 *   lateness = now − fire. On time (lateness ≤ toleranceMs): enqueued. Late and catch-up off,
 *   or late beyond the window (lateness > window): skipped. The rest ("within the window",
 *   on-time ones included) are candidates: mode 'all' enqueues the most recent `max` of them,
 *   mode 'latest' only the most recent one; the others are skipped.
 * - Passes happen: whenever a scheduler instance starts; at every fire instant while at least
 *   one instance is up and the world is not stalled; at the end of a stall (a frozen
 *   process wakes late). Concurrent instances look at the same `now`, so they count as one.
 */

export type OraclePeriod = 'tick' | 'hour' | 'day' | 'week' | 'month';

export type FireRule =
  | { kind: 'daily'; hour: number; minute: number; /** ISO weekdays, 1 = Monday … 7 = Sunday; default every day. */ weekdays?: number[] }
  | { kind: 'hourly'; minute: number; /** Local hours it fires in; default every hour. */ hours?: number[] }
  | { kind: 'cron'; /** Five numeric fields, e.g. `0 0 *\/2 * 1`. */ expr: string };

export interface OracleSchedule {
  name: string;
  timezone: string;
  fires: FireRule;
  period: OraclePeriod;
  catchUp: false | { mode: 'all' | 'latest'; windowMs: number; max: number };
  /** Fan-out entity keys (the job key becomes `<name>:<entity>:<period>`). */
  entities?: string[];
}

export interface History {
  /** Scheduler instances: which schedules each ran, and when (ms, inclusive). */
  instances: Array<{ id: string; schedules: string[]; start: number; stop: number }>;
  /** Frozen-process stalls: no pass strictly inside (from, to); one pass at `to`. */
  stalls: Array<{ from: number; to: number }>;
}

export type Reason = 'on time' | 'caught up' | 'first start' | 'outside window' | 'superseded' | 'over cap';

export interface ExpectedTick {
  at: number;
  periodKey: string;
  outcome: 'enqueued' | 'skipped';
  reason: Reason;
  /** When the deciding pass happened. */
  decidedAt: number;
}

export interface Expectation {
  /** Per schedule, every ledger row that must exist, ascending. */
  ticks: Map<string, ExpectedTick[]>;
  /** Every job key that must exist (each exactly once). */
  jobKeys: Set<string>;
}

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

// ---------------------------------------------------------------------------------------------
// Plain Intl arithmetic

interface Wall {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(tz: string): Intl.DateTimeFormat {
  let f = formatters.get(tz);
  if (!f) {
    f = new Intl.DateTimeFormat('en-GB', {
      timeZone: tz,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
    });
    formatters.set(tz, f);
  }
  return f;
}

export function wallOf(ms: number, tz: string): Wall {
  const w: Record<string, number> = {};
  for (const p of formatter(tz).formatToParts(new Date(ms))) {
    if (p.type !== 'literal') w[p.type] = Number(p.value);
  }
  return { year: w.year, month: w.month, day: w.day, hour: w.hour % 24, minute: w.minute, second: w.second };
}

/** The wall time read as if it were UTC, in ms (comparable across zones and offsets). */
const wallMs = (w: Wall): number => Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second);

/** Local minus UTC at `ms`. */
function offsetAt(ms: number, tz: string): number {
  return wallMs(wallOf(ms, tz)) - Math.floor(ms / 1000) * 1000;
}

const pad = (n: number, w = 2) => String(n).padStart(w, '0');

/** Local `YYYY-MM-DD`, `YYYY-MM`, etc. of an instant, in `tz`. */
export function oraclePeriodKey(period: OraclePeriod, ms: number, tz: string): string {
  if (period === 'tick') return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
  return keyOfWall(period, wallOf(ms, tz));
}

/** The key of a fire: its instant for `tick`, else the local time it was meant for. */
export function oracleFireKey(period: OraclePeriod, fire: Fire): string {
  if (period === 'tick') return oraclePeriodKey('tick', fire.at, 'UTC');
  const d = new Date(fire.wall);
  return keyOfWall(period, { year: d.getUTCFullYear(), month: d.getUTCMonth() + 1, day: d.getUTCDate(), hour: d.getUTCHours(), minute: 0, second: 0 });
}

function keyOfWall(period: Exclude<OraclePeriod, 'tick'>, w: Wall): string {
  const date = `${pad(w.year, 4)}-${pad(w.month)}-${pad(w.day)}`;
  switch (period) {
    case 'hour':
      return `${date}T${pad(w.hour)}`;
    case 'day':
      return date;
    case 'month':
      return `${pad(w.year, 4)}-${pad(w.month)}`;
    case 'week': {
      // ISO 8601: the week (Monday first) belongs to the year of its Thursday.
      const d = Date.UTC(w.year, w.month - 1, w.day);
      const isoDay = ((new Date(d).getUTCDay() + 6) % 7) + 1;
      const thursday = new Date(d + (4 - isoDay) * DAY);
      const weekYear = thursday.getUTCFullYear();
      const week = Math.floor((thursday.getTime() - Date.UTC(weekYear, 0, 1)) / DAY / 7) + 1;
      return `${pad(weekYear, 4)}-W${pad(week)}`;
    }
  }
}

/** Every instant showing local time `hour:minute` on y-m-d in `tz` (none in a gap, two in an overlap). */
export function instantsShowing(tz: string, y: number, m: number, d: number, hour: number, minute: number): number[] {
  const target = Date.UTC(y, m - 1, d, hour, minute);
  const offsets = new Set([offsetAt(target - 14 * HOUR, tz), offsetAt(target, tz), offsetAt(target + 14 * HOUR, tz)]);
  return [...offsets].map((o) => target - o).filter((u) => wallMs(wallOf(u, tz)) === target).sort((a, b) => a - b);
}

/**
 * The instant a fixed local time `hour:minute` on local date y-m-d fires in `tz`: the first
 * instant showing that wall time, or, if the wall time falls into a gap, the instant the
 * clock jumps (the next valid instant, which may be on the next local day).
 */
export function localFire(tz: string, y: number, m: number, d: number, hour: number, minute: number): number {
  const target = Date.UTC(y, m - 1, d, hour, minute);
  // Every offset in force within 14 h either side (any zone's instant for this wall time lies
  // there, and no zone changes offset twice within 28 h).
  const offsets = new Set([offsetAt(target - 14 * HOUR, tz), offsetAt(target, tz), offsetAt(target + 14 * HOUR, tz)]);
  const matches = [...offsets].map((o) => target - o).filter((u) => wallMs(wallOf(u, tz)) === target);
  if (matches.length > 0) return Math.min(...matches); // an overlap fires once, at the first occurrence
  // A gap: the first instant whose wall time is past the target. Local time is monotonic
  // around a gap, so bisect between "target read with the largest offset" and "with the smallest".
  let lo = target - Math.max(...offsets); // shows a wall time before the target
  let hi = target - Math.min(...offsets); // shows a wall time after it
  if (!(wallMs(wallOf(lo, tz)) < target && wallMs(wallOf(hi, tz)) > target)) {
    throw new Error(`oracle: cannot place ${y}-${m}-${d} ${hour}:${minute} in ${tz}`);
  }
  while (hi - lo > 1000) {
    const mid = lo + Math.floor((hi - lo) / 2000) * 1000;
    if (wallMs(wallOf(mid, tz)) > target) hi = mid;
    else lo = mid;
  }
  return hi;
}

/** One fire: its instant, and the local time it was meant for (read as UTC, as `wallMs`). */
export interface Fire {
  at: number;
  wall: number;
}

/** Fire instants of a rule in [fromMs, toMs], ascending. */
export function fireInstants(rule: FireRule, tz: string, fromMs: number, toMs: number): number[] {
  return oracleFires(rule, tz, fromMs, toMs).map((f) => f.at);
}

/** Fires of a rule in [fromMs, toMs], ascending by instant, one per instant. */
export function oracleFires(rule: FireRule, tz: string, fromMs: number, toMs: number): Fire[] {
  if (rule.kind === 'cron') return cronFires(parseCron(rule.expr), tz, fromMs, toMs);
  if (rule.kind === 'daily') {
    const weekdays = rule.weekdays ? rule.weekdays.map((d) => d % 7).join(',') : '*';
    return cronFires(parseCron(`${rule.minute} ${rule.hour} * * ${weekdays}`), tz, fromMs, toMs);
  }
  // Every real instant whose local wall time matches: in each UTC hour, the one instant whose
  // local minute is the rule's (zones are offset by whole minutes), checked once more by Intl.
  const out: Fire[] = [];
  for (let hour = Math.floor(fromMs / HOUR) * HOUR; hour <= toMs; hour += HOUR) {
    const t = hour + ((((rule.minute - wallOf(hour, tz).minute) % 60) + 60) % 60) * MINUTE;
    if (t < fromMs || t > toMs) continue;
    const w = wallOf(t, tz);
    if (w.minute === rule.minute && w.second === 0 && (!rule.hours || rule.hours.includes(w.hour))) out.push({ at: t, wall: wallMs(w) });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// A small Vixie-style cron reader (numbers only; no names, nicknames or seconds)

interface ParsedCron {
  minutes: number[];
  hours: number[];
  doms: Set<number>;
  months: Set<number>;
  dows: Set<number>;
  /** Day fields whose text starts with `*` (Vixie's DOM_STAR / DOW_STAR). */
  domStar: boolean;
  dowStar: boolean;
  /** Minute or hour text starts with `*` (Vixie's MIN_STAR / HR_STAR): an interval job. */
  interval: boolean;
}

function parseField(text: string, lo: number, hi: number): number[] {
  const out = new Set<number>();
  for (const part of text.split(',')) {
    const [range, stepText] = part.split('/');
    const step = stepText === undefined ? 1 : Number(stepText);
    let [a, b] = range === '*' ? [lo, hi] : range.split('-').map(Number);
    if (b === undefined) b = stepText === undefined ? a : hi;
    if (![a, b, step].every(Number.isInteger) || a < lo || b > hi || a > b || step < 1) throw new Error(`oracle: bad cron field '${text}'`);
    for (let v = a; v <= b; v += step) out.add(v);
  }
  return [...out].sort((x, y) => x - y);
}

export function parseCron(expr: string): ParsedCron {
  const f = expr.trim().split(/\s+/);
  if (f.length !== 5) throw new Error(`oracle: expected five fields in '${expr}'`);
  return {
    minutes: parseField(f[0], 0, 59),
    hours: parseField(f[1], 0, 23),
    doms: new Set(parseField(f[2], 1, 31)),
    months: new Set(parseField(f[3], 1, 12)),
    dows: new Set(parseField(f[4], 0, 7).map((d) => d % 7)),
    domStar: f[2].startsWith('*'),
    dowStar: f[4].startsWith('*'),
    interval: f[0].startsWith('*') || f[1].startsWith('*'),
  };
}

/** Whether local date y-m-d matches the day fields, Vixie's way. */
function dayMatches(c: ParsedCron, y: number, m: number, d: number): boolean {
  if (!c.months.has(m)) return false;
  const dom = c.doms.has(d);
  const dow = c.dows.has(new Date(Date.UTC(y, m - 1, d)).getUTCDay());
  return c.domStar || c.dowStar ? dom && dow : dom || dow;
}

function cronFires(c: ParsedCron, tz: string, fromMs: number, toMs: number): Fire[] {
  const found: Fire[] = [];
  const first = wallOf(fromMs - 2 * DAY, tz);
  for (let day = Date.UTC(first.year, first.month - 1, first.day); day <= toMs + 2 * DAY; day += DAY) {
    const date = new Date(day);
    const [y, m, d] = [date.getUTCFullYear(), date.getUTCMonth() + 1, date.getUTCDate()];
    if (!dayMatches(c, y, m, d)) continue;
    for (const hour of c.hours) {
      for (const minute of c.minutes) {
        const wall = Date.UTC(y, m - 1, d, hour, minute);
        const ats = c.interval ? instantsShowing(tz, y, m, d, hour, minute) : [localFire(tz, y, m, d, hour, minute)];
        for (const at of ats) if (at >= fromMs && at <= toMs) found.push({ at, wall });
      }
    }
  }
  found.sort((a, b) => a.at - b.at || a.wall - b.wall);
  return found.filter((f, i) => i === 0 || found[i - 1].at !== f.at);
}

// ---------------------------------------------------------------------------------------------
// Passes and decisions

/** The instants at which some scheduler ran a pass of `name`, ascending, deduplicated. */
export function passInstants(schedule: OracleSchedule, fires: number[], history: History): number[] {
  const runs = history.instances.filter((i) => i.schedules.includes(schedule.name));
  const upAt = (t: number) => runs.some((i) => i.start <= t && t <= i.stop);
  const stalledAt = (t: number) => history.stalls.some((s) => s.from < t && t < s.to);
  const passes = new Set<number>();
  for (const i of runs) passes.add(i.start);
  for (const s of history.stalls) if (upAt(s.to)) passes.add(s.to);
  for (const f of fires) if (upAt(f) && !stalledAt(f)) passes.add(f);
  return [...passes].sort((a, b) => a - b);
}

/** What the ledger and the job table must hold after `history`, given fires from `fromMs`. */
export function oracleExpectation(schedules: OracleSchedule[], history: History, toleranceMs: number, fromMs: number, toMs: number): Expectation {
  const ticks = new Map<string, ExpectedTick[]>();
  const jobKeys = new Set<string>();
  for (const s of schedules) {
    const scheduleFires = oracleFires(s.fires, s.timezone, fromMs, toMs);
    const meantAt = new Map(scheduleFires.map((f) => [f.at, f]));
    const fires = scheduleFires.map((f) => f.at);
    const passes = passInstants(s, fires, history);
    const rows: ExpectedTick[] = [];
    const add = (at: number, outcome: 'enqueued' | 'skipped', reason: Reason, decidedAt: number) =>
      rows.push({ at, periodKey: oracleFireKey(s.period, meantAt.get(at)!), outcome, reason, decidedAt });
    let fi = 0; // index of the first fire not decided yet
    passes.forEach((now, n) => {
      if (n === 0) {
        while (fi < fires.length && fires[fi] <= now) fi++;
        if (fi === 0) throw new Error(`oracle: ${s.name} has no fire before its first start; widen fromMs`);
        const anchor = fires[fi - 1];
        if (now - anchor <= toleranceMs) add(anchor, 'enqueued', 'on time', now);
        else add(anchor, 'skipped', 'first start', now);
        return;
      }
      const due: number[] = [];
      while (fi < fires.length && fires[fi] <= now) due.push(fires[fi++]);
      const candidates: number[] = [];
      const decided = new Map<number, [outcome: 'enqueued' | 'skipped', reason: Reason]>();
      for (const at of due) {
        const lateness = now - at;
        if (lateness <= toleranceMs) candidates.push(at);
        else if (s.catchUp === false || lateness > s.catchUp.windowMs) decided.set(at, ['skipped', 'outside window']);
        else candidates.push(at);
      }
      const keep = s.catchUp === false ? candidates.length : s.catchUp.mode === 'latest' ? 1 : s.catchUp.max;
      candidates.forEach((at, i) => {
        if (i < candidates.length - keep) decided.set(at, ['skipped', s.catchUp !== false && s.catchUp.mode === 'latest' ? 'superseded' : 'over cap']);
        else decided.set(at, ['enqueued', now - at <= toleranceMs ? 'on time' : 'caught up']);
      });
      for (const at of due) add(at, ...decided.get(at)!, now);
    });
    ticks.set(s.name, rows);
    for (const r of rows) {
      if (r.outcome !== 'enqueued') continue;
      if (s.entities) for (const e of s.entities) jobKeys.add(`${s.name}:${e}:${r.periodKey}`);
      else jobKeys.add(`${s.name}:${r.periodKey}`);
    }
  }
  return { ticks, jobKeys };
}
