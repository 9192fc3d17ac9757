import { hostname } from 'node:os';
import { createAdmin, type CronqAdmin } from './admin.ts';
import { connect, isConnectionError, OBSERVER_CONNECTIONS, RESERVED_CONNECTIONS, type Executor } from './db/client.ts';
import { applyMigrations, ensureDatabase } from './db/migrate.ts';
import { DEFAULT_DATABASE_URL } from './db/url.ts';
import { CONCURRENCY, GRACE_BOUND, GRACE_MS, HEARTBEAT_MS, SHUTDOWN_MARGIN_MS, IMPORT_TIMEOUT_MS, LEASE_EXPIRIES, LOOP_INTERVAL_MS, POLL_MS, POST_CLAIM_PAUSE_MS, PREFETCH, PRUNE_DEFAULTS, shownNumber, UNKNOWN_KIND_GRACE_MS, wholeNumberWithin, type Bounded } from './defaults.ts';
import { formatDuration, parseDuration, shownDuration, type Duration } from './duration.ts';
import { EnqueueRefusedError, usedAfterStop, UsageError } from './errors.ts';
import { errorText } from './runtime/errorText.ts';
import { charLength, longerThanChars } from './runtime/chars.ts';
import { libraryLogger, type Logger } from './logger.ts';
import { guardObserver, noopObserver, type Observer } from './observe.ts';
import { toJobRow, type EnqueueJob } from './enqueue/jobRow.ts';
import { refuseScheduleKey, type ScheduleKeyShape } from './schedule/fanout.ts';
import { enqueueFailure, enqueueOne, enqueueRows, statementByteLimitOf, type EnqueueOutcome } from './enqueue/write.ts';
import { pruneLoop } from './maintenance/prune.ts';
import { RECOVERY_DEFAULTS, recoveryLoop } from './maintenance/recovery.ts';
import { Store } from './store/index.ts';
import type { NewJobRow } from './store/jobs.ts';
import { guardClock, type Clock } from './schedule/clock.ts';
import { DatabaseClock } from './schedule/databaseClock.ts';
import { loadSchedulesDir } from './schedule/loader.ts';
import { checkRetention } from './schedule/retention.ts';
import { Scheduler } from './schedule/scheduler.ts';
import { isSchedule, schedulesOf, type Schedule } from './schedule/define.ts';
import { isTask, refuseUnknownOptions, shownName, validateQueueList, type Task } from './tasks/define.ts';
import { TaskRegistry } from './tasks/registry.ts';
import { DbHealth } from './runtime/dbHealth.ts';
import { DaemonHeartbeat } from './worker/heartbeat.ts';
import { WorkerPool, type StopResult } from './worker/pool.ts';
import { UnknownKinds } from './worker/unknownKinds.ts';
import { catchUncaught } from './worker/uncaught.ts';

export type { EnqueueJob, StopResult };

/** A job for a given task (`cronq.enqueue(task, job)`): the kind is the task's, the payload its type. */
export type TaskJob<P> = Omit<EnqueueJob, 'kind' | 'payload'> & {
  /** The payload, of the task's type; stored as EnqueueJob.payload is. */
  payload: P;
};

/** Options of one enqueue or enqueueMany call. */
export interface EnqueueOptions {
  /** A Drizzle transaction (drizzle-orm/mysql2): the rows commit or roll back with it. */
  tx?: Executor;
  /** Accept a kind no task of this instance defines (default: createCronq's allowUnknownKind). */
  allowUnknownKind?: boolean;
}

/** A job of an enqueueMany stream refused as it was read: enqueueManyCall adds what was written before it. */
class StreamJobRefusal extends UsageError {}

/** Batch INSERTs in flight at once for enqueueMany and fan-outs outside a transaction. */
export const ENQUEUE_PARALLEL = 2;

/** createCronq's options: each checked by createCronq (UsageError naming it), an unknown one refused. */
export interface CronqOptions {
  /** Default: DATABASE_URL, else mysql://root@127.0.0.1:3306/cronq. */
  databaseUrl?: string;
  /** Tasks defined in code. */
  tasks?: Task[];
  /** A folder of task/schedule files to load as well (null: none). */
  schedulesDir?: string | null;
  /** How long importing one schedule file may take before the folder is refused (ms, 100–86400000, default 10 s). */
  importTimeoutMs?: number;
  /** Handlers running at once (1–1000, default 10). */
  concurrency?: number;
  /**
   * Most jobs claimed ahead of free slots (0–10000, default 1000). The read-ahead is
   * what handlers use up in about two claim round trips, so slow handlers get none and
   * no-op ones the most; 0 claims only for free slots (README, "Claiming").
   */
  prefetch?: number;
  /** Queues to claim from (default: all); each a queue name as tasks take it. */
  queues?: string[];
  /**
   * Where cronq logs. Default: JSON lines on stdout like the daemon's (pino, level from
   * LOG_LEVEL, default info); `false`: nowhere; else any pino-compatible logger
   * (refused at once, UsageError, when it lacks child, debug, info, warn, error or isLevelEnabled;
   * a throw or an async method's rejection from it drops that line, Node warned once per method: CRONQ_LOGGER_ERROR).
   */
  logger?: Logger | false;
  /**
   * Let `enqueue({ kind })` / `enqueueMany` take a kind no task of this instance defines
   * (for workers elsewhere with other schedule files). Default false: such a kind is
   * refused (UsageError), as `cronq enqueue` refuses it. Also an option per call.
   */
  allowUnknownKind?: boolean;
  /** How often an idle worker looks for jobs enqueued elsewhere (10ms–60s, default 200ms). */
  pollInterval?: Duration;
  /** How often expired leases are recovered (10ms–7d, default 5s). */
  recoveryInterval?: Duration;
  /** Run handlers (default true). */
  workers?: boolean;
  /** Enqueue the schedules' ticks (default true). */
  scheduler?: boolean;
  /**
   * The scheduler's clock (tests drive a simulated one). Default: the database's clock,
   * read at start and every minute and carried by a monotonic clock between (DatabaseClock),
   * so daemons on hosts whose clocks disagree still agree on which ticks are due (a host
   * clock 2 s or more off logs `clock_skew`). A given clock whose now() throws or returns
   * no valid Date, or whose sleepUntil() rejects, fails scheduler passes, retried with
   * backoff and logged once per method (`clock_error`), never the process (guardClock).
   */
  clock?: Clock;
  /**
   * @internal Fault injection for tests and the daemon's CRONQ_FAULT_POST_CLAIM_PAUSE_MS:
   * pause after each claim commits (0–10000 ms). Not published (stripInternal).
   */
  postClaimPauseMs?: number;
  /** This daemon's name in `locked_by` and cronq_daemons (1–255 characters, no trailing space; `host:pid` by default). */
  lockedBy?: string;
  /** Told what the engine does (claims, results, recoveries, ticks), e.g. for metrics; methods left out are not called. Default: nobody. */
  observer?: Partial<Observer>;
  /**
   * Delete done jobs (and tick-ledger rows) older than this in the background, from
   * start() on (default: never). start() refuses (UsageError) a value under 1h or shorter
   * than any loaded schedule's catch-up window plus one period (checkRetention).
   */
  pruneDoneOlderThan?: Duration;
  /** How often that pruning runs (10ms–7d, default 5m). */
  pruneEvery?: Duration;
  /**
   * How long a kind may go unserved before claimed jobs of that kind go dead (ms,
   * default 15 minutes): measured from the last heartbeat of a daemon that ran it, or
   * from the job's creation when none ever did. Until then such a job is released for
   * a daemon that runs it, its attempt restored (README, "Kinds this daemon does not run").
   */
  unknownKindGraceMs?: number;
  /**
   * How often this daemon's cronq_daemons row is refreshed while its workers or scheduler
   * run (10ms–7d, default 10s). Silent for three of these, it counts as stalled: another
   * daemon may end the session of an overlap lock it holds (README, Overlap).
   */
  heartbeatInterval?: Duration;
  /**
   * A job whose lease expired this many times goes dead (1–1000, default 3): the
   * processes running it stopped or stalled that often without finishing it (a handler
   * calling process.exit, running out of memory, blocking the event loop past its lease).
   */
  maxLeaseExpiries?: number;
  /**
   * From start() to stop(), log an `unhandledRejection` or `uncaughtException` as one
   * JSON event naming the job whose handler caused it, and keep the process running,
   * instead of Node's default (print and exit). Default false: the process owner
   * decides; `cronq start` turns it on.
   */
  catchUncaught?: boolean;
}

