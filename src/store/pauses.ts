/**
 * All SQL on operator pauses (`cronq_pauses`): a row is a pause, resuming deletes it.
 *
 * Concurrency contract: the primary key (target, name) makes a pause exist at most once;
 * of two operators pausing the same thing at once one inserts and the other gets
 * 'already_paused' with the winner's row. A resume deletes the row it read under its
 * lock, so of two resumes one gets the pause and the other 'not_paused'. Daemons only
 * read the table (plain reads, no locks): a pause or resume takes effect at each
 * daemon's next read, which the scheduler does once per pass and the claim path at
 * least once per poll.
 */
import { sql } from 'drizzle-orm';
import type { Db, Executor } from '../db/client.ts';
import type { PauseTarget } from '../db/schema.ts';
import { header, NOW, parseDbTime, rows } from './sql.ts';

/** One pause: what is paused, by whom, when (database clock) and why. */
export interface Pause {
  /**
   * '' for a row whose target is none of cronq's (the ENUM's error value: a row written
   * from SQL with strict mode off): no daemon reads it, so it pauses nothing.
   */
  target: PauseTarget | '';
  /** The paused schedule's or queue's name. */
  name: string;
  /** Null when none was given. */
  reason: string | null;
  /** Who paused it (`user@host` unless given). */
  pausedBy: string;
  /** When it was paused (database clock). */
  pausedAt: Date;
}

/** What pausing did: the new pause, or the one already there (changed nothing). */
export type PauseWriteOutcome =
  | {
      /** Paused now: this call wrote the pause. */
      status: 'paused';
      /** The pause now in force. */
      pause: Pause;
    }
  | {
      /** Already paused: nothing changed (the first pause's who, when and why stand). */
      status: 'already_paused';
      /** The pause that was already in force. */
      pause: Pause;
    };

/** What resuming did: the pause it ended, or that there was none (changed nothing). */
export type ResumeWriteOutcome =
  | {
      /** Resumed: this call deleted the pause. */
      status: 'resumed';
      /** The pause it ended. */
      pause: Pause;
    }
  | {
      /** Not paused: nothing changed. */
      status: 'not_paused';
    };

type RawPause = { target: PauseTarget | ''; name: string; reason: string | null; paused_by: string; paused_at: string };

const toPause = (r: RawPause): Pause => ({
  target: r.target,
  name: r.name,
  reason: r.reason,
  pausedBy: r.paused_by,
  pausedAt: parseDbTime(r.paused_at)!,
});

const COLUMNS = sql.raw('target, name, reason, paused_by, paused_at');

/** The pause of one schedule or queue, or null: one primary-key lookup. */
export async function pauseOf(exec: Executor, target: PauseTarget, name: string): Promise<Pause | null> {
  const [row] = rows<RawPause>(await exec.execute(sql`SELECT ${COLUMNS} FROM cronq_pauses WHERE target = ${target} AND name = ${name}`));
  return row ? toPause(row) : null;
}

/** Every pause of `target` (or of both), by target and name: a range of the primary key. */
export async function listPauses(exec: Executor, target?: PauseTarget): Promise<Pause[]> {
  const where = target ? sql`WHERE target = ${target}` : sql``;
  return rows<RawPause>(await exec.execute(sql`SELECT ${COLUMNS} FROM cronq_pauses ${where} ORDER BY target, name`)).map(toPause);
}

/** The names of the paused queues: what the claim path leaves out. */
export async function pausedQueueNames(exec: Executor): Promise<string[]> {
  return rows<{ name: string }>(await exec.execute(sql`SELECT name FROM cronq_pauses WHERE target = 'queue'`)).map((r) => r.name);
}

/** Inserts the pause unless one exists; returns the pause now in force either way. */
export async function insertPauseIfAbsent(
  exec: Executor,
  pause: { target: PauseTarget; name: string; reason: string | null; pausedBy: string },
): Promise<PauseWriteOutcome> {
  const inserted = header(
    await exec.execute(sql`INSERT INTO cronq_pauses (target, name, reason, paused_by, paused_at)
      VALUES (${pause.target}, ${pause.name}, ${pause.reason}, ${pause.pausedBy}, ${NOW})
      ON DUPLICATE KEY UPDATE name = name`),
  ).affectedRows;
  const now = await pauseOf(exec, pause.target, pause.name);
  // Resumed between the insert and this read: the pause we lost to is over; try again.
  if (now === null) return insertPauseIfAbsent(exec, pause);
  return { status: inserted === 1 ? 'paused' : 'already_paused', pause: now };
}

/** Deletes the pause, returning it; 'not_paused' when there was none. Target '' names the rows of no known target. */
export async function deletePause(db: Db, target: PauseTarget | '', name: string): Promise<ResumeWriteOutcome> {
  return db.transaction(async (tx) => {
    const [row] = rows<RawPause>(await tx.execute(sql`SELECT ${COLUMNS} FROM cronq_pauses WHERE target = ${target} AND name = ${name} FOR UPDATE`));
    if (!row) return { status: 'not_paused' } as const;
    await tx.execute(sql`DELETE FROM cronq_pauses WHERE target = ${target} AND name = ${name}`);
    return { status: 'resumed', pause: toPause(row) } as const;
  });
}
