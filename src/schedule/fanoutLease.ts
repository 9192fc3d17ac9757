import type { SchedulerStore } from './schedulerStore.ts';

/** Thrown when another daemon took a tick's fan-out over (ours was presumed dead). */
export class TickTakenOverError extends Error {
  override name = 'TickTakenOverError';
}

/**
 * Thrown when a daemon gave up its own fan-out of a tick: nothing renewed the fan-out's
 * lease for a whole lease (jobs() yielded no entity and no batch was written), so other
 * daemons may take the tick over.
 */
export class FanoutAbandonedError extends Error {
  override name = 'FanoutAbandonedError';
}

/**
 * The lease a daemon holds on one tick's fan-out (store/ledger.ts: `fanout_until`, fenced
 * by `claimed_by`), kept while the fan-out makes progress and given up when it makes none.
 *
 * Contract under concurrency:
 * - The lease is renewed (renewIfDue) as the fan-out makes progress, at most once a third
 *   of a lease, one renewal at a time. A renewal that finds the tick no longer this
 *   daemon's aborts `signal` with TickTakenOverError and throws it.
 * - When a whole lease passes since the claim or the last renewal returned, with no
 *   renewal in flight, `signal` aborts with FanoutAbandonedError. Counted from when those
 *   statements returned, so the database's `fanout_until` (set as they ran) has passed
 *   by then: the fan-out never gives its tick up, nor (its caller) the overlap lock,
 *   while its lease still stands, and other daemons may take the tick over from then on.
 *   A renewal in flight at that moment is waited for: if it lands, the lease stands.
 * - Once `signal` has aborted it stays aborted: renewIfDue throws its reason, whatever
 *   the ledger says, so a fan-out never goes back to a tick it gave up.
 * - `end()` stops the clock when the fan-out is over (whatever its outcome); nothing
 *   aborts afterwards.
 */
export class FanoutLease {
  private readonly gone = new AbortController();
  /** performance.now() when the claim or the latest renewal returned. */
  private renewedAt: number;
  private renewing: Promise<void> | null = null;
  private timer: NodeJS.Timeout | undefined;
  private ended = false;

  /** `claimedAt`: performance.now() when claimTickFanout returned this tick. */
  constructor(
    private readonly deps: { store: Pick<SchedulerStore, 'renewTickIfOwned'>; id: number; claimedBy: string; leaseMs: number; at: string },
    claimedAt: number,
  ) {
    this.renewedAt = claimedAt;
    this.arm();
  }

  /** Aborts once the lease is lost (TickTakenOverError) or ran out (FanoutAbandonedError), with that error as its reason. */
  get signal(): AbortSignal {
    return this.gone.signal;
  }

  /** Why the lease is gone, or null while it is held. */
  get lost(): Error | null {
    return this.gone.signal.aborted ? (this.gone.signal.reason as Error) : null;
  }

  /**
   * Renews the lease if a third of it has passed since it last was (or joins the renewal in
   * flight); undefined, awaiting nothing, when it is not due. Rejects with the loss once
   * the lease is gone. Other failures (a lost connection) reject as they are.
   */
  renewIfDue(): Promise<void> | undefined {
    if (this.gone.signal.aborted) return Promise.reject(this.gone.signal.reason);
    if (this.renewing) return this.renewing;
    if (performance.now() - this.renewedAt < this.deps.leaseMs / 3) return undefined;
    this.renewing = this.renew().finally(() => (this.renewing = null));
    return this.renewing;
  }

  /** Stops the clock: the fan-out is over. */
  end(): void {
    this.ended = true;
    clearTimeout(this.timer);
  }

  private async renew(): Promise<void> {
    const { store, id, claimedBy, leaseMs, at } = this.deps;
    // No abandonment while this is in flight (check() waits for it): only this can end the lease now.
    const owned = await store.renewTickIfOwned(id, claimedBy, leaseMs);
    if (!owned) {
      this.gone.abort(new TickTakenOverError(`tick ${at} was taken over by another daemon`));
      throw this.gone.signal.reason;
    }
    this.renewedAt = performance.now();
  }

  private arm(): void {
    const leftMs = this.renewedAt + this.deps.leaseMs - performance.now();
    this.timer = setTimeout(() => this.check(), Math.max(0, leftMs));
  }

  /** At the deadline the timer was set for: renewed since (re-armed), renewing (waited for), or run out. */
  private check(): void {
    if (this.ended || this.gone.signal.aborted) return;
    if (this.renewing) {
      this.renewing.then(
        () => this.check(),
        () => this.check(),
      );
      return;
    }
    if (performance.now() - this.renewedAt < this.deps.leaseMs) {
      this.arm();
      return;
    }
    const { leaseMs, at } = this.deps;
    this.gone.abort(new FanoutAbandonedError(`the fan-out of tick ${at} made no progress for its whole lease (${leaseMs} ms) and was abandoned; any daemon may resume it`));
  }
}
