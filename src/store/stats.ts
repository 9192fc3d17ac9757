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

/**
 * Counting stops at these numbers, so stats cost the same on a table of any size: a
 * status with more rows than its cap is reported as the cap and listed in `capped`
 * ("at least"); a count of exactly the cap is exact. Live work (ready, reserved) is
 * counted further than history (done, dead, cancelled), which only grows until prune
 * removes it.
 */
export const COUNT_CAPS: Readonly<Record<JobStatus, number>> = { ready: 100_000, reserved: 100_000, done: 10_000, dead: 10_000, cancelled: 10_000 };
/** Dead letters awaiting review are counted up to this many (see `DeadLetterStats.capped`). */
export const DEAD_LETTER_COUNT_CAP = 100_000;

/** One queue's jobs by status. */
export interface QueueStats extends Record<JobStatus, number> {
  queue: string;
  /**
   * The statuses with more rows than their cap (100,000 ready or reserved, 10,000 done,
   * dead or cancelled): the number shown is the cap, a lower bound. Empty when every
   * count is exact.
   */
  capped: JobStatus[];
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
  /** Jobs whose status is none of cronq's (see UnknownStatusStats); collectStats always sets it. */
  unknownStatus?: UnknownStatusStats;
}

/**
 * Job rows whose `status` is the ENUM's error value '' (index 0): what the server stores
 * for a value outside the list (`SET status = 'retry'`) when strict mode is off. No
 * claim, cancel, recovery or prune ever selects them, so they sit unseen; stats count them.
 */
export interface UnknownStatusStats {
  /** How many, counted up to UNKNOWN_STATUS_COUNT_CAP. */
  jobs: number;
  /** True when there are more than the cap: `jobs` is the cap, a lower bound. */
  capped: boolean;
  /** The smallest few of their ids, for a look from SQL. */
  exampleIds: number[];
}

/** Jobs with an unknown status are counted up to this many. */
export const UNKNOWN_STATUS_COUNT_CAP = 10_000;
/** How many of their ids stats name. */
const UNKNOWN_STATUS_EXAMPLES = 5;

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
  /** Dead letters with `reviewed_at IS NULL`, counted up to 100,000. */
  awaitingReview: number;
  /** True when there are more than 100,000: `awaitingReview` is the cap, a lower bound. */
  capped: boolean;
}

/** (status, queue) pairs counted per statement at most. */
const PAIRS_PER_STATEMENT = 100;

/**
 * The queues that hold at least one job of each of `statuses`, by name: a skip scan of
 * the claim index, one seek per status and queue, every status in one statement per
 * step (so as many round trips as the longest list, plus one).
 */
export async function queuesByStatus(exec: Executor, statuses: readonly JobStatus[]): Promise<Map<JobStatus, string[]>> {
  const found = new Map<JobStatus, string[]>(statuses.map((status) => [status, []]));
  let after = new Map<JobStatus, string | null>(statuses.map((status) => [status, null]));
  while (after.size > 0) {
    const asked = [...after.keys()];
    const next = sql.join(
      asked.map((status) => {
        const from = after.get(status);
        const past = from === null || from === undefined ? sql`` : sql` AND queue > ${from}`;
        return sql`(SELECT queue FROM cronq_jobs WHERE status = ${status}${past} ORDER BY queue LIMIT 1) AS ${sql.identifier(status)}`;
      }),
      sql`, `,
    );
    const [row] = rows<Record<JobStatus, string | null>>(await exec.execute(sql`SELECT ${next}`));
    const still = new Map<JobStatus, string | null>();
    for (const status of asked) {
      const queue = row[status];
      if (queue === null || queue === undefined) continue;
      found.get(status)!.push(queue);
      still.set(status, queue);
    }
    after = still;
  }
  return found;
}

/**
 * Per-queue counts by status and the oldest waiting age. Every statement is a bounded
 * walk of the claim index `(status, queue, available_at, ...)`, so the cost follows the
 * number of queues, not of rows:
 * 1. each status's queues (queuesByStatus);
 * 2. per (status, queue), its entries counted up to the status's cap (COUNT_CAPS), and
 *    per ready queue its smallest available_at (one seek).
 * The counts are read by separate statements, so they are not one snapshot: a job
 * moving between statuses meanwhile may be counted twice or not at all.
 */
export async function queueStats(exec: Executor): Promise<QueueStats[]> {
  const byStatus = await queuesByStatus(exec, JOB_STATUSES);
  type Pair = { status: JobStatus; queue: string };
  const pairs: Pair[] = [...byStatus].flatMap(([status, queues]) => queues.map((queue) => ({ status, queue })));
  const byQueue = new Map<string, QueueStats>();
  // Pairs come in JOB_STATUSES order, so each queue's `capped` does too.
  for (let from = 0; from < pairs.length; from += PAIRS_PER_STATEMENT) {
    const chunk = pairs.slice(from, from + PAIRS_PER_STATEMENT);
    const found = await countPairs(exec, chunk);
    for (const [i, { status, queue }] of chunk.entries()) {
      let q = byQueue.get(queue);
      if (!q) {
        q = { queue, ...Object.fromEntries(JOB_STATUSES.map((s) => [s, 0])), capped: [], oldestReadyAgeSeconds: null } as unknown as QueueStats;
        byQueue.set(queue, q);
      }
      const n = Number(found[`n${i}`]);
      q[status] = Math.min(n, COUNT_CAPS[status]);
      if (n > COUNT_CAPS[status]) q.capped.push(status);
      const waitedUs = found[`w${i}`];
      // The smallest available_at in the future: nothing is waiting yet.
      if (status === 'ready' && waitedUs !== null && waitedUs !== undefined && Number(waitedUs) >= 0) {
        q.oldestReadyAgeSeconds = Math.round(Number(waitedUs) / 1000) / 1000;
      }
    }
  }
  return [...byQueue.values()].sort((a, b) => (a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : 0));
}

