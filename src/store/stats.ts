/**
 * The only place that writes stats SQL: counts of jobs per queue and status, how long
 * the oldest runnable job has waited, and dead letters awaiting review. Read-only,
 * lock-free (plain reads at READ COMMITTED), one statement per section.
 */
import { sql, type SQL } from 'drizzle-orm';
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
  /** The queue's name; each status's count is a field of its own (ready, reserved, done, dead, cancelled). */
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
  /** Dead letters awaiting review, by kind (see DeadLetterStats). */
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
  /** The schedule's name, as its ledger rows carry it (a schedule no longer loaded included). */
  schedule: string;
  /** Its latest tick ledger row, by scheduled instant. */
  lastTick: {
    /** The tick's instant, ISO 8601 in UTC. */
    scheduledAt: string;
    /** The tick's period key (in the schedule's time zone). */
    periodKey: string;
    /** 'enqueued', 'skipped' or 'failed'. */
    outcome: TickOutcome;
    /** Handled more than 60 s after its instant, whatever its outcome. */
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
/** Claim-index entries one grouped count of queueStats reads at most (prefixCounts). */
const PREFIX_COUNT_ROWS = 100_000;
/** Grouped counts queueStats runs at most, each starting past the pair the one before stopped in (prefixCounts). */
const PREFIX_COUNT_SCANS_MAX = 4;

/** A status that a queue holds jobs in (heldStatuses). */
export interface HeldStatus {
  status: JobStatus;
  queue: string;
  /** Microseconds (database clock) since the smallest available_at of the queue's jobs in this status; negative when it is in the future. */
  waitedUs: number;
  /** Microseconds since the largest available_at of those jobs (negative: in the future). */
  latestUs: number;
}

/**
 * Every (status, queue) holding at least one job, by status (JOB_STATUSES order) then
 * queue, with how long ago its smallest and its largest available_at were. One statement: a loose scan of
 * the claim index `(status, queue, available_at, ...)`, one seek per pair inside the
 * server (3,300 queues: one round trip, ~35 ms, where a seek per statement took 3,300
 * round trips). A plain read, stale at once.
 */
export async function heldStatuses(exec: Executor): Promise<HeldStatus[]> {
  const listed = rows<{ status: JobStatus; queue: string; waited_us: number | string; latest_us: number | string }>(
    await exec.execute(sql`SELECT status, queue, TIMESTAMPDIFF(MICROSECOND, MIN(available_at), UTC_TIMESTAMP(6)) AS waited_us,
        TIMESTAMPDIFF(MICROSECOND, MAX(available_at), UTC_TIMESTAMP(6)) AS latest_us
      FROM cronq_jobs FORCE INDEX (cronq_jobs_claim)
      WHERE status IN (${sql.join(JOB_STATUSES.map((status) => sql`${status}`), sql`, `)})
      GROUP BY status, queue ORDER BY status, queue`),
  );
  return listed.map((r) => ({ status: r.status, queue: r.queue, waitedUs: Number(r.waited_us), latestUs: Number(r.latest_us) }));
}

/**
 * The queues of `held` most behind first: those whose oldest ready job has waited
 * longest (available_at passed), then those with jobs running (reserved), then the rest;
 * each group by name. Pure.
 */
export function queuesMostBehindFirst(held: readonly HeldStatus[]): string[] {
  const waited = new Map<string, number>();
  const running = new Set<string>();
  const names = new Set<string>();
  for (const h of held) {
    names.add(h.queue);
    if (h.status === 'ready' && h.waitedUs >= 0) waited.set(h.queue, h.waitedUs);
    if (h.status === 'reserved') running.add(h.queue);
  }
  const rank = (queue: string) => (waited.has(queue) ? 0 : running.has(queue) ? 1 : 2);
  return [...names].sort((a, b) => rank(a) - rank(b) || (waited.get(b) ?? 0) - (waited.get(a) ?? 0) || (a < b ? -1 : a > b ? 1 : 0));
}

/**
 * Per-queue counts by status and the oldest waiting age, every queue holding a job, by
 * name. Every statement is a bounded walk of the claim index `(status, queue,
 * available_at, ...)`, so the cost follows the number of queues, not of rows:
 * 1. each status's queues and their smallest available_at (heldStatuses, one statement);
 * 2. when there are more pairs than one counting statement takes, the first
 *    PREFIX_COUNT_ROWS entries of the index counted by (status, queue) in one statement:
 *    every pair wholly inside them is counted (3,300 queues of a few jobs each: all of
 *    them, where a count per pair took 66 statements and ~800 ms); when they end inside
 *    a pair, the next PREFIX_COUNT_ROWS entries past that pair likewise, and so on, up
 *    to PREFIX_COUNT_SCANS_MAX statements, while more pairs are left than one counting
 *    statement takes (one queue of 120,000 ready jobs sorting first took all 100,000
 *    entries, and its 5,000 small neighbours then 50 statements of step 3);
 * 3. each pair left (a pair a grouped count stopped in, those past the last one), its
 *    entries counted up to the status's cap (COUNT_CAPS), PAIRS_PER_STATEMENT pairs a
 *    statement.
 * The counts are read by separate statements, so they are not one snapshot: a job
 * moving between statuses meanwhile may be counted twice or not at all.
 */
export async function queueStats(exec: Executor): Promise<QueueStats[]> {
  const held = await heldStatuses(exec);
  // With pairs for one counting statement, that one alone: it reads at most the caps, where the
  // grouped count reads (and sorts) up to PREFIX_COUNT_ROWS entries (130-170 ms for 100,000 here).
  const counted = await countedQueues(exec, held, held.length > PAIRS_PER_STATEMENT ? await prefixCounts(exec, held.length) : undefined);
  return [...counted.values()].sort((a, b) => (a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : 0));
}

/** The queues of the overview: at most `limit` of them, most behind first (queuesMostBehindFirst), and how many queues hold jobs in all. */
export interface QueuesMostBehind {
  /** At most the `limit` asked for, the queue whose oldest ready job waited longest first. */
  queues: QueueStats[];
  /** Every queue holding a job, those not in `queues` included. */
  total: number;
}

/**
 * QueueStats of the `limit` queues most behind (queuesMostBehindFirst), in that order:
 * one listing statement and at most ceil(5 * limit / PAIRS_PER_STATEMENT) counting ones,
 * however many queues there are. As queueStats, not one snapshot.
 */
export async function queuesMostBehind(exec: Executor, limit: number): Promise<QueuesMostBehind> {
  const held = await heldStatuses(exec);
  const ranked = queuesMostBehindFirst(held);
  const shown = new Set(ranked.slice(0, limit));
  const counted = await countedQueues(exec, held.filter((h) => shown.has(h.queue)));
  return { queues: ranked.slice(0, limit).map((queue) => counted.get(queue)!), total: ranked.length };
}

const pairKey = (status: string, queue: string) => `${status}\u0000${queue}`;

/**
 * The (status, queue) pairs counted by grouped counts of the claim index (its order:
 * status, then queue), each with its number of jobs. Each statement reads at most
 * PREFIX_COUNT_ROWS entries from the index alone; the last pair it read is left out when
 * it reached the limit (the pair may go on past it), and the next statement starts past
 * that pair: a queue of a million jobs costs one statement here, not the count of every
 * queue after it. At most PREFIX_COUNT_SCANS_MAX statements, and none once `pairsHeld`
 * (heldStatuses) leaves at most PAIRS_PER_STATEMENT pairs uncounted: one countPairs
 * statement counts those for less.
 */
async function prefixCounts(exec: Executor, pairsHeld: number): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  let stoppedIn: { status: JobStatus; queue: string } | null = null;
  let stoppedInCount = 0;
  for (let scan = 0; scan < PREFIX_COUNT_SCANS_MAX; scan++) {
    const found: Array<{ status: JobStatus; queue: string; n: number | string }> = rows(
      await exec.execute(sql`SELECT status, queue, COUNT(*) AS n
        FROM (SELECT status, queue FROM cronq_jobs FORCE INDEX (cronq_jobs_claim)
          WHERE ${stoppedIn ? pastPair(stoppedIn) : sql`status IN ${JOB_STATUSES}`}
          ORDER BY status, queue LIMIT ${PREFIX_COUNT_ROWS}) first_entries
        GROUP BY status, queue ORDER BY status, queue`),
    );
    const read = found.reduce((sum, r) => sum + Number(r.n), 0);
    const last = read >= PREFIX_COUNT_ROWS ? found.pop() : undefined;
    for (const r of found) counts.set(pairKey(r.status, r.queue), Number(r.n));
    if (!last) break;
    stoppedIn = last;
    stoppedInCount += 1;
    if (pairsHeld - counts.size - stoppedInCount <= PAIRS_PER_STATEMENT) break;
  }
  return counts;
}

