/**
 * The admin API (`cronq.admin`): what an operator does to a running cronq — triage dead
 * letters, read stats, prune, look at and fire schedules, check the database — as plain
 * typed values. The CLI's one-shot commands, the web console and applications all use
 * it; none of them holds the database. Every method works without `start()`: it needs
 * the database (and, for schedules and retention, the loaded schedule files).
 */
import { createPauseAdmin, type Pause, type PauseAdmin } from './admin/pauses.ts';
import { driverFailure, isConnectionError, isLockConflict, type Database } from './db/client.ts';
import type { DatabaseTarget } from './db/url.ts';
import { assertSchemaCurrent } from './db/migrate.ts';
import { shownNumber, wholeNumberWithin } from './defaults.ts';
import { DatabaseBusyError, DatabaseUnreachableError, TickFanoutError, usedAfterStop, UsageError, type RefusedJobInfo } from './errors.ts';
import { isDatabaseTrouble } from './runtime/dbHealth.ts';
import { errorLine } from './runtime/errorText.ts';
import { pruneOnce, type PruneResult } from './maintenance/prune.ts';
import type { Schedule } from './schedule/define.ts';
import { enqueueTick } from './schedule/fanout.ts';
import { StallWatch } from './schedule/stallWatch.ts';
import { FANOUT_LEASE_MS } from './schedule/ticker.ts';
import { fireTimesBetween, latestFireAtOrBefore, periodKeyOfFire, type Period } from './schedule/period.ts';
import { checkRetention } from './schedule/retention.ts';
import { refuseUnknownOptions, validateName, validateQueue } from './tasks/define.ts';
import { assessHealth, type ScheduleHealth } from './schedule/health.ts';
import type { BulkReviewResult, DeadLetterDetail, DeadLetterFilter, DeadLetterGroup, DeadLetterSummary, ReviewOutcome } from './store/deadLetters.ts';
import type { BulkCancelResult, CancelFilter, CancelOutcome, CancelTarget, Completions, DaemonSeen, JobRecord, JobTarget, KindLimitStatus, NoPayload, PayloadBound, PayloadReadOptions, SessionStanding, Store, TickRow, WithoutPayload } from './store/index.ts';
import { defaultOperator } from './runtime/operator.ts';
import type { DeadLetterStats, QueuesMostBehind, Stats } from './store/stats.ts';

export { MAX_REASON_LENGTH, REVIEW_BATCH_SIZE } from './store/deadLetters.ts';
export type { BulkReviewResult, DeadLetterDetail, DeadLetterFilter, DeadLetterGroup, DeadLetterSummary, ReviewOutcome, ReviewAction } from './store/deadLetters.ts';
export type { DeadLetterStats, QueuesMostBehind, QueueStats, ScheduleStats, Stats, UnknownStatusStats } from './store/stats.ts';
export { COUNT_CAPS, DEAD_LETTER_COUNT_CAP } from './store/stats.ts';
/** Every outcome a tick-ledger row can record (ScheduleStats.lastTick.outcome, TickRow.outcome). */
export { TICK_OUTCOMES } from './db/schema.ts';
/** Every status a job row can have (QueueStats counts each). */
export { JOB_STATUSES } from './db/schema.ts';
export type { TickRow } from './store/index.ts';
export type { SessionStanding } from './store/index.ts';
export type { Completions, DaemonSeen, JobRecord, JobTarget, NoPayload, PayloadBound, PayloadFields, PayloadReadOptions, WithoutPayload } from './store/index.ts';
export { COMPLETIONS_SCAN_MAX, COMPLETION_LAG_MAX_MS } from './store/console.ts';
export type { PruneResult } from './maintenance/prune.ts';
export type { KindLimitStatus } from './store/index.ts';
export { describePause, PAUSE_NAME_MAX, PAUSE_TEXT_MAX } from './admin/pauses.ts';
export type { Pause, PauseAdmin, PauseOptions, PauseOutcome, PauseTarget, ResumeOutcome } from './admin/pauses.ts';
export { defaultOperator } from './runtime/operator.ts';
export type { ScheduleHealth } from './schedule/health.ts';
export { CANCEL_BATCH_SIZE, MAX_CANCEL_TEXT_LENGTH } from './store/cancel.ts';
export type { BulkCancelResult, CancelFilter, CancelOutcome, CancelTarget } from './store/cancel.ts';

/** Why an operator cancels, and who (default `user@host` of this process). */
export interface CancelOptions {
  /** Required: 1–255 characters, stored in `cancel_reason`. */
  reason: string;
  /** Stored in `cancelled_by` (1–255 characters); default `user@host` of this process. */
  by?: string;
}

/** Most rows, fire times or groups one listing returns: the bound of every listing count (limit, count). */
export const LISTING_MAX = 1000;
/** Dead letters listed by default (DeadLetterAdmin.list): as many as a listing may hold. */
export const DEAD_LETTER_LIST_LIMIT = LISTING_MAX;
/** The last instant a JavaScript Date can hold: "no end" for fire-time listings. */
const END_OF_TIME = new Date(8_640_000_000_000_000);

/** Which dead letters a listing covers: a filter, and reviewed ones too when `includeReviewed`. */
export type DeadLetterQuery = DeadLetterFilter & {
  /** Reviewed (requeued or discarded) dead letters too (default false: only those awaiting review). */
  includeReviewed?: boolean;
};

