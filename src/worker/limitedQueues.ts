import type { QueueLimit } from '../store/index.ts';
import type { Task } from '../tasks/define.ts';

/**
 * The queues of this pool's limited kinds (tasks with a cluster-wide `concurrency`), and
 * which of them the last claims found at their limit. A queue at its limit is left out
 * of claims, like an empty queue, until the next poll (`pollMs` after it was found so)
 * or until a run of its kind in this process ends; so a busy pool does not keep taking
 * the kind's lock for nothing, and an idle one does not spin.
 *
 * Plain bookkeeping on the event loop.
 */
export class LimitedQueues {
  /** Queue → its kind's limit, for every limited kind this pool runs. */
  readonly byQueue: ReadonlyMap<string, QueueLimit>;
  /** Kind → its queue, for every limited kind this pool runs. */
  private readonly queueOfKind: ReadonlyMap<string, string>;
  /** Queue → when a claim found it at its limit (Date.now()). */
  private readonly fullSince = new Map<string, number>();

  constructor(
    tasks: readonly Task[],
    private readonly pollMs: number,
  ) {
    this.byQueue = new Map(
      tasks.filter((t) => t.concurrency !== null).map((t) => [t.queue, { kind: t.name, maxRunning: t.concurrency! }]),
    );
    this.queueOfKind = new Map([...this.byQueue].map(([queue, limit]) => [limit.kind, queue]));
  }

  /**
   * The queue `job` must run in when it is of a limited kind claimed from another queue
   * (a process that did not know the task enqueued it there, where no limit holds);
   * undefined for every other job.
   */
  misplaced(job: { kind: string; queue: string }): string | undefined {
    const queue = this.queueOfKind.get(job.kind);
    return queue !== undefined && queue !== job.queue ? queue : undefined;
  }

  /** `queues` without those at their limit since less than a poll ago (the same array when none is). */
  claimable(queues: string[], now = Date.now()): string[] {
    if (this.fullSince.size === 0) return queues;
    for (const [queue, since] of this.fullSince) if (now - since >= this.pollMs) this.fullSince.delete(queue);
    return this.fullSince.size === 0 ? queues : queues.filter((q) => !this.fullSince.has(q));
  }

  /** A claim found or left these queues at their limit. */
  reachedLimit(queues: Iterable<string>, now = Date.now()): void {
    for (const queue of queues) this.fullSince.set(queue, now);
  }

  /**
   * A run of `kind` (from `queue`) ended here, freeing one of its kind's places: true when
   * that queue was held back, now claimable again (the caller wakes its claim loop).
   */
  runEnded(queue: string): boolean {
    return this.fullSince.delete(queue);
  }
}
