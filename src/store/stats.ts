/**
 * The only place that writes stats SQL: counts of jobs per queue and status, how long
 * the oldest runnable job has waited, and dead letters awaiting review. Read-only,
 * lock-free (plain reads at READ COMMITTED), one statement per section.
 */
import { sql } from 'drizzle-orm';
import type { Executor } from '../db/client.ts';
import { JOB_STATUSES, type JobStatus, type TickOutcome } from '../db/schema.ts';
import { listPauses, type Pause } from './pauses.ts';
import { rows } from './sql.ts';

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
  /** Every schedule with at least one tick ledger row, by name. */
  schedules: ScheduleStats[];
  /** Every pause in force (schedules, then queues, by name): who paused what, when, why. */
  pauses: Pause[];
}

/** A schedule's latest tick ledger row. */
export interface ScheduleStats {
  schedule: string;
  lastTick: {
    scheduledAt: string;
    periodKey: string;
    outcome: TickOutcome;
    caughtUp: boolean;
    /** Why it was skipped or failed, what was refused, or that it was caught up (null: nothing to say). */
    note: string | null;
    /** Null while the fan-out is still running (or was abandoned and awaits takeover). */
    finishedAt: string | null;
  };
  /**
   * Milliseconds between the latest enqueued tick's instant and the moment a daemon
   * started its fan-out: how late the scheduler was. Null if no tick was enqueued yet.
   */
  latenessMs: number | null;
}

/** Dead letters as a whole. */
export interface DeadLetterStats {
  /** Dead letters with `reviewed_at IS NULL`. */
  awaitingReview: number;
}

/**
 * Per-queue counts by status and the oldest waiting age, in one statement that reads
 * only the covering index `cronq_jobs_claim (status, queue, available_at, id)`
 * (GROUP BY status, queue in index order: no temporary table, no sort, no row lookups).
 */
export async function queueStats(exec: Executor): Promise<QueueStats[]> {
  const result = await exec.execute(sql`SELECT queue, status, COUNT(*) AS n,
      TIMESTAMPDIFF(MICROSECOND, MIN(CASE WHEN available_at <= UTC_TIMESTAMP(6) THEN available_at END), UTC_TIMESTAMP(6)) AS oldest_us
    FROM cronq_jobs
    GROUP BY status, queue`);
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
 * Each schedule's latest ledger row and the lateness of its latest enqueued tick. Both
 * lookups are MAX(scheduled_at) per schedule on the unique (schedule_name, scheduled_at)
 * index.
 */
export async function scheduleStats(exec: Executor): Promise<ScheduleStats[]> {
  const latest = rows<{ schedule_name: string; scheduled_at: string; period_key: string; outcome: TickOutcome; caught_up: number; note: string | null; finished_at: string | null }>(
    await exec.execute(sql`SELECT t.schedule_name, t.scheduled_at, t.period_key, t.outcome, t.caught_up, t.note, t.finished_at
      FROM cronq_schedule_ticks t
      JOIN (SELECT schedule_name, MAX(scheduled_at) AS at FROM cronq_schedule_ticks GROUP BY schedule_name) m
        ON m.schedule_name = t.schedule_name AND m.at = t.scheduled_at
      ORDER BY t.schedule_name`),
  );
  const lateness = rows<{ schedule_name: string; lateness_us: number | string }>(
    await exec.execute(sql`SELECT t.schedule_name, TIMESTAMPDIFF(MICROSECOND, t.scheduled_at, t.started_at) AS lateness_us
      FROM cronq_schedule_ticks t
      JOIN (SELECT schedule_name, MAX(scheduled_at) AS at FROM cronq_schedule_ticks WHERE outcome = 'enqueued' GROUP BY schedule_name) m
        ON m.schedule_name = t.schedule_name AND m.at = t.scheduled_at`),
  );
  const latenessBy = new Map(lateness.map((r) => [r.schedule_name, Math.round(Number(r.lateness_us) / 1000)]));
  const iso = (v: string) => `${v.replace(' ', 'T').slice(0, 23)}Z`;
  return latest.map((r) => ({
    schedule: r.schedule_name,
    lastTick: {
      scheduledAt: iso(r.scheduled_at),
      periodKey: r.period_key,
      outcome: r.outcome,
      caughtUp: Boolean(r.caught_up),
      note: r.note,
      finishedAt: r.finished_at === null ? null : iso(r.finished_at),
    },
    latenessMs: latenessBy.get(r.schedule_name) ?? null,
  }));
}

/**
 * Collects every stats section (for `cronq stats`, metrics exporters, health pages).
 * Sections are separate statements, each consistent in itself; they may be a few
 * milliseconds apart. Works on the pool-backed db or inside a transaction.
 */
export async function collectStats(db: Executor): Promise<Stats> {
  const queues = await queueStats(db);
  const deadLetters = await deadLetterStats(db);
  const schedules = await scheduleStats(db);
  const pauses = await listPauses(db);
  return { queues, deadLetters, schedules, pauses };
}