/**
 * Dead-letter triage. A review (requeue or discard) marks a dead letter reviewed at most
 * once, however many operators race on it: the loser gets 'already_reviewed' and
 * changes nothing. Reasons are required (1–1000 characters; UsageError).
 */
/** Progress and interruption of a bulk triage (requeueMatching, discardMatching). */
export interface BulkTriageOptions {
  /** Called after each committed batch with the totals so far. */
  onBatch?: (soFar: BulkReviewResult) => void;
  /** Once aborted, no further batch starts; the result says `interrupted: true`. */
  signal?: AbortSignal;
}

/** Dead-letter triage (`cronq.admin.deadLetters`, `cronq dead`): list, group, read, requeue or discard. */
export interface DeadLetterAdmin {
  /** Oldest first, unreviewed only unless `includeReviewed`; at most `limit` (1–1000, default 1000); `more` when others match. */
  list(query?: DeadLetterQuery & { limit?: number }): Promise<{ letters: DeadLetterSummary[]; more: boolean }>;
  /** Counts by kind and failure reason (first line, numbers and ids normalised), largest first; only the `limit` largest (1–1000) when given. */
  groups(query?: DeadLetterQuery & { limit?: number }): Promise<DeadLetterGroup[]>;
  /** Dead letters awaiting review, counted up to DEAD_LETTER_COUNT_CAP (as stats().deadLetters, alone). */
  awaitingReview(): Promise<DeadLetterStats>;
  /**
   * One dead letter in full with its job's row now, or null when no such id.
   * `payloadCharsMax` (a whole number, 1 or more): read only the payload's first that many
   * characters (code points), `payloadChars` and `payloadBytes` still telling the whole.
   * `payload: false`: read none of the payload, nor its size (the result has no payload
   * fields; the console reads so for a viewer not shown payloads).
   */
  get(id: number, options: NoPayload): Promise<WithoutPayload<DeadLetterDetail> | null>;
  /** One dead letter in full, its payload whole or (`payloadCharsMax`) its first characters; null when no such id. As above. */
  get(id: number, options?: PayloadBound): Promise<DeadLetterDetail | null>;
  /** One dead letter, read as `options` says (either form above); null when no such id. */
  get(id: number, options?: PayloadReadOptions): Promise<DeadLetterDetail | WithoutPayload<DeadLetterDetail> | null>;
  /** Puts the job back to 'ready' (attempts and lease expiries 0, available now) unless it is no longer dead or died again since. */
  requeue(id: number, reason: string): Promise<ReviewOutcome>;
  /** Leaves the job dead and marks the dead letter reviewed. */
  discard(id: number, reason: string): Promise<ReviewOutcome>;
  /**
   * requeue for every unreviewed dead letter matching `filter` (all when empty), 500 per
   * transaction; `onBatch` hears the totals after each, an aborted `signal` stops it
   * between two (`interrupted: true`).
   */
  requeueMatching(filter: DeadLetterFilter, reason: string, options?: BulkTriageOptions): Promise<BulkReviewResult>;
  /** discard for every unreviewed dead letter matching `filter` (all when empty), 500 per transaction; options as requeueMatching. */
  discardMatching(filter: DeadLetterFilter, reason: string, options?: BulkTriageOptions): Promise<BulkReviewResult>;
}

/**
 * The web console's sign-outs, in the database so that every daemon serving the console
 * refuses a signed-out session at once (README, "Web console"). A session is named by
 * the SHA-256 of its cookie, 64 hex digits (UsageError otherwise).
 */
export interface ConsoleSignOutAdmin {
  /** Records the session as signed out until `expiresAt` (idempotent); expired records are pruned as new ones are written. */
  record(sessionHash: string, expiresAt: Date): Promise<void>;
  /** Whether the session was signed out. */
  has(sessionHash: string): Promise<boolean>;
  /**
   * Where the session, expiring at `expiresAt`, stands now by the database's clock:
   * 'signed_out', 'expired' or 'held'. The console takes a cookie only while it is held:
   * the clock that prunes sign-outs judges expiry too, whatever this host's clock says.
   */
  standing(sessionHash: string, expiresAt: Date): Promise<SessionStanding>;
}

/** A loaded schedule with its coming fire times and its latest tick-ledger row. */
export interface ScheduleListing {
  /** The schedule's name. */
  name: string;
  /** Its cron as written. */
  cron: string;
  /** The IANA zone its cron is read in. */
  timezone: string;
  /** Its period (what one job per key means). */
  period: Period;
  /** The next fire instants after `from`, ascending (empty: it never fires again). */
  next: Date[];
  /** The latest row of the tick ledger (null: no tick recorded yet). */
  lastTick: TickRow | null;
  /** Who paused it, when and why (null: not paused; see CronqAdmin.pauses). */
  paused: Pause | null;
  /** Its health now (database clock): last success, and overdue against `expect` (scheduleHealth). */
  health: ScheduleHealth;
}

/** `cronq stats`: the store's sections plus the health of every loaded schedule. */
export interface AdminStats extends Stats {
  /** One entry per loaded schedule (empty when no schedules folder was loaded). */
  health: ScheduleHealth[];
}