/** enqueue's and enqueueMany's options, checked: an object of known fields, a `tx` that can run statements. */
function checkedEnqueueOptions(call: unknown): EnqueueOptions {
  if (call === undefined || call === null) return {}; // null as no options, as before (JavaScript callers)
  if (typeof call !== 'object') throw new UsageError(`enqueue: options must be an object ({ tx, allowUnknownKind }; got ${typeof call})`);
  refuseUnknownOptions(call, ['tx', 'allowUnknownKind'], 'enqueue');
  const { tx, allowUnknownKind } = call as EnqueueOptions;
  if (tx !== undefined && tx !== null && typeof (tx as { execute?: unknown }).execute !== 'function') {
    throw new UsageError('enqueue: tx must be a Drizzle transaction on a drizzle-orm/mysql2 database (it has no execute())');
  }
  if (allowUnknownKind !== undefined && typeof allowUnknownKind !== 'boolean') throw new UsageError('enqueue: allowUnknownKind must be true or false');
  return call as EnqueueOptions;
}

/**
 * stop()'s grace from its options, checked: an object of known fields (a misspelt `grace`
 * would leave the default in force), null or nothing as none, `graceMs` a whole number
 * within GRACE_BOUND. UsageError otherwise.
 */
function stopGraceMs(call: unknown): number {
  if (call === undefined || call === null) return GRACE_MS; // null as no options, as enqueue takes it
  if (typeof call !== 'object' || Array.isArray(call)) throw new UsageError(`stop: options must be an object ({ graceMs }; got ${Array.isArray(call) ? 'an array' : typeof call})`);
  refuseUnknownOptions(call, ['graceMs'], 'stop');
  const { graceMs = GRACE_MS } = call as { graceMs?: number };
  return wholeNumberWithin(graceMs, 'graceMs', GRACE_BOUND);
}

/** Every option createCronq takes: any other is refused (checkOptionShapes). */
const CRONQ_OPTION_KEYS = Object.keys({
  databaseUrl: true, tasks: true, schedulesDir: true, importTimeoutMs: true, concurrency: true, prefetch: true, queues: true,
  logger: true, allowUnknownKind: true, pollInterval: true, recoveryInterval: true, workers: true, scheduler: true, clock: true,
  postClaimPauseMs: true, lockedBy: true, observer: true, pruneDoneOlderThan: true, pruneEvery: true, unknownKindGraceMs: true,
  heartbeatInterval: true, maxLeaseExpiries: true, catchUncaught: true,
} satisfies Record<keyof CronqOptions, true>);

/**
 * The checks of createCronq's options that come before their values are read: an object,
 * every key known (a misspelt `concurency` would otherwise leave the default in force),
 * and the options that are not numbers, durations or names of the right type (those are
 * checked where they are read, each with its own range). UsageError naming the option.
 */