/**
 * The claim index's entries after every entry of the pair (status, queue), in its order: by
 * JOB_STATUSES order (the ENUM's index order; `status > 'x'` would compare the names as
 * text), then by queue. Ranges of the index, so the server seeks to the first.
 */
function pastPair({ status, queue }: { status: JobStatus; queue: string }): SQL {
  const later = JOB_STATUSES.slice(JOB_STATUSES.indexOf(status) + 1);
  const sameStatus = sql`(status = ${status} AND queue > ${queue})`;
  return later.length === 0 ? sameStatus : sql`(${sameStatus} OR status IN ${later})`;
}

/**
 * QueueStats of every queue in `held`: a pair's count from `known` (prefixCounts) when
 * there, else counted up to its cap, PAIRS_PER_STATEMENT pairs a statement (countPairs).
 */
async function countedQueues(exec: Executor, held: readonly HeldStatus[], known = new Map<string, number>()): Promise<Map<string, QueueStats>> {
  const counts = new Map(known);
  const unknown = held.filter((h) => !counts.has(pairKey(h.status, h.queue)));
  for (let from = 0; from < unknown.length; from += PAIRS_PER_STATEMENT) {
    const chunk = unknown.slice(from, from + PAIRS_PER_STATEMENT);
    const found = await countPairs(exec, chunk);
    for (const [i, { status, queue }] of chunk.entries()) counts.set(pairKey(status, queue), Number(found[`n${i}`]));
  }
  const byQueue = new Map<string, QueueStats>();
  // Pairs come in JOB_STATUSES order, so each queue's `capped` does too.
  for (const { status, queue, waitedUs } of held) {
    let q = byQueue.get(queue);
    if (!q) {
      q = { queue, ...Object.fromEntries(JOB_STATUSES.map((s) => [s, 0])), capped: [], oldestReadyAgeSeconds: null } as unknown as QueueStats;
      byQueue.set(queue, q);
    }
    const n = counts.get(pairKey(status, queue))!;
    q[status] = Math.min(n, COUNT_CAPS[status]);
    if (n > COUNT_CAPS[status]) q.capped.push(status);
    // The smallest available_at in the future: nothing is waiting yet.
    if (status === 'ready' && waitedUs >= 0) q.oldestReadyAgeSeconds = Math.round(waitedUs / 1000) / 1000;
  }
  return byQueue;
}

/** One statement: for pair i, `n{i}` its jobs counted up to the status's cap. */
async function countPairs(exec: Executor, pairs: ReadonlyArray<{ status: JobStatus; queue: string }>): Promise<Record<string, number | string | null>> {
  const columns = sql.join(
    // One row past the cap: a count of exactly the cap is still exact.
    pairs.map(({ status, queue }, i) => sql`(SELECT COUNT(*) FROM (SELECT 1 FROM cronq_jobs WHERE status = ${status} AND queue = ${queue} LIMIT ${COUNT_CAPS[status] + 1}) capped) AS ${sql.identifier(`n${i}`)}`),
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