/** What `tick()` did: the fan-out's counts, or why there was nothing to run. */
export type TickNowOutcome =
  | {
      /** The fan-out ran to its end (even when every key was there already). */
      status: 'enqueued';
      /** The schedule's name. */
      schedule: string;
      /** The fire time run: the latest at or before `at`. */
      fireAt: Date;
      /** That fire time's period key: the last part of the keys written. */
      periodKey: string;
      /** Jobs this call inserted. */
      inserted: number;
      /** Keys already present as this schedule's jobs of this period. */
      existing: number;
      /**
       * Keys held by a job this schedule did not enqueue for this period (by hand, another
       * kind), apart from `existing`: their schedule jobs were not written. The oldest
       * holder is `firstConflict`.
       */
      conflicting: number;
      /** The oldest of those holders (null when `conflicting` is 0). */
      firstConflict: {
        /** The key it holds. */
        key: string;
        /** Its kind. */
        kind: string;
        /** Its job row's id. */
        jobId: number;
      } | null;
      /** Entities that cannot become jobs; the first 1,000 are in `refused`. */
      refusedCount: number;
      /** The first 1,000 refused entities, each with its key and why. */
      refused: RefusedJobInfo[];
    }
  | {
      /** No loaded schedule has that name: nothing ran. */
      status: 'no_schedule';
      /** The name asked for. */
      schedule: string;
    }
  | {
      /** Its cron has no fire time at or before `at` within the 8 years looked back: nothing ran. */
      status: 'no_fire_time';
      /** The schedule's name. */
      schedule: string;
      /** The instant looked back from. */
      at: Date;
    }
  | {
      /** The schedule is paused and `force` was not set: nothing enqueued (resume it first, or pass `force`). */
      status: 'paused';
      /** The schedule's name. */
      schedule: string;
      /** The pause in force. */
      pause: Pause;
    };

/**
 * The operator's view of one cronq instance (`cronq.admin`). Every method returns a
 * promise; none rejects with a statement's SQL. After stop(): UsageError. A database
 * unreachable or a connection lost mid-call: DatabaseUnreachableError naming the call,
 * host and port. A lock wait timeout or a deadlock (rows another transaction holds):
 * DatabaseBusyError, changing nothing, safe to call again. Another failed statement: an
 * Error with the driver's code and first line.
 */