function checkOptionShapes(options: CronqOptions): void {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new UsageError(`createCronq: options must be an object (got ${options === null ? 'null' : Array.isArray(options) ? 'an array' : typeof options})`);
  }
  refuseUnknownOptions(options, CRONQ_OPTION_KEYS, 'createCronq');
  const typeOf = (value: unknown) => (value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value);
  for (const name of ['allowUnknownKind', 'workers', 'scheduler', 'catchUncaught'] as const) {
    const value: unknown = options[name];
    if (value !== undefined && typeof value !== 'boolean') throw new UsageError(`createCronq: ${name} must be true or false (got ${typeOf(value)})`);
  }
  if (options.databaseUrl !== undefined && (typeof options.databaseUrl !== 'string' || options.databaseUrl === '')) {
    throw new UsageError(`createCronq: databaseUrl must be a mysql:// URL (got ${typeof options.databaseUrl === 'string' ? 'an empty string' : typeOf(options.databaseUrl)})`);
  }
  const dir: unknown = options.schedulesDir;
  if (dir !== undefined && dir !== null && (typeof dir !== 'string' || dir === '')) {
    throw new UsageError(`createCronq: schedulesDir must be a folder's path, or null for none (got ${typeof dir === 'string' ? 'an empty string' : typeOf(dir)})`);
  }
  const clock: unknown = options.clock;
  if (clock !== undefined && (typeof clock !== 'object' || clock === null || typeof (clock as Clock).now !== 'function' || typeof (clock as Clock).sleepUntil !== 'function')) {
    throw new UsageError('createCronq: clock must have now() and sleepUntil(at, signal) methods');
  }
  const observer: unknown = options.observer;
  if (observer !== undefined && (typeof observer !== 'object' || observer === null)) throw new UsageError(`createCronq: observer must be an object of callbacks (got ${typeOf(observer)})`);
  if (observer !== undefined) {
    // A misspelt callback (`jobComplete`) would never be called, and nothing would say so. An
    // observer's own state (a class's fields) is no callback: only functions are looked at.
    const callbacks = Object.keys(noopObserver);
    const own = Object.entries(observer as object);
    refuseUnknownOptions(Object.fromEntries(own.filter(([, value]) => typeof value === 'function')), callbacks, 'createCronq: observer', '', 'callback');
    for (const [name, value] of own) {
      if (callbacks.includes(name) && value !== undefined && typeof value !== 'function') throw new UsageError(`createCronq: observer.${name} must be a function (got ${typeOf(value)})`);
    }
  }
}

/**
 * What an instance loaded (createCronq's `tasks`, then its schedules folder), by name:
 * read-only, the same object for every ready() call. Schedules are tasks too (the job
 * kind of a schedule is its name); `schedules()` lists them alone.
 */
export interface LoadedTasks {
  /** The task or schedule named `name` (a job kind); undefined when this instance has none. */
  get(name: string): Task | undefined;
  /** Every task and schedule, in the order loaded (a new array each call). */
  list(): Task[];
  /** The schedules among them, in the order loaded (a new array each call). */
  schedules(): Schedule[];
  /** How many tasks and schedules were loaded. */
  readonly size: number;
}

/**
 * One cronq instance (createCronq): enqueue jobs, run the engine (start/stop), migrate, and
 * the operator's calls (`admin`). An instance starts once: after stop() every call that
 * needs the database is a UsageError.
 */
export interface Cronq {
  /** The database URL this instance uses, its password masked: for logs and messages. */
  readonly maskedDatabaseUrl: string;
  /** Operator work: dead letters, stats, prune, schedules and ticks, database checks (see CronqAdmin). */
  readonly admin: CronqAdmin;
  /**
   * Resolves once schedule files are loaded, with what was loaded (LoadedTasks); rejects
   * with the loader's error. Later calls share the first.
   */
  ready(): Promise<LoadedTasks>;
  /**
   * Creates the database if missing and applies pending migrations (needs DDL rights).
   * A migration older daemons cannot run beside (0007) is refused while another daemon is
   * alive; this instance's own, after start(), does not count. After stop(): a UsageError
   * (as every call that needs the database). A stop() while it still connects (a database
   * that does not answer) ends it at once with MigrationNotBegunError, nothing changed; once
   * connected, stop() waits for it to finish (cut midway, its DDL would stay half applied).
   */
  migrate(): Promise<void>;
  /**
   * Enqueues one job unless its key exists; returns the row's id either way.
   * `enqueue(task, { key, payload })` takes a task handle from defineTask/defineSchedule
   * (kind and payload type-checked, queue and maxAttempts from the task);
   * `enqueue({ kind, key, payload })` a kind by name, refused (UsageError) when no task of
   * this instance has it unless `allowUnknownKind`.
   * A key a schedule's tick could write (refuseScheduleKey: for a schedule this instance
   * loaded, or the task handle when it is a schedule) is refused (UsageError naming the key
   * and the schedule): a schedule's keys are written by its ticks (`cronq tick NAME --at`
   * runs a period now).
   * With `tx`, the row commits or rolls back with the caller's transaction.
   * A job the database refuses throws EnqueueRefusedError (its key and what is wrong);
   * any other failure EnqueueError (its key and the server's reason). Never the payload.
   * After stop(): a UsageError, at once (as enqueueMany, start, migrate and admin calls).
   */
  enqueue<P>(task: Task<P>, job: TaskJob<P>, options?: EnqueueOptions): Promise<{ id: number; created: boolean }>;
  /**
   * Enqueues one job of a kind named in it (`job.kind`) unless its key exists; returns the
   * row's id either way, `created` false when the key was there. As the task form above:
   * refused (UsageError) for a kind no task of this instance has unless `allowUnknownKind`.
   */
  enqueue(job: EnqueueJob, options?: EnqueueOptions): Promise<{ id: number; created: boolean }>;
  /**
   * Enqueues in batches of up to 1000 rows and below the server's max_allowed_packet per
   * statement; existing keys are left alone. Takes a task handle and its jobs, or jobs
   * naming their kind (as enqueue). Jobs the database refuses for their content
   * (or too large for one statement) are found and left out, every other job is
   * written, and then EnqueueRefusedError lists them. Other failures throw EnqueueError.
   */
  enqueueMany<P>(
    task: Task<P>,
    jobs: Iterable<TaskJob<P>> | AsyncIterable<TaskJob<P>>,
    options?: EnqueueOptions,
  ): Promise<{ inserted: number; existing: number }>;
  /**
   * Enqueues jobs naming their kinds, as the task form above does for one task's: batches
   * of up to 1000 rows, existing keys left alone, refused jobs listed by EnqueueRefusedError
   * after the others are written; an array is checked whole before anything is written.
   */
  enqueueMany(
    jobs: Iterable<EnqueueJob> | AsyncIterable<EnqueueJob>,
    options?: EnqueueOptions,
  ): Promise<{ inserted: number; existing: number }>;
  /**
   * Starts the scheduler, the workers and lease recovery (as configured). Calls while a
   * start runs, or after it succeeded, share it (one engine); after a failed start a
   * call tries again. After stop(): a UsageError (an instance starts once).
   */
  start(): Promise<void>;
  /**
   * Stops claiming at once, releases unstarted claims, gives running handlers `graceMs`,
   * and meanwhile stops a fan-out, writing what it gathered (its tick is left for the next
   * scheduler to resume); waits for a migrate() in progress to finish, and for enqueues
   * under way within the grace (past it, an enqueueMany still reading its rows writes what
   * it gathered and rejects with a UsageError saying how many it wrote); then closes the pool.
   * A start() still running is waited for and what it started is stopped too, except that
   * one still importing schedule files is not: it rejects at once (UsageError) and starts
   * nothing (the import itself cannot be cancelled and finishes in the background). Later calls
   * return the first call's promise. `graceMs` (default 10 s) is a whole number from 0 to
   * a day (24h, the longest lease); anything else is refused (UsageError) and nothing stops,
   * as is an option it does not know (`grace`) or options that are not an object (null is none).
   * Whatever the database does (frozen, locked, away), it resolves within `graceMs` plus
   * SHUTDOWN_MARGIN_MS (3 s), a migration under way excepted: past that it logs one
   * `shutdown_cut_short` line naming what it still waited for, ends every write still
   * waiting (fenced: those jobs return through lease recovery) and destroys its connections.
   */
  stop(options?: { graceMs?: number }): Promise<StopResult>;
  /** Whether each part this instance runs is alive now (null for a part it does not run); what `/healthz` reports. */
  health(): CronqHealth;
}

