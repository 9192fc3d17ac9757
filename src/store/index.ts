/**
 * The store: every statement cronq runs, behind one object. Each method is one of the
 * functions beside this file, bound to one Database (its pool-backed `db`, and its
 * multi-statement `claims` pool for the claim); the concurrency contract of each is at
 * the top of its file. Callers hold a Store, never the driver. Inserts inside a caller's
 * transaction go through `inTransaction(tx)`; other code that must run a statement inside
 * a caller's transaction (an effect's `tx`) calls the free function with that executor.
 */
import { CLAIM_CONNECTIONS, type Database } from '../db/client.ts';
import { cancelJob, cancellationOf, cancelMatching, type BulkCancelResult, type CancelBy, type Cancellation, type CancelFilter, type CancelOutcome, type CancelTarget } from './cancel.ts';
import { claimReady, openClaimConnections, readyQueues, type ClaimedJob, type ClaimRequest } from './claims.ts';
import { deleteSilentDaemons, heartbeatDaemon, listOverlapConnections, markDaemonStopped, registerDaemon, servingOf, type DaemonRecord, type Serving } from './daemons.ts';
import {
  getDeadLetter,
  groupDeadLetters,
  listDeadLetters,
  resolveDeadLetter,
  resolveMatching,
  type BulkReviewOptions,
  type BulkReviewResult,
  type DeadLetterDetail,
  type DeadLetterFilter,
  type DeadLetterGroup,
  type DeadLetterSummary,
  type ReviewAction,
  type ReviewOutcome,
} from './deadLetters.ts';
import {
  completeIfLeased,
  completeManyIfLeased,
  failIfLeased,
  releaseInterruptedIfLeased,
  releaseIfLeased,
  releaseUnstartedIfUnrecovered,
  releaseUnstartedManyIfUnrecovered,
  renewIfLeased,
  renewIfUnrecovered,
  type EffectBound,
  type Failure,
  type FailOutcome,
  type InterruptedOutcome,
  type Lease,
} from './fenced.ts';
import { databaseNow, ping } from './health.ts';
import { listKindLimits, upsertKindLimits, type KindLimit, type KindLimitStatus } from './limits.ts';
import { existingKeys, insertJobIfAbsent, insertJobsIfAbsent, jobWriterOn, keyHolders, maxAllowedPacket, type EncodedJobRow, type JobWriter, type KeyHolder, type NewJobRow } from './jobs.ts';
import {
  claimTickFanout,
  failTickIfOwned,
  finishTickIfOwned,
  latestTick,
  adoptTickSourceIfUnknown,
  recentTicks,
  ticksBefore,
  recordSkippedTicks,
  releaseTickIfOwned,
  renewTickIfOwned,
  resumableTicks,
  skipTickIfOwned,
  type SkippedTick,
  type TickClaim,
  type TickSource,
  type TickRow,
} from './ledger.ts';
import { countPrunable, cutoffBefore, deletePrunable, findPrunable, scanStart, windowEnd, type PruneTarget } from './prune.ts';
import { recoverExpiredLeases, type RecoveryBatch } from './recovery.ts';
import { deletePause, insertPauseIfAbsent, listPauses, pausedQueueNames, pauseOf, type Pause, type PauseWriteOutcome, type ResumeWriteOutcome } from './pauses.ts';
import type { PauseTarget } from '../db/schema.ts';
import { endSession, holdOverlapLock, otherTickInFlight, overlapLockHolder, tickHasJobs, type EndSessionOutcome, type HoldOptions, type LockHolder, type OverlapLock } from './overlap.ts';
import { periodHasUnfinishedJobs } from './scheduleHealth.ts';
import type { DbTime } from './sql.ts';
import { isSignedOut, recordSignOut, sessionStanding, type SessionStanding } from './consoleSignOuts.ts';
import { completionsPerMinute, daemonsSeen, jobByIdOrKey, recentDoneQueues, type Completions, type DaemonSeen, type JobRecord, type JobTarget } from './console.ts';
import type { NoPayload, PayloadBound, PayloadReadOptions, WithoutPayload } from './payloadRead.ts';
import { collectStats, deadLetterStats, heldStatuses, queuesMostBehind, type DeadLetterStats, type QueuesMostBehind, type Stats } from './stats.ts';
import type { Executor } from '../db/client.ts';

/** One Database's statements. Cheap to construct; holds no state of its own. */
export class Store implements JobWriter {
  constructor(private readonly database: Database) {}

