import { existsSync, readFileSync } from 'node:fs';
import { DEFAULT_DATABASE_URL, parseDatabaseUrl } from './db/url.ts';
import { CONCURRENCY, GRACE_BOUND, GRACE_MS, POLL_MS, POST_CLAIM_PAUSE_MS, PREFETCH, UNKNOWN_KIND_GRACE_MS, wholeNumberWithin } from './defaults.ts';
import { parseDuration } from './duration.ts';
import { UsageError } from './errors.ts';
import { shownInLine } from './shownText.ts';
import { parseHttpAddress, type HttpAddress } from './http/address.ts';
import { parseConsoleToken, type ConsoleToken } from './http/console/auth.ts';
import { parseLogLevel } from './logger.ts';
import { DEFAULT_IMPORT_TIMEOUT_MS, MAX_IMPORT_TIMEOUT_MS } from './schedule/importBound.ts';
import { MIN_RETENTION_MS } from './schedule/retention.ts';
import { validateQueue, validateQueueList } from './tasks/define.ts';

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
  /** @internal CRONQ_FAULT_POST_CLAIM_PAUSE_MS, the test hook (CronqOptions.postClaimPauseMs). */
  postClaimPauseMs: number;
  /** Where to serve /healthz and /metrics (--http); null: no HTTP server. */
  http: HttpAddress | null;
  /** The web console's token (CRONQ_CONSOLE_TOKEN or --console-token-file); null: the console is read-only. */
  consoleToken: ConsoleToken | null;
  /** Delete done jobs older than this in the background (--prune-done-older-than); null: never. */
  pruneDoneOlderThanMs: number | null;
  /** How long a kind may go unserved before its jobs go dead (--unknown-kind-grace). */
  unknownKindGraceMs: number;
}

/**
 * Reads DATABASE_URL, CRONQ_SCHEDULES, CRONQ_IMPORT_TIMEOUT and LOG_LEVEL, with `--schedules`
 * taking precedence. With `loadsSchedules` false (a command that loads no schedule file:
 * migrate, dead, cancel, limits), CRONQ_IMPORT_TIMEOUT is not read, so a value only the
 * daemon refuses does not refuse them too.
 */
export function baseConfig(env: NodeJS.ProcessEnv, flags: { schedules?: string } = {}, { loadsSchedules = true } = {}): BaseConfig {
  const databaseUrl = env.DATABASE_URL || DEFAULT_DATABASE_URL;
  parseDatabaseUrl(databaseUrl); // refuse a malformed URL before anything else
  return {
    databaseUrl,
    schedulesDir: flags.schedules ?? (env.CRONQ_SCHEDULES || (existsSync('./schedules') ? './schedules' : null)),
    importTimeoutMs: loadsSchedules && env.CRONQ_IMPORT_TIMEOUT ? parseImportTimeout(env.CRONQ_IMPORT_TIMEOUT) : DEFAULT_IMPORT_TIMEOUT_MS,
    logLevel: parseLogLevel(env.LOG_LEVEL),
  };
}

/** The base config of `cronq migrate`: MIGRATION_DATABASE_URL (refused under its own name) when set, else DATABASE_URL. */
export function migrationConfig(env: NodeJS.ProcessEnv): BaseConfig {
  if (env.MIGRATION_DATABASE_URL) parseDatabaseUrl(env.MIGRATION_DATABASE_URL, 'MIGRATION_DATABASE_URL');
  return baseConfig({ ...env, DATABASE_URL: env.MIGRATION_DATABASE_URL || env.DATABASE_URL }, {}, { loadsSchedules: false });
}

function parseImportTimeout(value: string): number {
  const ms = parseDuration(value, 'CRONQ_IMPORT_TIMEOUT');
  if (ms < 100 || ms > MAX_IMPORT_TIMEOUT_MS) throw new UsageError(`CRONQ_IMPORT_TIMEOUT must be between 100ms and 24h (got '${shownInLine(value)}')`);
  return ms;
}

function parseGrace(value: string): number {
  const ms = parseDuration(value, '--grace');
  if (ms > GRACE_BOUND.max) throw new UsageError(`--grace must be at most 24h, the longest lease (got '${shownInLine(value)}')`);
  return ms;
}