/** What `health()` reports; null means that part does not run in this instance. */
export interface CronqHealth {
  /** False while the engine's database statements are failing (between db_unavailable and db_recovered). */
  database: boolean;
  /** When an engine statement last succeeded (epoch ms); only loops that run update it. */
  databaseLastOkAt: number;
  /** Workers started and not stopping. */
  workers: boolean | null;
  /** When the claim loop last went round (epoch ms); it does at least every poll interval. */
  lastClaimLoopAt: number | null;
  /** Scheduler started and not stopping. */
  scheduler: boolean | null;
  /** How long the oldest job running in this process has run, in ms (0 when none; null without workers). */
  oldestRunningJobAgeMs: number | null;
}

/** The read-only face of a loaded registry (what ready() resolves with): nothing can be added through it. */
function loadedView(registry: TaskRegistry): LoadedTasks {
  return Object.freeze({
    get: (name: string) => registry.get(name),
    list: () => registry.list(),
    schedules: () => schedulesOf(registry),
    get size() {
      return registry.size;
    },
  });
}

/** A duration option in ms, its default when left out; a UsageError naming it when outside `bound`. */
function durationWithin(value: Duration | undefined, name: string, bound: Bounded): number {
  if (value === undefined) return bound.default;
  const ms = parseDuration(value, name);
  if (ms < bound.min || ms > bound.max) {
    throw new UsageError(`${name} must be a duration from ${formatDuration(bound.min)} to ${formatDuration(bound.max)} (got ${shownDuration(value)})`);
  }
  return ms;
}

/**
 * Builds a cronq instance: the same engine `cronq start` runs, for use from code.
 * Every option is checked here (UsageError naming it); nothing touches the database
 * until a method is called.
 */