export interface CronqAdmin {
  /**
   * `SELECT 1` within the connect timeout; throws DatabaseUnreachableError (naming host
   * and port, never the password) or DatabaseMissingError.
   */
  ping(): Promise<void>;
  /** Throws SchemaBehindError when migrations are pending ('cronq migrate' has not run); reads only. */
  checkSchema(): Promise<void>;
  /** Dead-letter triage: list, group, read, requeue and discard (see DeadLetterAdmin). */
  readonly deadLetters: DeadLetterAdmin;
  /** Pause and resume schedules and queues on every daemon (see PauseAdmin). */
  readonly pauses: PauseAdmin;
  /** The web console's sign-outs (ConsoleSignOutAdmin). */
  readonly consoleSignOuts: ConsoleSignOutAdmin;
  /**
   * Cancels one job by id or key if it is 'ready' (it never runs) or 'reserved' (its
   * handler's ctx.signal aborts at its next lease renewal with JobCancelledError and its
   * result is discarded): status 'cancelled' with `cancelled_by`, `cancel_reason` and
   * `finished_at`; its key stays taken. A job already done, dead or cancelled is left
   * alone ('finished'). Empty or over-long reason or name: UsageError.
   */
  cancel(target: CancelTarget, options: CancelOptions): Promise<CancelOutcome>;
  /**
   * cancel for every 'ready' or 'reserved' job matching `filter` (all of them when empty)
   * that exists when the call starts, 500 per transaction.
   */
  cancelMatching(filter: CancelFilter, options: CancelOptions): Promise<BulkCancelResult>;
  /**
   * Jobs per queue and status, the oldest waiting age, dead letters awaiting review, each
   * schedule's last tick, and each loaded schedule's health.
   */
  stats(): Promise<AdminStats>;
  /**
   * The `limit` queues (1–1000, default 50) most behind, counted as in stats(): those whose
   * oldest ready job has waited longest first, then those running jobs, then the rest, each
   * by name; `total` counts every queue holding a job. Its cost is bounded by `limit`, not
   * by the number of queues: one listing statement (a loose index scan) and one counting
   * statement per 100 (status, queue) pairs shown. The console's overview.
   */
  queuesMostBehind(options?: { limit?: number }): Promise<QueuesMostBehind>;
  /**
   * Each loaded schedule's health at `at` (default the database clock): the fire time of
   * its last tick whose jobs are all done, and whether it is overdue against its
   * `expect: { within }` (README, "Schedule health"). Reads at most the latest 10 ledger rows per
   * schedule, and the jobs of the ticks since its last success.
   */
  scheduleHealth(options?: { at?: Date }): Promise<ScheduleHealth[]>;
  /**
   * Every cluster-wide concurrency limit in force (`concurrency` on a task, written by
   * each daemon at start, the latest daemon's value winning), by kind, with how many of
   * its jobs hold a live reservation now. A plain read: a snapshot, stale at once.
   */
  limits(): Promise<KindLimitStatus[]>;
  /**
   * Refuses (UsageError, naming `name`) a retention under 1h or shorter than any loaded
   * schedule's catch-up window plus one period: pruning then could let a key run twice.
   * Touches no database.
   */
  checkRetention(olderThanMs: number, name?: string): Promise<void>;
  /**
   * One retention pass: deletes done and cancelled jobs and finished tick rows older than
   * `olderThanMs` (database clock), in small batches; `dryRun` counts instead. Checks the
   * retention first (checkRetention), deleting nothing when it is refused. Safe beside
   * running daemons and other prunes.
   */
  prune(options: { olderThanMs: number; dryRun?: boolean }): Promise<PruneResult>;
  /** Every loaded schedule with its next `count` fire times after `from` (default now, 5; count 1–1000). */
  schedules(options?: { from?: Date; count?: number }): Promise<ScheduleListing[]>;
  /**
   * The latest `count` tick-ledger rows of a schedule (default 10, 1–1000), newest first;
   * with `before`, those fired before it (the next page after a row's scheduledAt).
   */
  recentTicks(schedule: string, count?: number, options?: { before?: Date }): Promise<TickRow[]>;
  /**
   * Jobs marked done in each of the last 60 minutes (database clock), all queues together.
   * Bounded: per queue it reads at most 20,000 done jobs, newest available
   * first, that became available within 6 hours (`capped` when a queue hit
   * the bound), from the claim index alone. `queues`: the queues to count (default: the
   * queues with a done job that became available within 6 hours, the 1,000 with the
   * latest at most, `capped` when there were more).
   */
  completions(options?: { queues?: readonly string[] }): Promise<Completions>;
  /** Daemons heard from within `withinMs` (default 10 minutes), most recent first, at most 200. */
  daemons(options?: { withinMs?: number }): Promise<DaemonSeen[]>;
  /**
   * One job's row by id (a number) or key (a string), with its payload and lease holder;
   * null when none. `payloadCharsMax` (a whole number, 1 or more): read only the payload's
   * first that many characters (code points) from the database, `payloadChars` and
   * `payloadBytes` still telling the whole (the console reads a job so). `payload: false`:
   * read none of the payload, nor its size (the record has no payload fields).
   */
  job(target: JobTarget, options: NoPayload): Promise<WithoutPayload<JobRecord> | null>;
  /** One job's row, its payload whole or (`payloadCharsMax`) its first characters; null when none. As above. */
  job(target: JobTarget, options?: PayloadBound): Promise<JobRecord | null>;
  /** One job's row, read as `options` says (either form above); null when none. */
  job(target: JobTarget, options?: PayloadReadOptions): Promise<JobRecord | WithoutPayload<JobRecord> | null>;
  /**
   * Runs now the fan-out of a loaded schedule for its latest fire time at or before `at`
   * (default now). Keys make it harmless to repeat; it writes no tick-ledger row (the
   * scheduler records that tick when it reaches it). Now is the database's clock, as the
   * scheduler's; an `at` later than now (TICK_AT_SKEW_MS allowed) is a UsageError: it would take a
   * coming period's key, and that period's real run would then find it taken. A fan-out
   * that fails midway (jobs() throws) rejects with TickFanoutError, one line naming the
   * schedule, the fire time and the jobs enqueued before it (they stay enqueued). A
   * paused schedule (pauses.pause) is not run: 'paused', with the pause in force, unless
   * `force` is true (the pause stays; the scheduler goes on skipping its ticks).
   * Bounded as the scheduler's fan-out is by its lease: once `stallMs` (default
   * FANOUT_LEASE_MS, 60 s) passes with no progress (no entity from jobs(), no batch
   * written), or once `signal` aborts, the fan-out stops, the rows gathered so far are
   * written, and the call rejects with TickFanoutError saying so (a jobs() that hangs is
   * left pending, never awaited).
   */
  tick(schedule: string, options?: { at?: Date; force?: boolean; signal?: AbortSignal; stallMs?: number }): Promise<TickNowOutcome>;
}

/** What the admin API reads through: the instance's store, its database and its loaded schedules. */
export interface AdminDeps {
  store: Store;
  database: Database;
  /** The schedules loaded (createCronq's tasks and schedules folder), once they are. */
  schedules(): Promise<Schedule[]>;
  /** True once the instance's stop() was called: its pool is closing or closed. */
  stopped(): boolean;
}

/**
 * Builds `cronq.admin` over one instance's store; holds no state of its own. Every
 * method fails the same few ways (withFailures), never with a statement's SQL.
 */
export function createAdmin(deps: AdminDeps): CronqAdmin {
  return withFailures(adminMethods(deps), 'cronq.admin', deps);
}

/**
 * `api` with every method, nested objects' too (deadLetters, pauses), failing the
 * documented way: after stop() a UsageError, at once; a connection lost, refused or
 * closed a DatabaseUnreachableError naming host and port and the driver's reason; a lock
 * wait timeout or a deadlock a DatabaseBusyError (safe to call again); another failed
 * statement an Error with the driver's code and first line. Neither
 * message nor cause holds the SQL. Other errors (UsageError, SchemaBehindError...) pass
 * as they are, and a synchronous throw becomes a rejection.
 */
