/**
 * A bound on a fan-out run by hand (`admin.tick`), which holds no ledger lease of its
 * own: like the scheduler's fan-out lease (FanoutLease), it gives the fan-out up once a
 * whole `stallMs` passes with no progress (no entity from jobs(), no batch written).
 *
 * Contract: `progress()` is cheap (a clock read: it runs once per entity); `signal`
 * aborts with StalledFanoutError once `stallMs` has passed since the watch started or
 * since the latest progress(), or with the caller's `stop` signal's reason once that
 * aborts; it stays aborted. `end()` stops the clock and lets go of `stop`; nothing aborts
 * afterwards.
 */
export class StalledFanoutError extends Error {
  override name = 'StalledFanoutError';
}

export class StallWatch {
  private readonly gone = new AbortController();
  private progressAt = performance.now();
  private timer: NodeJS.Timeout | undefined;
  private readonly onStop = () => this.abort(this.stop?.reason);

  constructor(
    private readonly stallMs: number,
    private readonly stop?: AbortSignal,
  ) {
    if (stop?.aborted) this.onStop();
    else stop?.addEventListener('abort', this.onStop, { once: true });
    this.arm();
  }

  /** Aborts when the fan-out stalled (StalledFanoutError) or the caller stopped it (its reason). */
  get signal(): AbortSignal {
    return this.gone.signal;
  }

  /** The fan-out made progress: the stall is counted from now. */
  progress(): void {
    this.progressAt = performance.now();
  }

  /** Stops the clock: the fan-out is over. */
  end(): void {
    clearTimeout(this.timer);
    this.stop?.removeEventListener('abort', this.onStop);
  }

  private abort(reason: unknown): void {
    if (this.gone.signal.aborted) return;
    clearTimeout(this.timer);
    this.gone.abort(reason);
  }

  private arm(): void {
    this.timer = setTimeout(() => this.check(), Math.max(0, this.progressAt + this.stallMs - performance.now()));
  }

  private check(): void {
    if (this.gone.signal.aborted) return;
    if (performance.now() - this.progressAt < this.stallMs) {
      this.arm();
      return;
    }
    this.abort(new StalledFanoutError(`jobs() made no progress for ${this.stallMs} ms (no entity yielded, no batch written), the scheduler's fan-out lease: stopped`));
  }
}
