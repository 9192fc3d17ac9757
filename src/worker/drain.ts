import { sleep } from '../runtime/wakeup.ts';
import type { RunSlots } from './slots.ts';

/**
 * The end of a shutdown: waits up to `graceMs` for every run to settle; then aborts the
 * signal of each handler still running, gives those that honour it a little longer
 * (up to 2 s), and releases, attempt restored, each that still holds its job: a handler
 * that ignores its signal is released anyway, and the fence stops it from finishing
 * later. A run already writing its result finishes or fails on its own. Returns how
 * many jobs were released that way.
 */
export async function drainRuns(slots: RunSlots, graceMs: number): Promise<number> {
  const all = () => slots.allSettled();
  const timedOut = await outlasted(all(), graceMs);
  if (!timedOut || slots.used === 0) {
    await all();
    return 0;
  }
  const stragglers = slots.inHandler();
  for (const run of stragglers) run.abortForShutdown();
  await outlasted(all(), Math.min(2_000, Math.max(100, graceMs)));
  let abandoned = 0;
  for (const run of stragglers) {
    if (await run.releaseIfStillHeld()) abandoned += 1;
  }
  return abandoned;
}

/** Whether `ms` passed before `work` settled; the timer goes either way, so it never holds the process open. */
async function outlasted(work: Promise<unknown>, ms: number): Promise<boolean> {
  const over = new AbortController();
  try {
    return await Promise.race([work.then(() => false), sleep(ms, over.signal).then(() => true)]);
  } finally {
    over.abort();
  }
}