function withFailures<T extends object>(api: T, path: string, deps: AdminDeps): T {
  const wrapped: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(api)) {
    const what = `${path}.${name}`;
    if (typeof value === 'function') {
      wrapped[name] = async (...args: unknown[]) => {
        if (deps.stopped()) throw usedAfterStop(what);
        try {
          return await value(...args);
        } catch (error) {
          throw statementFailure(error, what, deps.database.target);
        }
      };
    } else {
      wrapped[name] = typeof value === 'object' && value !== null ? withFailures(value, what, deps) : value;
    }
  }
  return wrapped as T;
}

/** A failed statement of the admin call `what` as the caller sees it (withFailures); anything else as it is. */
function statementFailure(error: unknown, what: string, target: DatabaseTarget): unknown {
  const cause = driverFailure(error);
  if (!cause) return error;
  const reason = `${cause.code && !cause.message.includes(cause.code) ? `${cause.code} ` : ''}${cause.message}`;
  if (isConnectionError(cause)) {
    return new DatabaseUnreachableError(`${what}(): cannot reach the database at ${target.address} (database '${target.database}'): ${reason}`, { cause });
  }
  if (isLockConflict(cause)) return new DatabaseBusyError(what, reason, { cause });
  return new Error(`${what}() failed: ${reason}`, { cause });
}

