/**
 * The engine's settings that both `createCronq` (options from code) and `cronq start`
 * (flags, config.ts) accept: each one's default and bounds, defined once here. Each side
 * parses its own input form (numbers or flag text) and checks it against these bounds
 * with `wholeNumberWithin`, so a bound cannot drift between the API and the CLI.
 * A leaf: it imports nothing of cronq's but errors.ts, so every layer may read it.
 */
import { UsageError } from './errors.ts';

/** A whole-number setting: its default and the inclusive range it must fall in. */
export interface Bounded {
  default: number;
  min: number;
  max: number;
}

/** Handlers running at once (`concurrency`, `--concurrency`). */
export const CONCURRENCY: Bounded = { default: 10, min: 1, max: 1000 };
/** Most jobs claimed ahead of free slots (`prefetch`, `--prefetch`). */
export const PREFETCH: Bounded = { default: 1000, min: 0, max: 10_000 };
/**
 * Most payload held claimed ahead of free slots, in characters of payload JSON (about
 * bytes): the read-ahead is cut to this budget over the recent claims' mean payload, so
 * big payloads are read ahead a few at a time, never `prefetch` of them (see Prefetch).
 */
export const PREFETCH_PAYLOAD_CHARS = 16 * 1024 * 1024;
/** How often an idle worker polls, in ms (`pollInterval`, `--poll`). */
export const POLL_MS: Bounded = { default: 200, min: 10, max: 60_000 };
/** How often a background loop of createCronq's runs, in ms (`recoveryInterval`, `heartbeatInterval`, `pruneEvery`): at least 10ms, at most a week (a timer holds up to ~24.8 days). */
export const LOOP_INTERVAL_MS: Pick<Bounded, 'min' | 'max'> = { min: 10, max: 7 * 86_400_000 };
/** How long importing one schedule file may take, in ms (`importTimeoutMs`). */
export const IMPORT_TIMEOUT_MS: Bounded = { default: 10_000, min: 100, max: 86_400_000 };
/** @internal Test hook: pause after each claim commits, in ms (`postClaimPauseMs`, CRONQ_FAULT_POST_CLAIM_PAUSE_MS). */
export const POST_CLAIM_PAUSE_MS: Bounded = { default: 0, min: 0, max: 10_000 };
/** Lease expiries after which a job goes dead (`maxLeaseExpiries`). */
export const LEASE_EXPIRIES: Bounded = { default: 3, min: 1, max: 1000 };
/** How long `stop()` (and the first SIGTERM) gives running handlers, in ms (`graceMs`, `--grace`). */
export const GRACE_MS = 10_000;
/**
 * How long past its grace a stop may take at most, in ms, whatever the database does (a
 * frozen or locked server): the 2 s handlers get to honour their aborted signal, then a
 * second for releases, the heartbeat row and closing connections. Past it, stop() logs
 * `shutdown_cut_short` naming what it still waited for and resolves; the fence keeps
 * anything unwritten safe (lease recovery returns those jobs). A migration under way is
 * waited for all the same (cut midway its DDL would stay half applied).
 */
export const SHUTDOWN_MARGIN_MS = 3_000;
/** The range of that grace: up to the longest lease (24h), which a grace should stay below; well short of where timers overflow (2^31-1 ms: node would fire at once). */
export const GRACE_BOUND: Pick<Bounded, 'min' | 'max'> = { min: 0, max: 24 * 3_600_000 };
/** How long a kind may go unserved before its claimed jobs go dead, in ms (`unknownKindGraceMs`, `--unknown-kind-grace`). */
export const UNKNOWN_KIND_GRACE_MS = 15 * 60_000;
/** How often a daemon running workers or a scheduler refreshes its cronq_daemons row, in ms (`heartbeatInterval`). */
export const HEARTBEAT_MS = 10_000;
/** Retention passes: rows per DELETE, the pause between them, the id span scanned at once, and how often `--prune-done-older-than` runs. */
export const PRUNE_DEFAULTS = { batchSize: 500, pauseMs: 20, scanSpan: 10_000, everyMs: 5 * 60_000 };

/** A refused number as a message shows it: a string as one (`the string "4"` is not 4), anything else by its type. */
export function shownNumber(value: unknown): string {
  if (typeof value === 'number') return String(value);
  if (typeof value === 'string') return `the string ${JSON.stringify(value.length > 32 ? `${value.slice(0, 32)}…` : value)}`;
  return value === null ? 'null' : typeof value;
}

/**
 * `value` when it is a whole number within `bound`; otherwise a UsageError naming the
 * setting: `NAME must be a whole number from MIN to MAX (got SHOWN)`. `shown` is how the
 * input reads back to its writer (flags quote the text they were given).
 */
export function wholeNumberWithin(value: number, name: string, bound: Pick<Bounded, 'min' | 'max'>, shown: string = shownNumber(value)): number {
  if (!Number.isInteger(value) || value < bound.min || value > bound.max) {
    throw new UsageError(`${name} must be a whole number from ${bound.min} to ${bound.max} (got ${shown})`);
  }
  return value;
}
