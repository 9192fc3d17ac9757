import { UsageError } from '../errors.ts';
import { MAX_KEY_LENGTH } from '../db/schema.ts';
import { TASK_DEFAULTS, validateMaxAttempts, validateQueue } from '../tasks/define.ts';
import type { TaskRegistry } from '../tasks/registry.ts';
import { driverError, type Executor } from '../db/client.ts';
import { existingKeys, insertJobsIfAbsent, type NewJobRow } from './store.ts';

/** A job to enqueue, as callers write it. */
export interface EnqueueJob {
  kind: string;
  /** Unique across all jobs: the same key always means the same job. */
  key: string;
  payload?: unknown;
  /** Defaults to the task's queue, else 'default'. */
  queue?: string;
  /** Not before this instant. */
  runAt?: Date;
  /** Defaults to the task's maxAttempts, else 5. */
  maxAttempts?: number;
  /** Set by the scheduler; ad-hoc jobs leave them out. */
  scheduleName?: string;
  periodKey?: string;
  scheduledAt?: Date;
}

/**
 * Validates a job at the edge and fills in its task's defaults. Throws UsageError
 * naming the bad field; nothing reaches the database unless this passes.
 */
export function toJobRow(job: EnqueueJob, tasks: TaskRegistry): NewJobRow {
  if (typeof job !== 'object' || job === null) throw new UsageError('a job must be an object');
  if (typeof job.kind !== 'string' || job.kind.length === 0 || job.kind.length > 128) {
    throw new UsageError(`job kind must be a non-empty string of at most 128 characters (got ${JSON.stringify(job.kind)})`);
  }
  if (typeof job.key !== 'string' || job.key.length === 0) throw new UsageError('job key is missing');
  if (job.key.length > MAX_KEY_LENGTH) {
    throw new UsageError(`job key is ${job.key.length} characters long; at most ${MAX_KEY_LENGTH} are allowed`);
  }
  const task = tasks.get(job.kind);
  let payloadJson: string;
  try {
    payloadJson = JSON.stringify(job.payload === undefined ? {} : job.payload);
  } catch (error) {
    throw new UsageError(`payload of ${job.key} cannot be stored as JSON: ${(error as Error).message}`);
  }
  if (payloadJson === undefined) throw new UsageError(`payload of ${job.key} cannot be stored as JSON`);
  if (job.runAt !== undefined && (!(job.runAt instanceof Date) || Number.isNaN(job.runAt.getTime()))) {
    throw new UsageError(`runAt of ${job.key} is not a valid date`);
  }
  return {
    queue: job.queue === undefined ? (task?.queue ?? TASK_DEFAULTS.queue) : validateQueue(job.queue),
    kind: job.kind,
    key: job.key,
    payloadJson,
    maxAttempts: job.maxAttempts === undefined ? (task?.maxAttempts ?? TASK_DEFAULTS.maxAttempts) : validateMaxAttempts(job.maxAttempts),
    runAt: job.runAt ?? null,
    scheduleName: job.scheduleName ?? null,
    periodKey: job.periodKey ?? null,
    scheduledAt: job.scheduledAt ?? null,
  };
}

/** Below this many rows a batch goes straight to the INSERT, without reading existing keys first. */
const PRECHECK_MIN_ROWS = 10;

/** Rows per INSERT statement when enqueueing many. */
export const ENQUEUE_BATCH_SIZE = 1000;

/**
 * Streams rows into the queue in batches of `batchSize`: a batch of ten rows or more
 * first reads which of its keys exist (a cheap unique-index read, so repeating a fan-out
 * writes nothing) until a batch finds none,
 * then inserts the rest in one statement whose ON DUPLICATE KEY clause absorbs keys
 * that appeared meanwhile. Holds at most two batches in memory: one being written, one
 * being gathered. `afterBatch` runs after
 * each batch (a fan-out renews its tick lease there).
 */
export async function enqueueRows(
  exec: Executor,
  rows: AsyncIterable<NewJobRow> | Iterable<NewJobRow>,
  options: { batchSize?: number; afterBatch?: () => Promise<void>; parallel?: number } = {},
): Promise<{ inserted: number; existing: number }> {
  const batchSize = options.batchSize ?? ENQUEUE_BATCH_SIZE;
  let inserted = 0;
  let total = 0;
  let batch: NewJobRow[] = [];
  let lastBatchHadExisting = true;
  const write = async (rows: NewJobRow[]) => {
    // Read which keys exist only while that pays: for a handful of rows the read costs as
    // much as it saves, and once a batch found none (a fresh fan-out, or a resumed one past
    // where it stopped) the rest are new too; ON DUPLICATE KEY absorbs any straggler.
    const check = rows.length >= PRECHECK_MIN_ROWS && lastBatchHadExisting;
    const present = check ? await existingKeys(exec, rows.map((r) => r.key)) : new Set<string>();
    lastBatchHadExisting = present.size > 0;
    const fresh = present.size === 0 ? rows : rows.filter((r) => !present.has(r.key));
    const added = await insertJobsIfAbsent(exec, fresh); // not `inserted += await`: writes overlap
    inserted += added;
    total += rows.length;
    await options.afterBatch?.();
  };
  // Batches are written while the next is gathered, so producing rows (the caller's
  // generator) and the database's work overlap; at most `parallel` writes in flight,
  // each on its own pooled connection. Pass 1 (the default) inside a transaction.
  const parallel = Math.max(1, options.parallel ?? 1);
  const writing: Promise<void>[] = [];
  const flush = async () => {
    if (writing.length >= parallel) await writing.shift();
    const current = batch;
    // Only outside a caller's transaction (parallel > 1): a deadlock there rolls back the
    // caller's whole transaction, which a retry must not paper over.
    const pending = parallel > 1 ? withDeadlockRetry(() => write(current)) : write(current);
    pending.catch(() => undefined); // awaited (and rethrown) below
    writing.push(pending);
    batch = [];
  };
  for await (const row of rows) {
    batch.push(row);
    if (batch.length >= batchSize) await flush();
  }
  if (batch.length > 0) await flush();
  // Every write settles before we return, and the first failure is the one reported.
  const settled = await Promise.allSettled(writing);
  const failed = settled.find((r) => r.status === 'rejected');
  if (failed) throw (failed as PromiseRejectedResult).reason;
  return { inserted, existing: total - inserted };
}

/**
 * Two batch INSERTs in flight can deadlock on the unique key when a key repeats across
 * them; InnoDB then rolls one back whole, so running it again is safe.
 */
async function withDeadlockRetry<T>(write: () => Promise<T>, attempts = 3): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await write();
    } catch (error) {
      const code = (driverError(error) as { code?: string })?.code;
      if (attempt >= attempts || (code !== 'ER_LOCK_DEADLOCK' && code !== 'ER_LOCK_WAIT_TIMEOUT')) throw error;
    }
  }
}
