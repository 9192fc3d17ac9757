/**
 * Admission for console requests. The console reads through the engine's own database
 * pool, so requests rendering at once take connections the engine's completions, lease
 * renewals and ticks wait for: a flood of slow pages (a big dead-letter table) delayed
 * them by seconds. The gate lets `running` requests in at once and up to `waiting` more
 * queue in arrival order, each for at most `waitMs`; a request beyond those, or one that
 * waited that long, is turned away (the caller answers 503). Without the bound, requests
 * queued while the database made each page wait out a lock (a table another session
 * holds: 10 s each) were answered one pair every 10 s, the last after 50 s.
 */
export class ConsoleGate {
  private inside = 0;
  private readonly queue: Array<() => void> = [];

  constructor(private readonly limits: { running: number; waiting: number; waitMs?: number }) {}

  /**
   * Resolves with a release function once the request may run (call it exactly once,
   * when done), or with null: at once when `waiting` requests already queue, or once it
   * has queued for `waitMs` without being let in.
   */
  async enter(): Promise<(() => void) | null> {
    if (this.inside < this.limits.running) {
      this.inside += 1;
      return this.releaser();
    }
    if (this.queue.length >= this.limits.waiting) return null;
    return new Promise((resolve) => {
      const admit = () => {
        if (timer) clearTimeout(timer);
        // The slot was handed over by release(): `inside` still counts it.
        resolve(this.releaser());
      };
      const timer =
        this.limits.waitMs === undefined
          ? null
          : setTimeout(() => {
              const at = this.queue.indexOf(admit);
              if (at >= 0) this.queue.splice(at, 1);
              resolve(null);
            }, this.limits.waitMs);
      this.queue.push(admit);
    });
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.queue.shift();
      if (next) next();
      else this.inside -= 1;
    };
  }
}
