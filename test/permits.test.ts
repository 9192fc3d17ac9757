import { describe, expect, it } from 'vitest';
import { Permits } from '../src/db/permits.ts';

/** Settles on the next turns of the event loop: enough for any grant already due to land. */
const settled = () => new Promise((resolve) => setImmediate(resolve));

function tracked(permits: Permits, name: string, got: string[], signal?: AbortSignal) {
  const asked = permits.acquire(signal);
  return asked.then((release) => {
    got.push(name);
    return release;
  });
}

describe('Permits', () => {
  it('hands out up to its limit at once; the next caller waits until one is given back', async () => {
    const permits = new Permits(2);
    const got: string[] = [];
    const a = await tracked(permits, 'a', got);
    await tracked(permits, 'b', got);
    void tracked(permits, 'c', got);
    await settled();
    expect(got).toEqual(['a', 'b']);
    expect([permits.held, permits.waiting]).toEqual([2, 1]);
    a();
    await settled();
    expect(got).toEqual(['a', 'b', 'c']);
    expect([permits.held, permits.waiting]).toEqual([2, 0]);
  });

  it('serves waiters first come, first served, and a newcomer never jumps the queue', async () => {
    const permits = new Permits(1);
    const got: string[] = [];
    const first = await tracked(permits, 'first', got);
    const second = tracked(permits, 'second', got);
    const third = tracked(permits, 'third', got);
    first();
    void tracked(permits, 'late', got); // asked while 'third' still waits
    (await second)();
    (await third)();
    await settled();
    expect(got).toEqual(['first', 'second', 'third', 'late']);
  });

  it('gives a permit back once however often its release is called', async () => {
    const permits = new Permits(1);
    const release = await permits.acquire();
    release();
    release();
    expect(permits.held).toBe(0);
    await permits.acquire();
    const got: string[] = [];
    void tracked(permits, 'waiting', got);
    release(); // the old holder's release again: must not free the new holder's permit
    await settled();
    expect(got).toEqual([]);
    expect(permits.held).toBe(1);
  });

  it('ends a wait when its signal aborts: it rejects with the reason, holds nothing, and the next in line is served', async () => {
    const permits = new Permits(1);
    const got: string[] = [];
    const holder = await permits.acquire();
    const abort = new AbortController();
    const abandoned = tracked(permits, 'abandoned', got, abort.signal);
    const next = tracked(permits, 'next', got);
    const reason = new Error('shutting down');
    abort.abort(reason);
    await expect(abandoned).rejects.toBe(reason);
    holder();
    await next;
    expect(got).toEqual(['next']);
    expect([permits.held, permits.waiting]).toEqual([1, 0]);
  });

  it('refuses at once a signal already aborted, even with permits free', async () => {
    const permits = new Permits(1);
    const abort = new AbortController();
    abort.abort(new Error('too late'));
    await expect(permits.acquire(abort.signal)).rejects.toThrow('too late');
    expect(permits.held).toBe(0);
  });

  it('refuses a limit that is not a whole number of at least 1', () => {
    expect(() => new Permits(0)).toThrow(RangeError);
    expect(() => new Permits(1.5)).toThrow(RangeError);
  });
});
