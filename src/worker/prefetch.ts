import { PREFETCH_PAYLOAD_CHARS } from '../defaults.ts';

/**
 * How many jobs the claim loop should hold claimed beyond its free worker slots.
 *
 * A claim is a database round trip and a durable commit (a millisecond or two). When
 * handlers finish faster than that, slots claimed only once free sit idle for every
 * claim, and the drain rate is capped at `concurrency / claim latency` however fast the
 * database is. So the loop claims ahead by what its handlers are expected to use up in
 * two claims' time: the recent rate at which slots free, times the recent claim latency.
 * Slow handlers free slots rarely and get no read-ahead at all (a job is never held
 * back from another daemon that could run it now); `max` bounds it either way, and so
 * does `payloadChars`: the read-ahead never holds more payload than that, by the recent
 * claims' mean payload length (so 1 MB payloads are read ahead 16 at a time, not 1,000).
 *
 * Single-threaded bookkeeping only: the pool calls it from its one claim loop.
 */
export class Prefetch {
  private finished = 0;
  private windowStart: number;
  private ratePerMs = 0;
  private claimMs = 1;
  /** Mean payload length of the jobs claimed lately (0 before any). */
  private meanPayloadChars = 0;

  constructor(
    readonly max: number,
    private readonly now: () => number = () => performance.now(),
    private readonly payloadChars: number = PREFETCH_PAYLOAD_CHARS,
  ) {
    this.windowStart = now();
  }

  /** A claim brought `jobs` jobs whose payload texts are `chars` long in all. */
  claimedPayload(jobs: number, chars: number): void {
    if (jobs === 0) return;
    const mean = chars / jobs;
    // The first claim sets the mean; later ones move it, fast upwards (a burst of big payloads).
    this.meanPayloadChars = this.meanPayloadChars === 0 ? mean : mean > this.meanPayloadChars ? mean : 0.7 * this.meanPayloadChars + 0.3 * mean;
  }

  /** A handler returned: its slot is free. */
  slotFreed(): void {
    this.finished += 1;
  }

  /** A claim transaction took `ms`, commit included. */
  claimTook(ms: number): void {
    this.claimMs = 0.7 * this.claimMs + 0.3 * ms;
  }

  /**
   * Folds the slots freed since the last call into the rate (at most every 5 ms) and
   * returns the jobs to hold beyond the free slots now (0 to `max`, within the payload budget).
   */
  resize(): number {
    if (this.max === 0) return 0;
    const now = this.now();
    const elapsed = now - this.windowStart;
    if (elapsed >= 5) {
      this.ratePerMs = 0.6 * this.ratePerMs + 0.4 * (this.finished / elapsed);
      this.finished = 0;
      this.windowStart = now;
    }
    const byPayload = this.meanPayloadChars > 0 ? Math.floor(this.payloadChars / this.meanPayloadChars) : this.max;
    return Math.min(this.max, byPayload, Math.floor(this.ratePerMs * this.claimMs * 2));
  }
}
