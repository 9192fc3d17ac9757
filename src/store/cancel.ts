/**
 * The only place that writes cancellation SQL: an operator stops a job that has not
 * finished, whether it waits ('ready') or runs ('reserved').
 *
 * Concurrency contract, shared by everything below:
 * - "now" is the database clock (`UTC_TIMESTAMP(6)`), never the host's.
 * - A job is cancelled only while it is 'ready' or 'reserved', re-checked under its row
 *   lock, in one UPDATE that sets status 'cancelled', who, why and `finished_at`. Claims
 *   take only 'ready' rows and every fenced write (`...IfLeased`, fenced.ts) re-checks
 *   status 'reserved', so once this commits no daemon claims, renews, completes, fails or
 *   releases the job: its running handler's next renewal finds the lease gone.
 *   Lease recovery reads only 'reserved' rows: a cancelled job is never brought back.
 * - The row keeps its `lease_token`, so the worker that held it can tell a cancellation
 *   from any other lost lease (`cancellationOf`). Its key stays taken: a schedule's
 *   insert-if-absent finds it and enqueues nothing.
 * - Each transaction locks job rows only (one, or one batch in id order with SKIP LOCKED),
 *   never a dead letter or a tick, so it cannot wait in a cycle with the worker,
 *   dead-letter triage or the scheduler.
 */
import { sql, type SQL } from 'drizzle-orm';
import type { Db, Executor } from '../db/client.ts';
import type { JobStatus } from '../db/schema.ts';
import { UsageError } from '../errors.ts';
import { charLength, longerThanChars } from '../runtime/chars.ts';
import type { Lease } from './fenced.ts';
import { NO_TIME, NOW, PAYLOAD_KEPT, rows } from './sql.ts';

/** Longest accepted cancel reason and operator name (the columns are varchar(255)). */
export const MAX_CANCEL_TEXT_LENGTH = 255;
/** Jobs cancelled per transaction by `cancelMatching`. */
export const CANCEL_BATCH_SIZE = 500;

/** Which job one cancel names: its id, or its key. */
export type CancelTarget =
  | {
      /** The job row's id (cronq_jobs.id). */
      id: number;
    }
  | {
      /** The job's unique key, compared byte for byte. */
      key: string;
    };

/** Which jobs a bulk cancel covers: every field narrows; none means every unfinished job. */
export interface CancelFilter {
  /** Only jobs in this queue. */
  queue?: string;
  /** Only jobs of this kind. */
  kind?: string;
}

/** Who cancels and why (both recorded on the row). */
export interface CancelBy {
  by: string;
  reason: string;
}

/** What cancelling one job did. Only 'cancelled' changed anything. */
export type CancelOutcome =
  | {
      /** Cancelled now, by this call: no daemon claims, completes or retries it from here on. */
      status: 'cancelled';
      /** The job row's id. */
      jobId: number;
      /** Its key (still taken: a schedule's tick enqueues nothing in its place). */
      key: string;
      /** Its kind. */
      kind: string;
      /** Its queue. */
      queue: string;
      /** 'reserved': its handler was running, and its signal aborts (JobCancelledError) at its next renewal. */
      was: 'ready' | 'reserved';
    }
  | {
      /** No job has that id or key: nothing changed. */
      status: 'not_found';
      /** The id or key asked for. */
      target: CancelTarget;
    }
  | {
      /** The job had already finished ('done', 'dead' or 'cancelled'); nothing changed. */
      status: 'finished';
      /** The job row's id. */
      jobId: number;
      /** Its key. */
      key: string;
      /** How it finished. */
      jobStatus: JobStatus;
      /** Who cancelled it, when it was cancelled before (null otherwise). */
      cancelledBy: string | null;
      /** Why it was cancelled, when it was (null otherwise). */
      cancelReason: string | null;
    };

/** What a bulk cancel did, over all its batches. */
export interface BulkCancelResult {
  /** Jobs cancelled that were waiting. */
  ready: number;
  /** Jobs cancelled while their handler ran (it is told at its next lease renewal). */
  running: number;
  /**
   * Matching jobs (that existed at the start) still 'ready' or 'reserved' at the end:
   * another transaction held them through both passes (SKIP LOCKED), a by-hand
   * `SELECT ... FOR UPDATE` say. Running it again cancels them. Absent when nothing matched.
   */
  skippedHeld?: number;
}

/** Who cancelled a job its caller held a lease on, and why. */
export interface Cancellation {
  by: string | null;
  reason: string | null;
}

function checkText(value: string, what: string): string {
  if (typeof value !== 'string') throw new UsageError(`a ${what} is required`);
  const trimmed = value.trim();
  if (trimmed === '') throw new UsageError(`a ${what} is required`);
  if (longerThanChars(trimmed, MAX_CANCEL_TEXT_LENGTH)) throw new UsageError(`the ${what} is ${charLength(trimmed)} characters long; at most ${MAX_CANCEL_TEXT_LENGTH}`);
  return trimmed;
}

function checkBy({ by, reason }: CancelBy): CancelBy {
  return { by: checkText(by, 'canceller name'), reason: checkText(reason, 'reason') };
}

const UNFINISHED = sql`status IN ('ready', 'reserved')`;