  /** The pool-backed executor, for free functions that a caller runs outside a transaction. */
  private get db() {
    return this.database.db;
  }

  // Claims (claims.ts)

  /** How many claims can run at once: the claim pool's connections. */
  get claimConnections(): number {
    return CLAIM_CONNECTIONS;
  }

  /** Opens every claim connection at once, ahead of the first claims (openClaimConnections). */
  openClaimConnections(): Promise<void> {
    return openClaimConnections(this.database.claims, CLAIM_CONNECTIONS);
  }

  /** Claims up to `request.limit` ready jobs in one short transaction (claimReady). */
  claim(request: ClaimRequest, rotation = 0): Promise<ClaimedJob[]> {
    return claimReady(this.database.claims, request, rotation);
  }

  /** Queues that have ready jobs due now, by a loose index scan (readyQueues). */
  readyQueues(): Promise<string[]> {
    return readyQueues(this.database.claims);
  }

  // Fenced writes (fenced.ts): each changes nothing once the lease is lost.

  /** Marks these jobs done in one statement; returns the ids it completed (completeManyIfLeased). */
  completeMany(leases: Lease[]): Promise<Set<number>> {
    return completeManyIfLeased(this.db, leases);
  }

  /**
   * Marks one job done, running `effect` in the same transaction, abandoned (rolled back)
   * once `bound` ends; false when the lease was lost (completeIfLeased).
   */
  complete(lease: Lease, effect?: (tx: Executor) => Promise<void>, bound?: EffectBound): Promise<boolean> {
    return completeIfLeased(this.database, lease, effect, bound);
  }

  /** Records a failure: retry later or dead with a dead letter (failIfLeased). */
  fail(lease: Lease, failure: Failure): Promise<FailOutcome> {
    return failIfLeased(this.db, lease, failure);
  }

  /** Gives back a job whose handler a shutdown cut short, counting the stop, or sends it dead at `maxLeaseExpiries` stops (releaseInterruptedIfLeased). */
  releaseInterrupted(lease: Lease, reason: string, maxLeaseExpiries: number): Promise<InterruptedOutcome> {
    return releaseInterruptedIfLeased(this.db, lease, reason, maxLeaseExpiries);
  }

  /** Extends the lease to now + `leaseMs`; false when it is gone (renewIfLeased). */
  renew(lease: Lease, leaseMs: number): Promise<boolean> {
    return renewIfLeased(this.db, lease, leaseMs);
  }

  /** Takes back a lease whose deadline passed while the job is still reserved under its token; false when it is gone (renewIfUnrecovered). */
  renewUnrecovered(lease: Lease, leaseMs: number): Promise<boolean> {
    return renewIfUnrecovered(this.db, lease, leaseMs);
  }

  /** Gives the job back into another queue without counting the attempt (releaseIfLeased with a queue). */
  moveToQueue(lease: Lease, queue: string, reason: string): Promise<boolean> {
    return releaseIfLeased(this.db, lease, reason, 0, queue);
  }

  /** Gives back, attempt restored, a job whose handler never started, while nobody recovered it (releaseUnstartedIfUnrecovered). */
  releaseUnstarted(lease: Lease, reason: string): Promise<boolean> {
    return releaseUnstartedIfUnrecovered(this.db, lease, reason);
  }

  /** releaseUnstarted for many jobs in one transaction; returns the ids released (releaseUnstartedManyIfUnrecovered). */
  releaseUnstartedMany(leases: Lease[], reason: string): Promise<Set<number>> {
    return releaseUnstartedManyIfUnrecovered(this.db, leases, reason);
  }

  /** Gives the job back without counting the attempt (releaseIfLeased). */
  release(lease: Lease, reason: string, delayMs = 0): Promise<boolean> {
    return releaseIfLeased(this.db, lease, reason, delayMs);
  }

  // Database health (health.ts)

  /** The database clock. */
  now(): Promise<Date> {
    return databaseNow(this.db);
  }

  /** `SELECT 1`; throws DatabaseUnreachableError or DatabaseMissingError (ping). */
  ping(): Promise<void> {
    return ping(this.database);
  }

  // Inserts (jobs.ts)

  /** Inserts one job unless its key exists; returns its id either way (insertJobIfAbsent). */
  insertJob(row: NewJobRow): Promise<{ id: number; created: boolean }> {
    return insertJobIfAbsent(this.db, row);
  }

