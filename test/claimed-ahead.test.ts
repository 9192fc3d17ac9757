/**
 * Jobs a claim brought beyond the free slots wait in the read-ahead buffer. One that waited
 * long (behind slow handlers) has its lease renewed before its handler starts, so a cancel
 * that came meanwhile keeps it from starting; and a run whose lease is found lost or whose
 * job is cancelled gives its slot back at once, even if its handler ignores its signal.
 * The pool runs against a scripted store (no database): the test answers each claim and
 * each renewal, and moves the clock past the recheck threshold with a fake Date.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { sleep, within } from '../src/runtime/wakeup.ts';
import type { Lease } from '../src/store/index.ts';
import { defineTask } from '../src/tasks/define.ts';
import { TaskRegistry } from '../src/tasks/registry.ts';
import { EventLog } from './support/events.ts';
import { claimedJob } from './support/jobs.ts';
import { scriptedStore, withPool } from './support/scriptedStore.ts';

afterEach(() => {
  vi.useRealTimers();
});

/** A task whose first run waits for `open()`; records the id of every job whose handler started. */
function gatedTask() {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const started: number[] = [];
  const task = defineTask({
    name: 'gated',
    handle: (job) => {
      started.push(job.id);
      return started.length === 1 ? gate : Promise.resolve();
    },
  });
  return { tasks: new TaskRegistry([task]), started, open };
}

const job = (id: number) => claimedJob(id, 'gated');

/** A store that takes unstarted releases only in batches, recording each batch's ids; job `lostId` was no longer ours. */
function batchedReleases(lostId: number) {
  const batches: number[][] = [];
  const fake = scriptedStore({
    writes: {
      releaseUnstarted: async () => {
        throw new Error('many unstarted jobs are released in batches, not one by one');
      },
      releaseUnstartedMany: async (leases: Lease[]) => (batches.push(leases.map((l) => l.id)), new Set(leases.filter((l) => l.id !== lostId).map((l) => l.id))),
    },
  });
  return { fake, batches };
}

describe('a job claimed ahead of a free slot', () => {
  it('never starts its handler when an operator cancelled it while it waited', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const { tasks, started, open } = gatedTask();
    const log = new EventLog();
    const renewed: number[] = [];
    const fake = scriptedStore({
      writes: {
        renew: async (lease: Lease) => (renewed.push(lease.id), lease.id !== 2),
        cancellationOf: async (lease: Lease) => (lease.id === 2 ? { by: 'ops', reason: 'not wanted' } : null),
      },
    });
    await withPool(fake, { pollMs: 60_000, tasks, concurrency: 1, log }, async () => {
      (await fake.claim(1)).answer([job(1), job(2)]); // one slot: job 2 waits in the buffer
      await new Promise((resolve) => setImmediate(resolve));
      expect(started).toEqual([1]);
      vi.setSystemTime(Date.now() + 1_000); // job 2 has waited a second
      open();
      const [cancelled] = await log.waitFor('job_cancelled');
      expect(cancelled).toMatchObject({ job_id: 2, cancelled_by: 'ops', cancel_reason: 'not wanted' });
      expect(cancelled.msg).toMatch(/before its handler started; not run/);
      // Its slot is free again: the next claim asks for it.
      expect((await within(fake.claim(2), 2_000))?.request.limit).toBe(1);
      expect(started).toEqual([1]);
      expect(renewed).toEqual([2]);
    });
  });

  it('starts with its lease renewed first when it waited, and at once when it did not', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const { tasks, started, open } = gatedTask();
    const order: string[] = [];
    const fake = scriptedStore({
      writes: {
        renew: async (lease: Lease) => (order.push(`renew ${lease.id}`), true),
      },
    });
    const recording = new TaskRegistry([
      defineTask({
        name: 'gated',
        handle: (j, ctx) => {
          order.push(`start ${j.id}`);
          return tasks.get('gated')!.handle(j, ctx);
        },
      }),
    ]);
    await withPool(fake, { pollMs: 60_000, tasks: recording, concurrency: 1 }, async () => {
      (await fake.claim(1)).answer([job(1), job(2), job(3)]);
      await new Promise((resolve) => setImmediate(resolve));
      vi.setSystemTime(Date.now() + 1_000);
      open(); // job 2 waited a second: renewed, then started; job 3 then waited as long
      await within(fake.claim(2), 2_000);
      expect(order).toEqual(['start 1', 'renew 2', 'start 2', 'renew 3', 'start 3']);
      expect(started).toEqual([1, 2, 3]);
    });
  });

  it('starts without a renewal when it waited only a moment (a fast drain costs no round trip more)', async () => {
    const { tasks, started, open } = gatedTask();
    const fake = scriptedStore({ writes: { renew: () => Promise.reject(new Error('no renewal expected')) } });
    await withPool(fake, { pollMs: 60_000, tasks, concurrency: 1 }, async () => {
      (await fake.claim(1)).answer([job(1), job(2)]);
      await new Promise((resolve) => setImmediate(resolve));
      open();
      await within(fake.claim(2), 2_000);
      expect(started).toEqual([1, 2]);
    });
  });
});

