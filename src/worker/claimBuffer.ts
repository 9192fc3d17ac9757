import type { ClaimedJob } from '../store/index.ts';

/**
 * Jobs claimed (their reservation committed) but not started yet, oldest first: what a
 * claim brings beyond the free slots (see Prefetch). Each entry knows when it goes
 * stale, a third of its lease after its claim: started later, its lease could run out
 * before the first renewal, so the pool releases it instead.
 *
 * Plain bookkeeping, no I/O; the pool decides what to start and what to release.
 */
export class ClaimBuffer {
  private readonly entries: Array<{ job: ClaimedJob; claimedAt: number; staleAt: number }> = [];
  /** The earliest staleAt among the entries (Infinity when none). */
  private nextStaleAt = Infinity;

  get length(): number {
    return this.entries.length;
  }

  /** Adds a claim's jobs, claimed at `claimedAt` (Date.now()), each going stale by its own lease. */
  add(jobs: ClaimedJob[], claimedAt: number): void {
    for (const job of jobs) {
      const staleAt = claimedAt + job.leaseMs / 3;
      this.entries.push({ job, claimedAt, staleAt });
      if (staleAt < this.nextStaleAt) this.nextStaleAt = staleAt;
    }
  }

  /** The oldest entry, removed; undefined when empty. */
  next(): { job: ClaimedJob; claimedAt: number } | undefined {
    return this.entries.shift();
  }

  /** Removes and returns the entries stale at `now` (cheap when none can be). */
  takeStale(now: number): ClaimedJob[] {
    if (now < this.nextStaleAt) return [];
    const stale: ClaimedJob[] = [];
    const keep: typeof this.entries = [];
    this.nextStaleAt = Infinity;
    for (const entry of this.entries) {
      if (now >= entry.staleAt) stale.push(entry.job);
      else {
        keep.push(entry);
        this.nextStaleAt = Math.min(this.nextStaleAt, entry.staleAt);
      }
    }
    this.entries.splice(0, this.entries.length, ...keep);
    return stale;
  }

  /** Removes and returns every entry. */
  takeAll(): ClaimedJob[] {
    this.nextStaleAt = Infinity;
    return this.entries.splice(0).map((entry) => entry.job);
  }
}
