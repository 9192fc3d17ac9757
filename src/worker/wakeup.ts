/**
 * A level-triggered wake-up: `notify()` before or during `wait()` ends the wait at
 * once; otherwise `wait(ms)` ends after `ms`. One waiter at a time (the claim loop).
 */
export class Wakeup {
  private pending = false;
  private resolve: (() => void) | null = null;
  private timer: NodeJS.Timeout | null = null;

  notify(): void {
    if (this.resolve) this.finish();
    else this.pending = true;
  }

  wait(ms: number): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      this.resolve = resolve;
      this.timer = setTimeout(() => this.finish(), ms);
    });
  }

  private finish(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const resolve = this.resolve;
    this.resolve = null;
    this.pending = false;
    resolve?.();
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
