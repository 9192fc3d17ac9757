import { formatDuration } from '../duration.ts';
import type { Logger } from '../logger.ts';

/** How long every slot must be held by the same runs before SlotsHeldWatch says so. */
export const SLOTS_HELD_WARN_MS = 60_000;

/** Most kinds the warning names (by how many slots each holds); the rest are counted. */
const KINDS_NAMED = 10;

/** What the watch reads of the pool's slots (RunSlots). */
export interface HeldSlots {
  readonly concurrency: number;
  readonly full: boolean;
  /** When a run last took a slot (performance.now()); undefined before the first. While full: the newest holder. */
  readonly lastTakenAt: number | undefined;
  /** Whether every run holding a slot is still in its handler (a walk: asked only once the rest holds). */
  allInHandler(): boolean;
  /** The kind of each run holding a slot. */
  heldKinds(): string[];
}

/**
 * Says once, at warn (`worker_slots_held`), when every worker slot has been held by the
 * same runs, each still in its handler, for `afterMs`: no run started since, so no other
 * job can start in this process until one of them ends. Runs whose handler ended and that
 * hold their slot while their result is written (failures waiting out an outage, say) are
 * not hanging: slots held by them say nothing. A handler that never settles (no `timeout`) holds its
 * slot for ever, and a schedule with `overlap: 'allow'` takes one more each tick until
 * none is left: nothing else was logged while every other job waited. Says it again only
 * after a slot has turned over (a run started) and the slots have been held that long anew.
 *
 * Single-threaded bookkeeping: the pool's claim loop calls `check` on each round (at
 * least every poll interval while the slots are full). O(1) a round while slots turn over;
 * the slots are walked only once they have been full and unchanged for `afterMs`.
 */
export class SlotsHeldWatch {
  private said = false;

  constructor(
    private readonly slots: HeldSlots,
    private readonly log: Logger,
    private readonly afterMs: number = SLOTS_HELD_WARN_MS,
  ) {}

  check(now: number = performance.now()): void {
    const newest = this.slots.full ? this.slots.lastTakenAt : undefined;
    if (newest === undefined || now - newest < this.afterMs || !this.slots.allInHandler()) {
      this.said = false;
      return;
    }
    if (this.said) return;
    this.said = true;
    const byKind = new Map<string, number>();
    for (const kind of this.slots.heldKinds()) byKind.set(kind, (byKind.get(kind) ?? 0) + 1);
    const ranked = [...byKind].sort((a, b) => b[1] - a[1]);
    const named = ranked.slice(0, KINDS_NAMED);
    const others = ranked.slice(KINDS_NAMED).reduce((sum, [, n]) => sum + n, 0);
    const listed = named.map(([kind, n]) => `${kind} ×${n}`).join(', ') + (others > 0 ? `, ${others} of other kinds` : '');
    this.log.warn(
      {
        event: 'worker_slots_held',
        concurrency: this.slots.concurrency,
        held_ms: Math.round(now - newest),
        kinds: Object.fromEntries(named),
      },
      `all ${this.slots.concurrency} worker slots held for over ${formatDuration(this.afterMs)} by the same runs (${listed}): ` +
        'no other job can start in this process until one ends; a handler that never settles holds its slot for ever ' +
        "(give its task a timeout, or its schedule overlap: 'skip')",
    );
  }
}
