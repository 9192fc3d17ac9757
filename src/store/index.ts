/**
 * The store: every statement cronq runs, behind one object. Each method is one of the
 * functions beside this file, bound to one Database (its pool-backed `db`, and its
 * multi-statement `claims` pool for the claim); the concurrency contract of each is at
 * the top of its file. Callers hold a Store, never the driver. Code that must run a
 * statement inside a caller's transaction (an effect's `tx`) calls the free function
 * with that executor instead.
 */
import type { Database } from '../db/client.ts';
import { claimReady, readyQueues, type ClaimedJob, type ClaimRequest } from './claims.ts';
import { deleteSilentDaemons, heartbeatDaemon, markDaemonStopped, registerDaemon, servingOf, type DaemonRecord, type Serving } from './daemons.ts';
import {
  getDeadLetter,
  groupDeadLetters,
  listDeadLetters,
  resolveDeadLetter,
  resolveMatching,
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
  releaseIfLeased,
  renewIfLeased,
  type Failure,
  type FailOutcome,
  type Lease,
} from './fenced.ts';
import { databaseNow, ping } from './health.ts';
import { existingKeys, insertJobIfAbsent, insertJobsIfAbsent, maxAllowedPacket, type EncodedJobRow, type NewJobRow } from './jobs.ts';
import {
  claimTickFanout,
  failTickIfOwned,
  finishTickIfOwned,
  latestTick,
  recentTicks,
  recordSkippedTicks,
  releaseTickIfOwned,
  renewTickIfOwned,
  resumableTicks,
  type SkippedTick,
  type TickClaim,
  type TickRow,
} from './ledger.ts';
import { countPrunable, cutoffBefore, deletePrunable, findPrunable, scanStart, windowEnd, type PruneTarget } from './prune.ts';
import { recoverExpiredLeases } from './recovery.ts';
import type { DbTime } from './sql.ts';
import { collectStats, type Stats } from './stats.ts';
import type { Executor } from '../db/client.ts';

/** One Database's statements. Cheap to construct; holds no state of its own. */
export class Store {
  constructor(private readonly database: Database) {}

  /** The pool-backed executor, for free functions that a caller runs outside a transaction. */
  private get db() {
    return this.database.db;
  }

  // Claims (claims.ts)

  /** Claims up to `request.limit` ready jobs in one short transaction (claimReady). */
  claim(request: ClaimRequest, rotation = 0): Promise<ClaimedJob[]> {
    return claimReady(this.database.claims, request, rotation);
  }

  /** Queues that have ready jobs, by a loose index scan (readyQueues). */
  readyQueues(): Promise<string[]> {
    return readyQueues(this.database.claims);
  }

  // Fenced writes (fenced.ts): each changes nothing once the lease is lost.

  /** Marks these jobs done in one statement; returns the ids it completed (completeManyIfLeased). */
  completeMany(leases: Lease[]): Promise<Set<number>> {
    return completeManyIfLeased(this.db, leases);
  }

  /** Marks one job done, running `effect` in the same transaction; false when the lease was lost (completeIfLeased). */
  complete(lease: Lease, effect?: (tx: Executor) => Promise<void>): Promise<boolean> {
    return completeIfLeased(this.db, lease, effect);
  }

  /** Records a failure: retry later or dead with a dead letter (failIfLeased). */
  fail(lease: Lease, failure: Failure): Promise<FailOutcome> {
    return failIfLeased(this.db, lease, failure);
  }

