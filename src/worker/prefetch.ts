import { PREFETCH_PAYLOAD_CHARS } from '../defaults.ts';

/**
 * A claim gap at least this long (no claim answered for it: an outage, a stalled database,
 * a pool long without room) makes the pace start over (Prefetch.startOver).
 */
export const LONG_CLAIM_GAP_MS = 1_000;

export interface PrefetchOptions {
  /** The pool's worker slots: what its handlers could do at once. */
  concurrency: number;
  now?: () => number;
  /** The most payload text held ahead, in characters (default PREFETCH_PAYLOAD_CHARS). */
  payloadChars?: number;
}

/**
 * How many jobs the claim loop should hold claimed beyond its free worker slots.
 *
 * A claim is a database round trip and a durable commit (a millisecond or two). When
 * handlers finish faster than that, slots claimed only once free sit idle for every
 * claim, and the drain rate is capped at `concurrency / claim latency` however fast the
 * database is. So the loop claims ahead by what its handlers could use up in two claims'
 * time: what the slots get done per millisecond while busy (runs finished over the
 * slot-time they held), times all the slots, times the recent claim latency. Measured
 * per busy slot rather than per wall-clock millisecond, the estimate does not wait for
 * the claims to feed the slots: a drain starting with idle slots reads ahead fully
 * within a few claims instead of growing with its own rate. Slow handlers free slots
 * rarely and get no read-ahead at all (a job is never held back from another daemon
 * that could run it now), nor do slots held by stuck handlers: they count as busy and
 * finish nothing, and pull the pace down with each window. While no slot is busy at all
 * the pace fades with time (0.6 of its weight per 5 ms), so after about 200 ms idle
 * nothing of it is left, however fast the handlers were. `max` bounds it
 * either way, and so does `payloadChars`: the read-ahead never holds more payload than
 * that, by the recent claims' mean payload length (so 1 MB payloads are read ahead 16 at
 * a time, not 1,000).
 *
 * After an outage (the pool calls `startOver` when a claim fails on the database's
 * trouble) or any claim gap of LONG_CLAIM_GAP_MS or more, the estimate starts over: no
 * read-ahead until runs started since then have been measured, and the claim latency
 * measured afresh, the first claim after the gap left out (it pays for reconnecting).
 * The pace from before says nothing about what can start soon: the runs that held
 * their slots through the outage finish together once the database is back (their
 * results written at last), which would otherwise read as handlers fast beyond any pace.
 *
 * Single-threaded bookkeeping only: the pool's slots and claim loop call it on its one event loop.
 */
export class Prefetch {
  private finished = 0;
  private windowStart: number;
  /** Slot-milliseconds held since windowStart, up to `changedAt`. */
  private busySlotMs = 0;
  private inUse = 0;
  private changedAt: number;
  /** Runs finished per busy slot-millisecond (smoothed). */
  private perSlotMs = 0;
  private claimMs = 1;
  /** When the last claim answered (now()). */
  private lastClaimAt: number;
  /** When the estimate last started over: runs started before then are not measured. */
  private startedOverAt = Number.NEGATIVE_INFINITY;
  /** The next claim's latency is left out (the first after a start-over). */
  private skipClaimTime = false;
  /** Mean payload length of the jobs claimed lately (0 before any). */
  private meanPayloadChars = 0;
  private readonly concurrency: number;
  private readonly now: () => number;
  private readonly payloadChars: number;

  constructor(
    readonly max: number,
    options: PrefetchOptions,
  ) {
    this.concurrency = options.concurrency;
    this.now = options.now ?? (() => performance.now());
    this.payloadChars = options.payloadChars ?? PREFETCH_PAYLOAD_CHARS;
    this.windowStart = this.changedAt = this.lastClaimAt = this.now();
  }

  /**
   * Forgets the pace and the claim latency (an outage, a long claim gap): no read-ahead
   * until runs started from now on have finished, and the next claim's latency is not
   * taken (it reconnects). Runs already holding slots count as busy and finish unmeasured.
   */
  startOver(): void {
    this.accrue();
    this.perSlotMs = 0;
    this.finished = 0;
    this.busySlotMs = 0;
    this.windowStart = this.changedAt;
    this.claimMs = 1;
    this.skipClaimTime = true;
    this.startedOverAt = this.changedAt;
  }

