import { UsageError } from './errors.ts';
import { shownInLine } from './shownText.ts';

const UNIT_MS: Record<string, number> = {
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 7 * 86_400_000,
};

/** A duration as users write it: `100ms`, `2s`, `5m`, `1h`, `40d`, `2w`, or a number of milliseconds. */
export type Duration = string | number;

/**
 * The longest duration anything accepts: 100 years. Past it instants computed from now
 * leave the range a Date (or a DATETIME) can hold, and a number of digits reads as Infinity.
 */
export const MAX_DURATION_MS = 36_500 * UNIT_MS.d;

/**
 * Parses `100ms`, `2s`, `5m`, `1h`, `40d`, `2w` (or a bare number of milliseconds)
 * into milliseconds: the CLI's flags and environment and the library's options alike.
 * Throws UsageError naming `what` for anything else, negatives included, a space anywhere
 * (`'1h '`, `' 1h'`, `'1 h'`: a value with one is mistyped or pasted, not meant), and
 * anything longer than MAX_DURATION_MS, and a value that is neither text nor a number
 * (an object, `true`, `null` from JavaScript or a JSON config).
 */
export function parseDuration(value: Duration, what = 'duration'): number {
  if (typeof value !== 'string' && typeof value !== 'number') {
    const given: unknown = value;
    const shownType = given === null ? 'null' : Array.isArray(given) ? 'an array' : typeof given === 'object' ? 'an object' : typeof given === 'boolean' ? String(given) : `a ${typeof given}`;
    throw new UsageError(`${what}: ${shownType} is not a duration (use e.g. 100ms, 2s, 5m, 1h, 40d, or a number of milliseconds)`);
  }
  const shown = shownDuration(value);
  let ms: number;
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value < 0) throw new UsageError(`${what}: ${value} is not a valid duration`);
    ms = value;
  } else {
    const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d|w)?$/.exec(value);
    if (!match) throw new UsageError(`${what}: ${shown} is not a duration (use e.g. 100ms, 2s, 5m, 1h, 40d)`);
    ms = Math.round(Number(match[1]) * UNIT_MS[match[2] ?? 'ms']);
  }
  if (!(ms <= MAX_DURATION_MS)) throw new UsageError(`${what}: ${shown} is longer than ${formatDuration(MAX_DURATION_MS)} (100 years)`);
  return ms;
}

/** A duration as messages quote it: a number as it is, text in quotes, cut as shownText cuts it. */
export function shownDuration(value: Duration): string {
  return typeof value === 'number' ? String(value) : `'${shownInLine(value)}'`;
}

/** Renders milliseconds back in the largest whole unit (`90000` → `90s`, `3600000` → `1h`). */
export function formatDuration(ms: number): string {
  for (const unit of ['w', 'd', 'h', 'm', 's'] as const) {
    if (ms >= UNIT_MS[unit] && ms % UNIT_MS[unit] === 0) return `${ms / UNIT_MS[unit]}${unit}`;
  }
  return `${ms}ms`;
}
