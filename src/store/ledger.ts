/**
 * All SQL on the tick ledger (`cronq_schedule_ticks`). Times are the database clock's.
 *
 * Concurrency contract: the unique key (schedule_name, scheduled_at) decides which
 * daemon owns a tick's fan-out — the one whose INSERT created the row. Ownership is a
 * lease (`fanout_until`), renewed while fanning out; once it expires with the tick
 * unfinished, any daemon may take it over, and the previous owner can no longer
 * finish it (`claimed_by` fences `finishTickIfOwned`).
 */
import { sql, type SQL } from 'drizzle-orm';
import type { Executor } from '../db/client.ts';
import type { TickOutcome } from '../db/schema.ts';
import { sliceChars } from '../runtime/errorText.ts';
import { header, interval, NOW, parseDbTime, rows, toDbTime } from './sql.ts';

/** One row of the tick ledger (cronq_schedule_ticks): what the scheduler did with one fire time of a schedule. */
export interface TickRow {
  /** The ledger row's id. */
  id: number;
  /** The schedule it is a tick of; with scheduledAt, unique: one row per fire time. */
  scheduleName: string;
  /** The fire time (UTC). */
  scheduledAt: Date;
  /** Its period key, in the schedule's time zone. */
  periodKey: string;
  /** 'enqueued' (its jobs were written, all or some already there), 'skipped' (see note) or 'failed' (it kept failing). */
  outcome: TickOutcome;
  /** Jobs this tick inserted. */
  jobsEnqueued: number;
  /** Jobs whose key was there already, held by this schedule's job of this period (keys held by other jobs are not counted: see note). */
  jobsExisting: number;
  /** Handled more than 60 s after its instant, whatever its outcome. */
  caughtUp: boolean;
  /** Why it was skipped or failed, entities refused, keys held by other jobs, a cron edit; null: nothing to say. */
  note: string | null;
  /** The daemon (its lockedBy) that owns, or owned, its fan-out; only it may finish the tick while its lease holds. */
  claimedBy: string | null;
  /** When the row was written: the tick's handling began (database clock). */
  startedAt: Date;
  /** When the tick was finished; null while its fan-out runs, or was abandoned and awaits takeover. */
  finishedAt: Date | null;
  /** The cron the tick was computed from (as the writer gave it), or null: written before migration 0009 or by an older daemon. */
  cron: string | null;
  /** The time zone the tick was computed in, or null as `cron`. */
  timezone: string | null;
}

/** What a row's tick was computed from, as its writer states it (TickRow.cron, TickRow.timezone). */
export interface TickSource {
  cron: string;
  timezone: string;
}

type RawTick = {
  id: number;
  schedule_name: string;
  scheduled_at: string;
  period_key: string;
  outcome: TickOutcome;
  jobs_enqueued: number;
  jobs_existing: number;
  caught_up: number;
  note: string | null;
  claimed_by: string | null;
  started_at: string;
  finished_at: string | null;
  cron: string | null;
  timezone: string | null;
};

function toTick(r: RawTick): TickRow {
  return {
    id: Number(r.id),
    scheduleName: r.schedule_name,
    scheduledAt: parseDbTime(r.scheduled_at)!,
    periodKey: r.period_key,
    outcome: r.outcome,
    jobsEnqueued: Number(r.jobs_enqueued),
    jobsExisting: Number(r.jobs_existing),
    caughtUp: Boolean(r.caught_up),
    note: r.note,
    claimedBy: r.claimed_by,
    startedAt: parseDbTime(r.started_at)!,
    finishedAt: parseDbTime(r.finished_at),
    cron: r.cron,
    timezone: r.timezone,
  };
}

const COLUMNS = sql.raw(
  'id, schedule_name, scheduled_at, period_key, outcome, jobs_enqueued, jobs_existing, caught_up, note, claimed_by, started_at, finished_at, cron, timezone',
);

/** The schedule's latest ledger row by scheduled_at (enqueued or skipped), or null. */
export async function latestTick(exec: Executor, scheduleName: string): Promise<TickRow | null> {
  const result = await exec.execute(
    sql`SELECT ${COLUMNS} FROM cronq_schedule_ticks WHERE schedule_name = ${scheduleName} ORDER BY scheduled_at DESC LIMIT 1`,
  );
  const [row] = rows<RawTick>(result);
  return row ? toTick(row) : null;
}

/** The latest `count` ledger rows of a schedule, newest first. */
export async function recentTicks(exec: Executor, scheduleName: string, count: number): Promise<TickRow[]> {
  const result = await exec.execute(
    sql`SELECT ${COLUMNS} FROM cronq_schedule_ticks WHERE schedule_name = ${scheduleName} ORDER BY scheduled_at DESC LIMIT ${count}`,
  );
  return rows<RawTick>(result).map(toTick);
}