/** Cancels `ids` (locked by the caller's transaction), re-checking they are unfinished. */
async function cancelLocked(tx: Executor, ids: number[], { by, reason }: CancelBy): Promise<void> {
  await tx.execute(sql`${PAYLOAD_KEPT}UPDATE cronq_jobs
    SET status = 'cancelled', cancelled_by = ${by}, cancel_reason = ${reason}, lease_deadline = ${NO_TIME},
        finished_time = ${NOW}, updated_at = ${NOW}
    WHERE id IN ${ids} AND ${UNFINISHED}`);
}

/**
 * Cancels one job by id or key: if it is 'ready' or 'reserved' (checked under its row
 * lock) it becomes 'cancelled' with `cancelled_by`, `cancel_reason` and `finished_at`.
 * Otherwise nothing changes and the outcome says why. Throws UsageError for an empty or
 * over-long reason or name.
 */
export async function cancelJob(db: Db, target: CancelTarget, who: CancelBy): Promise<CancelOutcome> {
  const checked = checkBy(who);
  const where = 'id' in target ? sql`id = ${target.id}` : sql`job_key = ${target.key}`;
  return db.transaction(async (tx) => {
    type Row = { id: number; job_key: string; kind: string; queue: string; status: JobStatus; cancelled_by: string | null; cancel_reason: string | null };
    const [job] = rows<Row>(
      await tx.execute(sql`SELECT id, job_key, kind, queue, status, cancelled_by, cancel_reason FROM cronq_jobs WHERE ${where} FOR UPDATE`),
    );
    if (!job) return { status: 'not_found', target };
    const jobId = Number(job.id);
    if (job.status !== 'ready' && job.status !== 'reserved') {
      return { status: 'finished', jobId, key: job.job_key, jobStatus: job.status, cancelledBy: job.cancelled_by, cancelReason: job.cancel_reason };
    }
    await cancelLocked(tx, [jobId], checked);
    return { status: 'cancelled', jobId, key: job.job_key, kind: job.kind, queue: job.queue, was: job.status };
  });
}

/**
 * Cancels every 'ready' or 'reserved' job matching `filter` that existed when the call
 * started (ids up to the largest then: jobs enqueued meanwhile are not chased), in id
 * order, at most `batchSize` per transaction. Rows another transaction holds right now
 * (a claim, a completion) are skipped for this pass (SKIP LOCKED) and looked at again
 * once, after the pass; a job still held then is left as it is. Walks the primary key
 * from the smallest id, so its cost grows with the table, in short transactions.
 */
export async function cancelMatching(
  db: Db,
  filter: CancelFilter,
  who: CancelBy,
  { batchSize = CANCEL_BATCH_SIZE }: { batchSize?: number } = {},
): Promise<BulkCancelResult> {
  const checked = checkBy(who);
  const parts: SQL[] = [UNFINISHED];
  if (filter.queue !== undefined) parts.push(sql`queue = ${filter.queue}`);
  if (filter.kind !== undefined) parts.push(sql`kind = ${filter.kind}`);
  const matching = sql.join(parts, sql` AND `);
  const [{ top }] = rows<{ top: number | null }>(await db.execute(sql`SELECT MAX(id) AS top FROM cronq_jobs`));
  const total: BulkCancelResult = { ready: 0, running: 0 };
  if (top === null) return total;
  for (let pass = 0; pass < 2; pass++) {
    let after = 0;
    for (;;) {
      const batch = await db.transaction(async (tx) => {
        const found = rows<{ id: number; status: 'ready' | 'reserved' }>(
          await tx.execute(sql`SELECT id, status FROM cronq_jobs
            WHERE id > ${after} AND id <= ${Number(top)} AND ${matching}
            ORDER BY id LIMIT ${batchSize} FOR UPDATE SKIP LOCKED`),
        );
        if (found.length > 0) await cancelLocked(tx, found.map((r) => Number(r.id)), checked);
        return found;
      });
      for (const r of batch) total[r.status === 'ready' ? 'ready' : 'running'] += 1;
      if (batch.length < batchSize) break;
      after = Number(batch.at(-1)!.id);
    }
  }
  // A plain count: the jobs both passes skipped as held and that are still unfinished.
  const [{ open }] = rows<{ open: number }>(await db.execute(sql`SELECT COUNT(*) AS open FROM cronq_jobs WHERE id <= ${Number(top)} AND ${matching}`));
  return { ...total, skippedHeld: Number(open) };
}

/**
 * Whether the job this lease was on has been cancelled since (status 'cancelled' with
 * the same token): who and why, or null for any other loss (recovered, reclaimed).
 * A plain read, for a worker whose renewal just found its lease gone.
 */
export async function cancellationOf(exec: Executor, lease: Lease): Promise<Cancellation | null> {
  const [row] = rows<{ cancelled_by: string | null; cancel_reason: string | null }>(
    await exec.execute(sql`SELECT cancelled_by, cancel_reason FROM cronq_jobs
      WHERE id = ${lease.id} AND status = 'cancelled' AND lease_fence = ${lease.token}`),
  );
  return row ? { by: row.cancelled_by, reason: row.cancel_reason } : null;
}