  /** Inserts a batch in one statement, existing keys left alone; returns how many were new (insertJobsIfAbsent). */
  insertJobs(batch: Array<NewJobRow | EncodedJobRow>): Promise<number> {
    return insertJobsIfAbsent(this.db, batch);
  }

  /** Which of `keys` already exist. */
  existingKeys(keys: string[]): Promise<Set<string>> {
    return existingKeys(this.db, keys);
  }

  /** Which of `keys` exist, and the jobs among them not of schedule `scheduleName`'s period `periodKey` (keyHolders). */
  keyHolders(keys: readonly string[], scheduleName: string, periodKey: string): Promise<{ existing: Set<string>; outside: KeyHolder[] }> {
    return keyHolders(this.db, keys, scheduleName, periodKey);
  }

  /** The server's max_allowed_packet in bytes. */
  maxAllowedPacket(): Promise<number> {
    return maxAllowedPacket(this.db);
  }

  /** The same inserts inside a caller's Drizzle transaction: they commit or roll back with it. */
  inTransaction(tx: Executor): JobWriter {
    return jobWriterOn(tx);
  }

  // Lease recovery (recovery.ts)

  /**
   * Expired leases back to ready, or dead; at most `limit` rows, none of `skip`; dead
   * letters the database refuses leave their jobs as they were (recoverExpiredLeases).
   */
  recoverExpiredLeases(limit: number, maxLeaseExpiries?: number, skip?: readonly number[]): Promise<RecoveryBatch> {
    return recoverExpiredLeases(this.db, limit, maxLeaseExpiries, skip);
  }

  // Tick ledger (ledger.ts)

  /** The schedule's latest ledger row, or null. */
  latestTick(scheduleName: string): Promise<TickRow | null> {
    return latestTick(this.db, scheduleName);
  }

  /** Records `source` on ledger row `id` if it records none (NULL); returns whether it did (ledger.ts). */
  adoptTickSourceIfUnknown(id: number, source: TickSource): Promise<boolean> {
    return adoptTickSourceIfUnknown(this.db, id, source);
  }

  /** The latest `count` ledger rows of a schedule, newest first. */
  recentTicks(scheduleName: string, count: number): Promise<TickRow[]> {
    return recentTicks(this.db, scheduleName, count);
  }

  /** Claims a tick's fan-out (inserts its row, or takes over an expired one); the row id when this caller owns it, else null. */
  claimTickFanout(claim: TickClaim): Promise<number | null> {
    return claimTickFanout(this.db, claim);
  }

  /** Extends the fan-out lease; false when another daemon took the tick over. */
  renewTickIfOwned(id: number, claimedBy: string, leaseMs: number): Promise<boolean> {
    return renewTickIfOwned(this.db, id, claimedBy, leaseMs);
  }

  /** Marks the fan-out finished with its counts; false when the tick was taken over. */
  finishTickIfOwned(id: number, claimedBy: string, counts: { inserted: number; existing: number; note?: string | null }): Promise<boolean> {
    return finishTickIfOwned(this.db, id, claimedBy, counts);
  }

  /** Records a fan-out that kept failing as 'failed'; false when the tick was taken over. */
  failTickIfOwned(id: number, claimedBy: string, result: { inserted: number; existing: number; note: string }): Promise<boolean> {
    return failTickIfOwned(this.db, id, claimedBy, result);
  }

  /** Records a claimed tick as skipped with `note` (overlap); false when the tick was taken over. */
  skipTickIfOwned(id: number, claimedBy: string, note: string): Promise<boolean> {
    return skipTickIfOwned(this.db, id, claimedBy, note);
  }

  /** Ends the fan-out lease now so any scheduler resumes the tick at once; false when it was not ours. */
  releaseTickIfOwned(id: number, claimedBy: string): Promise<boolean> {
    return releaseTickIfOwned(this.db, id, claimedBy);
  }

  /** Records ticks deliberately not enqueued; returns how many rows were new. */
  recordSkippedTicks(scheduleName: string, source: TickSource, ticks: SkippedTick[]): Promise<number> {
    return recordSkippedTicks(this.db, scheduleName, source, ticks);
  }

  /** Unfinished ticks of a schedule this scheduler may take over, oldest first. */
  resumableTicks(scheduleName: string, claimedBy: string): Promise<TickRow[]> {
    return resumableTicks(this.db, scheduleName, claimedBy);
  }

  // Overlap (overlap.ts)

