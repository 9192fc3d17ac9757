/**
 * FanoutLease without a database: a store that answers renewals when the test says so.
 * Waits are on the lease's signal and the store's calls, not sleeps.
 */
import { describe, expect, it } from 'vitest';
import { FanoutAbandonedError, FanoutLease, TickTakenOverError } from '../src/schedule/fanoutLease.ts';

/** A store whose renewals wait for `answer(owned)`. */
function heldStore() {
  let answer: (owned: boolean) => void = () => undefined;
  let asked: () => void = () => undefined;
  const firstAsk = new Promise<void>((resolve) => (asked = resolve));
  const store = {
    renewals: 0,
    renewTickIfOwned: () => {
      store.renewals += 1;
      asked();
      return new Promise<boolean>((resolve) => (answer = resolve));
    },
    answer: (owned: boolean) => answer(owned),
    /** Resolves once the first renewal was sent. */
    asked: () => firstAsk,
  };
  return store;
}

const aborted = (signal: AbortSignal) => new Promise<unknown>((resolve) => signal.addEventListener('abort', () => resolve(signal.reason), { once: true }));

function leaseOf(store: ReturnType<typeof heldStore>, leaseMs: number, claimedAt = performance.now()) {
  return new FanoutLease({ store, id: 1, claimedBy: 'me:1', leaseMs, at: '2030-01-01T10:01:00.000Z' }, claimedAt);
}

describe('FanoutLease', () => {
  it('renews nothing before a third of the lease has passed, and awaits nothing then', () => {
    const store = heldStore();
    const lease = leaseOf(store, 60_000);
    try {
      expect(lease.renewIfDue()).toBeUndefined();
      expect(store.renewals).toBe(0);
      expect(lease.lost).toBeNull();
    } finally {
      lease.end();
    }
  });

  it('runs out a whole lease after its claim with no renewal: its signal aborts with FanoutAbandonedError, and renewing then rejects', async () => {
    const store = heldStore();
    const claimedAt = performance.now();
    const lease = leaseOf(store, 100, claimedAt);
    const reason = await aborted(lease.signal);
    expect(performance.now() - claimedAt).toBeGreaterThanOrEqual(100);
    expect(reason).toBeInstanceOf(FanoutAbandonedError);
    expect(lease.lost).toBe(reason);
    await expect(lease.renewIfDue()).rejects.toBe(reason);
    expect(store.renewals).toBe(0);
    lease.end();
  });

  it('waits at its deadline for a renewal in flight: one that lands keeps the lease, for a whole lease from when it returned', async () => {
    const store = heldStore();
    const lease = leaseOf(store, 150, performance.now() - 100); // a third has passed: due
    const renewing = lease.renewIfDue();
    expect(renewing).toBeInstanceOf(Promise);
    expect(lease.renewIfDue()).toBe(renewing); // one at a time: a second caller joins it
    await store.asked();
    // Past the deadline the claim set, the renewal still unanswered: not abandoned.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(lease.lost).toBeNull();
    store.answer(true);
    await renewing;
    const renewedAt = performance.now();
    const reason = await aborted(lease.signal);
    expect(reason).toBeInstanceOf(FanoutAbandonedError);
    expect(performance.now() - renewedAt).toBeGreaterThanOrEqual(140);
    expect(store.renewals).toBe(1);
    lease.end();
  });

  it('is lost when a renewal finds the tick taken over: its signal aborts with TickTakenOverError, which the renewal throws', async () => {
    const store = heldStore();
    const lease = leaseOf(store, 60_000, performance.now() - 30_000);
    const renewing = lease.renewIfDue()!;
    await store.asked();
    store.answer(false);
    await expect(renewing).rejects.toBeInstanceOf(TickTakenOverError);
    expect(lease.signal.aborted).toBe(true);
    expect(lease.lost).toBeInstanceOf(TickTakenOverError);
    lease.end();
  });

  it('never aborts once ended', async () => {
    const store = heldStore();
    const lease = leaseOf(store, 20);
    lease.end();
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(lease.signal.aborted).toBe(false);
  });
});