/** The latest `count` ledger rows of a schedule fired before `before`, newest first: a page of the ledger (unique index). */
export async function ticksBefore(exec: Executor, scheduleName: string, before: Date, count: number): Promise<TickRow[]> {
  const result = await exec.execute(
    sql`SELECT ${COLUMNS} FROM cronq_schedule_ticks WHERE schedule_name = ${scheduleName} AND scheduled_at < ${toDbTime(before)}
      ORDER BY scheduled_at DESC LIMIT ${count}`,
  );
  return rows<RawTick>(result).map(toTick);
}

export interface TickClaim {
  scheduleName: string;
  scheduledAt: Date;
  periodKey: string;
  caughtUp: boolean;
  note: string | null;
  /** Unique per scheduler instance: the fence for finishing. */
  claimedBy: string;
  leaseMs: number;
  /** Recorded on the row it inserts; a row taken over keeps its own. */
  source: TickSource;
}

/**
 * Claims a tick's fan-out: inserts its 'enqueued' row (its note cut to NOTE_MAX), or takes over an unfinished
 * one whose fan-out lease expired (or that this same scheduler instance left behind).
 * Returns the row id when this caller now owns the fan-out, null when another daemon
 * did it or is doing it.
 */
export async function claimTickFanout(exec: Executor, claim: TickClaim): Promise<number | null> {
  const at = toDbTime(claim.scheduledAt);
  const inserted = header(
    await exec.execute(sql`INSERT INTO cronq_schedule_ticks
        (schedule_name, scheduled_at, period_key, outcome, caught_up, note, claimed_by, fanout_until, started_at, cron, timezone)
      VALUES (${claim.scheduleName}, ${at}, ${claim.periodKey}, 'enqueued', ${claim.caughtUp}, ${claim.note === null ? null : boundedNote(claim.note)},
        ${claim.claimedBy}, ${NOW} + ${interval(claim.leaseMs)}, ${NOW}, ${claim.source.cron}, ${claim.source.timezone})
      ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)`),
  );
  if (inserted.affectedRows === 1) return Number(inserted.insertId);
  const taken = header(
    await exec.execute(sql`UPDATE cronq_schedule_ticks
      SET claimed_by = ${claim.claimedBy}, fanout_until = ${NOW} + ${interval(claim.leaseMs)}
      WHERE id = ${inserted.insertId} AND outcome = 'enqueued' AND finished_at IS NULL
        AND (fanout_until < ${NOW} OR claimed_by = ${claim.claimedBy})`),
  );
  return taken.affectedRows === 1 ? Number(inserted.insertId) : null;
}

/** Extends the fan-out lease; false when another daemon has taken the tick over. */
export async function renewTickIfOwned(exec: Executor, id: number, claimedBy: string, leaseMs: number): Promise<boolean> {
  const result = await exec.execute(sql`UPDATE cronq_schedule_ticks
    SET fanout_until = ${NOW} + ${interval(leaseMs)}
    WHERE id = ${id} AND claimed_by = ${claimedBy} AND finished_at IS NULL`);
  return header(result).affectedRows === 1;
}

/**
 * Marks the fan-out finished with its counts and, when given, a note (entities refused);
 * false when the tick was taken over meanwhile.
 */
export function finishTickIfOwned(
  exec: Executor,
  id: number,
  claimedBy: string,
  counts: { inserted: number; existing: number; note?: string | null },
): Promise<boolean> {
  const note = counts.note ? sql`, note = ${boundedNote(counts.note)}` : sql``;
  return closeTickIfOwned(exec, id, claimedBy, sql`jobs_enqueued = ${counts.inserted}, jobs_existing = ${counts.existing}${note}`);
}

/**
 * Records a tick whose fan-out kept failing as finished with outcome 'failed', the jobs
 * enqueued before it gave up counted and `note` saying why. It is never resumed: the
 * schedule moves on to later ticks. False when the tick was taken over meanwhile.
 */
export function failTickIfOwned(
  exec: Executor,
  id: number,
  claimedBy: string,
  result: { inserted: number; existing: number; note: string },
): Promise<boolean> {
  return closeTickIfOwned(
    exec,
    id,
    claimedBy,
    sql`outcome = 'failed', jobs_enqueued = ${result.inserted}, jobs_existing = ${result.existing}, note = ${boundedNote(result.note)}`,
  );
}

/**
 * Records a claimed tick as deliberately not enqueued (outcome 'skipped', finished, with
 * `note`), e.g. because its previous run is still in progress. False when the tick was
 * taken over meanwhile.
 */
