import { formatDuration } from '../duration.ts';
import { instantText } from '../shownText.ts';
import type { ResolvedCatchUp } from './define.ts';

/** A tick is "caught up" rather than on time when handled more than this after its instant. */
export const DEFAULT_LATE_TOLERANCE_MS = 60_000;

/**
 * Whether a tick at `at` handled at `now` is late: more than `toleranceMs` after its
 * instant. What the ledger's `caught_up` records, whatever the tick's outcome.
 */
export function isLateTick(at: Date, now: Date, toleranceMs = DEFAULT_LATE_TOLERANCE_MS): boolean {
  return now.getTime() - at.getTime() > toleranceMs;
}

export interface TickPlan {
  /** Ticks to enqueue, oldest first. */
  enqueue: Array<{ at: Date; late: boolean }>;
  /** Ticks to record as skipped, with the reason, oldest first. */
  skip: Array<{ at: Date; note: string }>;
}

/**
 * Decides, for fire instants that fell due since the last ledger row (ascending, all
 * ≤ now), which to enqueue and which to record as skipped. Pure; DueTickPlanner over
 * one page.
 *
 * - On time (≤ toleranceMs late): always enqueued.
 * - Late and older than the catch-up window (or catch-up off): skipped.
 * - Late within the window: mode 'all' enqueues the most recent `max` of them and
 *   skips the rest; mode 'latest' enqueues only the most recent due tick.
 */
export function planDueTicks(due: Date[], now: Date, catchUp: ResolvedCatchUp, toleranceMs = DEFAULT_LATE_TOLERANCE_MS): TickPlan {
  const planner = new DueTickPlanner(now, catchUp, toleranceMs);
  const skip = planner.add(due);
  return { enqueue: planner.finish(), skip };
}

/**
 * planDueTicks page by page, for an outage of any length: `add` takes the next due
 * instants (ascending, each page after the last) and returns, oldest first, the ticks
 * already known to be skipped; `finish` returns the ticks to enqueue. Between pages it
 * holds only the ticks a catch-up could still enqueue (the most recent `max` for 'all',
 * one for 'latest', the on-time ones with catch-up off), so the caller can record each
 * page's skips and yield before computing the next page instead of listing a window of
 * an every-second schedule (600,000 instants a week) in one go.
 *
 * The skips come out in time order across pages: once one tick is within the window,
 * every later one is too, and a tick leaves the held ones only for a later one.
 */
export class DueTickPlanner {
  private held: Array<{ at: Date; late: boolean }> = [];
  private readonly keep: number;
  private readonly capNote: string;

  constructor(
    private readonly now: Date,
    private readonly catchUp: ResolvedCatchUp,
    private readonly toleranceMs = DEFAULT_LATE_TOLERANCE_MS,
  ) {
    this.keep = catchUp.mode === 'latest' ? 1 : catchUp.mode === 'all' ? catchUp.max : Number.POSITIVE_INFINITY;
    this.capNote = catchUp.mode === 'latest' ? 'superseded by a later tick (catchUp mode latest)' : `over the catch-up cap (max ${catchUp.max})`;
  }

  /** Takes the next page of due instants; returns those to record as skipped now, oldest first. */
  add(due: Date[]): Array<{ at: Date; note: string }> {
    const skip: Array<{ at: Date; note: string }> = [];
    const nowMs = this.now.getTime();
    for (const at of due) {
      const late = isLateTick(at, this.now, this.toleranceMs);
      if (late && (this.catchUp.mode === 'off' || nowMs - at.getTime() > this.catchUp.windowMs)) skip.push({ at, note: outsideNote(this.catchUp) });
      else this.held.push({ at, late });
    }
    // Once per page, so a page costs its length plus `keep`, never their product.
    const over = this.held.length - this.keep;
    if (over > 0) {
      for (const tick of this.held.slice(0, over)) skip.push({ at: tick.at, note: this.capNote });
      this.held = this.held.slice(over);
    }
    return skip;
  }

  /** The ticks to enqueue, oldest first. */
  finish(): Array<{ at: Date; late: boolean }> {
    return this.held;
  }
}

/** The note for late ticks that no catch-up policy enqueues. */
export function outsideNote(catchUp: ResolvedCatchUp): string {
  return catchUp.mode === 'off' ? 'missed; catch-up is off' : `older than the catch-up window (${formatDuration(catchUp.windowMs)})`;
}

/** The ledger note of a tick skipped while its schedule was paused: who, since when, why. */
export function pausedNote(pause: { pausedBy: string; pausedAt: Date; reason: string | null }): string {
  // One line: a reason's line breaks would print as lines of their own (in `cronq tick`'s refusal, say), reading as other output.
  const oneLine = (text: string) => text.replace(/[\r\n]+/g, ' ');
  const reason = pause.reason === null ? null : oneLine(pause.reason);
  return `paused by ${oneLine(pause.pausedBy)} since ${instantText(pause.pausedAt)}${reason ? `: ${reason}` : ''}`;
}
