/**
 * A level-triggered wake-up: `notify()` ends every wait in progress at once, or, with
 * nobody waiting, the next `wait()`; otherwise `wait(ms)` ends after `ms`.
 */
export class Wakeup {
  private pending = false;
  private readonly waiters = new Set<() => void>();

  notify(): void {
    if (this.waiters.size === 0) {
      this.pending = true;
      return;
    }
    for (const finish of [...this.waiters]) finish();
  }

  wait(ms: number): Promise<void> {
    if (this.pending) {
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
