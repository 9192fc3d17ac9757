import { Wakeup } from '../runtime/wakeup.ts';
import type { JobRun } from './jobRun.ts';
import type { Prefetch } from './prefetch.ts';

/**
 * The pool's worker slots: which runs hold one (in start order) and which are not yet
 * settled (handler running, or its final write in flight). A run takes a slot when it
 * starts and gives it back once: as its handler returns a plain success (its batched
 * completion may still be in flight), otherwise when it settles. Settling frees the slot
 * too, so every run frees exactly once.
 *
 * Plain bookkeeping on the event loop: nothing here starts a run. A freed slot (or a
 * shrunk completion backlog) notifies `room`, which the pool's start loop waits on, so
 * the next run starts on that loop's own turn, never on the stack of the run that freed it.
 */
export class RunSlots {
  private readonly holding = new Set<JobRun>();
  private readonly unsettled = new Set<JobRun>();
  /** When a run last took a slot (performance.now()); undefined before the first. */
  private lastTaken: number | undefined;
  /** Limited queues (see LimitedQueues) with runs settled since the last takeSettledQueues. */
  private settledQueues = new Set<string>();
  /** Resolved (and cleared) each time `unsettled` becomes empty. */
  private whenAllSettled: Array<() => void> = [];
  /** Notified when a slot frees or the finisher's backlog shrinks: there may be room to start runs. */
  readonly room = new Wakeup();

  constructor(
    readonly concurrency: number,
    private readonly prefetch: Prefetch,
    /** Queues whose settled runs are reported (and notify `room`): the limited ones. */
    private readonly watchedQueues: ReadonlySet<string> = new Set(),
  ) {}

  /** Runs holding a slot. */
  get used(): number {
    return this.holding.size;
  }

  get full(): boolean {
    return this.holding.size >= this.concurrency;
  }

  /** `run` starts: it holds a slot and is unsettled. */
  take(run: JobRun): void {
    this.holding.add(run);
    this.unsettled.add(run);
    this.lastTaken = performance.now();
    this.prefetch.slotTaken(this.holding.size);
  }

  /** Gives `run`'s slot back (once; later calls do nothing). */
  free(run: JobRun): void {
    if (!this.holding.delete(run)) return;
    this.prefetch.slotFreed(this.holding.size, run.startedAt);
    this.room.notify();
  }

  /** `run` is settled: its final write is done, failed or given up. Frees its slot if it still holds one. */
  settle(run: JobRun): void {
    this.free(run);
    if (this.watchedQueues.has(run.job.queue)) {
      this.settledQueues.add(run.job.queue);
      this.room.notify();
    }
    if (!this.unsettled.delete(run) || this.unsettled.size > 0) return;
    for (const resolve of this.whenAllSettled.splice(0)) resolve();
  }

  /** The watched queues with runs settled since the last call (those rows are no longer reserved). */
  takeSettledQueues(): Set<string> {
    const queues = this.settledQueues;
    this.settledQueues = new Set();
    return queues;
  }

  isSettled(run: JobRun): boolean {
    return !this.unsettled.has(run);
  }

  /** When the run holding a slot longest started (performance.now()), or undefined when none does. */
  oldestStartedAt(): number | undefined {
    for (const run of this.holding) return run.startedAt;
    return undefined;
  }

  /**
   * When a run last took a slot (performance.now()), or undefined before the first: while
   * the slots are full, the newest of the runs holding them (to fill up again after a slot
   * freed, a run must have taken it).
   */
  get lastTakenAt(): number | undefined {
    return this.lastTaken;
  }

  /** Whether every run holding a slot is still in its handler (none writing its result, none waiting to start). A walk of the slots. */
  allInHandler(): boolean {
    for (const run of this.holding) if (!run.inHandler) return false;
    return true;
  }

  /** The kind of each run holding a slot. */
  heldKinds(): string[] {
    return [...this.holding].map((run) => run.job.kind);
  }

  /** Runs whose handler is still running, or whose effects are (not a plain final write): what shutdown interrupts. */
  inHandler(): JobRun[] {
    return [...this.holding].filter((run) => run.inHandler || run.effectsAbort !== null);
  }

  /** Resolves once no run is unsettled (at once when none is). */
  allSettled(): Promise<void> {
    if (this.unsettled.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.whenAllSettled.push(resolve));
  }
}
