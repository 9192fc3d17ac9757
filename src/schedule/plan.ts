import { formatDuration } from '../duration.ts';
import type { ResolvedCatchUp } from './define.ts';

/** A tick is "caught up" rather than on time when handled more than this after its instant. */
export const DEFAULT_LATE_TOLERANCE_MS = 60_000;

export interface TickPlan {
  /** Ticks to enqueue, oldest first. */
  enqueue: Array<{ at: Date; late: boolean }>;
  /** Ticks to record as skipped, with the reason, oldest first. */
  skip: Array<{ at: Date; note: string }>;
}

/**
 * Decides, for fire instants that fell due since the last ledger row (ascending, all
 * ≤ now), which to enqueue and which to record as skipped. Pure.
 *
 * - On time (≤ toleranceMs late): always enqueued.
 * - Late and older than the catch-up window (or catch-up off): skipped.
 * - Late within the window: mode 'all' enqueues the most recent `max` of them and
 *   skips the rest; mode 'latest' enqueues only the most recent due tick.
 */
export function planDueTicks(due: Date[], now: Date, catchUp: ResolvedCatchUp, toleranceMs = DEFAULT_LATE_TOLERANCE_MS): TickPlan {
  const plan: TickPlan = { enqueue: [], skip: [] };
  const nowMs = now.getTime();
  const inWindow: Array<{ at: Date; late: boolean }> = [];
  for (const at of due) {
    const lateness = nowMs - at.getTime();
    const late = lateness > toleranceMs;
    if (late && (catchUp.mode === 'off' || lateness > catchUp.windowMs)) plan.skip.push({ at, note: outsideNote(catchUp) });
    else inWindow.push({ at, late });
  }
  const keep = catchUp.mode === 'latest' ? 1 : catchUp.mode === 'all' ? catchUp.max : inWindow.length;
  const cut = Math.max(0, inWindow.length - keep);
  for (const tick of inWindow.slice(0, cut)) {
    plan.skip.push({
      at: tick.at,
      note: catchUp.mode === 'latest' ? 'superseded by a later tick (catchUp mode latest)' : `over the catch-up cap (max ${catchUp.max})`,
    });
  }
  plan.enqueue.push(...inWindow.slice(cut));
  plan.skip.sort((a, b) => a.at.getTime() - b.at.getTime());
  return plan;
}

/** The note for late ticks that no catch-up policy enqueues. */
export function outsideNote(catchUp: ResolvedCatchUp): string {
  return catchUp.mode === 'off' ? 'missed; catch-up is off' : `older than the catch-up window (${formatDuration(catchUp.windowMs)})`;
}

/** The ledger note of a tick skipped while its schedule was paused: who, since when, why. */
export function pausedNote(pause: { pausedBy: string; pausedAt: Date; reason: string | null }): string {
  return `paused by ${pause.pausedBy} since ${pause.pausedAt.toISOString()}${pause.reason ? `: ${pause.reason}` : ''}`;
}