export function skipTickIfOwned(exec: Executor, id: number, claimedBy: string, note: string): Promise<boolean> {
  return closeTickIfOwned(exec, id, claimedBy, sql`outcome = 'skipped', note = ${boundedNote(note)}`);
}

/** Finishes an unfinished tick this claimer still owns, setting `set` too; false when it was taken over. */
async function closeTickIfOwned(exec: Executor, id: number, claimedBy: string, set: SQL): Promise<boolean> {
  const result = await exec.execute(sql`UPDATE cronq_schedule_ticks
    SET finished_at = ${NOW}, fanout_until = NULL, ${set}
    WHERE id = ${id} AND claimed_by = ${claimedBy} AND finished_at IS NULL`);
  return header(result).affectedRows === 1;
}

/**
 * Gives up a fan-out cut short on purpose (shutdown): the row stays unfinished and its
 * lease ends now, so the next scheduler of any daemon resumes it at once instead of
 * after the lease. False when the tick was no longer ours.
 */
export async function releaseTickIfOwned(exec: Executor, id: number, claimedBy: string): Promise<boolean> {
  const result = await exec.execute(sql`UPDATE cronq_schedule_ticks
    SET fanout_until = ${NOW} - INTERVAL 1 MICROSECOND
    WHERE id = ${id} AND claimed_by = ${claimedBy} AND finished_at IS NULL`);
  return header(result).affectedRows === 1;
}

/** The ledger's note column holds 255 characters. */
export const NOTE_MAX = 255;

function boundedNote(note: string): string {
  return note.length <= NOTE_MAX ? note : `${sliceChars(note, NOTE_MAX - 1)}…`;
}

/**
 * Records `source` on row `id` if it records none (NULL: written before migration 0009 or
 * by an older daemon), as the daemon that reads it as its schedule's latest row computes
 * that schedule's ticks: from then on an edit of the cron or zone is told from it. A row
 * that records a source keeps it, whoever asks (one UPDATE; concurrent callers: the first
 * one's source stays). Returns whether the row was changed.
 */
export async function adoptTickSourceIfUnknown(exec: Executor, id: number, source: TickSource): Promise<boolean> {
  const result = await exec.execute(sql`UPDATE cronq_schedule_ticks SET cron = ${source.cron}, timezone = ${source.timezone}
    WHERE id = ${id} AND (cron IS NULL OR timezone IS NULL)`);
  return header(result).affectedRows > 0;
}

export interface SkippedTick {
  scheduledAt: Date;
  periodKey: string;
  /** Handled late (more than the late tolerance after scheduledAt), as TickClaim.caughtUp: column caught_up. */
  caughtUp: boolean;
  note: string;
}

/**
 * Records ticks deliberately not enqueued, each note cut to NOTE_MAX, as computed from
 * `source`. A tick that already has a row (another daemon enqueued or skipped it) keeps
 * that row. Returns how many rows were new.
 */
export async function recordSkippedTicks(exec: Executor, scheduleName: string, source: TickSource, ticks: SkippedTick[]): Promise<number> {
  let inserted = 0;
  for (let i = 0; i < ticks.length; i += 1000) {
    const values = ticks
      .slice(i, i + 1000)
      .map(
        (t) =>
          sql`(${scheduleName}, ${toDbTime(t.scheduledAt)}, ${t.periodKey}, 'skipped', ${t.caughtUp}, ${boundedNote(t.note)}, ${NOW}, ${NOW}, ${source.cron}, ${source.timezone})`,
      );
    const result = await exec.execute(sql`INSERT INTO cronq_schedule_ticks
        (schedule_name, scheduled_at, period_key, outcome, caught_up, note, started_at, finished_at, cron, timezone)
      VALUES ${sql.join(values, sql`, `)}
      ON DUPLICATE KEY UPDATE id = id`);
    inserted += header(result).affectedRows;
  }
  return inserted;
}

/**
 * Unfinished 'enqueued' ticks of a schedule that a scheduler may take over: their
 * fan-out lease expired, or `claimedBy` (this scheduler) left them behind. Oldest first.
 */
export async function resumableTicks(exec: Executor, scheduleName: string, claimedBy: string): Promise<TickRow[]> {
  const result = await exec.execute(sql`SELECT ${COLUMNS} FROM cronq_schedule_ticks
    WHERE schedule_name = ${scheduleName} AND finished_at IS NULL AND outcome = 'enqueued'
      AND (fanout_until < ${NOW} OR claimed_by = ${claimedBy})
    ORDER BY scheduled_at LIMIT 100`);
  return rows<RawTick>(result).map(toTick);
}
