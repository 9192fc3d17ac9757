/**
 * A wake-up that cannot be lost: `notify()` ends every wait in progress at once and, with
 * nobody waiting, the next `wait()`. A loop that reads `seen` before its work and passes
 * it to `wait(ms, seen)` also wakes at once for a notify that came *during* that work
 * (while it was not waiting yet), instead of sleeping `ms` past it.
 */
export class Wakeup {
  private generation = 0;
  private pending = false;
  private readonly waiters = new Set<() => void>();

  /** How many notifications there have been: read before work that a notify could overtake. */
  get seen(): number {
    return this.generation;
  }

  notify(): void {
    this.generation += 1;
    if (this.waiters.size === 0) {
      this.pending = true;
      return;
    }
    for (const finish of [...this.waiters]) finish();
  }

  /**
   * Resolves after `ms`, at a `notify()`, or at once when a notify came since `since` (a
   * `seen` read earlier) — or, without `since`, when one came while nobody waited.
   */
  wait(ms: number, since?: number): Promise<void> {
    if (since === undefined ? this.pending : this.generation !== since) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const finish = () => {
        clearTimeout(timer);
        this.waiters.delete(finish);
        resolve();
      };
      const timer = setTimeout(finish, ms);
      this.waiters.add(finish);
    });
  }
}

/** Resolves after `ms`, or at once when `signal` aborts (never rejects). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** `promise`'s value, or undefined after `ms`; the timer is cleared either way so it never holds the process. */
export function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
