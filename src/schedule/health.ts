/**
 * Schedule health, a dead-man's switch: has each tick's work completed in time?
 *
 * A tick succeeded when its fan-out finished ('enqueued' with `finished_at`), none of its
 * keys was found held by a job this schedule did not enqueue for its period (its ledger
 * note says so: noteSaysKeysTaken), and no job of its schedule and period is anything but
 * 'done'. The last success is the latest such tick among the latest HEALTH_TICKS_LOOKED
 * ledger rows. A schedule with `expect: { within }`
 * is overdue when the first fire time after its last success (by the cron, so a tick no
 * daemon ever enqueued counts) is more than `within` in the past. When none of the rows
 * looked at succeeded, the oldest of them stands in for that fire time; a schedule with no
 * ledger row yet is not overdue (nothing says when it should have started).
 */
import type { TickRow } from '../store/index.ts';
import type { Schedule } from './define.ts';
import { noteSaysKeysTaken } from './fanout.ts';
import { nextFireAfter } from './period.ts';

/** Ledger rows read per schedule (newest first), stopping at the first success. */
export const HEALTH_TICKS_LOOKED = 10;

/** One schedule's health at one instant. */
export interface ScheduleHealth {
  /** The schedule's name. */
  schedule: string;
  /** `expect.within` in milliseconds (null: the schedule has no expectation and is never overdue). */
  expectWithinMs: number | null;
  /** The fire time of the latest tick whose jobs are all done (null: none among the latest ticks). */
  lastSuccessAt: Date | null;
  /** True when a tick's jobs are not all done within `expect.within` of it and no later tick has completed since (never without an expectation). */
  overdue: boolean;
  /** When it became overdue: the first fire time after the last success, plus `within` (null when not overdue). */
  overdueSince: Date | null;
}

/** What assessing health reads. */
export interface HealthReads {
  recentTicks(scheduleName: string, count: number): Promise<TickRow[]>;
  periodHasUnfinishedJobs(scheduleName: string, periodKey: string): Promise<boolean>;
}

/** Reads `schedule`'s latest ticks (stopping at its last success) and judges it at `now`. */
export async function assessHealth(schedule: Schedule, reads: HealthReads, now: Date): Promise<ScheduleHealth> {
  const ticks = await reads.recentTicks(schedule.name, HEALTH_TICKS_LOOKED);
  let success: TickRow | null = null;
  for (const tick of ticks) {
    if (tick.outcome !== 'enqueued' || tick.finishedAt === null) continue;
    // Some of its jobs were never written as the schedule's: the jobs found are not all of it.
    if (noteSaysKeysTaken(tick.note ?? null)) continue;
    if (!(await reads.periodHasUnfinishedJobs(schedule.name, tick.periodKey))) {
      success = tick;
      break;
    }
  }
  return judgeHealth(schedule, success?.scheduledAt ?? null, ticks.at(-1)?.scheduledAt ?? null, now);
}

/**
 * The pure verdict: `lastSuccessAt` is the last successful tick's fire time, `oldestLooked`
 * the oldest ledger row read (used when no success was found).
 */
export function judgeHealth(
  schedule: Pick<Schedule, 'name' | 'cron' | 'timezone' | 'expect'>,
  lastSuccessAt: Date | null,
  oldestLooked: Date | null,
  now: Date,
): ScheduleHealth {
  const withinMs = schedule.expect?.withinMs ?? null;
  const dueFrom = lastSuccessAt ? nextFireAfter(schedule.cron, schedule.timezone, lastSuccessAt) : oldestLooked;
  const since = withinMs !== null && dueFrom !== null ? new Date(dueFrom.getTime() + withinMs) : null;
  const overdue = since !== null && since.getTime() <= now.getTime();
  return { schedule: schedule.name, expectWithinMs: withinMs, lastSuccessAt, overdue, overdueSince: overdue ? since : null };
}
