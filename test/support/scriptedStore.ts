import type { ClaimCursor, ClaimedJob, ClaimRequest } from '../../src/store/index.ts';
import { TaskRegistry } from '../../src/tasks/registry.ts';
import { WorkerPool } from '../../src/worker/pool.ts';
import type { WorkerStore } from '../../src/worker/workerStore.ts';
import { EventLog } from './events.ts';

/** One claim the pool sent: the cursors it carried, and how to answer it. */
interface SentClaim {
  request: ClaimRequest;
  /** The cursors as the claim received them (the pool's map changes afterwards). */
  cursors: Map<string, ClaimCursor>;
  answer(jobs: ClaimedJob[]): void;
}

/**
 * A store whose claims wait for the test to answer them, one lane (or `lanes`); no
 * database. Completions of plain successes are all written; every other write is refused
 * unless `writes` gives it.
 */
export function scriptedStore({ lanes = 1, writes = {} }: { lanes?: number; writes?: Partial<WorkerStore> } = {}) {
  const sent: SentClaim[] = [];
  let arrived: (() => void) | null = null;
  const refuse = () => Promise.reject(new Error('not part of this test'));
  const store: WorkerStore = {
    claimConnections: lanes,
    claim: (request) =>
      new Promise((resolve) => {
        sent.push({ request, cursors: new Map(request.cursors), answer: resolve });
        arrived?.();
      }),
    readyQueues: async () => ['default'],
    pausedQueues: async () => [],
    now: async () => new Date(),
    servingOf: refuse,
    cancellationOf: refuse,
    completeMany: async (leases) => new Set(leases.map((lease) => lease.id)),
    complete: refuse,
    fail: refuse,
    renew: refuse,
    renewUnrecovered: refuse,
    release: refuse,
    releaseInterrupted: refuse,
    releaseUnstarted: refuse,
    moveToQueue: refuse,
    // Shutdown's batched release goes through releaseUnstarted one lease at a time.
    releaseUnstartedMany: async (leases, reason) => {
      const released = new Set<number>();
      for (const lease of leases) if (await store.releaseUnstarted(lease, reason)) released.add(lease.id);
      return released;
    },
    ...writes,
  };
  /** The `n`th claim (from 1), once the pool has sent it. */
  const claim = async (n: number): Promise<SentClaim> => {
    while (sent.length < n) await new Promise<void>((resolve) => (arrived = resolve));
    return sent[n - 1];
  };
  return { store, sent, claim };
}


/**
 * Runs `body` with a started pool on `fake` (queue 'default'; no tasks, concurrency 4 and
 * a 20 ms poll unless told), then stops it, answering every claim left open or sent meanwhile.
 */
export async function withPool(
  fake: ReturnType<typeof scriptedStore>,
  options: { pollMs?: number; tasks?: TaskRegistry; concurrency?: number; log?: EventLog; slotsHeldWarnMs?: number },
  body: (pool: WorkerPool) => Promise<void>,
): Promise<void> {
  const { pollMs = 20, tasks = new TaskRegistry(), concurrency = 4, log = new EventLog(), slotsHeldWarnMs } = options;
  const pool = new WorkerPool({ store: fake.store, tasks, log: log.logger, concurrency, queues: ['default'], lockedBy: 'test:1', pollMs, slotsHeldWarnMs });
  pool.start();
  try {
    await body(pool);
  } finally {
    // Claims the pool sends while it stops are answered too (answering twice does nothing).
    let stopped = false;
    const stopping = pool.stop({ graceMs: 0 }).then(() => (stopped = true));
    while (!stopped) {
      for (const claim of fake.sent) claim.answer([]);
      await new Promise((resolve) => setImmediate(resolve));
    }
    await stopping;
  }
}