  /** Takes the schedule's overlap lock, waiting at most `waitS` s; null when another fan-out held it all along (holdOverlapLock). */
  holdOverlapLock(scheduleName: string, waitS: number, options?: HoldOptions): Promise<OverlapLock | null> {
    return holdOverlapLock(this.database.overlapLocks, scheduleName, waitS, options);
  }

  /** The session holding the schedule's overlap lock and the daemons listing it, or null when free (overlapLockHolder). */
  overlapLockHolder(scheduleName: string): Promise<LockHolder | null> {
    return overlapLockHolder(this.db, scheduleName);
  }

  /** Ends a session, freeing its named locks; 'refused' without the privilege (endSession). */
  endSession(connectionId: number): Promise<EndSessionOutcome> {
    return endSession(this.db, connectionId);
  }

  /** Whether a job of another tick of the schedule (earlier or later) is still ready or running (otherTickInFlight). */
  otherTickInFlight(scheduleName: string, queue: string, tick: Date): Promise<boolean> {
    return otherTickInFlight(this.db, scheduleName, queue, tick);
  }

  /** Whether the tick already has a job of its own, in any status (tickHasJobs). */
  tickHasJobs(scheduleName: string, periodKey: string, tick: Date): Promise<boolean> {
    return tickHasJobs(this.db, scheduleName, periodKey, tick);
  }

  // Schedule health (scheduleHealth.ts)

  /** Whether a job of this schedule and period is not 'done' yet (periodHasUnfinishedJobs). */
  periodHasUnfinishedJobs(scheduleName: string, periodKey: string): Promise<boolean> {
    return periodHasUnfinishedJobs(this.db, scheduleName, periodKey);
  }

  // Dead letters (deadLetters.ts)

  /** Dead letters matching a filter, oldest first, at most `limit` (listDeadLetters). */
  listDeadLetters(options: DeadLetterFilter & { includeReviewed?: boolean; limit: number }): Promise<{ letters: DeadLetterSummary[]; more: boolean }> {
    return listDeadLetters(this.db, options);
  }

  /** Dead letters counted by kind and normalised first line (groupDeadLetters). */
  groupDeadLetters(options: DeadLetterFilter & { includeReviewed?: boolean; limit?: number }): Promise<DeadLetterGroup[]> {
    return groupDeadLetters(this.db, options);
  }

  /** One dead letter with its job's current row, or null; its payload's start only with `payloadCharsMax`, none with `payload: false` (getDeadLetter). */
  getDeadLetter(id: number, options: NoPayload): Promise<WithoutPayload<DeadLetterDetail> | null>;
  getDeadLetter(id: number, options?: PayloadBound): Promise<DeadLetterDetail | null>;
  getDeadLetter(id: number, options?: PayloadReadOptions): Promise<DeadLetterDetail | WithoutPayload<DeadLetterDetail> | null>;
  getDeadLetter(id: number, options: PayloadReadOptions = {}): Promise<DeadLetterDetail | WithoutPayload<DeadLetterDetail> | null> {
    return getDeadLetter(this.db, id, options);
  }

  /** Requeues or discards one dead letter, at most once (resolveDeadLetter). */
  resolveDeadLetter(id: number, action: ReviewAction, reason: string): Promise<ReviewOutcome> {
    return resolveDeadLetter(this.db, id, action, reason);
  }

  /** Requeues or discards every unreviewed dead letter matching a filter, in batches (resolveMatching). */
  resolveMatching(filter: DeadLetterFilter, action: ReviewAction, reason: string, options?: BulkReviewOptions): Promise<BulkReviewResult> {
    return resolveMatching(this.db, filter, action, reason, options);
  }

  // Cancellation (cancel.ts)

  /** Cancels one unfinished job by id or key (cancelJob). */
  cancelJob(target: CancelTarget, who: CancelBy): Promise<CancelOutcome> {
    return cancelJob(this.db, target, who);
  }

  /** Cancels every unfinished job matching a filter, in batches (cancelMatching). */
  cancelMatching(filter: CancelFilter, who: CancelBy, options?: { batchSize?: number }): Promise<BulkCancelResult> {
    return cancelMatching(this.db, filter, who, options);
  }

  /** Who cancelled the job this lease was on, or null when the lease went another way (cancellationOf). */
  cancellationOf(lease: Lease): Promise<Cancellation | null> {
    return cancellationOf(this.db, lease);
  }

  // Stats (stats.ts)

