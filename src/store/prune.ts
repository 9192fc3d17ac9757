/**
 * The only place that writes retention SQL: finding and deleting old done (and
 * cancelled: like done, a finished row whose only use is to keep its key taken) jobs and
 * old tick-ledger rows. Nothing here touches a job that is not `done` or `cancelled`, a dead letter, an
 * unfinished tick, or the latest tick of any schedule.
 *
 * Locking contract: candidates are found by plain reads (no locks at READ COMMITTED),
 * walking the primary key in windows, then deleted by primary key in one autocommit
 * statement per batch that re-checks the condition. Each DELETE locks at most one
 * batch of rows that nobody else is writing, for milliseconds.
 */
import { sql, type SQL } from 'drizzle-orm';
import type { Executor } from '../db/client.ts';
import { header, interval, rows, type DbTime } from './sql.ts';

export type { DbTime } from './sql.ts';

/** Now minus `olderThanMs` by the database clock, to the microsecond. */
export async function cutoffBefore(exec: Executor, olderThanMs: number): Promise<DbTime> {
  const result = await exec.execute(
    sql`SELECT DATE_FORMAT(UTC_TIMESTAMP(6) - ${interval(olderThanMs)}, '%Y-%m-%d %H:%i:%s.%f') AS cutoff`,
  );
  return rows<{ cutoff: string }>(result)[0].cutoff;
}

/** One table's retention rule: what may go, as a condition on alias `t`. */
interface Rule {
  table: SQL;
  prunable: (cutoff: DbTime) => SQL;
  /** The same condition, for the DELETE's re-check (no self-referencing subquery there). */
  recheck: (cutoff: DbTime) => SQL;
}

const DONE_JOBS: Rule = {
  table: sql.raw('cronq_jobs'),
  prunable: (cutoff) => sql`t.status IN ('done', 'cancelled') AND t.finished_time < ${cutoff}`,
  recheck: (cutoff) => sql`status IN ('done', 'cancelled') AND finished_time < ${cutoff}`,
};

// A tick row may go once it is finished (skipped rows are finished when recorded)
// before the cutoff and a later tick of the same schedule exists (an EXISTS on the
// unique (schedule_name, scheduled_at) index that stops at the first hit): the latest row is
// where catch-up resumes from, and later rows are only ever added after it, so a row
// that is not the latest when found is still not the latest when deleted.
const OLD_TICKS: Rule = {
  table: sql.raw('cronq_schedule_ticks'),
  prunable: (cutoff) => sql`t.finished_at IS NOT NULL AND t.finished_at < ${cutoff}
    AND EXISTS (SELECT 1 FROM cronq_schedule_ticks l WHERE l.schedule_name = t.schedule_name AND l.scheduled_at > t.scheduled_at)`,
  recheck: (cutoff) => sql`finished_at IS NOT NULL AND finished_at < ${cutoff}`,
};

/** Which table a retention statement works on. */
export type PruneTarget = 'doneJobs' | 'ticks';

const RULES: Record<PruneTarget, Rule> = { doneJobs: DONE_JOBS, ticks: OLD_TICKS };

/** The smallest id in the table minus one (a scan starts after it), or null when it is empty. */
export async function scanStart(exec: Executor, target: PruneTarget): Promise<number | null> {
  const result = await exec.execute(sql`SELECT MIN(id) AS id FROM ${RULES[target].table}`);
  const id = rows<{ id: number | null }>(result)[0].id;
  return id === null ? null : Number(id) - 1;
}

/**
 * The id ending the window of the next `span` rows after `afterId` (by primary key),
 * or null when no row follows. Bounds each candidate search to `span` rows however
 * sparse the ids are.
 */
export async function windowEnd(exec: Executor, target: PruneTarget, afterId: number, span: number): Promise<number | null> {
  const result = await exec.execute(sql`SELECT MAX(w.id) AS id FROM
    (SELECT id FROM ${RULES[target].table} WHERE id > ${afterId} ORDER BY id LIMIT ${span}) w`);
  const id = rows<{ id: number | null }>(result)[0].id;
  return id === null ? null : Number(id);
}

/** Ids in (afterId, throughId] that the rule lets go, ascending, at most `limit`. A plain read. */
export async function findPrunable(
  exec: Executor,
  target: PruneTarget,
  range: { cutoff: DbTime; afterId: number; throughId: number; limit: number },
): Promise<number[]> {
  const rule = RULES[target];
  const result = await exec.execute(sql`SELECT t.id FROM ${rule.table} t
    WHERE t.id > ${range.afterId} AND t.id <= ${range.throughId} AND ${rule.prunable(range.cutoff)}
    ORDER BY t.id LIMIT ${range.limit}`);
  return rows<{ id: number }>(result).map((r) => Number(r.id));
}

/** Deletes these ids, re-checking the rule under the row locks; returns how many went. */
export async function deletePrunable(exec: Executor, target: PruneTarget, ids: number[], cutoff: DbTime): Promise<number> {
  if (ids.length === 0) return 0;
  const rule = RULES[target];
  return header(await exec.execute(sql`DELETE FROM ${rule.table} WHERE id IN ${ids} AND ${rule.recheck(cutoff)}`)).affectedRows;
}

/** How many rows the rule would let go now (for --dry-run). A plain read. */
export async function countPrunable(exec: Executor, target: PruneTarget, cutoff: DbTime): Promise<number> {
  const rule = RULES[target];
  const result = await exec.execute(sql`SELECT COUNT(*) AS n FROM ${rule.table} t WHERE ${rule.prunable(cutoff)}`);
  return Number(rows<{ n: number }>(result)[0].n);
}
