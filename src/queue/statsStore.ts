/**
 * The only place that writes stats SQL: counts of jobs per queue and status, how long
 * the oldest runnable job has waited, and dead letters awaiting review. Read-only,
 * lock-free (plain reads at READ COMMITTED), one statement per section.
 */
import { sql } from 'drizzle-orm';
import type { Executor } from '../db/client.ts';
import { JOB_STATUSES, type JobStatus } from '../db/schema.ts';

/** One queue's jobs by status, as of one statement. */
export interface QueueStats extends Record<JobStatus, number> {
  queue: string;
  /**
   * Seconds (millisecond precision, by the database clock) since the oldest ready job
   * with `available_at <= now` became available: how long work has been waiting.
   * Jobs scheduled for the future are not waiting and do not count. Null when none.
   */
  oldestReadyAgeSeconds: number | null;
}

/**
 * Everything `cronq stats` reports. Each key is one section, collected by its own
 * function; a new section (such as `schedules: ScheduleStats[]`) is added as a new
 * key, so consumers of the JSON must ignore keys they do not know.
 */
export interface Stats {
  /** Every queue that has at least one job row, by name. */
  queues: QueueStats[];
  deadLetters: DeadLetterStats;
}

/** Dead letters as a whole. */
export interface DeadLetterStats {
  /** Dead letters with `reviewed_at IS NULL`. */
  awaitingReview: number;
}

const rows = <T>(result: unknown): T[] => (result as [T[]])[0];

/**
 * Per-queue counts by status and the oldest waiting age, in one statement that reads
 * only the covering index `cronq_jobs_claim_queue (queue, status, available_at, id)`
 * (GROUP BY queue, status in index order: no temporary table, no sort, no row lookups).
 */
export async function queueStats(exec: Executor): Promise<QueueStats[]> {
  const result = await exec.execute(sql`SELECT queue, status, COUNT(*) AS n,
      TIMESTAMPDIFF(MICROSECOND, MIN(CASE WHEN available_at <= UTC_TIMESTAMP(6) THEN available_at END), UTC_TIMESTAMP(6)) AS oldest_us
    FROM cronq_jobs
    GROUP BY queue, status`);
  const byQueue = new Map<string, QueueStats>();
  for (const r of rows<{ queue: string; status: JobStatus; n: number; oldest_us: number | string | null }>(result)) {
    let q = byQueue.get(r.queue);
    if (!q) {
      q = { queue: r.queue, ...Object.fromEntries(JOB_STATUSES.map((s) => [s, 0])), oldestReadyAgeSeconds: null } as QueueStats;
      byQueue.set(r.queue, q);
    }
    q[r.status] = Number(r.n);
    if (r.status === 'ready' && r.oldest_us !== null) q.oldestReadyAgeSeconds = Math.round(Number(r.oldest_us) / 1000) / 1000;
  }
  return [...byQueue.values()].sort((a, b) => (a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : 0));
}

/** Dead letters awaiting review, counted on the `cronq_dead_letters_review` index. */
export async function deadLetterStats(exec: Executor): Promise<DeadLetterStats> {
  const result = await exec.execute(sql`SELECT COUNT(*) AS n FROM cronq_dead_letters WHERE reviewed_at IS NULL`);
  return { awaitingReview: Number(rows<{ n: number }>(result)[0].n) };
}

/**
 * Collects every stats section (for `cronq stats`, metrics exporters, health pages).
 * Sections are separate statements, each consistent in itself; they may be a few
 * milliseconds apart. Works on the pool-backed db or inside a transaction.
 */
export async function collectStats(db: Executor): Promise<Stats> {
  const queues = await queueStats(db);
  const deadLetters = await deadLetterStats(db);
  return { queues, deadLetters };
}
