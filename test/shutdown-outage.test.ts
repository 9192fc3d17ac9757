/**
 * What a stop logs and how long it takes when the database is healthy, busy, or silently
 * gone (a TCP proxy in front of the test server turned into a black hole): statements
 * our own stop fails by closing the pool are no database outage.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createCronq, type Cronq } from '../src/cronq.ts';
import { SHUTDOWN_MARGIN_MS } from '../src/defaults.ts';
import { defineTask } from '../src/tasks/define.ts';
import { BlackholeProxy } from './support/blackholeProxy.ts';
import { useTestDatabase } from './support/db.ts';
import { eventually, EventLog } from './support/events.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs'] });
let proxy: BlackholeProxy;
let engine: Cronq | undefined;

beforeAll(async () => {
  proxy = await BlackholeProxy.before(t.url);
});
afterEach(async () => {
  proxy.blackhole = false;
  await engine?.stop({ graceMs: 0 });
  engine = undefined;
});
afterAll(async () => {
  await proxy.close();
});

/** A task whose handler runs until its signal aborts; `running` once the first started, `abortedAt()` when its signal aborted (null: not yet). */
function signalledTask(name: string, leaseMs = 30_000) {
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  let abortedAt: number | null = null;
  const task = defineTask({
    name,
    lease: `${leaseMs}ms`,
    handle: (_job, ctx) =>
      new Promise((_resolve, reject) => {
        started();
        ctx.signal.addEventListener('abort', () => ((abortedAt = Date.now()), reject(ctx.signal.reason)), { once: true });
      }),
  });
  return { task, running, abortedAt: () => abortedAt };
}

describe('a stop', () => {
  it('logs no db_unavailable when a handler that ignores its signal renews its lease after the pool closed', async () => {
    const log = new EventLog('debug');
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => (finish = resolve));
    // A 3 s lease is renewed every second: the first renewal comes after the stop.
    const stubborn = defineTask({ name: 'stubborn', lease: '3s', handle: async () => (started(), finished) });
    engine = createCronq({ databaseUrl: t.url, tasks: [stubborn], logger: log.logger, pollInterval: '50ms' });
    await engine.start();
    await engine.enqueue(stubborn, { key: 'stubborn:1', payload: {} });
    await running;
    await engine.stop({ graceMs: 100 });
    const renewal = await eventually(
      async () => log.events.find((e) => e.where === 'renew' && ['db_error', 'db_unavailable'].includes(e.event!)),
      10_000,
      'the renewal after the stop',
    );
    finish();
    expect(renewal).toMatchObject({ event: 'db_error', pool_closed: true });
    expect(log.named('db_unavailable')).toEqual([]);
  });

  it('logs no db_unavailable when it stops a busy pool', async () => {
    const log = new EventLog('debug');
    let done = 0;
    const work = defineTask({ name: 'work', handle: async () => void (await new Promise((resolve) => setTimeout(resolve, 2)), (done += 1)) });
    engine = createCronq({ databaseUrl: t.url, tasks: [work], logger: log.logger, pollInterval: '50ms', concurrency: 10 });
    await engine.enqueueMany(work, Array.from({ length: 3_000 }, (_, i) => ({ key: `work:${i}`, payload: {} })));
    await engine.start();
    await eventually(async () => done >= 300, 30_000, 'the drain to be under way');
    await engine.stop({ graceMs: 1_000 });
    expect(log.named('worker_stopped')).toHaveLength(1);
    expect(log.named('db_unavailable')).toEqual([]);
  });

  it('during a black hole resolves within its grace plus the margin, and what the cut fails is not logged as an outage', async () => {
    const log = new EventLog('debug');
    const { task, running, abortedAt } = signalledTask('held');
    engine = createCronq({ databaseUrl: proxy.urlFor(t.url), tasks: [task], logger: log.logger, pollInterval: '50ms' });
    await engine.start();
    await engine.enqueue(task, { key: 'held:1', payload: {} });
    await running;
    proxy.blackhole = true;
    // An idle pool claims every poll (50 ms): this long into the black hole, a claim hangs in it.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const stoppedAt = Date.now();
    await engine.stop({ graceMs: 1_000 });
    const tookMs = Date.now() - stoppedAt;
    // The grace, the margin, and a little for a loaded machine.
    expect(tookMs).toBeLessThan(1_000 + SHUTDOWN_MARGIN_MS + 400);
    expect(log.named('shutdown_cut_short')).toHaveLength(1);
    // The claim the black hole holds up does not hold up the grace: the handler's signal aborts when it ends.
    expect(abortedAt()! - stoppedAt).toBeGreaterThanOrEqual(1_000);
    expect(abortedAt()! - stoppedAt).toBeLessThan(1_000 + 500);
    // The writes the cut failed ('Pool is closed.'): logged at debug, not as an outage.
    const cut = await eventually(async () => log.events.find((e) => /Pool is closed/.test(e.error ?? '')), 5_000, 'the cut writes to fail');
    expect(cut).toMatchObject({ event: 'db_error', pool_closed: true });
    expect(log.named('db_unavailable')).toEqual([]);
  });
});
