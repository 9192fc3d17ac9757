import { describe, expect, it } from 'vitest';
import { Prefetch } from '../src/worker/prefetch.ts';

/** A Prefetch on a hand-driven clock (ms). */
function prefetchAt(max: number, payloadChars?: number) {
  let now = 0;
  const prefetch = new Prefetch(max, () => now, payloadChars);
  return {
    prefetch,
    /** `count` handlers finish over `ms`, then the size is read. */
    finish(count: number, ms: number): number {
      for (let i = 0; i < count; i++) prefetch.slotFreed();
      now += ms;
      return prefetch.resize();
    },
  };
}

describe('prefetch', () => {
  it('holds nothing ahead before any handler has finished', () => {
    const { prefetch } = prefetchAt(1000);
    prefetch.claimTook(5);
    expect(prefetch.resize()).toBe(0);
  });

  it('reads ahead about what fast handlers use up in two claims', () => {
    const p = prefetchAt(1000);
    let size = 0;
    for (let i = 0; i < 30; i++) {
      p.prefetch.claimTook(4); // claims take 4 ms
      size = p.finish(100, 10); // 10 jobs per ms
    }
    expect(size).toBeGreaterThanOrEqual(78);
    expect(size).toBeLessThanOrEqual(80);
  });

  it('gives handlers slower than a claim no read-ahead', () => {
    const p = prefetchAt(1000);
    p.prefetch.claimTook(3);
    let size = -1;
    for (let i = 0; i < 30; i++) size = p.finish(1, 100); // one job per 100 ms
    expect(size).toBe(0);
  });

  it('never passes its ceiling, and a ceiling of 0 turns it off', () => {
    const capped = prefetchAt(50);
    const off = prefetchAt(0);
    for (const p of [capped, off]) p.prefetch.claimTook(20);
    let cappedSize = 0;
    let offSize = -1;
    for (let i = 0; i < 30; i++) {
      cappedSize = capped.finish(1000, 10);
      offSize = off.finish(1000, 10);
    }
    expect(cappedSize).toBe(50);
    expect(offSize).toBe(0);
  });

  it('shrinks back to nothing once handlers slow down', () => {
    const p = prefetchAt(1000);
    p.prefetch.claimTook(4);
    for (let i = 0; i < 30; i++) p.finish(100, 10);
    expect(p.prefetch.resize()).toBeGreaterThan(0);
    let size = -1;
    for (let i = 0; i < 30; i++) size = p.finish(0, 50);
    expect(size).toBe(0);
  });

  it('holds no more payload ahead than its budget, by the mean payload of recent claims', () => {
    const p = prefetchAt(1000, 1_000_000);
    p.prefetch.claimTook(20);
    p.prefetch.claimedPayload(100, 100 * 100); // 100-character payloads: the budget allows 10,000
    let size = 0;
    for (let i = 0; i < 30; i++) size = p.finish(1000, 10);
    expect(size).toBe(1000);
    p.prefetch.claimedPayload(16, 16 * 100_000); // a claim of 100 kB payloads: 10 of them
    expect(p.prefetch.resize()).toBe(10);
    for (let i = 0; i < 20; i++) p.prefetch.claimedPayload(500, 500 * 100); // small ones again
    expect(p.prefetch.resize()).toBe(1000);
  });
});
