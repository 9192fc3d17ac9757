import { describe, expect, it } from 'vitest';
import { defineSchedule, defineTask } from '../src/index.ts';

/**
 * A defined task or schedule is frozen: an assignment throws in strict code (this file, as
 * every ES module, is strict) instead of being read live by some parts and never by others.
 */
const handle = () => undefined;

/** Assigns `value` to `target[key]` past the readonly types, as JavaScript code could. */
const assign = (target: object, key: string, value: unknown) => () => {
  (target as Record<string, unknown>)[key] = value;
};

describe('a defined task or schedule cannot be changed', () => {
  it('refuses an assignment to a task, or to its backoff, with a TypeError', () => {
    const task = defineTask({ name: 'send-email', handle, backoff: { base: '2s' } });
    expect(assign(task, 'queue', 'urgent')).toThrow(TypeError);
    expect(assign(task, 'handle', () => 'other')).toThrow(TypeError);
    expect(assign(task, 'maxAttempts', 1)).toThrow(TypeError);
    expect(assign(task.backoff, 'baseMs', 1)).toThrow(TypeError);
    expect(() => delete (task as { parse?: unknown }).parse).toThrow(TypeError);
    expect({ queue: task.queue, maxAttempts: task.maxAttempts, backoff: task.backoff }).toEqual({
      queue: 'default',
      maxAttempts: 5,
      backoff: { baseMs: 2000, maxMs: 3_600_000 },
    });
  });

  it('refuses an assignment to a schedule, its catchUp or its expect, with a TypeError', () => {
    const nightly = defineSchedule({ name: 'nightly', cron: '0 3 * * *', handle, catchUp: { max: 10 }, expect: { within: '2h' } });
    expect(assign(nightly, 'cron', '* * * * *')).toThrow(TypeError);
    expect(assign(nightly, 'jobs', () => [])).toThrow(TypeError);
    expect(assign(nightly.catchUp, 'max', 100)).toThrow(TypeError);
    expect(assign(nightly.expect!, 'withinMs', 60_000)).toThrow(TypeError);
    expect(nightly.cron).toBe('0 3 * * *');
    expect(nightly.catchUp.max).toBe(10);
  });

  it("refuses a change to the catch-up defaults that schedules without a catchUp share: one schedule's cannot reach another's", () => {
    const first = defineSchedule({ name: 'first', cron: '0 3 * * *', handle });
    expect(assign(first.catchUp, 'max', 1)).toThrow(TypeError);
    expect(defineSchedule({ name: 'second', cron: '0 4 * * *', handle }).catchUp).toEqual({ mode: 'all', windowMs: 86_400_000, max: 1000 });
    expect(defineSchedule({ name: 'off', cron: '0 4 * * *', handle, catchUp: false }).catchUp).toSatisfy(Object.isFrozen);
  });

  it('a variant takes the options its task was defined with, whatever later happens to the object they were given in', () => {
    const options = { name: 'send-email', handle, backoff: { base: '2s' } };
    const task = defineTask(options);
    options.backoff.base = '9s';
    options.name = 'renamed';
    expect(defineTask({ ...task, name: 'send-email-urgent' }).backoff.baseMs).toBe(2000);
    expect(defineSchedule({ ...task, cron: '0 8 * * *' })).toMatchObject({ name: 'send-email', backoff: { baseMs: 2000 } });
  });

  it('a spread task is an object of its own that defineTask and defineSchedule take as before', () => {
    const task = defineTask({ name: 'send-email', handle });
    const spread = { ...task };
    expect(Object.isFrozen(spread)).toBe(false);
    expect(defineSchedule({ ...spread, cron: '0 8 * * *', queue: 'mail' }).queue).toBe('mail');
  });
});
