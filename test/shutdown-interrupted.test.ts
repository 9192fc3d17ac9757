/**
 * A running handler cut short by the shutdown's grace: its job is handed back, attempt
 * restored, and the stop is counted in lease_expiries as a process that stopped while
 * running it, so a job whose handler stops its own daemon (a `systemctl restart` of the
 * service, say) goes dead after maxLeaseExpiries stops instead of stopping every daemon in
 * turn for ever (README, Shutdown and Recovery).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createCronq, defineTask, type Cronq } from '../src/index.ts';
import { commandHandler } from '../src/shell/handler.ts';
import { useTestDatabase } from './support/db.ts';
import { EventLog } from './support/events.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_dead_letters'] });
let cronq: Cronq | null = null;

afterEach(async () => {
  await cronq?.stop({ graceMs: 0 });
  cronq = null;
});

/** A daemon whose `outlasts` handler runs until its signal aborts; resolves once the handler has started. */
async function daemonRunningIt(maxLeaseExpiries: number): Promise<{ cronq: Cronq; log: EventLog }> {
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  const outlasts = defineTask({
    name: 'outlasts',
    handle: (_job, ctx) =>
      new Promise<void>((_, reject) => {
        started();
        ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
      }),
  });
  const log = new EventLog();
  cronq = createCronq({ databaseUrl: t.url, tasks: [outlasts], logger: log.logger, scheduler: false, pollInterval: '20ms', maxLeaseExpiries });
  await cronq.start();
  await running;
  return { cronq, log };
}

const jobState = async () =>
  (await t.sql("SELECT status, attempts, lease_expiries, lease_token FROM cronq_jobs WHERE job_key = 'deploy:1'"))[0];

describe('a running job cut short by the shutdown grace', () => {
  it('is handed back attempt restored, each cut counted, and goes dead at maxLeaseExpiries cuts', async () => {
    await t.sql(`INSERT INTO cronq_jobs (queue, kind, job_key, payload, max_attempts) VALUES ('default', 'outlasts', 'deploy:1', '{}', 5)`);
    for (const cuts of [1, 2]) {
      const { cronq: daemon, log } = await daemonRunningIt(3);
      await daemon.stop({ graceMs: 50 });
      cronq = null;
      expect(log.named('job_released_on_shutdown')).toHaveLength(1);
      expect(await jobState()).toEqual({ status: 'ready', attempts: 0, lease_expiries: cuts, lease_token: null });
    }
    const { cronq: third, log } = await daemonRunningIt(3);
    await third.stop({ graceMs: 50 });
    cronq = null;
    expect(log.named('job_released_on_shutdown')).toEqual([]);
    expect(log.named('job_dead')).toHaveLength(1);
    expect(await jobState()).toMatchObject({ status: 'dead', attempts: 1, lease_expiries: 3 });
    const [letter] = await t.sql("SELECT failure_reason, attempts FROM cronq_dead_letters WHERE job_key = 'deploy:1'");
    expect(letter.attempts).toBe(1);
    expect(letter.failure_reason).toMatch(/^the process running it stopped 3 times without finishing it \(the last time the shutdown's grace ran out while its handler ran; /);
  }, 60_000);

  it('is handed back too when its handler returns early on the aborted signal instead of throwing: it did not finish', async () => {
    // The common way to stop early: check ctx.signal.aborted between items and return.
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    let itemsDone = 0;
    const stopsEarly = defineTask({
      name: 'stops-early',
      handle: async (_job, ctx) => {
        started();
        for (let item = 0; item < 1_000; item++) {
          if (ctx.signal.aborted) return;
          await new Promise((resolve) => setTimeout(resolve, 10));
          itemsDone += 1;
        }
      },
    });
    const log = new EventLog();
    cronq = createCronq({ databaseUrl: t.url, tasks: [stopsEarly], logger: log.logger, scheduler: false, pollInterval: '20ms' });
    await cronq.start();
    await cronq.enqueue({ kind: 'stops-early', key: 'deploy:3' });
    await running;
    await cronq.stop({ graceMs: 100 });
    cronq = null;
    expect(itemsDone).toBeLessThan(1_000);
    expect(log.named('job_released_on_shutdown')).toHaveLength(1);
    expect(log.named('job_completed')).toEqual([]);
    expect((await t.sql("SELECT status, attempts, lease_expiries, lease_token FROM cronq_jobs WHERE job_key = 'deploy:3'"))[0]).toEqual({
      status: 'ready',
      attempts: 0,
      lease_expiries: 1,
      lease_token: null,
    });
  }, 30_000);

  it.each([
    ['', {}],
    [' (its task with a timeout)', { timeout: '1m' }],
  ])('a shell command that exited 0 is done even when the grace runs out while its output still drains%s', async (_, limits) => {
    // A background child keeps the command's stdout open: the handler waits up to
    // OUTPUT_DRAIN_MS for it after the shell's exit 0, and the grace runs out meanwhile.
    const log = new EventLog();
    const deploys = defineTask({ name: 'deploys', handle: commandHandler({ command: 'sleep 2 & exit 0' }), ...limits });
    cronq = createCronq({ databaseUrl: t.url, tasks: [deploys], logger: log.logger, scheduler: false, pollInterval: '20ms' });
    await cronq.start();
    await cronq.enqueue({ kind: 'deploys', key: 'deploy:4' });
    const [{ command_pid: pid }] = await log.waitFor('command_started');
    // The shell has exited (reaped): its work is done, only its output is drained.
    for (;;) {
      try {
        process.kill(pid, 0);
      } catch {
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    // Its signal aborts at 300 ms, before the drain's 500 ms are over; the 300 ms more
    // handlers get to honour it then see the handler return.
    await cronq.stop({ graceMs: 300 });
    cronq = null;
    expect(log.named('job_released_on_shutdown')).toEqual([]);
    expect(log.named('job_failed')).toEqual([]);
    expect(log.named('job_completed')).toHaveLength(1);
    expect((await t.sql("SELECT status, lease_expiries FROM cronq_jobs WHERE job_key = 'deploy:4'"))[0]).toEqual({ status: 'done', lease_expiries: 0 });
  }, 30_000);

  it('a job that finishes within the grace is done, with no stop counted', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const finishes = defineTask({
      name: 'finishes',
      handle: async () => {
        started();
        await gate;
      },
    });
    cronq = createCronq({ databaseUrl: t.url, tasks: [finishes], logger: new EventLog().logger, scheduler: false, pollInterval: '20ms' });
    await cronq.start();
    await cronq.enqueue({ kind: 'finishes', key: 'deploy:2' });
    await running;
    const stopped = cronq.stop({ graceMs: 10_000 });
    release();
    await stopped;
    cronq = null;
    expect((await t.sql("SELECT status, attempts, lease_expiries FROM cronq_jobs WHERE job_key = 'deploy:2'"))[0]).toEqual({
      status: 'done',
      attempts: 1,
      lease_expiries: 0,
    });
  }, 30_000);
});
