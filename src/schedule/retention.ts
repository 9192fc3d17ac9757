import { formatDuration, MAX_DURATION_MS } from '../duration.ts';
import { UsageError } from '../errors.ts';
import type { Schedule } from './define.ts';
import { fireTimesBetween, periodLengthMs } from './period.ts';
import { DEFAULT_LATE_TOLERANCE_MS } from './plan.ts';

/** No retention below this is accepted, schedules or not (`--done-older-than 30` is 30 ms). */
export const MIN_RETENTION_MS = 3_600_000;

/** How many upcoming fire times are sampled for a `tick` schedule's longest gap. */
const GAP_SAMPLE = 32;

/** Why a schedule needs done rows kept as long as it does. */
export interface RetentionNeed {
  /** How late a tick can still be enqueued: the catch-up window, at least the lateness tolerance. */
  windowMs: number;
  /** One period: periodLengthMs, or for `tick` the longest gap between consecutive fire times. */
  periodMs: number;
  /** windowMs + periodMs. */
  totalMs: number;
}

/**
 * How long a schedule's done jobs must be kept so that no period is ever enqueued twice.
 *
 * A period's jobs finish after its first tick; its last tick is enqueued at most one
 * period after that, and caught up at most one window after its instant. A done row
 * kept for window + period therefore outlives every tick that could enqueue its key
 * again. For `tick` schedules the key is the instant itself and the window alone would
 * do; the longest gap between consecutive fire times (sampled over the next 32) is
 * added anyway as that schedule's "period", so a retention that covers it reads the
 * same for every schedule. A catch-up that is off still enqueues ticks up to the 60 s
 * lateness tolerance late, so the window is never less than that.
 */
export function retentionNeed(schedule: Schedule, now = new Date()): RetentionNeed {
  const windowMs = Math.max(DEFAULT_LATE_TOLERANCE_MS, schedule.catchUp.mode === 'off' ? 0 : schedule.catchUp.windowMs);
  const periodMs = schedule.period === 'tick' ? longestGapMs(schedule, now) : periodLengthMs(schedule.period);
  return { windowMs, periodMs, totalMs: windowMs + periodMs };
}

function longestGapMs(schedule: Schedule, now: Date): number {
  const fires = fireTimesBetween(schedule.cron, schedule.timezone, now, new Date(8.64e15), GAP_SAMPLE + 1);
  let longest = 0;
  for (let i = 1; i < fires.length; i++) longest = Math.max(longest, fires[i].getTime() - fires[i - 1].getTime());
  return longest;
}

/**
 * Throws a one-line UsageError when `retentionMs` is not a whole number of milliseconds
 * up to 100 years (MAX_DURATION_MS), when it is under MIN_RETENTION_MS or shorter
 * than any schedule's retentionNeed, naming `flag`, the schedule that needs the most and
 * the minimum that covers every schedule at once (in whole days, rounded up), so one
 * correction is enough. Returns nothing when every schedule is covered.
 */
export function checkRetention(retentionMs: number, schedules: Schedule[], flag: string, now = new Date()): void {
  // Before anything reads it: Infinity or NaN would reach the database's date arithmetic.
  if (typeof retentionMs !== 'number' || !Number.isSafeInteger(retentionMs) || retentionMs < 0 || retentionMs > MAX_DURATION_MS) {
    const shown = typeof retentionMs === 'number' ? String(retentionMs) : typeof retentionMs;
    throw new UsageError(`${flag} must be a whole number of milliseconds from ${MIN_RETENTION_MS} (1h) to ${MAX_DURATION_MS} (100 years) (got ${shown})`);
  }
  const given = formatDuration(retentionMs);
  if (retentionMs < MIN_RETENTION_MS) {
    throw new UsageError(`${flag} ${given} is below the minimum of ${formatDuration(MIN_RETENTION_MS)}`);
  }
  let most: { schedule: Schedule; need: RetentionNeed } | null = null;
  for (const schedule of schedules) {
    const need = retentionNeed(schedule, now);
    if (!most || need.totalMs > most.need.totalMs) most = { schedule, need };
  }
  if (!most || retentionMs >= most.need.totalMs) return;
  const { schedule, need } = most;
  const days = Math.ceil(need.totalMs / 86_400_000);
  throw new UsageError(
    `${flag} ${given} is shorter than schedule '${schedule.name}' needs: its catch-up window ` +
      `(${formatDuration(need.windowMs)}) plus one ${schedule.period === 'tick' ? 'gap between ticks' : schedule.period} ` +
      `(${formatDuration(need.periodMs)}); a pruned done job could be enqueued again. Use at least ${days}d` +
      (schedules.length > 1 ? `, which covers every schedule` : ''),
  );
}