  /** Extends the lease to now + `leaseMs`; false when it is gone (renewIfLeased). */
  renew(lease: Lease, leaseMs: number): Promise<boolean> {
    return renewIfLeased(this.db, lease, leaseMs);
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

  /** The server's max_allowed_packet in bytes. */
  maxAllowedPacket(): Promise<number> {
    return maxAllowedPacket(this.db);
  }

  // Lease recovery (recovery.ts)

  /** Expired leases back to ready, or dead; at most `limit` rows (recoverExpiredLeases). */
  recoverExpiredLeases(limit: number, maxLeaseExpiries?: number): Promise<{ returned: number; dead: number }> {
    return recoverExpiredLeases(this.db, limit, maxLeaseExpiries);
  }

  // Tick ledger (ledger.ts)

  latestTick(scheduleName: string): Promise<TickRow | null> {
    return latestTick(this.db, scheduleName);
  }

  recentTicks(scheduleName: string, count: number): Promise<TickRow[]> {
    return recentTicks(this.db, scheduleName, count);
  }

  claimTickFanout(claim: TickClaim): Promise<number | null> {
    return claimTickFanout(this.db, claim);
  }

  renewTickIfOwned(id: number, claimedBy: string, leaseMs: number): Promise<boolean> {
    return renewTickIfOwned(this.db, id, claimedBy, leaseMs);
  }

  finishTickIfOwned(id: number, claimedBy: string, counts: { inserted: number; existing: number; note?: string | null }): Promise<boolean> {
    return finishTickIfOwned(this.db, id, claimedBy, counts);
  }

  failTickIfOwned(id: number, claimedBy: string, result: { inserted: number; existing: number; note: string }): Promise<boolean> {
    return failTickIfOwned(this.db, id, claimedBy, result);
  }

  releaseTickIfOwned(id: number, claimedBy: string): Promise<boolean> {
    return releaseTickIfOwned(this.db, id, claimedBy);
  }

  recordSkippedTicks(scheduleName: string, ticks: SkippedTick[]): Promise<number> {
    return recordSkippedTicks(this.db, scheduleName, ticks);
  }

  resumableTicks(scheduleName: string, claimedBy: string): Promise<TickRow[]> {
    return resumableTicks(this.db, scheduleName, claimedBy);
  }

  // Dead letters (deadLetters.ts)

  listDeadLetters(options: DeadLetterFilter & { includeReviewed?: boolean; limit: number }): Promise<{ letters: DeadLetterSummary[]; more: boolean }> {
    return listDeadLetters(this.db, options);
  }

  groupDeadLetters(options: DeadLetterFilter & { includeReviewed?: boolean }): Promise<DeadLetterGroup[]> {
    return groupDeadLetters(this.db, options);
  }

  getDeadLetter(id: number): Promise<DeadLetterDetail | null> {
    return getDeadLetter(this.db, id);
  }

  resolveDeadLetter(id: number, action: ReviewAction, reason: string): Promise<ReviewOutcome> {
    return resolveDeadLetter(this.db, id, action, reason);
  }

  resolveMatching(filter: DeadLetterFilter, action: ReviewAction, reason: string, options?: { batchSize?: number }): Promise<BulkReviewResult> {
    return resolveMatching(this.db, filter, action, reason, options);
  }

  // Stats (stats.ts)

  stats(): Promise<Stats> {
    return collectStats(this.db);
  }

  // Retention (prune.ts)

  cutoffBefore(olderThanMs: number): Promise<DbTime> {
    return cutoffBefore(this.db, olderThanMs);
  }

  scanStart(target: PruneTarget): Promise<number | null> {
    return scanStart(this.db, target);
  }

  windowEnd(target: PruneTarget, afterId: number, span: number): Promise<number | null> {
    return windowEnd(this.db, target, afterId, span);
  }

  findPrunable(target: PruneTarget, range: { cutoff: DbTime; afterId: number; throughId: number; limit: number }): Promise<number[]> {
    return findPrunable(this.db, target, range);
  }

  deletePrunable(target: PruneTarget, ids: number[], cutoff: DbTime): Promise<number> {
    return deletePrunable(this.db, target, ids, cutoff);
  }

  countPrunable(target: PruneTarget, cutoff: DbTime): Promise<number> {
    return countPrunable(this.db, target, cutoff);
  }

  // Daemons (daemons.ts)

  registerDaemon(daemon: DaemonRecord): Promise<void> {
    return registerDaemon(this.db, daemon);
  }

  heartbeatDaemon(daemon: DaemonRecord): Promise<void> {
    return heartbeatDaemon(this.db, daemon);
  }

  markDaemonStopped(id: string): Promise<void> {
    return markDaemonStopped(this.db, id);
  }

  deleteSilentDaemons(olderThanMs?: number): Promise<number> {
    return deleteSilentDaemons(this.db, olderThanMs);
  }

  servingOf(query: { jobId: number; kind: string; queue: string; aliveMs: number }): Promise<Serving> {
    return servingOf(this.db, query);
  }
}

export type { ClaimCursor, ClaimedJob, ClaimRequest, LeaseLengths } from './claims.ts';
export { ClaimUpdateError } from './claims.ts';
export type { Failure, FailOutcome, Lease } from './fenced.ts';
export type { NewJobRow, EncodedJobRow } from './jobs.ts';
export type { TickRow, TickClaim, SkippedTick } from './ledger.ts';
export type { Stats } from './stats.ts';
export type { DaemonRecord, Serving } from './daemons.ts';
export type { PruneTarget } from './prune.ts';
export { parseDbTime, type DbTime } from './sql.ts';