/**
 * One statement: for pair i, `n{i}` its jobs counted up to the status's cap and, for a
 * ready pair, `w{i}` microseconds since its smallest available_at (negative: in the future).
 */
async function countPairs(exec: Executor, pairs: Array<{ status: JobStatus; queue: string }>): Promise<Record<string, number | string | null>> {
  const columns = sql.join(
    pairs.map(({ status, queue }, i) => {
      // One row past the cap: a count of exactly the cap is still exact.
      const count = sql`(SELECT COUNT(*) FROM (SELECT 1 FROM cronq_jobs WHERE status = ${status} AND queue = ${queue} LIMIT ${COUNT_CAPS[status] + 1}) capped) AS ${sql.identifier(`n${i}`)}`;
      if (status !== 'ready') return count;
      return sql`${count}, (SELECT TIMESTAMPDIFF(MICROSECOND, MIN(available_at), UTC_TIMESTAMP(6)) FROM cronq_jobs
        WHERE status = 'ready' AND queue = ${queue}) AS ${sql.identifier(`w${i}`)}`;
    }),
    sql`, `,
  );
  return rows<Record<string, number | string | null>>(await exec.execute(sql`SELECT ${columns}`))[0];
}

/** Dead letters awaiting review, counted on the `cronq_dead_letters_review` index up to DEAD_LETTER_COUNT_CAP. */
export async function deadLetterStats(exec: Executor): Promise<DeadLetterStats> {
  const result = await exec.execute(sql`SELECT COUNT(*) AS n
    FROM (SELECT 1 FROM cronq_dead_letters WHERE reviewed_at IS NULL LIMIT ${DEAD_LETTER_COUNT_CAP + 1}) capped`);
  const n = Number(rows<{ n: number }>(result)[0].n);
  return { awaitingReview: Math.min(n, DEAD_LETTER_COUNT_CAP), capped: n > DEAD_LETTER_COUNT_CAP };
}

/**
 * Jobs whose status is the ENUM's error value, on the claim index's `status = ''` prefix
 * up to UNKNOWN_STATUS_COUNT_CAP (none: one index probe).
 */
export async function unknownStatusStats(exec: Executor): Promise<UnknownStatusStats> {
  const found = rows<{ id: number }>(
    await exec.execute(sql`SELECT id FROM cronq_jobs WHERE status = '' ORDER BY id LIMIT ${UNKNOWN_STATUS_COUNT_CAP + 1}`),
  );
  return {
    jobs: Math.min(found.length, UNKNOWN_STATUS_COUNT_CAP),
    capped: found.length > UNKNOWN_STATUS_COUNT_CAP,
    exampleIds: found.slice(0, UNKNOWN_STATUS_EXAMPLES).map((r) => Number(r.id)),
  };
}

/**
 * Each schedule's latest ledger row and the lateness of its latest enqueued tick. Both
 * read the unique (schedule_name, scheduled_at) index: MAX(scheduled_at) per schedule,
 * and per schedule a backward walk to its newest enqueued tick.
 */
export async function scheduleStats(exec: Executor): Promise<ScheduleStats[]> {
  const latest = rows<{ schedule_name: string; scheduled_at: string; period_key: string; outcome: TickOutcome; caught_up: number; note: string | null; finished_at: string | null }>(
    await exec.execute(sql`SELECT t.schedule_name, t.scheduled_at, t.period_key, t.outcome, t.caught_up, t.note, t.finished_at
      FROM cronq_schedule_ticks t
      JOIN (SELECT schedule_name, MAX(scheduled_at) AS at FROM cronq_schedule_ticks GROUP BY schedule_name) m
        ON m.schedule_name = t.schedule_name AND m.at = t.scheduled_at
      ORDER BY t.schedule_name`),
  );
  // Per schedule, its ledger walked newest first until an enqueued tick (usually the
  // first row): a GROUP BY over outcome would read every ledger row instead.
  const lateness = rows<{ schedule_name: string; lateness_us: number | string | null }>(
    await exec.execute(sql`SELECT m.schedule_name,
        (SELECT TIMESTAMPDIFF(MICROSECOND, e.scheduled_at, e.started_at) FROM cronq_schedule_ticks e
          WHERE e.schedule_name = m.schedule_name AND e.outcome = 'enqueued'
          ORDER BY e.scheduled_at DESC LIMIT 1) AS lateness_us
      FROM (SELECT DISTINCT schedule_name FROM cronq_schedule_ticks) m`),
  );
  const latenessBy = new Map(
    lateness.filter((r) => r.lateness_us !== null).map((r) => [r.schedule_name, Math.round(Number(r.lateness_us) / 1000)]),
  );
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
 * Sections are separate statements, each consistent in itself, one after another on one
 * connection at a time (a scrape leaves a daemon's pool to its workers); they may be a
 * few milliseconds apart. Works on the pool-backed db or inside
 * a transaction.
 */
export async function collectStats(db: Executor): Promise<Stats> {
  const queues = await queueStats(db);
  const deadLetters = await deadLetterStats(db);
  const schedules = await scheduleStats(db);
  const pauses = await listPauses(db);
  const unknownStatus = await unknownStatusStats(db);
  return { queues, deadLetters, schedules, pauses, unknownStatus };
}
