import { describe, expect, it } from 'vitest';
import { within } from '../src/runtime/wakeup.ts';
import { defineTask } from '../src/tasks/define.ts';
import { TaskRegistry } from '../src/tasks/registry.ts';
import { ClaimCursors } from '../src/worker/claimCursors.ts';
import { claimedJob } from './support/jobs.ts';
import { scriptedStore, withPool } from './support/scriptedStore.ts';

const AT = { availableAt: '2026-01-01 00:00:00.000001', id: 5, drained: true };


/** One turn of the event loop: the lane, answered, goes back to waiting. */
const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('claim cursors', () => {
  it('drop what lookFromFront names when the next claim starts, even if a claim in flight moves them meanwhile', () => {
    const cursors = new ClaimCursors();
    const inFlight = cursors.current(0);
    cursors.lookFromFront('a');
    inFlight.set('a', AT); // the claim in flight locked rows of 'a'
    inFlight.set('b', AT);
    expect([...cursors.current(1).keys()]).toEqual(['b']);
    inFlight.set('a', AT);
    cursors.lookFromFront();
    inFlight.set('c', AT);
    expect(cursors.current(2).size).toBe(0);
    inFlight.set('a', AT);
    expect(cursors.current(3).get('a')).toEqual(AT); // asked once, dropped once
    expect(cursors.current(1_004).size).toBe(0); // and at least once a second
  });
});

describe('claim cursors in the pool', () => {
  it('keeps them for the claim a local enqueue prompts after a short claim, and drops them for a poll', async () => {
    const fake = scriptedStore();
    await withPool(fake, {}, async (pool) => {
      const first = await fake.claim(1);
      expect(first.cursors.size).toBe(0);
      first.request.cursors!.set('default', AT); // as claimReady leaves it: nothing more after this row
      first.answer([]);
      await turn(); // the lane goes idle...
      pool.wake('default'); // ...and a local enqueue wakes it
      const prompted = await fake.claim(2);
      expect(prompted.cursors.get('default')).toEqual(AT); // skips what earlier claims left behind
      prompted.answer([]);
      const poll = await fake.claim(3); // nothing notified: the poll interval ran out
      expect(poll.cursors.size).toBe(0); // a row enqueued elsewhere may sit behind the cursor
    });
  });

  it('drops them for the claim a local enqueue with a past run time prompts, and for an enqueue naming no queue', async () => {
    const fake = scriptedStore();
    await withPool(fake, { pollMs: 60_000 }, async (pool) => {
      const first = await fake.claim(1);
      first.request.cursors!.set('default', AT);
      first.answer([]);
      await turn();
      pool.wake('default', { pastRunAt: true }); // its row may sit behind the cursor
      const pastRunAt = await fake.claim(2);
      expect(pastRunAt.cursors.size).toBe(0);
      pastRunAt.request.cursors!.set('default', AT);
      pastRunAt.answer([]);
      await turn();
      pool.wake(); // enqueueMany, a schedule's tick: any queue, any run time
      const anyQueue = await fake.claim(3);
      expect(anyQueue.cursors.size).toBe(0);
      anyQueue.request.cursors!.set('default', AT);
      anyQueue.answer([]);
      await turn();
      pool.wake('default');
      expect((await fake.claim(4)).cursors.get('default')).toEqual(AT);
    });
  });
});

describe('claims by id in the pool', () => {
  it('claims a job a local enqueue names by its id while the pool is idle, and by range once a wake names none', async () => {
    const fake = scriptedStore();
    await withPool(fake, { pollMs: 60_000 }, async (pool) => {
      const first = await fake.claim(1);
      expect(first.request.ids).toBeUndefined(); // a fresh pool reads its queues
      first.answer([]);
      await turn();
      pool.wake('default', { id: 41 });
      pool.wake('default', { id: 42 });
      const byId = await fake.claim(2);
      expect(byId.request.ids).toEqual([41, 42]);
      expect(byId.cursors.size).toBe(0); // and no range is read (ClaimRequest.ids)
      byId.answer([]);
      await turn();
      pool.wake('default', { id: 43 });
      pool.wake(); // enqueueMany: rows the ids do not cover
      const byRange = await fake.claim(3);
      expect(byRange.request.ids).toBeUndefined();
      byRange.answer([]);
      await turn();
      pool.wake('default', { id: 44 }); // 43 was covered by that range claim
      expect((await fake.claim(4)).request.ids).toEqual([44]);
    });
  });

  it('still claims by range once a poll interval has passed, however often local enqueues wake it', async () => {
    const fake = scriptedStore();
    await withPool(fake, { pollMs: 40 }, async (pool) => {
      (await fake.claim(1)).answer([]);
      const startedAt = performance.now();
      // A local enqueue every few ms: each wake names its job, and none lets the poll run out.
      for (let n = 2, id = 100; ; n++, id++) {
        await turn();
        pool.wake('default', { id });
        const claim = await fake.claim(n);
        claim.answer([]);
        if (claim.request.ids === undefined) break; // rows enqueued elsewhere get their claim
        expect(performance.now() - startedAt).toBeLessThan(1_000);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      expect(performance.now() - startedAt).toBeGreaterThanOrEqual(35);
    });
  });

  it('still reads its queues by range once a poll interval while local enqueues keep it claiming by id, so rows enqueued elsewhere are not starved', async () => {
    const fake = scriptedStore();
    const pollMs = 100;
    await withPool(fake, { pollMs }, async (pool) => {
      const first = await fake.claim(1);
      first.answer([]);
      await turn();
      let id = 100;
      const since = Date.now();
      pool.wake('default', { id: id++ });
      for (let n = 2; ; n++) {
        const claim = await fake.claim(n);
        if (!claim.request.ids) break; // a claim by range: older rows get their turn
        expect(Date.now() - since).toBeLessThan(10 * pollMs);
        pool.wake('default', { id: id++ }); // the next local enqueue lands while this claim is in flight
        await new Promise((resolve) => setTimeout(resolve, 2)); // the claim's round trip
        claim.answer([]);
      }
      expect(Date.now() - since).toBeLessThan(3 * pollMs);
    });
  });

  it('claims the rest of a burst of local enqueues as soon as slots free, not a poll interval later', async () => {
    const quick = (id: number) => claimedJob(id, 'quick');
    const fake = scriptedStore();
    const tasks = new TaskRegistry([defineTask({ name: 'quick', handle: async () => undefined })]);
    await withPool(fake, { pollMs: 60_000, tasks, concurrency: 2 }, async (pool) => {
      const first = await fake.claim(1);
      first.answer([]);
      await turn();
      for (const id of [1, 2, 3]) pool.wake('default', { id }); // three enqueues, two slots
      const byId = await fake.claim(2);
      expect(byId.request.ids).toEqual([1, 2]);
      byId.answer([quick(1), quick(2)]);
      const rest = await within(fake.claim(3), 2_000);
      expect(rest?.request.ids).toEqual([3]);
    });
  });
});