  /** A claim brought `jobs` jobs whose payload texts are `chars` long in all. */
  claimedPayload(jobs: number, chars: number): void {
    if (jobs === 0) return;
    const mean = chars / jobs;
    // The first claim sets the mean; later ones move it, fast upwards (a burst of big payloads).
    this.meanPayloadChars = this.meanPayloadChars === 0 ? mean : mean > this.meanPayloadChars ? mean : 0.7 * this.meanPayloadChars + 0.3 * mean;
  }

  /** A run took a slot: `used` are in use now. */
  slotTaken(used: number): void {
    this.accrue();
    this.inUse = used;
  }

  /**
   * A handler returned and gave its slot back: `used` are in use now. `startedAt` (now()'s
   * clock; default: measured) says when its run started: a run started before the last
   * start-over is not counted as finished.
   */
  slotFreed(used: number, startedAt = Number.POSITIVE_INFINITY): void {
    this.accrue();
    this.inUse = used;
    if (startedAt >= this.startedOverAt) this.finished += 1;
  }

  /** A claim transaction took `ms`, commit included. */
  claimTook(ms: number): void {
    const now = this.now();
    if (now - ms - this.lastClaimAt >= LONG_CLAIM_GAP_MS && this.startedOverAt < this.lastClaimAt) this.startOver();
    this.lastClaimAt = now;
    if (this.skipClaimTime) {
      this.skipClaimTime = false;
      return;
    }
    this.claimMs = 0.7 * this.claimMs + 0.3 * ms;
  }

  /**
   * Folds the runs finished since the last fold into the per-slot rate (every 5 ms, or
   * sooner once `concurrency` runs have finished) and returns the jobs to hold beyond the
   * free slots now (0 to `max`, within the payload budget).
   */
  resize(): number {
    if (this.max === 0) return 0;
    this.accrue();
    const now = this.changedAt;
    // Sizing a claim after a long gap (the last claim answered long ago): start over first.
    if (now - this.lastClaimAt >= LONG_CLAIM_GAP_MS && this.startedOverAt < this.lastClaimAt) this.startOver();
    // A window closes after 5 ms, or as soon as a slot's worth of runs per slot has finished.
    if (now - this.windowStart >= 5 || this.finished >= this.concurrency) {
      // A window with runs finishing but hardly any slot-time (handlers that return at
      // once) counts at least a microsecond per run.
      const measured = this.finished === 0 ? 0 : this.finished / Math.max(this.busySlotMs, this.finished / 1000);
      // The first measure is taken as it is (a fresh pool has nothing to smooth it with).
      // A window with slots busy is a measure: the pace so far keeps 0.6 of its weight
      // (stuck handlers measure 0 and pull it down window by window). A window with no
      // slot busy measures nothing, so the pace so far fades with the time it covers, 0.6
      // per 5 ms: after an idle poll interval nothing of it is left; else the pace of
      // handlers that returned at once (up to 1,000 runs per slot-millisecond) would
      // outlive the idle while, and slow work arriving after it would be claimed up to
      // `max` ahead.
      const kept = this.busySlotMs === 0 ? 0.6 ** ((now - this.windowStart) / 5) : 0.6;
      this.perSlotMs = this.perSlotMs === 0 ? measured : kept * this.perSlotMs + (1 - kept) * measured;
      this.finished = 0;
      this.busySlotMs = 0;
      this.windowStart = now;
    }
    const byPayload = this.meanPayloadChars > 0 ? Math.floor(this.payloadChars / this.meanPayloadChars) : this.max;
    return Math.min(this.max, byPayload, Math.floor(this.perSlotMs * this.concurrency * this.claimMs * 2));
  }

  private accrue(): void {
    const now = this.now();
    this.busySlotMs += this.inUse * (now - this.changedAt);
    this.changedAt = now;
  }
}