function adminMethods({ store, database, schedules }: AdminDeps): CronqAdmin {
  const healthAt = async (at?: Date): Promise<ScheduleHealth[]> => {
    const loaded = await schedules();
    if (loaded.length === 0) return [];
    const now = at ?? (await store.now());
    const health: ScheduleHealth[] = [];
    for (const s of loaded) health.push(await assessHealth(s, store, now));
    return health;
  };
  const checkRetentionOf = async (olderThanMs: number, name = 'olderThanMs') => checkRetention(olderThanMs, await schedules(), name);
  function deadLetter(id: number, options: NoPayload): Promise<WithoutPayload<DeadLetterDetail> | null>;
  function deadLetter(id: number, options?: PayloadBound): Promise<DeadLetterDetail | null>;
  function deadLetter(id: number, options?: PayloadReadOptions): Promise<DeadLetterDetail | WithoutPayload<DeadLetterDetail> | null>;
  async function deadLetter(id: number, options?: PayloadReadOptions): Promise<DeadLetterDetail | WithoutPayload<DeadLetterDetail> | null> {
    const checked = checkedId(id);
    return store.getDeadLetter(checked, checkedPayloadRead(options, 'deadLetters.get'));
  }
  function job(target: JobTarget, options: NoPayload): Promise<WithoutPayload<JobRecord> | null>;
  function job(target: JobTarget, options?: PayloadBound): Promise<JobRecord | null>;
  function job(target: JobTarget, options?: PayloadReadOptions): Promise<JobRecord | WithoutPayload<JobRecord> | null>;
  async function job(target: JobTarget, options?: PayloadReadOptions): Promise<JobRecord | WithoutPayload<JobRecord> | null> {
    const checked = checkedTarget(target, 'job');
    return store.job(checked, checkedPayloadRead(options, 'job'));
  }
  return {
    ping: () => store.ping(),
    checkSchema: () => assertSchemaCurrent(database),
    deadLetters: {
      list: async (query = {}) => {
        const { limit = DEAD_LETTER_LIST_LIMIT, ...rest } = checkedFilter(query, DEAD_LETTER_QUERY_KEYS, 'deadLetters.list');
        return store.listDeadLetters({ ...rest, limit: wholeNumberWithin(limit, 'limit', { min: 1, max: LISTING_MAX }) });
      },
      groups: async (query = {}) => {
        const { limit, ...rest } = checkedFilter(query, DEAD_LETTER_QUERY_KEYS, 'deadLetters.groups');
        return store.groupDeadLetters({ ...rest, ...(limit === undefined ? {} : { limit: wholeNumberWithin(limit, 'limit', { min: 1, max: LISTING_MAX }) }) });
      },
      awaitingReview: () => store.deadLettersAwaitingReview(),
      get: deadLetter,
      requeue: async (id, reason) => store.resolveDeadLetter(checkedId(id), 'requeue', reason),
      discard: async (id, reason) => store.resolveDeadLetter(checkedId(id), 'discard', reason),
      requeueMatching: async (filter, reason, options) =>
        store.resolveMatching(checkedFilter(filter, DEAD_LETTER_FILTER_KEYS, 'deadLetters.requeueMatching'), 'requeue', reason, checkedTriageOptions(options, 'deadLetters.requeueMatching')),
      discardMatching: async (filter, reason, options) =>
        store.resolveMatching(checkedFilter(filter, DEAD_LETTER_FILTER_KEYS, 'deadLetters.discardMatching'), 'discard', reason, checkedTriageOptions(options, 'deadLetters.discardMatching')),
    },
    pauses: createPauseAdmin(store, schedules),
    consoleSignOuts: {
      record: async (sessionHash, expiresAt) => store.recordSignOut(checkedSessionHash(sessionHash), checkedDate(expiresAt, 'expiresAt')),
      has: async (sessionHash) => store.isSignedOut(checkedSessionHash(sessionHash)),
      standing: async (sessionHash, expiresAt) => store.sessionStanding(checkedSessionHash(sessionHash), checkedDate(expiresAt, 'expiresAt')),
    },
    limits: () => store.kindLimits(),
    cancel: async (target, options) => {
      const checked = checkedTarget(target, 'cancel');
      const { reason, by = defaultOperator() } = checkedOptions(options, ['reason', 'by'], 'cancel') as CancelOptions;
      return store.cancelJob(checked, { by, reason });
    },
    cancelMatching: async (filter, options) => {
      const { reason, by = defaultOperator() } = checkedOptions(options, ['reason', 'by'], 'cancelMatching') as CancelOptions;
      return store.cancelMatching(checkedFilter(filter, CANCEL_FILTER_KEYS, 'cancelMatching'), { by, reason });
    },
    async stats() {
      // One after the other: a caller (the console's overview, a scrape) holds one connection of the pool, not two.
      const stats = await store.stats();
      return { ...stats, health: await healthAt() };
    },
    queuesMostBehind: async (options) => {
      const { limit = 50 } = checkedOptions(options, ['limit'], 'queuesMostBehind');
      return store.queuesMostBehind(wholeNumberWithin(limit, 'limit', { min: 1, max: LISTING_MAX }));
    },
    scheduleHealth: async (options) => {
      const { at } = checkedOptions(options, ['at'], 'scheduleHealth');
      return healthAt(at === undefined ? undefined : checkedDate(at, 'at'));
    },
    checkRetention: checkRetentionOf,
    async prune(options) {
      if (typeof options !== 'object' || options === null) throw new UsageError('prune: give { olderThanMs } (and dryRun if you like)');
      refuseUnknownOptions(options, ['olderThanMs', 'dryRun'], 'prune');
      const { olderThanMs, dryRun } = options;
      if (dryRun !== undefined && typeof dryRun !== 'boolean') throw new UsageError(`prune: dryRun must be true or false (got ${shownValue(dryRun)})`);
      await checkRetentionOf(olderThanMs);
      return pruneOnce(store, { olderThanMs, dryRun });
    },
    async schedules(options) {
      const { from = new Date(), count = 5 } = checkedOptions(options, ['from', 'count'], 'schedules');
      checkedFireDate(from, 'from');
      const limit = wholeNumberWithin(count, 'count', { min: 1, max: LISTING_MAX });
      const listed: ScheduleListing[] = [];
      const paused = new Map((await store.listPauses('schedule')).map((p) => [p.name, p]));
      const health = new Map((await healthAt()).map((h) => [h.schedule, h]));
      for (const s of await schedules()) {
        listed.push({
          name: s.name,
          cron: s.cron,
          timezone: s.timezone,
          period: s.period,
          next: fireTimesBetween(s.cron, s.timezone, from, END_OF_TIME, limit),
          lastTick: await store.latestTick(s.name),
          paused: paused.get(s.name) ?? null,
          health: health.get(s.name)!,
        });
      }
      return listed;
    },
    async recentTicks(schedule, count = 10, options) {
      const { before } = checkedOptions(options, ['before'], 'recentTicks');
      validateName(schedule, 'recentTicks: schedule name');
      const limit = wholeNumberWithin(count, 'count', { min: 1, max: LISTING_MAX });
      return before ? store.ticksBefore(schedule, checkedDate(before, 'before'), limit) : store.recentTicks(schedule, limit);
    },
    completions: async (options) => {
      const { queues } = checkedOptions(options, ['queues'], 'completions');
      if (queues !== undefined && !Array.isArray(queues)) throw new UsageError('completions: queues must be an array of queue names');
      for (const queue of queues ?? []) validateQueue(queue, 'completions: queues entry');
      return store.completionsPerMinute(queues);
    },
    daemons: async (options) => {
      const { withinMs = 10 * 60_000 } = checkedOptions(options, ['withinMs'], 'daemons');
      return store.daemonsSeen(wholeNumberWithin(withinMs, 'withinMs', { min: 0, max: Number.MAX_SAFE_INTEGER }));
    },
    job,
    async tick(name, options) {
      const { at: asked, force = false, signal, stallMs = FANOUT_LEASE_MS } = checkedOptions(options, ['at', 'force', 'signal', 'stallMs'], 'tick');
      if (typeof force !== 'boolean') throw new UsageError(`tick: force must be true or false (got ${shownValue(force)})`);
      if (signal !== undefined && !(signal instanceof AbortSignal)) throw new UsageError('tick: signal must be an AbortSignal');
      wholeNumberWithin(stallMs, 'stallMs', { min: 1, max: 2_147_483_647 });
      // What needs no database first: a bad `at` or an unknown name is told as such, also while it is down.
      const valid = asked === undefined ? undefined : checkTickInstant(checkedFireDate(asked, 'at'), 'at');
      const schedule: Schedule | undefined = (await schedules()).find((s) => s.name === name);
      if (!schedule) return { status: 'no_schedule', schedule: name };
      // The database's clock, which the scheduler ticks by (DatabaseClock).
      const now = await store.now();
      const at = valid === undefined ? now : checkTickInstant(valid, 'at', now, "the database's clock");
      if (!force) {
        const pause = await store.pauseOf('schedule', name);
        if (pause) return { status: 'paused', schedule: name, pause };
      }
      const fireAt = latestFireAtOrBefore(schedule.cron, schedule.timezone, at);
      if (!fireAt) return { status: 'no_fire_time', schedule: name, at };
      const periodKey = periodKeyOfFire(schedule.period, schedule.cron, schedule.timezone, fireAt);
      const written = { inserted: 0, existing: 0 };
      const watch = new StallWatch(stallMs, signal);
      const afterBatch = async (batch: { inserted: number; existing: number }) => {
        written.inserted += batch.inserted;
        written.existing += batch.existing;
        watch.progress();
      };
      const onEntity = () => {
        watch.progress();
        return undefined;
      };
      let result: Awaited<ReturnType<typeof enqueueTick>>;
      try {
        result = await enqueueTick(store, schedule, { scheduledAt: fireAt, periodKey }, { afterBatch, onEntity, signal: watch.signal });
      } catch (error) {
        // A database gone or busy is the same failure as in any admin call (withFailures); anything else is this tick's.
        if (isDatabaseTrouble(error)) throw error;
        throw new TickFanoutError(name, fireAt, periodKey, written, errorLine(error, TICK_FAILURE_TEXT_MAX), { cause: driverFailure(error) ?? error });
      } finally {
        watch.end();
      }
      if (result.stopped) {
        const why = watch.signal.reason as unknown;
        throw new TickFanoutError(name, fireAt, periodKey, { inserted: result.inserted, existing: result.existing }, errorLine(why, TICK_FAILURE_TEXT_MAX), { cause: why });
      }
      return {
        status: 'enqueued',
        schedule: name,
        fireAt,
        periodKey,
        inserted: result.inserted,
        existing: result.existing,
        conflicting: result.conflicting,
        firstConflict: result.firstConflict,
        refusedCount: result.refusedCount,
        refused: result.refused,
      };
    },
  };
}

