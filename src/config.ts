import { existsSync } from 'node:fs';
import { DEFAULT_DATABASE_URL, parseDatabaseUrl } from './db/url.ts';
import { parseDuration } from './duration.ts';
import { UsageError } from './errors.ts';
import { parseHttpAddress, type HttpAddress } from './http/address.ts';
import { DEFAULT_IMPORT_TIMEOUT_MS } from './schedule/importBound.ts';
import { MIN_RETENTION_MS } from './schedule/retention.ts';
import { validateQueue } from './tasks/define.ts';
import { UNKNOWN_KIND_DEFAULTS } from './worker/unknownKinds.ts';

/** Settings every command shares, from the environment (flags override them). */
export interface BaseConfig {
  databaseUrl: string;
  /** Null when neither --schedules nor CRONQ_SCHEDULES is set and ./schedules does not exist. */
  schedulesDir: string | null;
  /** How long importing one schedule file may take (CRONQ_IMPORT_TIMEOUT, default 10s). */
  importTimeoutMs: number;
  logLevel: string;
}

/** What `cronq start` runs with. */
export interface DaemonConfig extends BaseConfig {
  concurrency: number;
  /** Most jobs claimed ahead of free slots while handlers are fast (--prefetch). */
  prefetch: number;
  queues: string[];
  graceMs: number;
  pollMs: number;
  migrate: boolean;
  workers: boolean;
  scheduler: boolean;
  postClaimPauseMs: number;
  /** Where to serve /healthz and /metrics (--http); null: no HTTP server. */
  http: HttpAddress | null;
  /** Delete done jobs older than this in the background (--prune-done-older-than); null: never. */
  pruneDoneOlderThanMs: number | null;
  /** How long a kind may go unserved before its jobs go dead (--unknown-kind-grace). */
  unknownKindGraceMs: number;
}

export const DAEMON_DEFAULTS = {
  concurrency: 10,
  prefetch: 1000,
  graceMs: 10_000,
  pollMs: 200,
  unknownKindGraceMs: UNKNOWN_KIND_DEFAULTS.graceMs,
};

/** Reads DATABASE_URL, CRONQ_SCHEDULES, CRONQ_IMPORT_TIMEOUT and LOG_LEVEL, with `--schedules` taking precedence. */
export function baseConfig(env: NodeJS.ProcessEnv, flags: { schedules?: string } = {}): BaseConfig {
  const databaseUrl = env.DATABASE_URL || DEFAULT_DATABASE_URL;
  parseDatabaseUrl(databaseUrl); // refuse a malformed URL before anything else
  return {
    databaseUrl,
    schedulesDir: flags.schedules ?? (env.CRONQ_SCHEDULES || (existsSync('./schedules') ? './schedules' : null)),
    importTimeoutMs: env.CRONQ_IMPORT_TIMEOUT ? parseImportTimeout(env.CRONQ_IMPORT_TIMEOUT) : DEFAULT_IMPORT_TIMEOUT_MS,
    logLevel: env.LOG_LEVEL || 'info',
  };
}

function parseImportTimeout(value: string): number {
  const ms = parseDuration(value, 'CRONQ_IMPORT_TIMEOUT');
  if (ms < 100) throw new UsageError(`CRONQ_IMPORT_TIMEOUT must be at least 100ms (got '${value}')`);
  return ms;
}

/** Parses a whole number flag within bounds, naming the flag when it is not one. */
export function parseIntFlag(value: string, flag: string, min: number, max: number): number {
  if (!/^\d+$/.test(value.trim()) || Number(value) < min || Number(value) > max) {
    throw new UsageError(`${flag} must be a whole number from ${min} to ${max} (got '${value}')`);
  }
  return Number(value);
}

/** Splits `a,b` into validated queue names. */
export function parseQueues(value: string | undefined): string[] {
  if (value === undefined) return [];
  return value.split(',').map((q) => validateQueue(q.trim(), '--queues entry'));
}

/**
 * Parses a retention duration, refusing one under MIN_RETENTION_MS (a bare `30` is 30 ms).
 * Whether it covers the schedules is checked once they are loaded (checkRetention).
 */
export function parseRetention(value: string, flag: string): number {
  const ms = parseDuration(value, flag);
  if (ms < MIN_RETENTION_MS) throw new UsageError(`${flag} must be at least 1h (got '${value}'; durations read as 30d, 12h)`);
  return ms;
}

/** Builds the daemon config; refuses bad values at start with one line naming them. */
export function daemonConfig(
  env: NodeJS.ProcessEnv,
  flags: {
    schedules?: string;
    concurrency?: string;
    prefetch?: string;
    queues?: string;
    grace?: string;
    poll?: string;
    'no-migrate'?: boolean;
    'no-workers'?: boolean;
    'no-scheduler'?: boolean;
    http?: string;
    'prune-done-older-than'?: string;
    'unknown-kind-grace'?: string;
  },
): DaemonConfig {
  const base = baseConfig(env, flags);
  const pause = env.CRONQ_FAULT_POST_CLAIM_PAUSE_MS ?? '0';
  const config: DaemonConfig = {
    ...base,
    concurrency: flags.concurrency === undefined ? DAEMON_DEFAULTS.concurrency : parseIntFlag(flags.concurrency, '--concurrency', 1, 1000),
    prefetch: flags.prefetch === undefined ? DAEMON_DEFAULTS.prefetch : parseIntFlag(flags.prefetch, '--prefetch', 0, 10_000),
    queues: parseQueues(flags.queues),
    graceMs: flags.grace === undefined ? DAEMON_DEFAULTS.graceMs : parseDuration(flags.grace, '--grace'),
    pollMs: flags.poll === undefined ? DAEMON_DEFAULTS.pollMs : parseDuration(flags.poll, '--poll'),
    migrate: !flags['no-migrate'],
    workers: !flags['no-workers'],
    scheduler: !flags['no-scheduler'],
    postClaimPauseMs: parseIntFlag(pause, 'CRONQ_FAULT_POST_CLAIM_PAUSE_MS', 0, 10_000),
    http: flags.http === undefined ? null : parseHttpAddress(flags.http, '--http'),
    pruneDoneOlderThanMs: flags['prune-done-older-than'] === undefined ? null : parseRetention(flags['prune-done-older-than'], '--prune-done-older-than'),
    unknownKindGraceMs:
      flags['unknown-kind-grace'] === undefined ? DAEMON_DEFAULTS.unknownKindGraceMs : parseDuration(flags['unknown-kind-grace'], '--unknown-kind-grace'),
  };
  if (config.pollMs < 10 || config.pollMs > 60_000) throw new UsageError('--poll must be between 10ms and 60s');
  if (!config.workers && !config.scheduler) throw new UsageError('--no-workers and --no-scheduler together leave nothing to run');
  return config;
}
