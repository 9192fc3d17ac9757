/**
 * The only place that reads schedule-health SQL: whether a tick's jobs are all done.
 *
 * Concurrency contract: plain reads at READ COMMITTED, no locks; the answer is as of the
 * statement and may be stale by the time the caller uses it (health is re-read on every
 * look, so a tick completing meanwhile shows on the next one).
 */
import { sql } from 'drizzle-orm';
import type { Executor } from '../db/client.ts';
import { rows } from './sql.ts';

/**
 * True when a job of `scheduleName` in period `periodKey` is not 'done' (waiting,
 * running, dead or cancelled). Reads the `cronq_jobs_schedule (schedule_name,
 * period_key)` index and stops at the first such job; a period whose jobs are all done
 * costs one index entry and row per job.
 */
export async function periodHasUnfinishedJobs(exec: Executor, scheduleName: string, periodKey: string): Promise<boolean> {
  const [row] = rows<{ pending: number }>(
    await exec.execute(sql`SELECT EXISTS (SELECT 1 FROM cronq_jobs
        WHERE schedule_name = ${scheduleName} AND period_key = ${periodKey} AND status <> 'done') AS pending`),
  );
  return Number(row.pending) === 1;
}
