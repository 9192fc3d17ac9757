import { describe, expect, it } from 'vitest';
import { Wakeup } from '../src/runtime/wakeup.ts';

/** Whether `promise` settles within a few turns of the event loop (no timer of ours fires that soon). */
async function settlesAtOnce(promise: Promise<unknown>): Promise<boolean> {
  let settled = false;
  void promise.then(() => (settled = true));
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
  return settled;
}

describe('wake-ups', () => {
  it('a notify that came while the loop was busy (not waiting yet) ends its next wait at once', async () => {
    const wakeup = new Wakeup();
    const seen = wakeup.seen; // a claim lane reads this, then claims...
    const other = wakeup.wait(60_000); // ...while another lane waits and takes the notify
    wakeup.notify(); // a local enqueue lands mid-claim
    expect(await settlesAtOnce(other)).toBe(true);
    expect(await settlesAtOnce(wakeup.wait(60_000, seen))).toBe(true); // the claiming lane does not sleep past it
  });

  it('waits the full time when nothing was notified since it looked', async () => {
    const wakeup = new Wakeup();
    wakeup.notify();
    const seen = wakeup.seen;
    const started = Date.now();
    await wakeup.wait(50, seen);
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
  });

  it('without a generation, a notify with nobody waiting ends the next wait (and only that one)', async () => {
    const wakeup = new Wakeup();
    wakeup.notify();
    expect(await settlesAtOnce(wakeup.wait(60_000))).toBe(true);
    const next = wakeup.wait(60_000);
    expect(await settlesAtOnce(next)).toBe(false);
    wakeup.notify();
    expect(await settlesAtOnce(next)).toBe(true);
  });
});
