import type { ClaimCursor } from '../store/index.ts';

/** Cursors older than this are dropped before the next claim. */
const CURSOR_MAX_AGE_MS = 1_000;

/**
 * The claim cursors one pool's lanes share (see ClaimRequest.cursors in store/claims.ts):
 * where the last claim from each queue stopped. A ready row behind a cursor is found only
 * by a claim without one, so they are dropped on every short or failed claim (`clear`)
 * and at least once a second (`current`).
 */
export class ClaimCursors {
  private readonly cursors = new Map<string, ClaimCursor>();
  private setAt = 0;

  /** The cursors for the next claim (the claim moves them on); emptied first when a second old. */
  current(now = Date.now()): Map<string, ClaimCursor> {
    if (now - this.setAt > CURSOR_MAX_AGE_MS) {
      this.cursors.clear();
      this.setAt = now;
    }
    return this.cursors;
  }

  /** Look from the front of every queue next time. */
  clear(): void {
    this.cursors.clear();
  }
}
