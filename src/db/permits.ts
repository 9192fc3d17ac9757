/**
 * A fixed number of permits, handed out first come, first served: how a share of a pool's
 * connections is kept to a bound (Database.dedicated).
 */
export class Permits {
  private inUse = 0;
  private readonly queue: Array<{ grant: () => void }> = [];

  /** `limit`: permits that may be held at once, a whole number of at least 1. */
  constructor(readonly limit: number) {
    if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError(`a permit limit must be a whole number of at least 1 (got ${limit})`);
  }

  /** Permits held now. */
  get held(): number {
    return this.inUse;
  }

  /** Callers waiting for a permit now. */
  get waiting(): number {
    return this.queue.length;
  }

  /**
   * Resolves with the function that gives the permit back (once; calling it again does
   * nothing) as soon as one is free, in the order asked. Rejects with the signal's reason,
   * holding nothing, when `signal` aborts first (or had already).
   */
  acquire(signal?: AbortSignal): Promise<() => void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    // A permit given back goes straight to a waiter, so none is free while any wait.
    if (this.inUse < this.limit) {
      this.inUse += 1;
      return Promise.resolve(this.releaser());
    }
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        const at = this.queue.indexOf(entry);
        if (at >= 0) this.queue.splice(at, 1);
        reject(signal!.reason);
      };
      const entry = {
        grant: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve(this.releaser());
        },
      };
      this.queue.push(entry);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** A permit's release: hands it straight to the next waiter, if any. */
  private releaser(): () => void {
    let given = false;
    return () => {
      if (given) return;
      given = true;
      const next = this.queue.shift();
      if (next) next.grant(); // the permit passes on: inUse stays
      else this.inUse -= 1;
    };
  }
}
