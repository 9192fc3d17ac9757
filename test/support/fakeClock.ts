import type { Clock } from '../../src/schedule/clock.ts';

interface Sleeper {
  at: number;
  seq: number;
  resolve: () => void;
  signal: AbortSignal;
  onAbort: () => void;
}

/**
 * A deterministic Clock for driving schedulers through simulated time, event to event.
 *
 * Time only moves when the test moves it. The test tells the clock how many ticker loops
 * are running (`addLoops` / `removeLoops`); `settled()` resolves once every one of them is
 * blocked in `sleepUntil`, i.e. the simulated world is quiescent and every pass (and its
 * database work) is done. Then `advance()` moves `now` to the earliest pending wake-up and
 * releases the sleepers due by then, or `advanceTo(t)` jumps to a chosen instant (a stall:
 * every sleeper due by `t` wakes at once, late, and sees `now = t`).
 *
 * Everything is promise-driven: no polling, no real sleeps. The only real timer is the
 * watchdog of `settled()`, which turns a hang into a failure that says who is missing.
 */
export class FakeClock implements Clock {
  private nowMs: number;
  private seq = 0;
  private readonly sleepers: Sleeper[] = [];
  private expectedLoops = 0;
  private settleWaiters: Array<() => void> = [];
  /** Sleeps that resolved at once because `at` was not in the future. */
  immediateWakes = 0;
  /** Sleeps released by advancing the clock. */
  wakes = 0;

  constructor(start: Date | number) {
    this.nowMs = typeof start === 'number' ? start : start.getTime();
  }

  now(): Date {
    return new Date(this.nowMs);
  }

  get nowMsValue(): number {
    return this.nowMs;
  }

  sleepUntil(at: Date, signal: AbortSignal): Promise<void> {
    const atMs = at.getTime();
    if (signal.aborted) return Promise.resolve();
    if (!(atMs > this.nowMs)) {
      this.immediateWakes++;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const sleeper: Sleeper = {
        at: atMs,
        seq: this.seq++,
        resolve,
        signal,
        onAbort: () => {
          this.remove(sleeper);
          resolve();
          this.notify();
        },
      };
      signal.addEventListener('abort', sleeper.onAbort, { once: true });
      this.sleepers.push(sleeper);
      this.notify();
    });
  }

  /** Declares `n` more loops that will sleep on this clock (a scheduler's ticker loops). */
  addLoops(n: number): void {
    this.expectedLoops += n;
  }

  /** Declares `n` loops gone (after their scheduler's stop() resolved). */
  removeLoops(n: number): void {
    this.expectedLoops -= n;
    if (this.expectedLoops < 0) throw new Error('FakeClock: more loops removed than added');
    this.notify();
  }

  get loops(): number {
    return this.expectedLoops;
  }

  get sleeping(): number {
    return this.sleepers.length;
  }

  /** The earliest pending wake-up, or null when nobody sleeps. */
  nextWakeAt(): number | null {
    let min: number | null = null;
    for (const s of this.sleepers) if (min === null || s.at < min) min = s.at;
    return min;
  }

  /**
   * Resolves once every declared loop is blocked in sleepUntil. Rejects after `timeoutMs` of
   * real time (a loop stuck on the database, or a wrong loop count) with what it saw.
   */
  settled(timeoutMs = 20_000): Promise<void> {
    if (this.quiescent()) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.settleWaiters = this.settleWaiters.filter((w) => w !== done);
        reject(
          new Error(
            `FakeClock: not quiescent after ${timeoutMs} ms at ${this.now().toISOString()}: ` +
              `${this.sleepers.length} of ${this.expectedLoops} loops sleeping`,
          ),
        );
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        resolve();
      };
      this.settleWaiters.push(done);
    });
  }

  /** Moves `now` to the earliest pending wake-up and releases what is due; returns the new now, or null if nobody sleeps. */
  advance(): number | null {
    const next = this.nextWakeAt();
    if (next === null) return null;
    this.advanceTo(next);
    return next;
  }

  /**
   * Sets `now` to `at` (never backwards) and releases every sleeper due by then, oldest wake-up
   * first. Released loops see `now = at`: when that is past their wake-up they woke late.
   */
  advanceTo(at: Date | number): void {
    const atMs = typeof at === 'number' ? at : at.getTime();
    if (atMs < this.nowMs) throw new Error(`FakeClock: cannot go back from ${this.now().toISOString()} to ${new Date(atMs).toISOString()}`);
    this.nowMs = atMs;
    const due = this.sleepers.filter((s) => s.at <= atMs).sort((a, b) => a.at - b.at || a.seq - b.seq);
    for (const s of due) {
      this.remove(s);
      s.signal.removeEventListener('abort', s.onAbort);
      this.wakes++;
      s.resolve();
    }
  }

  private remove(sleeper: Sleeper): void {
    const i = this.sleepers.indexOf(sleeper);
    if (i >= 0) this.sleepers.splice(i, 1);
  }

  private quiescent(): boolean {
    return this.sleepers.length === this.expectedLoops;
  }

  private notify(): void {
    if (this.sleepers.length > this.expectedLoops) {
      // More sleepers than declared loops: the test's bookkeeping is wrong. Fail loudly via the
      // watchdog rather than declaring a world quiescent that is not.
      return;
    }
    if (!this.quiescent() || this.settleWaiters.length === 0) return;
    for (const wake of this.settleWaiters.splice(0)) wake();
  }
}
