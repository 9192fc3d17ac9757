import { formatDuration, parseDuration, type Duration } from '../duration.ts';
import { UsageError } from '../errors.ts';

/**
 * Every backoff and jitter in cronq: handler retries, fan-out retries, database
 * outages and periodic passes all take their delays from here.
 */

/** Exponential backoff: base·2^(attempt−1), capped at max, then jittered. */
export interface Backoff {
  /** The first retry's delay before jitter, in ms (at least 1). */
  baseMs: number;
  /** The cap on any delay before jitter, in ms (at least baseMs, at most 365 days). */
  maxMs: number;
}

export const DEFAULT_BACKOFF: Backoff = { baseMs: 1_000, maxMs: 3_600_000 };

/** The longest retry delay a task may ask for: a retry dated further out would overflow the database's DATETIME arithmetic. */
export const BACKOFF_MAX_MS = 365 * 86_400_000;

/** Reads `{ base, max }` as written in a task or schedule; refuses max < base, and either over BACKOFF_MAX_MS. */
export function parseBackoff(value: { base?: Duration; max?: Duration } | undefined, what: string): Backoff {
  const baseMs = value?.base === undefined ? DEFAULT_BACKOFF.baseMs : parseDuration(value.base, `${what}.base`);
  const maxMs = value?.max === undefined ? Math.max(DEFAULT_BACKOFF.maxMs, baseMs) : parseDuration(value.max, `${what}.max`);
  if (baseMs < 1) throw new UsageError(`${what}.base must be at least 1ms`);
  for (const [part, ms] of [['base', baseMs], ['max', maxMs]] as const) {
    if (ms > BACKOFF_MAX_MS) throw new UsageError(`${what}.${part} must be at most ${formatDuration(BACKOFF_MAX_MS)} (got ${JSON.stringify(value?.[part])})`);
  }
  // (Only a max as written can be: the default grows to the base.)
  if (maxMs < baseMs) throw new UsageError(`${what}.max (${formatDuration(maxMs)}) is below its base (${formatDuration(baseMs)})`);
  return { baseMs, maxMs };
}

/** The un-jittered delay before retry number `attempt` (the attempt that just failed, from 1). */
export function backoffCeilingMs(backoff: Backoff, attempt: number): number {
  const exponent = Math.min(Math.max(attempt - 1, 0), 40);
  return Math.min(backoff.maxMs, backoff.baseMs * 2 ** exponent);
}

/**
 * The delay before the next attempt after `attempt` failed: "equal jitter", uniformly
 * random in [ceiling/2, ceiling]. Never below half the ceiling, so delays still grow;
 * spread over half the ceiling, so fifty jobs failing together do not return together.
 */
export function retryDelayMs(backoff: Backoff, attempt: number, random: () => number = Math.random): number {
  const ceiling = backoffCeilingMs(backoff, attempt);
  return uniformMs(ceiling / 2, ceiling, random);
}

/** A whole number of milliseconds, uniformly random in [lowMs, highMs]: the one jitter. */
export function uniformMs(lowMs: number, highMs: number, random: () => number = Math.random): number {
  return Math.round(lowMs + random() * (highMs - lowMs));
}
