/**
 * The worker process of the `drain-async` and `memory` bench sections (bench/drainChild.ts
 * starts it): one createCronq at concurrency 16 with an async no-op handler, draining
 * whatever the bench enqueues, as a worker process the issue compares with peers would.
 * It enqueues nothing itself. Talks to its parent over IPC:
 *
 *   → { type: 'loaded' }                once imported, connected and pinged (not claiming yet)
 *   ← { type: 'start' }                 → { type: 'ready' } once started (claiming)
 *   ← { type: 'report', gc?: boolean }  → { type: 'report', handled, memory }  (memory: process.memoryUsage(), after full GCs when asked and --expose-gc is on)
 *   ← { type: 'expect', total }         → { type: 'completed' } once `total` completions are written (counted since the start, by the Observer's jobCompleted)
 *   ← { type: 'stop' }                  stops the engine and exits 0
 *
 *   BENCH_DATABASE_URL   the bench database
 *   BENCH_CONCURRENCY    handlers at once (default 16)
 *   BENCH_PREFETCH       createCronq's prefetch (default: createCronq's)
 */
import { createCronq, defineTask, noopObserver } from '../src/index.ts';

const url = process.env.BENCH_DATABASE_URL ?? 'mysql://root@127.0.0.1:3306/cronq_bench';
const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 16);
const prefetch = process.env.BENCH_PREFETCH === undefined ? undefined : Number(process.env.BENCH_PREFETCH);

let handled = 0;
const task = defineTask({
  name: 'async-noop',
  handle: async (job) => {
    await Promise.resolve(job.payload);
    handled += 1;
  },
});
// Completions written, as the engine reports them: the parent times a drain to the last
// one without polling the database (a COUNT over the table every few ms would take
// server CPU from the drain it times).
let completed = 0;
let expected: { total: number; done: () => void } | null = null;
const observer = {
  ...noopObserver,
  jobCompleted() {
    completed += 1;
    if (expected && completed >= expected.total) {
      expected.done();
      expected = null;
    }
  },
};
const cronq = createCronq({ databaseUrl: url, logger: false, concurrency, observer, ...(prefetch === undefined ? {} : { prefetch }), tasks: [task] });

process.on('message', async (message: { type: string; gc?: boolean }) => {
  if (message.type === 'report') {
    if (message.gc && global.gc) {
      // Twice, half a second apart: V8 hands freed pages back to the OS in the background,
      // so an RSS read at once after one GC can still count some of them.
      global.gc();
      await new Promise((resolve) => setTimeout(resolve, 500));
      global.gc();
    }
    process.send!({ type: 'report', handled, memory: process.memoryUsage() });
  } else if (message.type === 'expect') {
    const total = (message as { total?: number }).total ?? 0;
    const done = () => process.send!({ type: 'completed' });
    if (completed >= total) done();
    else expected = { total, done };
  } else if (message.type === 'start') {
    await cronq.start();
    process.send!({ type: 'ready' });
  } else if (message.type === 'stop') {
    await cronq.stop();
    process.exit(0);
  }
});

await cronq.admin.ping();
process.send!({ type: 'loaded' });
