/**
 * The overlap check of a schedule with `overlap: 'skip'`: does an earlier tick of it still
 * have work in flight?
 *
 * Concurrency contract: a plain read at READ COMMITTED, no locks. It is run only by the
 * daemon that owns the tick in the ledger (after claimTickFanout), so one daemon decides
 * per tick; a job finishing during the read may still be counted as in flight (the tick
 * is then skipped: the safe side of overlap).
 */
import { sql } from 'drizzle-orm';
import type { Executor } from '../db/client.ts';
import { rows, toDbTime } from './sql.ts';

/**
 * True when a job of an earlier tick of `scheduleName` (scheduled_at before `before`) is
 * still 'ready' (waiting, or waiting to retry) or 'reserved' (running). Jobs of a schedule
 * are written to its queue, so the read is bounded by that queue's ready and reserved
 * jobs (the claim index) or by the schedule's own rows (cronq_jobs_schedule), whichever
 * the optimizer finds smaller, and stops at the first match.
 */
export async function earlierTickInFlight(exec: Executor, scheduleName: string, queue: string, before: Date): Promise<boolean> {
  const found = await exec.execute(sql`SELECT 1 AS busy FROM cronq_jobs
    WHERE status IN ('ready', 'reserved') AND queue = ${queue} AND schedule_name = ${scheduleName} AND scheduled_at < ${toDbTime(before)}
    LIMIT 1`);
  return rows(found).length > 0;
}