describe('a stop with jobs claimed ahead', () => {
  it('hands the whole read-ahead buffer back in one batched release, not a statement per job', async () => {
    const { tasks, started, open } = gatedTask();
    const log = new EventLog();
    const { fake, batches } = batchedReleases(5);
    const buffered = Array.from({ length: 700 }, (_, i) => job(i + 2));
    let result: { released: number } | undefined;
    await withPool(fake, { pollMs: 60_000, tasks, concurrency: 1, log }, async (pool) => {
      (await fake.claim(1)).answer([job(1), ...buffered]); // one slot: 700 jobs wait in the buffer
      await new Promise((resolve) => setImmediate(resolve));
      expect(started).toEqual([1]);
      const stopping = pool.stop({ graceMs: 1_000 });
      open();
      result = await stopping;
    });
    expect(batches.map((ids) => ids.length)).toEqual([500, 200]);
    expect(batches.flat()).toEqual(buffered.map((j) => j.id));
    expect(result!.released).toBe(699);
    expect(log.named('claim_released_on_shutdown')).toHaveLength(699);
    expect(log.named('claim_release_lost').map((e) => e.job_id)).toEqual([5]);
  });
});

describe('a stop while a buffered job has its lease renewed before it starts', () => {
  it('waits for that renewal and counts the job it then releases, even with no grace', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const { tasks, started, open } = gatedTask();
    const released: string[] = [];
    let renewalSent!: () => void;
    const renewing = new Promise<void>((resolve) => (renewalSent = resolve));
    let answerRenewal!: (held: boolean) => void;
    const fake = scriptedStore({
      writes: {
        renew: () => (renewalSent(), new Promise<boolean>((answer) => (answerRenewal = answer))),
        releaseUnstarted: async () => (released.push('released'), true),
      },
    });
    let result: { released: number } | undefined;
    await withPool(fake, { pollMs: 60_000, tasks, concurrency: 1 }, async (pool) => {
      (await fake.claim(1)).answer([job(1), job(2)]); // one slot: job 2 waits in the buffer
      await new Promise((resolve) => setImmediate(resolve));
      vi.setSystemTime(Date.now() + 1_000); // it waited long enough to be rechecked first
      open();
      await renewing;
      const stopping = pool.stop({ graceMs: 0 }).then((r) => (result = r));
      await sleep(300); // past the drain's own wait for runs that honour their signal
      expect(result).toBeUndefined();
      answerRenewal(true);
      await stopping;
      expect(released).toEqual(['released']);
      expect(result!.released).toBe(1);
      expect(started).toEqual([1]);
    });
  });
});