export function createCronq(options: CronqOptions = {}): Cronq {
  checkOptionShapes(options);
  const log = libraryLogger(options.logger);
  const concurrency = wholeNumberWithin(options.concurrency ?? CONCURRENCY.default, 'concurrency', CONCURRENCY);
  const prefetch = wholeNumberWithin(options.prefetch ?? PREFETCH.default, 'prefetch', PREFETCH);
  const enginePool = Math.min(concurrency + RESERVED_CONNECTIONS, 48);
  const database = connect(options.databaseUrl ?? process.env.DATABASE_URL ?? DEFAULT_DATABASE_URL, {
    // Claims run on Database.claims (CLAIM_CONNECTIONS more): concurrency + 4 in all, and up to
    // OVERLAP_LOCK_CONNECTIONS more while overlap:'skip' schedules fan out (Database.overlapLocks).
    // Effects hold at most all but RESERVED_CONNECTIONS of the engine's share (Database.dedicated):
    // one each for up to 46 running at once, beyond that they wait their turn, and renewals,
    // completions and the scheduler's enqueues always have the reserve. OBSERVER_CONNECTIONS more
    // are the console's and /metrics': with --concurrency 1 (a pool of 3), two console pages and
    // a scrape waiting out a locked table held all of it, and completions waited with them.
    poolSize: enginePool + OBSERVER_CONNECTIONS,
    dedicatedConnections: Math.max(1, enginePool - RESERVED_CONNECTIONS),
    // A bad URL is refused under the name it was given by: the option, else the environment's.
    ...(options.databaseUrl !== undefined ? { urlName: 'databaseUrl' } : {}),
  });
  const store = new Store(database);
  const healthTracker = new DbHealth(log);
  const observer = guardObserver(options.observer, (method, error) =>
    log.warn({ event: 'observer_error', method, error: errorText(error) }, 'observer threw; ignored'),
  );
  const unknownKindGraceMs = options.unknownKindGraceMs ?? UNKNOWN_KIND_GRACE_MS;
  if (!Number.isFinite(unknownKindGraceMs) || unknownKindGraceMs < 0) {
    throw new UsageError(`unknownKindGraceMs must be a duration in milliseconds, 0 or more (got ${shownNumber(unknownKindGraceMs)})`);
  }
  const heartbeatMs = durationWithin(options.heartbeatInterval, 'heartbeatInterval', { ...LOOP_INTERVAL_MS, default: HEARTBEAT_MS });
  const pollMs = durationWithin(options.pollInterval, 'pollInterval', POLL_MS);
  const recoveryMs = durationWithin(options.recoveryInterval, 'recoveryInterval', { ...LOOP_INTERVAL_MS, default: RECOVERY_DEFAULTS.everyMs });
  const pruneEveryMs = durationWithin(options.pruneEvery, 'pruneEvery', { ...LOOP_INTERVAL_MS, default: PRUNE_DEFAULTS.everyMs });
  const importTimeoutMs = wholeNumberWithin(options.importTimeoutMs ?? IMPORT_TIMEOUT_MS.default, 'importTimeoutMs', IMPORT_TIMEOUT_MS);
  const postClaimPauseMs = wholeNumberWithin(options.postClaimPauseMs ?? POST_CLAIM_PAUSE_MS.default, 'postClaimPauseMs', POST_CLAIM_PAUSE_MS);
  const lockedBy = options.lockedBy ?? `${hostname()}:${process.pid}`;
  if (typeof lockedBy !== 'string' || lockedBy.length < 1 || longerThanChars(lockedBy, 255)) {
    throw new UsageError(`lockedBy must be a string of 1 to 255 characters (got ${typeof lockedBy === 'string' ? `${charLength(lockedBy)} characters` : typeof lockedBy})`);
  }
  // Stored right-padded with spaces (LEASE_STORAGE), read back with them trimmed.
  if (lockedBy.endsWith(' ')) throw new UsageError('lockedBy must not end with a space');
  if (options.queues !== undefined && !Array.isArray(options.queues)) throw new UsageError(`queues must be an array of queue names (got ${typeof options.queues})`);
  const queues = validateQueueList(options.queues ?? [], 'queues');
  const tasks = options.tasks ?? [];
  if (!Array.isArray(tasks)) throw new UsageError('tasks must be an array of what defineTask or defineSchedule returned');
  const notTask = tasks.findIndex((task) => !isTask(task));
  if (notTask >= 0) throw new UsageError(`tasks must hold what defineTask or defineSchedule returned (entry ${notTask})`);
  // Its names and limited queues checked now, as every option is; the schedules folder's join it as it loads.
  const taskRegistry = new TaskRegistry(tasks);
  const maxLeaseExpiries = wholeNumberWithin(options.maxLeaseExpiries ?? LEASE_EXPIRIES.default, 'maxLeaseExpiries', LEASE_EXPIRIES);
  let uncaughtGuard: (() => void) | null = null;
  const pruneMs = options.pruneDoneOlderThan === undefined ? null : parseDuration(options.pruneDoneOlderThan, 'pruneDoneOlderThan');
  let prune: Promise<void> | null = null;
  let pool: WorkerPool | null = null;
  let scheduler: Scheduler | null = null;
  let heartbeat: DaemonHeartbeat | null = null;
  const maintenanceStop = new AbortController();
  let recovery: Promise<void> | null = null;
  /** The database clock's re-measuring loop (when the scheduler runs on it: no `clock` option). */
  let clockSync: Promise<void> | null = null;
  let starting: Promise<void> | null = null;
  let stopped: Promise<StopResult> | null = null;
  /** migrate() calls under way, every one: a stop waits for each (one called while another holds the lock ends at once, the holder must not). */
  const migrations = new Set<Promise<void>>();
  /** Settles once every migrate() under way now has; null when none is. */
  const migrationsUnderWay = () => (migrations.size === 0 ? null : Promise.allSettled([...migrations]));
  /** Aborted as stop() is called: a start still waiting for schedule files gives up. */
  const stopRequested = new AbortController();
  /** enqueue/enqueueMany calls under way: stop() lets them finish within its grace before the pool closes. */
  const enqueuing = new Set<Promise<unknown>>();
  /** Aborted once stop()'s grace has run out: an enqueueMany still reading its rows stops reading (enqueueRows' signal). */
  const enqueuesCut = new AbortController();
  /** Runs `work` as an enqueue stop() waits for. */
  const asEnqueue = <T>(work: () => Promise<T>): Promise<T> => {
    const running = work();
    const settled = running.then(
      () => undefined,
      () => undefined,
    );
    enqueuing.add(settled);
    void settled.then(() => enqueuing.delete(settled));
    return running;
  };

  let registryPromise: Promise<TaskRegistry> | null = null;
  /** The registry, loaded once; complete (never added to) once this resolves. */
  const loadTasks = () => {
    registryPromise ??= (async () => {
      if (options.schedulesDir) await loadSchedulesDir(options.schedulesDir, taskRegistry, { importTimeoutMs });
      return taskRegistry;
    })();
    return registryPromise;
  };
  /**
   * The registry, or, with schedule files to import, a UsageError as soon as stop() is
   * called: an import in progress cannot be cancelled (Node has no way to), but nothing
   * need wait for it, and nothing starts.
   */
  const loadTasksUnlessStopped = (): Promise<TaskRegistry> => {
    if (!options.schedulesDir) return loadTasks();
    return new Promise((resolve, reject) => {
      const interrupted = () => reject(new UsageError('start() interrupted by stop() while schedule files were still importing: nothing was started'));
      if (stopRequested.signal.aborted) return interrupted();
      stopRequested.signal.addEventListener('abort', interrupted, { once: true });
      loadTasks()
        .then(resolve, reject)
        .finally(() => stopRequested.signal.removeEventListener('abort', interrupted));
    });
  };
  let loadedPromise: Promise<LoadedTasks> | null = null;
  const ready = () => {
    loadedPromise ??= loadTasks().then(loadedView);
    return loadedPromise;
  };

  // The server's max_allowed_packet, read once per pool (also for enqueues inside a caller's
  // transaction: it is a server-wide setting).
  // `what` names the call as an enqueue's own failure would (`enqueueing job "K"`).
  const byteLimit = async (what: string) => {
    try {
      return await statementByteLimitOf(store);
    } catch (error) {
      const { address, database: name } = database.target;
      throw enqueueFailure(error, isConnectionError(error) ? `${what} (reaching the database at ${address}, database '${name}')` : `${what} (reading max_allowed_packet)`);
    }
  };

  // A job for a task handle: kind and defaults from the handle, which needs no registry entry.
  const forTask = (task: Task, job: TaskJob<unknown>): EnqueueJob => {
    if (!isTask(task)) throw new UsageError('enqueue(task, job): task must be what defineTask or defineSchedule returned');
    if (typeof job !== 'object' || job === null) throw new UsageError('a job must be an object');
    // The handle's kind would win: a job naming another kind would go to another handler than it says.
    const { kind } = job as { kind?: unknown };
    if (kind !== undefined && kind !== task.name) {
      throw new UsageError(`job ${shownName((job as { key?: unknown }).key)}: kind ${shownName(kind)} is not the task's (${shownName(task.name)}): leave kind out with a task handle, or enqueue({ kind, key, payload }) without one`);
    }
    return { queue: task.queue, maxAttempts: task.maxAttempts, ...job, kind: task.name };
  };
  // After toJobRow: a job that is malformed is refused as such before its kind is looked up.
  const checkKind = (row: NewJobRow, registry: TaskRegistry, allowUnknownKind: boolean): NewJobRow => {
    if (!allowUnknownKind && !registry.get(row.kind)) {
      throw new UsageError(
        `unknown kind '${row.kind}': no task or schedule of that name in this cronq (its tasks and schedulesDir); pass allowUnknownKind if workers elsewhere define it`,
      );
    }
    return row;
  };
  /**
   * (task, job, options) or (job, options), as enqueue and enqueueMany take them; a kind by
   * name first (`enqueue('report', { key })`, the CLI's order) is refused saying what to
   * write, rather than its job read as the call's options.
   */
  const callOf = <J>(args: unknown[], what: 'enqueue' | 'enqueueMany'): { task: Task | null; jobs: J; options: EnqueueOptions } => {
    if (typeof args[0] === 'string') {
      const given = `got the string ${shownName(args[0])}`;
      throw new UsageError(
        what === 'enqueue'
          ? `enqueue: the first argument must be a task (defineTask, defineSchedule) or a job ({ kind, key, payload }); ${given}: enqueue({ kind: ${shownName(args[0])}, key, payload })`
          : `enqueueMany: the first argument must be a task (defineTask, defineSchedule) or jobs; ${given}: enqueueMany(jobs), each { kind, key, payload }`,
      );
    }
    const [task, jobs, call] = isTask(args[0]) ? [args[0], args[1], args[2]] : [null, args[0], args[1]];
    return { task, jobs: jobs as J, options: checkedEnqueueOptions(call) };
  };

  /** `jobs` when it can be read as jobs (an array or an iterable, sync or async), else UsageError. */
  const checkedJobs = <T>(jobs: T): T => {
    const iterable = typeof jobs === 'object' && jobs !== null && (Symbol.iterator in jobs || Symbol.asyncIterator in jobs);
    if (!iterable) throw new UsageError(`enqueueMany: jobs must be an array or an iterable of jobs (got ${jobs === null ? 'null' : typeof jobs})`);
    return jobs;
  };

  /** The loaded schedules' key shapes by name (the registry is complete once loaded: read once). */
  let loadedSchedules: ReadonlyMap<string, ScheduleKeyShape> | null = null;
  /**
   * The key shapes of the schedules whose keys a job of this call may not take (refuseScheduleKey): every
   * schedule this instance loaded (its tasks and schedulesDir), and the call's task handle
   * when that is a schedule. An instance that loaded none cannot tell (the tick notes it).
   */
  const keyShape = (s: Schedule): ScheduleKeyShape => ({ period: s.period, fansOut: s.jobs !== null });
  const scheduleKeyShapesFor = (registry: TaskRegistry, task: Task | null): ReadonlyMap<string, ScheduleKeyShape> => {
    loadedSchedules ??= new Map(schedulesOf(registry).map((s) => [s.name, keyShape(s)]));
    return task && isSchedule(task) && !loadedSchedules.has(task.name) ? new Map([...loadedSchedules, [task.name, keyShape(task)]]) : loadedSchedules;
  };

  /**
   * One job's row: by task handle (its kind and defaults), or by kind (which this instance
   * must know unless `allowUnknownKind`); never a key of one of `schedules`.
   */
  const rowOf = (job: EnqueueJob | TaskJob<unknown>, registry: TaskRegistry, task: Task | null, allowUnknownKind: boolean, schedules: ReadonlyMap<string, ScheduleKeyShape>): NewJobRow => {
    const row = task ? toJobRow(forTask(task, job as TaskJob<unknown>), registry) : checkKind(toJobRow(job as EnqueueJob, registry), registry, allowUnknownKind);
    if (schedules.size > 0) refuseScheduleKey(row.key, schedules);
    return row;
  };

  const rowsOf = async function* (
    jobs: Iterable<EnqueueJob | TaskJob<unknown>> | AsyncIterable<EnqueueJob | TaskJob<unknown>>,
    registry: TaskRegistry,
    task: Task | null,
    allowUnknownKind: boolean,
  ) {
    const schedules = scheduleKeyShapesFor(registry, task);
    let index = 0;
    for await (const job of jobs) {
      let row: NewJobRow;
      try {
        row = rowOf(job, registry, task, allowUnknownKind, schedules);
      } catch (error) {
        if (error instanceof UsageError) throw new StreamJobRefusal(`enqueueMany: job ${index} of the stream (from 0): ${error.message}`);
        throw error;
      }
      yield row;
      index += 1;
    }
  };

  /**
   * An array's rows, every job checked before any is written: a bad one refuses the whole
   * call (UsageError naming its index; nothing written). A stream (any other iterable) is
   * checked as it is read, so the rows it yielded before a bad one are written (README).
   */
  const checkedRows = (jobs: ReadonlyArray<EnqueueJob | TaskJob<unknown>>, registry: TaskRegistry, task: Task | null, allowUnknownKind: boolean): NewJobRow[] => {
    const schedules = scheduleKeyShapesFor(registry, task);
    return jobs.map((job, index) => {
      try {
        return rowOf(job, registry, task, allowUnknownKind, schedules);
      } catch (error) {
        if (error instanceof UsageError) throw new UsageError(`enqueueMany: jobs[${index}]: ${error.message}; nothing was written`);
        throw error;
      }
    });
  };

  const cronq: Cronq = {
    maskedDatabaseUrl: database.target.masked,
    admin: createAdmin({ store, database, schedules: async () => (await ready()).schedules(), stopped: () => stopped !== null }),
    ready,

    migrate() {
      // The pool is closed: a migration could only fail (after creating the database).
      if (stopped) return Promise.reject(usedAfterStop('migrate'));
      // A stop while it still connects ends it at once (nothing applied yet); once the
      // database answered it finishes: its CREATE DATABASE may have run, and a stop between
      // that and the migrations' own connection must not call that 'nothing changed'.
      const signal = stopRequested.signal;
      const run = (async () => {
        await ensureDatabase(database.target, signal);
        // This instance's own heartbeat (a start() before migrate()) is this version's: not a daemon 0007 must wait for.
        await applyMigrations(database, { self: lockedBy });
      })();
      // Only a migration under way holds a stop past its margin: a finished one is forgotten.
      const finished = () => migrations.delete(run);
      migrations.add(run);
      run.then(finished, finished);
      return run;
    },

    async enqueue(...args: unknown[]) {
      if (stopped) throw usedAfterStop('enqueue');
      return asEnqueue(() => enqueueCall(args));
    },

    async enqueueMany(...args: unknown[]) {
      if (stopped) throw usedAfterStop('enqueueMany');
      return asEnqueue(() => enqueueManyCall(args));
    },

    start() {
      if (stopped) return Promise.reject(usedAfterStop('start'));
      starting ??= startEngine().catch((error: unknown) => {
        starting = null; // a failed start may be tried again
        throw error;
      });
      return starting;
    },

    stop(options) {
      let graceMs: number;
      try {
        graceMs = stopGraceMs(options);
      } catch (error) {
        return Promise.reject(error);
      }
      const deadline = Date.now() + graceMs;
      stopped ??= (async () => {
        stopRequested.abort(); // a start still loading schedule files gives up at once
        /** The steps under way, for the line a stop out of time logs. */
        const waiting = new Set<string>();
        const step = async <T>(what: string, work: Promise<T> | null | undefined): Promise<T | undefined> => {
          if (!work) return undefined;
          waiting.add(what);
          try {
            return await work;
          } finally {
            waiting.delete(what);
          }
        };
        let result: StopResult = { released: 0, abandoned: 0 };
        const work = (async () => {
          await step('the engine to finish starting', starting?.catch(() => undefined)); // what a start in flight starts, this stops
          // Together: claiming stops at once, and a fan-out writes what it gathered.
          const [, stoppedPool] = await Promise.all([step('the scheduler', scheduler?.stop()), step('the workers', pool?.stop({ graceMs }))]);
          if (stoppedPool) result = stoppedPool;
          await step("this daemon's row in cronq_daemons", heartbeat?.stop()); // after the pool: its kinds were served until now
          maintenanceStop.abort();
          await step('a lease recovery pass', recovery);
          await step('a prune pass', prune);
          await step("the scheduler's database clock reading", clockSync);
          // A migration cut off midway would leave its DDL half applied (MySQL commits DDL
          // statement by statement), and every later run failing on it: let it finish.
          await migrationsUnderWay();
          // Enqueues under way finish within what is left of the grace; past it, an
          // enqueueMany still reading its rows writes what it gathered and stops reading.
          await settledWithin([...enqueuing], deadline - Date.now());
          enqueuesCut.abort();
          await step('enqueues', Promise.all([...enqueuing]));
          // A connection that cannot close cleanly (a connect still waiting on a silent server
          // times out) is destroyed: the stop resolves whatever the database does.
          healthTracker.poolClosing(); // what fails from here is our own close, not an outage
          await step('closing database connections', database.close().catch(() => database.destroy()));
        })();
        if (await finishedInTime(work, deadline + SHUTDOWN_MARGIN_MS, migrationsUnderWay)) {
          await work; // its error, if any, is the stop's
        } else {
          // Out of time, whatever the database does: say once what was left, write nothing more.
          const inPool = pool?.unfinished() ?? [];
          const steps = [...waiting].filter((what) => what !== 'the workers' || inPool.length === 0);
          const left = [...inPool, ...steps];
          if (left.length === 0) left.push('the last steps of the stop');
          log.warn(
            { event: 'shutdown_cut_short', grace_ms: graceMs, margin_ms: SHUTDOWN_MARGIN_MS, waiting_for: left },
            `shutdown cut short ${formatDuration(SHUTDOWN_MARGIN_MS)} past its grace, still waiting for: ${left.join(', ')} ` +
              '(the database did not answer in time; jobs whose results were not written return through lease recovery)',
          );
          if (pool) result = pool.cutOff();
          maintenanceStop.abort();
          enqueuesCut.abort();
          healthTracker.poolClosing();
          database.destroy();
        }
        uncaughtGuard?.();
        return result;
      })();
      return stopped;
    },

    health() {
      return {
        database: healthTracker.healthy,
        databaseLastOkAt: healthTracker.lastOkAt,
        workers: pool ? !pool.isStopping : null,
        lastClaimLoopAt: pool ? pool.lastLoopAt : null,
        scheduler: scheduler ? scheduler.running : null,
        oldestRunningJobAgeMs: pool ? pool.oldestRunningAgeMs : null,
      };
    },
  };

  /** enqueue()'s work (the call is checked and tracked by `cronq.enqueue`). */
  async function enqueueCall(args: unknown[]) {
    const { task, jobs: job, options: call } = callOf<EnqueueJob | TaskJob<unknown>>(args, 'enqueue');
    const registry = await loadTasks();
    const allowUnknown = call.allowUnknownKind ?? options.allowUnknownKind ?? false;
    const row = rowOf(job, registry, task, allowUnknown, scheduleKeyShapesFor(registry, task));
    const { tx } = call;
    const result = await enqueueOne(tx ? store.inTransaction(tx) : store, row, await byteLimit(`enqueueing job ${JSON.stringify(row.key)}`), { ownTransaction: !tx });
    if (result.created && !tx && (!row.runAt || row.runAt.getTime() <= Date.now())) pool?.wake(row.queue, { pastRunAt: row.runAt !== null, id: result.id });
    return result;
  }

  /** enqueueMany()'s work (the call is checked and tracked by `cronq.enqueueMany`). */
  async function enqueueManyCall(args: unknown[]) {
    const { task, jobs, options: call } = callOf<Iterable<EnqueueJob> | AsyncIterable<EnqueueJob>>(args, 'enqueueMany');
    const { tx } = call;
    const registry = await loadTasks();
    const allowUnknown = call.allowUnknownKind ?? options.allowUnknownKind ?? false;
    const rows = Array.isArray(jobs) ? checkedRows(jobs, registry, task, allowUnknown) : rowsOf(checkedJobs(jobs), registry, task, allowUnknown);
    const maxStatementBytes = await byteLimit('enqueueMany');
    /** Written so far, for a stream's refused job: the rows read before it stay written. */
    const sofar = { inserted: 0, existing: 0, refused: 0 };
    const counted = async (batch: { inserted: number; existing: number; refused: number }) => {
      sofar.inserted += batch.inserted;
      sofar.existing += batch.existing;
      sofar.refused += batch.refused;
    };
    let result: EnqueueOutcome;
    try {
      result = await enqueueRows(tx ? store.inTransaction(tx) : store, rows, { parallel: tx ? 1 : ENQUEUE_PARALLEL, maxStatementBytes, signal: enqueuesCut.signal, afterBatch: counted });
    } catch (error) {
      if (error instanceof StreamJobRefusal) {
        const refused = sofar.refused > 0 ? `, but for ${sofar.refused} the database refused` : '';
        throw new UsageError(`${error.message}; the jobs read before it were written (${sofar.inserted} new, ${sofar.existing} already present)${refused}`);
      }
      throw enqueueFailure(error, 'enqueueMany');
    }
    if (result.inserted > 0 && !tx) pool?.wake();
    const written = { inserted: result.inserted, existing: result.existing };
    if (result.stopped) {
      throw new UsageError(
        `enqueueMany() cut off by stop() after its grace: ${written.inserted} new and ${written.existing} existing jobs written, the rows after them not read`,
      );
    }
    if (result.refusedCount > 0) throw new EnqueueRefusedError(result.refused, result.refusedCount, written);
    return written;
  }

  function startPrune(): void {
    if (pruneMs !== null && !prune) {
      prune = pruneLoop({ store, log, olderThanMs: pruneMs, everyMs: pruneEveryMs }, maintenanceStop.signal);
    }
  }

  /** start()'s work, run once at a time (start() shares a run in flight). Parts already running are left as they are. */
  async function startEngine(): Promise<void> {
    const registry = await loadTasksUnlessStopped();
    const schedules = schedulesOf(registry);
    if (pruneMs !== null) checkRetention(pruneMs, schedules, 'pruneDoneOlderThan');
    await store.ping();
    if (options.catchUncaught && !uncaughtGuard) uncaughtGuard = catchUncaught(log);
    const runsScheduler = options.scheduler !== false && schedules.length > 0;
    if (!runsScheduler && options.workers === false) return startPrune();
    // Registered before the scheduler's first tick (its overlap locks are listed in this row)
    // and before the first claim (other daemons then know these kinds are served). Without
    // workers it serves no kinds. One per instance: a start that failed after registering
    // left it beating, and stop() ends only this one.
    heartbeat ??= new DaemonHeartbeat({
      store,
      log,
      health: healthTracker,
      record: {
        id: lockedBy,
        host: hostname(),
        pid: process.pid,
        kinds: options.workers === false ? [] : registry.list().map((task) => task.name),
        queues: queues.length > 0 ? queues : null,
      },
      everyMs: heartbeatMs,
    });
    // The claim connections open meanwhile, so the first claims need no handshakes.
    const claimConnections = options.workers === false || pool ? null : store.openClaimConnections();
    await heartbeat.start();
    if (runsScheduler && !scheduler) {
      // An app's clock that throws or reads no valid time fails passes, logged, never the process (guardClock).
      let clock = options.clock && guardClock(options.clock, (method, error) =>
        log.error({ event: 'clock_error', method, error: errorText(error) }, `the clock option's ${method}() failed; the scheduler goes on, retrying with backoff`),
      );
      if (!clock) {
        // Ticks are due by the database's clock, which every daemon shares (DatabaseClock).
        const databaseClock = new DatabaseClock({ readNow: () => store.now(), log });
        // Twice: the first round trip may include opening a connection, which would leave
        // the clock that much behind; the second, quicker one replaces it.
        await databaseClock.sync();
        await databaseClock.sync();
        clockSync = databaseClock.run(maintenanceStop.signal);
        clock = databaseClock;
      }
      scheduler = new Scheduler({
        store,
        clock,
        log,
        schedules,
        onEnqueued: () => pool?.wake(),
        observer,
        daemon: { id: lockedBy, heartbeatMs },
        dbHealth: healthTracker,
      });
      scheduler.start();
    }
    startPrune();
    if (claimConnections === null) return;
    // Before the first claim, which reads these rows: the latest daemon's values win.
    await store.setKindLimits(
      registry.list().flatMap((task) => (task.concurrency === null ? [] : [{ kind: task.name, maxRunning: task.concurrency }])),
    );
    await claimConnections;
    pool = new WorkerPool({
      store,
      tasks: registry,
      log,
      concurrency,
      prefetch,
      queues,
      lockedBy,
      pollMs,
      postClaimPauseMs,
      health: healthTracker,
      observer,
      unknownKinds: new UnknownKinds({ graceMs: unknownKindGraceMs, aliveMs: 3 * heartbeatMs, log }),
      maxLeaseExpiries,
    });
    pool.start();
    recovery = recoveryLoop(
      {
        store,
        log,
        health: healthTracker,
        everyMs: recoveryMs,
        batchSize: RECOVERY_DEFAULTS.batchSize,
        maxBatchesPerPass: RECOVERY_DEFAULTS.maxBatchesPerPass,
        observer,
        maxLeaseExpiries,
      },
      maintenanceStop.signal,
    );
  }
  return cronq;
}

