import { describe, expect, it } from 'vitest';
import { defineTask } from '../src/tasks/define.ts';
import { TaskRegistry } from '../src/tasks/registry.ts';
import { within } from '../src/runtime/wakeup.ts';
import { claimedJob } from './support/jobs.ts';
import { scriptedStore, withPool } from './support/scriptedStore.ts';

const job = (id: number) => claimedJob(id, 'gated');

describe('claim lanes', () => {
  it('claim again as soon as running jobs make room, not a poll interval later', async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const tasks = new TaskRegistry([defineTask({ name: 'gated', handle: () => gate })]);
    const fake = scriptedStore();
    await withPool(fake, { pollMs: 60_000, tasks, concurrency: 2 }, async () => {
      const first = await fake.claim(1);
      expect(first.request.limit).toBe(2);
      first.answer([job(1), job(2)]); // a full claim: both slots busy, no room for another
      await new Promise((resolve) => setImmediate(resolve));
      expect(fake.sent).toHaveLength(1);
      open(); // the handlers return: two free slots, and the lane is asleep for a minute
      const second = await within(fake.claim(2), 2_000);
      expect(second?.request.limit).toBe(2);
    });
  });

  it("an idle pool's claim asks for every free slot, and only a busy pool splits its claims between the lanes", async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const tasks = new TaskRegistry([defineTask({ name: 'gated', handle: () => gate })]);
    const fake = scriptedStore({ lanes: 2 });
    await withPool(fake, { pollMs: 60_000, tasks, concurrency: 8 }, async () => {
      const first = await fake.claim(1);
      expect(first.request.limit).toBe(8); // lane 1 claims nothing while the pool is idle
      first.answer(Array.from({ length: 8 }, (_, i) => job(i + 1))); // full: the queues are busy
      open();
      await within(fake.claim(3), 2_000);
      expect(fake.sent.slice(1).map((claim) => claim.request.limit)).toEqual([4, 4]); // both lanes, a share each
    });
  });
});