  /** Every stats section: queues, dead letters, schedules (collectStats). */
  stats(): Promise<Stats> {
    return collectStats(this.db);
  }

  // Retention (prune.ts)

  /** Now minus `olderThanMs` by the database clock. */
  cutoffBefore(olderThanMs: number): Promise<DbTime> {
    return cutoffBefore(this.db, olderThanMs);
  }

  /** Where a retention scan of `target` starts (the smallest id minus one), or null when empty. */
  scanStart(target: PruneTarget): Promise<number | null> {
    return scanStart(this.db, target);
  }

  /** The id ending the next window of `span` rows after `afterId`, or null. */
  windowEnd(target: PruneTarget, afterId: number, span: number): Promise<number | null> {
    return windowEnd(this.db, target, afterId, span);
  }

  /** Ids in the window that retention lets go, ascending, at most `limit`. */
  findPrunable(target: PruneTarget, range: { cutoff: DbTime; afterId: number; throughId: number; limit: number }): Promise<number[]> {
    return findPrunable(this.db, target, range);
  }

  /** Deletes these ids, re-checking the rule under the row locks; returns how many went. */
  deletePrunable(target: PruneTarget, ids: number[], cutoff: DbTime): Promise<number> {
    return deletePrunable(this.db, target, ids, cutoff);
  }

  /** How many rows retention would let go now. */
  countPrunable(target: PruneTarget, cutoff: DbTime): Promise<number> {
    return countPrunable(this.db, target, cutoff);
  }

  // Limits (limits.ts)

  /** Writes these kinds' cluster-wide limits (last writer wins). */
  setKindLimits(limits: readonly KindLimit[]): Promise<void> {
    return upsertKindLimits(this.db, limits);
  }

  /** Every cluster-wide limit in force, with its kind's running count. */
  kindLimits(): Promise<KindLimitStatus[]> {
    return listKindLimits(this.db);
  }

  // Daemons (daemons.ts)

  /** Records this daemon as running from now. */
  registerDaemon(daemon: DaemonRecord): Promise<void> {
    return registerDaemon(this.db, daemon);
  }

  /** Refreshes this daemon's heartbeat (rewriting its row if it was deleted). */
  heartbeatDaemon(daemon: DaemonRecord): Promise<void> {
    return heartbeatDaemon(this.db, daemon);
  }

  /** Lists the connections this daemon's overlap locks are (about to be) held on (listOverlapConnections). */
  listOverlapConnections(daemon: { id: string; heartbeatMs: number }, connectionIds: readonly number[]): Promise<void> {
    return listOverlapConnections(this.db, daemon, connectionIds);
  }

  /** Marks this daemon stopped now. */
  markDaemonStopped(id: string): Promise<void> {
    return markDaemonStopped(this.db, id);
  }

  /** Deletes daemon rows not heard from for `olderThanMs`; returns how many. */
  deleteSilentDaemons(olderThanMs?: number): Promise<number> {
    return deleteSilentDaemons(this.db, olderThanMs);
  }

  /** Whether a live daemon serves a kind on a queue, and for how long none has. */
  servingOf(query: { jobId: number; kind: string; queue: string; aliveMs: number }): Promise<Serving> {
    return servingOf(this.db, query);
  }

  // Pauses (pauses.ts)

  /** The pause of one schedule or queue, or null. */
  pauseOf(target: PauseTarget, name: string): Promise<Pause | null> {
    return pauseOf(this.db, target, name);
  }

  /** Every pause (of one target, when given), by target and name. */
  listPauses(target?: PauseTarget): Promise<Pause[]> {
    return listPauses(this.db, target);
  }

  /** The paused queues' names: one read of a tiny table, for the claim path. */
  pausedQueues(): Promise<string[]> {
    return pausedQueueNames(this.db);
  }

  /** Pauses a schedule or queue unless it is paused already (insertPauseIfAbsent). */
  pause(pause: { target: PauseTarget; name: string; reason: string | null; pausedBy: string }): Promise<PauseWriteOutcome> {
    return insertPauseIfAbsent(this.db, pause);
  }

  /** Ends a pause, returning it, or 'not_paused' (deletePause). */
  resume(target: PauseTarget | '', name: string): Promise<ResumeWriteOutcome> {
    return deletePause(this.db, target, name);
  }

  // Console sign-outs (consoleSignOuts.ts)

