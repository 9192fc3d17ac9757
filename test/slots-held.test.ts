/**
 * A handler that never settles holds its worker slot for ever, and a schedule with
 * overlap 'allow' takes one more each tick: once every slot is held, no other job starts
 * in the process. The pool says so once (`worker_slots_held`, naming the kinds holding
 * the slots) instead of going quiet. The pool runs against a scripted store (no database).
 */
import { describe, expect, it } from 'vitest';
import { defineTask } from '../src/tasks/define.ts';
import { TaskRegistry } from '../src/tasks/registry.ts';
import { SlotsHeldWatch, type HeldSlots } from '../src/worker/slotsHeld.ts';
import { EventLog } from './support/events.ts';
import { claimedJob } from './support/jobs.ts';
import { scriptedStore, withPool } from './support/scriptedStore.ts';

describe('every worker slot held by the same runs', () => {
  it('is logged once, naming the kinds holding the slots, when handlers never settle', async () => {
    const hangs = defineTask({ name: 'hangs', handle: () => new Promise<void>(() => undefined) });
    const tasks = new TaskRegistry([hangs, defineTask({ name: 'beat', handle: () => undefined })]);
    const log = new EventLog();
    const fake = scriptedStore({ writes: { renew: async () => true } });
    await withPool(fake, { pollMs: 20, tasks, concurrency: 2, log, slotsHeldWarnMs: 200 }, async () => {
      (await fake.claim(1)).answer([claimedJob(1, 'hangs'), claimedJob(2, 'hangs')]);
      const [held] = await log.waitFor('worker_slots_held', 1, 5_000);
      expect(held).toMatchObject({ level: 40, concurrency: 2, kinds: { hangs: 2 } });
      expect(held.held_ms).toBeGreaterThanOrEqual(200);
      expect(held.msg).toMatch(/^all 2 worker slots held for over 200ms by the same runs \(hangs ×2\): no other job can start in this process until one ends; /);
      // Once per episode: the loop goes on checking every poll, and says nothing more.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(log.named('worker_slots_held')).toHaveLength(1);
    });
  });

  it('is not logged after an outage that held every slot with failures waiting to be written: those runs ended, their handlers did not hang', async () => {
    const failing = defineTask({ name: 'reads-the-db', handle: () => Promise.reject(new Error('database gone')) });
    const tasks = new TaskRegistry([failing]);
    const log = new EventLog();
    let down = true;
    const gone = () => Promise.reject(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:3306'), { code: 'ECONNREFUSED' }));
    let written = 0;
    const fake = scriptedStore({
      writes: {
        renew: async () => true,
        renewUnrecovered: async () => true,
        fail: async () => (down ? gone() : (written++, { status: 'retry', retryInMs: 1_000 })),
      },
    });
    fake.store.now = async () => (down ? gone() : new Date());
    await withPool(fake, { pollMs: 20, tasks, concurrency: 2, log, slotsHeldWarnMs: 200 }, async () => {
      (await fake.claim(1)).answer([claimedJob(1, 'reads-the-db'), claimedJob(2, 'reads-the-db')]);
      await log.waitFor('db_unavailable', 1, 5_000);
      // The outage lasts past the watch's 200 ms, both slots held by failures waiting to be written.
      await new Promise((resolve) => setTimeout(resolve, 400));
      down = false;
      await log.waitFor('job_failed', 2, 10_000);
      expect(written).toBe(2);
      expect(log.named('worker_slots_held')).toEqual([]);
    });
  });

  it('is not logged while slots turn over, nor while one is free, nor while a run holding one writes its result', () => {
    const log = new EventLog();
    const state = { full: true, newest: 1_000, inHandler: true, walks: 0 };
    const slots: HeldSlots = {
      concurrency: 2,
      get full() {
        return state.full;
      },
      get lastTakenAt() {
        return state.newest;
      },
      allInHandler: () => {
        state.walks += 1;
        return state.inHandler;
      },
      heldKinds: () => ['a', 'b'],
    };
    const watch = new SlotsHeldWatch(slots, log.logger, 60_000);
    watch.check(60_999); // held 59.999 s
    state.full = false;
    watch.check(70_000); // a slot is free
    state.full = true;
    state.newest = 65_000; // a run started since
    watch.check(120_000);
    expect(log.named('worker_slots_held')).toEqual([]);
    expect(state.walks).toBe(0); // slots turning over are never walked
    state.inHandler = false; // one of them is writing its result: not hanging
    watch.check(125_000);
    expect(log.named('worker_slots_held')).toEqual([]);
    state.inHandler = true;
    watch.check(125_000); // the same runs for 60 s: said, once
    watch.check(200_000);
    expect(log.named('worker_slots_held')).toHaveLength(1);
    state.newest = 190_000; // turned over, then held 60 s anew: said again
    watch.check(200_000);
    watch.check(250_001);
    expect(log.named('worker_slots_held')).toHaveLength(2);
  });

  it('names the ten kinds holding most slots and counts the rest', () => {
    const log = new EventLog();
    const kinds = Array.from({ length: 14 }, (_, i) => `k${String(i).padStart(2, '0')}`).flatMap((k, i) => Array(i < 10 ? 2 : 1).fill(k));
    const watch = new SlotsHeldWatch({ concurrency: kinds.length, full: true, lastTakenAt: 1, allInHandler: () => true, heldKinds: () => kinds }, log.logger, 10);
    watch.check(100);
    const [held] = log.named('worker_slots_held');
    expect(Object.keys(held.kinds)).toHaveLength(10);
    expect(held.msg).toContain('k09 ×2, 4 of other kinds)');
  });
});
