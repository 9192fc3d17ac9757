import { describe, expect, it } from 'vitest';
import { defineTask } from '../src/tasks/define.ts';
import { TaskRegistry } from '../src/tasks/registry.ts';
import { within } from '../src/runtime/wakeup.ts';
import { WorkerPool } from '../src/worker/pool.ts';
import { EventLog } from './support/events.ts';
import { claimedJob } from './support/jobs.ts';
import { scriptedStore } from './support/scriptedStore.ts';

const job = (id: number) => claimedJob(id, 'gated');

describe('claim lanes', () => {
  it('claim again as soon as running jobs make room, not a poll interval later', async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const tasks = new TaskRegistry([defineTask({ name: 'gated', handle: () => gate })]);
    const fake = scriptedStore();
    const pool = new WorkerPool({ store: fake.store, tasks, log: new EventLog().logger, concurrency: 2, queues: ['default'], lockedBy: 'test:1', pollMs: 60_000 });
    pool.start();
    try {
      const first = await fake.claim(1);
      expect(first.request.limit).toBe(2);
      first.answer([job(1), job(2)]); // a full claim: both slots busy, no room for another
      await new Promise((resolve) => setImmediate(resolve));
      expect(fake.sent).toHaveLength(1);
      open(); // the handlers return: two free slots, and the lane is asleep for a minute
      const second = await within(fake.claim(2), 2_000);
      expect(second?.request.limit).toBe(2);
    } finally {
      const stopped = pool.stop({ graceMs: 0 });
      for (const claim of fake.sent) claim.answer([]);
      await stopped;
    }
  });
});
