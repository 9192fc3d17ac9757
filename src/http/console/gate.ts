/**
 * Admission for console requests. The console reads through the engine's own database
 * pool, so requests rendering at once take connections the engine's completions, lease
 * renewals and ticks wait for: a flood of slow pages (a big dead-letter table) delayed
 * them by seconds. The gate lets `running` requests in at once and up to `waiting` more
 * queue in arrival order; a request beyond those is turned away (the caller answers 503).
 */
export class ConsoleGate {
  private inside = 0;
  private readonly queue: Array<() => void> = [];

  constructor(private readonly limits: { running: number; waiting: number }) {}

  /**
   * Resolves with a release function once the request may run (call it exactly once,
   * when done), or with null at once when `waiting` requests already queue.
   */
  async enter(): Promise<(() => void) | null> {
    if (this.inside < this.limits.running) {
      this.inside += 1;
      return this.releaser();
    }
    if (this.queue.length >= this.limits.waiting) return null;
    await new Promise<void>((resolve) => this.queue.push(resolve));
    // The slot was handed over by release(): `inside` still counts it.
    return this.releaser();
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
