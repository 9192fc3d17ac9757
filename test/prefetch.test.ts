import { describe, expect, it } from 'vitest';
import { Prefetch } from '../src/worker/prefetch.ts';

/** A Prefetch for 16 slots on a hand-driven clock (ms). */
function prefetchAt(max: number, payloadChars?: number) {
  let now = 0;
  const prefetch = new Prefetch(max, { concurrency: 16, now: () => now, ...(payloadChars === undefined ? {} : { payloadChars }) });
  return {
    prefetch,
    /** `count` handlers finish over `ms` while `busy` slots are in use (all 16 unless told), then the size is read. */
    finish(count: number, ms: number, busy = 16): number {
      prefetch.slotTaken(busy);
      now += ms;
      for (let i = 0; i < count; i++) prefetch.slotFreed(busy); // and taken again at once: `busy` stay in use
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

  it('reads ahead by what busy slots get done, so a drain whose slots wait for claims ramps up from its first runs', () => {
    const p = prefetchAt(1000);
    for (let i = 0; i < 30; i++) p.prefetch.claimTook(4); // claims take 4 ms
    // 8 jobs in 10 ms with one slot busy on average: the claims, not the handlers, set the pace.
    expect(p.finish(8, 10, 1)).toBeGreaterThanOrEqual(100); // 16 slots could do 12.8 jobs per ms
    let size = 0;
    for (let i = 0; i < 30; i++) size = p.finish(8, 10, 1);
    expect(size).toBeGreaterThanOrEqual(100);
    expect(size).toBeLessThanOrEqual(103);
  });

  it('counts slots held by stuck handlers as busy: only the slots still turning over earn a read-ahead', () => {
    const p = prefetchAt(1000);
    for (let i = 0; i < 30; i++) p.prefetch.claimTook(4);
    let size = 0;
    // 14 slots stuck, 2 finishing a job per ms each: 20 jobs in 10 ms over 16 busy slots.
    for (let i = 0; i < 30; i++) size = p.finish(20, 10);
    expect(size).toBeGreaterThanOrEqual(15);
    expect(size).toBeLessThanOrEqual(16);
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

  it('forgets the pace of handlers that ran before the pool went idle, so slow work arriving a poll interval later is not claimed ahead', () => {
    const p = prefetchAt(1000);
    for (let i = 0; i < 30; i++) {
      p.prefetch.claimTook(4); // claims take 4 ms
      p.finish(160, 1); // handlers that return at once: 160 jobs per ms
    }
    expect(p.prefetch.resize()).toBe(1000);
    expect(p.finish(0, 200, 0)).toBe(0); // a poll interval (200 ms) with nothing running: the pace is unknown
  });

  it('starts its pace over after an outage: runs held up by it finishing together once the database is back earn no read-ahead', () => {
    let now = 0;
    const prefetch = new Prefetch(1000, { concurrency: 8, now: () => now });
    for (let i = 0; i < 30; i++) {
      prefetch.claimTook(4);
      prefetch.slotTaken(8);
      now += 10;
      for (let j = 0; j < 40; j++) prefetch.slotFreed(8, now - 5); // 4 jobs per ms on 8 slots
      expect(prefetch.resize()).toBeGreaterThan(0);
    }
    expect(prefetch.resize()).toBeGreaterThanOrEqual(30); // 0.5 jobs per slot-ms, 8 slots, two 4 ms claims: 32
    // The outage: a claim fails, 8 runs started before it hold their slots (their results wait).
    const heldSince = now - 1;
    prefetch.startOver();
    now += 400;
    prefetch.claimTook(150); // the first claim after it reconnects: slow, and not a measure
    // The database is back: the 8 runs write their results and free their slots within a millisecond.
    now += 1;
    for (let j = 0; j < 8; j++) prefetch.slotFreed(8 - j - 1, heldSince);
    now += 5;
    expect(prefetch.resize()).toBe(0);
    // Runs started since are measured again from scratch, with the latency of normal claims.
    prefetch.claimTook(4);
    prefetch.slotTaken(8);
    now += 10;
    for (let j = 0; j < 40; j++) prefetch.slotFreed(8, now - 5);
    const size = prefetch.resize();
    expect(size).toBeGreaterThan(0);
    expect(size).toBeLessThanOrEqual(32);
  });

  it('starts its pace over after a long claim gap, so the first claim after it asks only for what can start soon', () => {
    let now = 0;
    const prefetch = new Prefetch(1000, { concurrency: 16, now: () => now });
    for (let i = 0; i < 30; i++) {
      prefetch.claimTook(4);
      prefetch.slotTaken(16);
      now += 10;
      for (let j = 0; j < 100; j++) prefetch.slotFreed(16, now - 5); // 10 jobs per ms
      prefetch.resize();
    }
    expect(prefetch.resize()).toBeGreaterThanOrEqual(78);
    // Two seconds without a claim answered (a frozen database), all 16 slots held, nothing finishing.
    const heldSince = now - 1;
    now += 2_000;
    expect(prefetch.resize()).toBe(0);
    prefetch.claimTook(900); // the claim that waited on the frozen server: not a latency to plan by
    now += 1;
    for (let j = 0; j < 16; j++) prefetch.slotFreed(16, heldSince); // the runs held through the gap
    now += 5;
    expect(prefetch.resize()).toBe(0);
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