/** A console session's name: the SHA-256 of its cookie as 64 lowercase hex digits, else a UsageError. */
function checkedSessionHash(hash: unknown): string {
  if (typeof hash !== 'string' || !/^[0-9a-f]{64}$/.test(hash)) throw new UsageError('a console session is named by the SHA-256 of its cookie, 64 lowercase hex digits');
  return hash;
}

/** A row id as callers pass it: a whole number from 1, else a UsageError (never a statement with NaN in it). */
function checkedId(id: unknown): number {
  if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 1) throw new UsageError(`id must be a whole number from 1 (got ${shownNumber(id)})`);
  return id;
}

/**
 * `{ id }` or `{ key }`, exactly one of them and nothing else (UsageError naming `what`):
 * the id a whole number from 1, the key a non-empty string. Both given would leave one of
 * them unread, and an empty key names no job a caller can have meant.
 */
function checkedTarget(target: { id: number } | { key: string }, what: string): { id: number } | { key: string } {
  if (typeof target !== 'object' || target === null || Array.isArray(target)) throw new UsageError('a job is named by { id } or { key }');
  refuseUnknownOptions(target, ['id', 'key'], what, '', 'field');
  const hasId = Object.hasOwn(target, 'id');
  const hasKey = Object.hasOwn(target, 'key');
  if (hasId && hasKey) throw new UsageError(`${what}: a job is named by { id } or { key }, not both`);
  if (hasId) return { id: checkedId((target as { id: unknown }).id) };
  if (!hasKey) throw new UsageError('a job is named by { id } or { key }');
  const { key } = target as { key: unknown };
  if (typeof key !== 'string' || key === '') throw new UsageError(`${what}: key must be a non-empty string (got ${shownValue(key)})`);
  return { key };
}

const CANCEL_FILTER_KEYS = Object.keys({ queue: true, kind: true } satisfies Record<keyof CancelFilter, true>);
const DEAD_LETTER_FILTER_KEYS = Object.keys({ queue: true, kind: true, since: true } satisfies Record<keyof DeadLetterFilter, true>);
const DEAD_LETTER_QUERY_KEYS = [...DEAD_LETTER_FILTER_KEYS, 'includeReviewed', 'limit'];

/**
 * A filter, checked before it narrows anything: an object whose fields are all known, and
 * whose narrowing fields (queue, kind, since) are set if present. A bulk call's filter decides
 * which rows change, so a misspelt field (`{ kidn: 'report' }`) or one present but undefined
 * (`{ kind: opts.kind }`) would widen it to every row; both are refused (UsageError naming
 * the field), as is a field of the wrong type. `{}` matches every row.
 */
function checkedFilter<T extends DeadLetterFilter & { includeReviewed?: boolean }>(filter: T, known: readonly string[], what: string): T {
  if (typeof filter !== 'object' || filter === null || Array.isArray(filter)) {
    throw new UsageError(`${what}: a filter must be an object ({} matches every row; got ${shownValue(filter)})`);
  }
  refuseUnknownOptions(filter, known, what);
  // Only the fields that narrow which rows match: an undefined `limit` or `includeReviewed` widens nothing.
  for (const field of DEAD_LETTER_FILTER_KEYS) {
    if (Object.hasOwn(filter, field) && filter[field as keyof T] === undefined) {
      throw new UsageError(`${what}: ${field} is undefined; leave the field out to match every ${field}, or give one`);
    }
  }
  for (const field of ['queue', 'kind'] as const) {
    const value: unknown = filter[field];
    if (value !== undefined && (typeof value !== 'string' || value === '')) throw new UsageError(`${what}: ${field} must be a non-empty string (got ${shownValue(value)})`);
  }
  if (filter.since !== undefined) checkedDate(filter.since, `${what}: since`);
  if (filter.includeReviewed !== undefined && typeof filter.includeReviewed !== 'boolean') {
    throw new UsageError(`${what}: includeReviewed must be true or false (got ${shownValue(filter.includeReviewed)})`);
  }
  return filter;
}

