import { sql } from 'drizzle-orm';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createCronq, defineTask, type Cronq, type Task } from '../src/index.ts';
import { useTestDatabase } from './support/db.ts';
import { EventLog } from './support/events.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_dead_letters'] });
let cronq: Cronq | null = null;
let log: EventLog;

beforeEach(async () => {
  log = new EventLog('info');
  await t.sql('CREATE TABLE IF NOT EXISTS effect_marks (job_key VARCHAR(100) NOT NULL)');
  await t.sql('DELETE FROM effect_marks');
});
afterEach(async () => {
  await cronq?.stop({ graceMs: 200 });
  cronq = null;
});

function start(tasks: Task[]): Promise<Cronq> {
  cronq = createCronq({ databaseUrl: t.url, tasks, logger: log.logger, concurrency: 4, pollInterval: '50ms' });
  return cronq.start().then(() => cronq!);
}

const never = () => new Promise<void>(() => undefined);

describe('an effect that never settles', () => {
  it('fails its attempt once the task timeout passes, releases the row lock, and the retry completes', async () => {
    let attempts = 0;
    const c = await start([
      defineTask({
        name: 'stuck',
        timeout: '300ms',
        maxAttempts: 2,
        backoff: { base: '10ms', max: '10ms' },
        handle: (job, ctx) => {
          attempts += 1;
          const first = attempts === 1;
          ctx.effect(async (tx) => {
            await tx.execute(sql`INSERT INTO effect_marks (job_key) VALUES (${job.key})`);
            if (first) await never();
          });
        },
      }),
    ]);
    await c.enqueue({ kind: 'stuck', key: 'stuck:1' });
    const [failed] = await log.waitFor('job_failed', 1, 5_000);
    expect(failed.error).toMatch(/effect timed out after 300ms/);
    await log.waitFor('job_completed', 1, 5_000);
    const rows = await t.sql("SELECT status, attempts FROM cronq_jobs WHERE job_key = 'stuck:1'");
    expect(rows).toEqual([{ status: 'done', attempts: 2 }]);
    // The stalled transaction was rolled back: only the retry's mark committed.
    expect(await t.sql('SELECT job_key FROM effect_marks')).toEqual([{ job_key: 'stuck:1' }]);
  });

  it('without a timeout is bounded by the lease: the attempt fails before the lease runs out, naming the effect', async () => {
    const c = await start([
      defineTask({
        name: 'stuck',
        lease: '1500ms',
        maxAttempts: 1,
        handle: (job, ctx) => {
          ctx.effect(async (tx) => {
            await tx.execute(sql`INSERT INTO effect_marks (job_key) VALUES (${job.key})`);
            await never();
          });
        },
      }),
    ]);
    await c.enqueue({ kind: 'stuck', key: 'stuck:2' });
    await log.waitFor('job_dead', 1, 5_000);
    expect(await t.sql("SELECT status FROM cronq_jobs WHERE job_key = 'stuck:2'")).toEqual([{ status: 'dead' }]);
    const [letter] = await t.sql('SELECT failure_reason FROM cronq_dead_letters');
    expect(letter.failure_reason).toMatch(/effect timed out/);
    expect(await t.sql('SELECT job_key FROM effect_marks')).toEqual([]);
    expect(log.named('job_lease_lost')).toEqual([]);
  });

  it('an abandoned effect that resumes later cannot write or complete the job: the fence holds', async () => {
    let resumed!: (error: unknown) => void;
    const lateWrite = new Promise((resolve) => (resumed = resolve));
    const c = await start([
      defineTask({
        name: 'slow',
        timeout: '200ms',
        maxAttempts: 1,
        handle: (job, ctx) => {
          ctx.effect(async (tx) => {
            await new Promise((resolve) => setTimeout(resolve, 500));
            try {
              await tx.execute(sql`INSERT INTO effect_marks (job_key) VALUES (${job.key})`);
              resumed(null);
            } catch (error) {
              resumed(error);
            }
          });
        },
      }),
    ]);
    await c.enqueue({ kind: 'slow', key: 'slow:1' });
    await log.waitFor('job_dead', 1, 5_000);
    expect(await lateWrite).toBeInstanceOf(Error);
    expect(await t.sql("SELECT status FROM cronq_jobs WHERE job_key = 'slow:1'")).toEqual([{ status: 'dead' }]);
    expect(await t.sql('SELECT job_key FROM effect_marks')).toEqual([]);
  });

  it('does not hold up stop(): the grace ends it, the job goes back with its attempt restored', async () => {
    let entered!: () => void;
    const inEffect = new Promise<void>((resolve) => (entered = resolve));
    const c = await start([
      defineTask({
        name: 'stuck',
        handle: (job, ctx) => {
          ctx.effect(async (tx) => {
            await tx.execute(sql`INSERT INTO effect_marks (job_key) VALUES (${job.key})`);
            entered();
            await never();
          });
        },
      }),
    ]);
    await c.enqueue({ kind: 'stuck', key: 'stuck:3' });
    await inEffect;
    const began = Date.now();
    await c.stop({ graceMs: 200 });
    cronq = null;
    expect(Date.now() - began).toBeLessThan(5_000);
    expect(await t.sql("SELECT status, attempts FROM cronq_jobs WHERE job_key = 'stuck:3'")).toEqual([{ status: 'ready', attempts: 0 }]);
    expect(await t.sql('SELECT job_key FROM effect_marks')).toEqual([]);
  });

  it('stuck in a statement the server is still running: that statement is ended too, so the row lock is freed and the failure recorded at once', async () => {
    let attempts = 0;
    const c = await start([
      defineTask({
        name: 'sleepy',
        timeout: '300ms',
        maxAttempts: 2,
        backoff: { base: '10ms', max: '10ms' },
        handle: (job, ctx) => {
          attempts += 1;
          const first = attempts === 1;
          ctx.effect(async (tx) => {
            await tx.execute(sql`INSERT INTO effect_marks (job_key) VALUES (${job.key})`);
            // MariaDB checks a SLEEP's client only every 5 s; a slow UPDATE would not check at all.
            if (first) await tx.execute(sql`SELECT SLEEP(60)`);
          });
        },
      }),
    ]);
    const began = Date.now();
    await c.enqueue({ kind: 'sleepy', key: 'sleepy:1' });
    const [failed] = await log.waitFor('job_failed', 1, 15_000);
    expect(failed.error).toMatch(/effect timed out after 300ms/);
    expect(Date.now() - began).toBeLessThan(4_000); // not held until the server looked at the socket again
    await log.waitFor('job_completed', 1, 10_000);
    expect(await t.sql("SELECT status, attempts FROM cronq_jobs WHERE job_key = 'sleepy:1'")).toEqual([{ status: 'done', attempts: 2 }]);
    expect(await t.sql('SELECT job_key FROM effect_marks')).toEqual([{ job_key: 'sleepy:1' }]);
  });
});
