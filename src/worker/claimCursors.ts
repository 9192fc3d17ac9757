import type { ClaimCursor } from '../store/index.ts';

/** Cursors older than this are dropped before the next claim. */
const CURSOR_MAX_AGE_MS = 1_000;

/**
 * The claim cursors one pool's lanes share (see ClaimRequest.cursors in store/claims.ts):
 * where the last claim from each queue stopped. A ready row behind a cursor is found only
 * by a claim without one, so the pool drops them at once on a failed claim (`clear`),
 * and has the next claim look from the front (`lookFromFront`) before an idle poll and
 * when a local enqueue may have put a row behind one; they are dropped at least once a
 * second anyway (`current`). So a row behind a cursor waits at most a poll interval on
 * an idle pool, a second on a busy one (or on one kept busy by local enqueues).
 *
 * A drop asked for by `lookFromFront` applies when the next claim starts (`current`),
 * so a claim still in flight, which moves the cursors when it locks rows, cannot undo it.
 * Plain bookkeeping on the pool's event loop.
 */
export class ClaimCursors {
  private readonly cursors = new Map<string, ClaimCursor>();
  private setAt = 0;
  /** Queues whose next claim looks from the front; 'all' for every queue. */
  private frontNext: Set<string> | 'all' = new Set();

  /**
   * The cursors for the next claim (the claim moves them on): emptied first when a second
   * old, less those `lookFromFront` asked to drop since the last call.
   */
  current(now = Date.now()): Map<string, ClaimCursor> {
    if (this.frontNext === 'all' || now - this.setAt > CURSOR_MAX_AGE_MS) {
      this.cursors.clear();
      this.setAt = now;
    } else {
      for (const queue of this.frontNext) this.cursors.delete(queue);
    }
    this.frontNext = new Set();
    return this.cursors;
  }

  /** The next claim looks from the front of `queue` (of every queue, without one). */
  lookFromFront(queue?: string): void {
    if (queue === undefined) this.frontNext = 'all';
    else if (this.frontNext !== 'all') this.frontNext.add(queue);
  }

  /** Look from the front of every queue next time, dropping the cursors now. */
  clear(): void {
    this.cursors.clear();
  }
}