/**
 * The payload options of job's or deadLetters.get's, checked: `payloadCharsMax` a whole
 * number, 1 or more, or `payload: false` alone (nothing read, so nothing to bound).
 */
function checkedPayloadRead(options: PayloadReadOptions | undefined, what: string): PayloadReadOptions {
  const { payload, payloadCharsMax } = checkedOptions(options as { payload?: unknown; payloadCharsMax?: number } | undefined, ['payloadCharsMax', 'payload'], what);
  if (payload !== undefined) {
    if (payload !== false) throw new UsageError(`${what}: payload must be false (read none of it) or left out (got ${shownValue(payload)})`);
    if (payloadCharsMax !== undefined) throw new UsageError(`${what}: payload: false reads none of the payload; leave out payloadCharsMax`);
    return { payload: false };
  }
  return payloadCharsMax === undefined ? {} : { payloadCharsMax: wholeNumberWithin(payloadCharsMax, `${what}: payloadCharsMax`, { min: 1, max: Number.MAX_SAFE_INTEGER }) };
}

/**
 * A call's options: undefined (none) or an object of known keys, else UsageError naming the
 * key (a misspelt `{ att }` would leave the default in force: `tick` would run today's fire).
 */
function checkedOptions<T extends object>(options: T | undefined, known: readonly string[], what: string): Partial<T> {
  if (options === undefined) return {};
  if (typeof options !== 'object' || options === null) throw new UsageError(`${what}: options must be an object (got ${shownValue(options)})`);
  refuseUnknownOptions(options, known, what);
  return options;
}

/** A bulk triage's options, checked: only onBatch (a function) and signal (an AbortSignal). */
function checkedTriageOptions(options: BulkTriageOptions | undefined, what: string): BulkTriageOptions {
  const { onBatch, signal } = checkedOptions(options, ['onBatch', 'signal'], what);
  if (onBatch !== undefined && typeof onBatch !== 'function') throw new UsageError(`${what}: onBatch must be a function (got ${shownValue(onBatch)})`);
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new UsageError(`${what}: signal must be an AbortSignal (got ${shownValue(signal)})`);
  return { onBatch, signal };
}

/** A refused value as a message shows it: its type and, for a short primitive, the value. */
function shownValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 64 ? `${value.slice(0, 64)}…` : value);
  if (value === null || typeof value === 'number' || typeof value === 'boolean') return String(value);
  return Array.isArray(value) ? 'an array' : `a ${typeof value}`;
}

/** A Date the fire-time arithmetic and the database can both hold, else a UsageError naming it. */
function checkedDate(value: unknown, name: string): Date {
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) throw new UsageError(`${name} must be a valid Date`);
  const year = value.getUTCFullYear();
  if (year < 1 || year > 9999) throw new UsageError(`${name} must be a Date from year 1 to 9999 (got ${value.toISOString()})`);
  return value;
}

/** Most characters of the error's first line a TickFanoutError quotes. */
const TICK_FAILURE_TEXT_MAX = 300;

/** How far ahead of now a tick's `at` may be: clock skew between the caller's clock and the one checked against. */
export const TICK_AT_SKEW_MS = 5_000;

/**
 * Refuses (UsageError naming `name`) a tick instant later than `now` (read off `whose`
 * clock: admin.tick checks by the database's, which the scheduler ticks by) plus
 * TICK_AT_SKEW_MS. Run early, a coming fire time's fan-out would take its period's key:
 * its real run would find the key taken and never run.
 */
export function checkTickInstant(at: Date, name: string, now = new Date(), whose = "this host's clock"): Date {
  if (at.getTime() > now.getTime() + TICK_AT_SKEW_MS) {
    throw new UsageError(
      `${name} must not be later than now (${now.toISOString()} by ${whose}, ${TICK_AT_SKEW_MS / 1000}s of clock skew allowed): a coming fire time ticked now would take its period's key, and its real run would find it taken and never run (got ${at.toISOString()})`,
    );
  }
  return at;
}

/** The first instant croner finds no fire time at or after: fire times end with the year 2999. */
export const FIRE_TIME_HORIZON = Date.UTC(3000, 0, 1);

/** checkedDate for an instant fire times are looked up from: before FIRE_TIME_HORIZON, or a UsageError saying why. */
function checkedFireDate(value: unknown, name: string): Date {
  const date = checkedDate(value, name);
  if (date.getTime() >= FIRE_TIME_HORIZON) {
    throw new UsageError(`${name} must be before the year 3000: cron fire times are computed up to the end of 2999 (got ${date.toISOString()})`);
  }
  // As the CLI's instants: period keys are written for 1970 to 2999.
  if (date.getTime() < 0) throw new UsageError(`${name} must be 1970 or later (got ${date.toISOString()})`);
  return date;
}