/**
 * Whether `work` settled by `at` (epoch ms). A migration under way then (`migrating()`) is
 * waited for, and `work` gets SHUTDOWN_MARGIN_MS more after it: cut midway, its DDL would
 * stay half applied.
 */
async function finishedInTime(work: Promise<unknown>, at: number, migrating: () => Promise<unknown> | null): Promise<boolean> {
  const settled = work.then(
    () => true,
    () => true,
  );
  let timer: NodeJS.Timeout | undefined;
  const outOfTime = async (ms: number) => {
    await new Promise((resolve) => (timer = setTimeout(resolve, Math.max(0, ms))));
    return false;
  };
  try {
    if (await Promise.race([settled, outOfTime(at - Date.now())])) return true;
    const migration = migrating();
    if (!migration) return false;
    await Promise.race([settled, migration.catch(() => undefined)]);
    clearTimeout(timer);
    return await Promise.race([settled, outOfTime(SHUTDOWN_MARGIN_MS)]);
  } finally {
    clearTimeout(timer);
  }
}

/** Resolves once every one of `work` has settled, or after `ms`, whichever comes first. */
async function settledWithin(work: Array<Promise<unknown>>, ms: number): Promise<void> {
  if (work.length === 0) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.allSettled(work), new Promise((resolve) => (timer = setTimeout(resolve, Math.max(0, ms))))]);
  clearTimeout(timer);
}
