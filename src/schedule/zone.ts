/**
 * Local wall time in an IANA zone, from the Node runtime's own zone data (`process.versions.tz`).
 * Pure. Wall times are carried as "wall ms": the local fields read as if they were UTC, so
 * `Date.UTC(2026, 2, 29, 2, 30)` is 02:30 on 29 March in whatever zone is meant.
 */
import { UsageError } from '../errors.ts';

/** Local calendar and clock fields. */
export interface LocalFields {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

/** One change of a zone's offset. Offsets are local minus UTC, in ms (Berlin in summer: +2 h). */
export interface Transition {
  /** First instant with the new offset. */
  at: number;
  before: number;
  after: number;
}

/**
 * How a wall time maps onto instants: `one` instant; `two` in a repeated range (an overlap,
 * `first` before the transition and `second` after it); or `none`, inside a skipped range (a
 * gap). `two` and `none` carry the transition that causes them.
 */
export type WallInstants =
  | { kind: 'one'; at: number }
  | { kind: 'two'; first: number; second: number; transition: Transition }
  | { kind: 'none'; transition: Transition };

const DAY_MS = 86_400_000;

// Building a DateTimeFormat costs far more than formatting with one.
const formatters = new Map<string, Intl.DateTimeFormat>();

/** The zone's formatter, or null for a name this runtime does not know. */
export function formatterFor(timezone: string): Intl.DateTimeFormat | null {
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

/** The zone's formatter; throws UsageError("unknown time zone 'X'") for an unknown zone. */
export function requireFormatter(timezone: string): Intl.DateTimeFormat {
  const formatter = formatterFor(timezone);
  if (!formatter) throw new UsageError(`unknown time zone '${timezone}'`);
  return formatter;
}

// `format` is about twice as fast as `formatToParts`; its en-US text is "3/29/2026, 02:30:00"
// for years 1000–9999, and anything else (an era, a short year) takes the slow path.
const FORMATTED = /^(\d{1,2})\/(\d{1,2})\/(\d{4}), (\d{2}):(\d{2}):(\d{2})$/;

/** The local fields of instant `ms`. */
export function localFields(formatter: Intl.DateTimeFormat, ms: number): LocalFields {
  const fast = FORMATTED.exec(formatter.format(ms));
  if (fast) {
    const hour = Number(fast[4]);
    return {
      year: Number(fast[3]),
      month: Number(fast[1]),
      day: Number(fast[2]),
      hour: hour === 24 ? 0 : hour,
      minute: Number(fast[5]),
      second: Number(fast[6]),
    };
  }
  const fields: LocalFields = { year: 0, month: 0, day: 0, hour: 0, minute: 0, second: 0 };
  for (const part of formatter.formatToParts(ms)) {
    if (part.type in fields) fields[part.type as keyof LocalFields] = Number(part.value);
  }
  // Some ICU versions still say 24 for midnight despite h23.
  if (fields.hour === 24) fields.hour = 0;
  return fields;
}

/** The wall ms of instant `ms`, to the whole second. */
export function wallOf(formatter: Intl.DateTimeFormat, ms: number): number {
  const f = localFields(formatter, ms);
  return Date.UTC(f.year, f.month - 1, f.day, f.hour, f.minute, f.second);
}

/** Local wall time minus UTC at `ms`, in ms. */
export function offsetAt(formatter: Intl.DateTimeFormat, ms: number): number {
  return wallOf(formatter, ms) - (ms - mod(ms, 1000));
}

export function mod(a: number, b: number): number {
  return ((a % b) + b) % b;
}

/**
 * The instants whose local wall time is `wall` (whole seconds). Reads the offsets a day either
 * side, as Temporal does: every zone's offset lies within ±24 h, and no zone changes its offset
 * twice within two days, so two candidates settle it. Usually two Intl calls; a wall time near a
 * transition costs a bisection (about 17 more).
 */
export function wallInstants(formatter: Intl.DateTimeFormat, wall: number): WallInstants {
  const known = steadyOffset(formatter, wall - DAY_MS, wall + DAY_MS);
  if (known !== null) return { kind: 'one', at: wall - known };
  const before = offsetAt(formatter, wall - DAY_MS);
  const after = offsetAt(formatter, wall + DAY_MS);
  if (before === after) {
    steadySpans.set(formatter, { from: wall - DAY_MS, to: wall + DAY_MS, offset: before });
    return { kind: 'one', at: wall - before };
  }
  const early = wall - before; // valid if the old offset is still in force there
  const late = wall - after; // valid if the new one already is
  const earlyValid = offsetAt(formatter, early) === before;
  const lateValid = offsetAt(formatter, late) === after;
  if (earlyValid && lateValid) {
    return { kind: 'two', first: early, second: late, transition: transitionIn(formatter, early, late, before) };
  }
  if (earlyValid) return { kind: 'one', at: early };
  if (lateValid) return { kind: 'one', at: late };
  return { kind: 'none', transition: transitionIn(formatter, late, early, before) };
}

/**
 * Per zone, the latest span known to hold one offset throughout. Under the same "no two
 * changes within two days" rule, two equal offsets up to two days apart mean none between, so
 * a span grows by probes at most 47 h apart: a dense schedule then costs one Intl call per
 * two days instead of two per fire.
 */
const steadySpans = new Map<Intl.DateTimeFormat, { from: number; to: number; offset: number }>();
const PROBE_MS = 47 * 3_600_000;

/** The offset in force throughout [from, to] if the zone's steady span covers it (growing it when it can), else null. */
function steadyOffset(formatter: Intl.DateTimeFormat, from: number, to: number): number | null {
  const span = steadySpans.get(formatter);
  if (!span || from < span.from || from > span.to) return null;
  while (span.to < to) {
    const probe = Math.max(span.to + PROBE_MS, to);
    if (probe - span.to > PROBE_MS || offsetAt(formatter, probe) !== span.offset) return null;
    span.to = probe;
  }
  return span.offset;
}

/** The transition in (lo, hi], to the whole second, given the offset in force at `lo`. */
function transitionIn(formatter: Intl.DateTimeFormat, lo: number, hi: number, loOffset: number): Transition {
  let a = lo;
  let b = hi;
  while (b - a > 1000) {
    const mid = a + Math.floor((b - a) / 2000) * 1000;
    if (offsetAt(formatter, mid) === loOffset) a = mid;
    else b = mid;
  }
  return { at: b, before: loOffset, after: offsetAt(formatter, b) };
}

/** The transition taking effect exactly at instant `ms` (whole seconds), or null. */
export function transitionAt(formatter: Intl.DateTimeFormat, ms: number): Transition | null {
  const before = offsetAt(formatter, ms - 1000);
  const after = offsetAt(formatter, ms);
  return before === after ? null : { at: ms, before, after };
}