/**
 * Parses a whole number flag within bounds, naming the flag when it is not one. Digits
 * only, as typed: `1e3`, `0x10`, `+5`, `5.0` and ` 5` are refused, never read as Number
 * reads them (1000, 16) or trimmed.
 */
export function parseIntFlag(value: string, flag: string, min: number, max: number): number {
  return wholeNumberWithin(/^[0-9]+$/.test(value) ? Number(value) : Number.NaN, flag, { min, max }, `'${shownInLine(value)}'`);
}

/** A queue name given as `flag`, validated as tasks take it (a UsageError naming the flag). */
export function parseQueueFlag(value: string, flag: string): string {
  return validateQueue(value, flag);
}

/** Splits `a,b` into validated queue names, each named once (validateQueueList). */
export function parseQueues(value: string | undefined): string[] {
  if (value === undefined) return [];
  return validateQueueList(value.split(',').map((q) => q.trim()), '--queues');
}

/**
 * Parses a retention duration, refusing one under MIN_RETENTION_MS (a bare `30` is 30 ms).
 * Whether it covers the schedules is checked once they are loaded (checkRetention).
 */
export function parseRetention(value: string, flag: string): number {
  const ms = parseDuration(value, flag);
  if (ms < MIN_RETENTION_MS) throw new UsageError(`${flag} must be at least 1h (got '${shownInLine(value)}'; durations read as 30d, 12h)`);
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
    'console-token-file'?: string;
    'prune-done-older-than'?: string;
    'unknown-kind-grace'?: string;
  },
): DaemonConfig {
  const base = baseConfig(env, flags);
  const pause = env.CRONQ_FAULT_POST_CLAIM_PAUSE_MS ?? String(POST_CLAIM_PAUSE_MS.default);
  const config: DaemonConfig = {
    ...base,
    concurrency: flags.concurrency === undefined ? CONCURRENCY.default : parseIntFlag(flags.concurrency, '--concurrency', CONCURRENCY.min, CONCURRENCY.max),
    prefetch: flags.prefetch === undefined ? PREFETCH.default : parseIntFlag(flags.prefetch, '--prefetch', PREFETCH.min, PREFETCH.max),
    queues: parseQueues(flags.queues),
    graceMs: flags.grace === undefined ? GRACE_MS : parseGrace(flags.grace),
    pollMs: flags.poll === undefined ? POLL_MS.default : parseDuration(flags.poll, '--poll'),
    migrate: !flags['no-migrate'],
    workers: !flags['no-workers'],
    scheduler: !flags['no-scheduler'],
    postClaimPauseMs: parseIntFlag(pause, 'CRONQ_FAULT_POST_CLAIM_PAUSE_MS', POST_CLAIM_PAUSE_MS.min, POST_CLAIM_PAUSE_MS.max),
    http: flags.http === undefined ? null : parseHttpAddress(flags.http, '--http'),
    consoleToken: consoleTokenOf(env, flags['console-token-file']),
    pruneDoneOlderThanMs: flags['prune-done-older-than'] === undefined ? null : parseRetention(flags['prune-done-older-than'], '--prune-done-older-than'),
    unknownKindGraceMs:
      flags['unknown-kind-grace'] === undefined ? UNKNOWN_KIND_GRACE_MS : parseDuration(flags['unknown-kind-grace'], '--unknown-kind-grace'),
  };
  if (config.pollMs < POLL_MS.min || config.pollMs > POLL_MS.max) throw new UsageError(`--poll must be between ${POLL_MS.min}ms and ${POLL_MS.max / 1000}s (got '${shownInLine(String(flags.poll))}')`);
  if (!config.workers && !config.scheduler) throw new UsageError('--no-workers and --no-scheduler together leave nothing to run');
  return config;
}

/** The console token from --console-token-file (first) or CRONQ_CONSOLE_TOKEN; null when neither is given. */
function consoleTokenOf(env: NodeJS.ProcessEnv, file: string | undefined): ConsoleToken | null {
  if (file !== undefined) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8').slice(0, 4096);
    } catch (error) {
      throw new UsageError(`--console-token-file: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
    }
    return parseConsoleToken(text, '--console-token-file');
  }
  const value = env.CRONQ_CONSOLE_TOKEN;
  return value === undefined || value === '' ? null : parseConsoleToken(value, 'CRONQ_CONSOLE_TOKEN');
}