describe('a job claimed ahead that went stale', () => {
  it('is released once the database answers again when its release met an outage, not left to its lease', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const { tasks, started, open } = gatedTask();
    const log = new EventLog();
    const releases: number[] = [];
    const lost = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:3306'), { code: 'ECONNREFUSED' });
    const fake = scriptedStore({
      writes: {
        // The first release finds the database gone; the pool's probe (now()) then finds it back.
        releaseUnstarted: async (lease: Lease) => {
          releases.push(lease.id);
          if (releases.length === 1) throw lost;
          return true;
        },
      },
    });
    await withPool(fake, { pollMs: 20, tasks, concurrency: 1, log }, async () => {
      (await fake.claim(1)).answer([job(1), job(2)]); // one slot: job 2 waits in the buffer
      await new Promise((resolve) => setImmediate(resolve));
      vi.setSystemTime(Date.now() + 30_000); // past a third of job 2's 60 s lease: stale
      const [released] = await log.waitFor('claim_released_unstarted', 1, 5_000);
      expect(released).toMatchObject({ job_id: 2 });
      expect(releases).toEqual([2, 2]);
      expect(log.named('claim_release_failed')).toEqual([]);
      open();
      expect(started).toEqual([1]);
    });
  });
});

describe('many jobs claimed ahead that went stale together', () => {
  it('are handed back in batched releases, not a statement each queued on the pool until their leases ran out', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const { tasks, started, open } = gatedTask();
    const log = new EventLog();
    const { fake, batches } = batchedReleases(7);
    const buffered = Array.from({ length: 700 }, (_, i) => job(i + 2));
    await withPool(fake, { pollMs: 20, tasks, concurrency: 1, log }, async () => {
      (await fake.claim(1)).answer([job(1), ...buffered]); // one slot: 700 jobs wait in the buffer
      await new Promise((resolve) => setImmediate(resolve));
      vi.setSystemTime(Date.now() + 30_000); // past a third of their 60 s leases: all stale
      await log.waitFor('claim_released_unstarted', 699, 5_000);
      expect(batches.map((ids) => ids.length)).toEqual([500, 200]);
      expect(batches.flat()).toEqual(buffered.map((j) => j.id));
      expect(log.named('claim_release_lost').map((e) => e.job_id)).toEqual([7]);
      expect(log.named('claim_release_failed')).toEqual([]);
      open();
      expect(started).toEqual([1]);
    });
  });

  it('are released once the database answers again when their batch met an outage', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const { tasks, open } = gatedTask();
    const log = new EventLog();
    const lost = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:3306'), { code: 'ECONNREFUSED' });
    let sent = 0;
    const fake = scriptedStore({
      writes: {
        releaseUnstartedMany: async (leases: Lease[]) => {
          sent += 1;
          if (sent === 1) throw lost;
          return new Set(leases.map((l) => l.id));
        },
      },
    });
    await withPool(fake, { pollMs: 20, tasks, concurrency: 1, log }, async () => {
      (await fake.claim(1)).answer([job(1), job(2), job(3)]);
      await new Promise((resolve) => setImmediate(resolve));
      vi.setSystemTime(Date.now() + 30_000);
      await log.waitFor('claim_released_unstarted', 2, 5_000);
      expect(sent).toBe(2);
      expect(log.named('claim_release_failed')).toEqual([]);
      open();
    });
  });
});

describe('a running job cancelled or lost', () => {
  it('gives its slot back at once even when its handler ignores its signal', async () => {
    const log = new EventLog();
    let handlerEnded = false;
    const stuck = defineTask({
      name: 'gated',
      lease: '1s', // renewed every 333 ms
      handle: () => new Promise<void>(() => undefined).finally(() => (handlerEnded = true)), // never settles, never reads ctx.signal
    });
    const fake = scriptedStore({
      writes: {
        renew: async () => false,
        cancellationOf: async () => ({ by: 'ops', reason: 'runaway' }),
      },
    });
    await withPool(fake, { pollMs: 60_000, tasks: new TaskRegistry([stuck]), concurrency: 1, log }, async () => {
      (await fake.claim(1)).answer([{ ...job(1), leaseMs: 1_000 }]);
      const [cancelled] = await log.waitFor('job_cancelled');
      expect(cancelled.msg).toMatch(/result discarded/);
      // The slot is free while the handler still runs, abandoned.
      expect((await within(fake.claim(2), 2_000))?.request.limit).toBe(1);
      expect(handlerEnded).toBe(false);
    });
  });
});