  /** Records a console session as signed out until `expiresAt` (recordSignOut). */
  recordSignOut(sessionHash: string, expiresAt: Date): Promise<void> {
    return recordSignOut(this.db, sessionHash, expiresAt);
  }

  /** Where a console session expiring at `expiresAt` stands by the database's clock (sessionStanding). */
  sessionStanding(sessionHash: string, expiresAt: Date): Promise<SessionStanding> {
    return sessionStanding(this.db, sessionHash, expiresAt);
  }

  /** Whether a console session was signed out (isSignedOut). */
  isSignedOut(sessionHash: string): Promise<boolean> {
    return isSignedOut(this.db, sessionHash);
  }

  // The console's reads (console.ts)

  /** Done jobs per minute over the last hour, bounded per queue (completionsPerMinute); when `queues` is not given, those recentDoneQueues picks (1,000 at most). */
  async completionsPerMinute(queues?: readonly string[]): Promise<Completions> {
    if (queues) return completionsPerMinute(this.db, queues);
    const recent = recentDoneQueues(await heldStatuses(this.db));
    return completionsPerMinute(this.db, recent.queues, { queuesLeftOut: recent.leftOut });
  }

  /** The `limit` queues most behind, counted, and how many queues hold jobs (queuesMostBehind). */
  queuesMostBehind(limit: number): Promise<QueuesMostBehind> {
    return queuesMostBehind(this.db, limit);
  }

  /** Dead letters awaiting review, counted up to their cap (deadLetterStats). */
  deadLettersAwaitingReview(): Promise<DeadLetterStats> {
    return deadLetterStats(this.db);
  }

  /** Daemons heard from within `withinMs`, most recent first (daemonsSeen). */
  daemonsSeen(withinMs: number): Promise<DaemonSeen[]> {
    return daemonsSeen(this.db, withinMs);
  }

  /** One job row by id or key, or null; its payload's start only with `payloadCharsMax`, none with `payload: false` (jobByIdOrKey). */
  job(target: JobTarget, options: NoPayload): Promise<WithoutPayload<JobRecord> | null>;
  job(target: JobTarget, options?: PayloadBound): Promise<JobRecord | null>;
  job(target: JobTarget, options?: PayloadReadOptions): Promise<JobRecord | WithoutPayload<JobRecord> | null>;
  job(target: JobTarget, options: PayloadReadOptions = {}): Promise<JobRecord | WithoutPayload<JobRecord> | null> {
    return jobByIdOrKey(this.db, target, options);
  }

  /** A page of a schedule's ledger: `count` rows fired before `before`, newest first (ticksBefore). */
  ticksBefore(scheduleName: string, before: Date, count: number): Promise<TickRow[]> {
    return ticksBefore(this.db, scheduleName, before, count);
  }
}

export type { ClaimCursor, ClaimedJob, ClaimRequest, LeaseLengths, QueueLimit } from './claims.ts';
export { ClaimUpdateError } from './claims.ts';
export { UnreadableRowsError } from './unreadableRows.ts';
export type { EffectBound, Failure, FailOutcome, InterruptedOutcome, Lease } from './fenced.ts';
export { EffectNotStartedError } from './fenced.ts';
export type { NewJobRow, EncodedJobRow, JobWriter, KeyHolder } from './jobs.ts';
export type { TickRow, TickClaim, TickSource, SkippedTick } from './ledger.ts';
export type { EndSessionOutcome, HolderListing, HoldOptions, LockHolder, OverlapLock } from './overlap.ts';
export type { RecoveryBatch } from './recovery.ts';
export type { DeadLetterStats, QueuesMostBehind, Stats } from './stats.ts';
export type { Completions, DaemonSeen, JobRecord, JobTarget } from './console.ts';
export type { NoPayload, PayloadBound, PayloadFields, PayloadReadOptions, WithoutPayload } from './payloadRead.ts';
export type { BulkCancelResult, CancelBy, Cancellation, CancelFilter, CancelOutcome, CancelTarget } from './cancel.ts';
export type { DaemonRecord, Serving } from './daemons.ts';
export type { SessionStanding } from './consoleSignOuts.ts';
export type { KindLimit, KindLimitStatus } from './limits.ts';
export type { PruneTarget } from './prune.ts';
export type { Pause, PauseWriteOutcome, ResumeWriteOutcome } from './pauses.ts';
export { parseDbTime, type DbTime } from './sql.ts';
/** The longest job key the jobs table holds. */
export { MAX_KEY_LENGTH } from '../db/schema.ts';
