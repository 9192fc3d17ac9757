import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createCronq, defineSchedule, defineTask, JobCancelledError, LeaseLostError, type Cronq } from '../src/index.ts';
import { cancelMatching } from '../src/store/cancel.ts';
import { claimReady } from '../src/store/claims.ts';
import { countPrunable, cutoffBefore } from '../src/store/prune.ts';
import { recoverExpiredLeases } from '../src/store/recovery.ts';
import { runCli } from './support/cli.ts';
import { useTestDatabase } from './support/db.ts';
import { whileLocked } from './support/rowLock.ts';
import { EventLog } from './support/events.ts';
import { THIRTY_SECOND_LEASES } from './support/jobs.ts';
import { runMain } from './support/runMain.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_dead_letters'] });
let env: Record<string, string>;
let cronq: Cronq | null = null;

beforeAll(() => {
  env = { DATABASE_URL: t.url, CRONQ_SCHEDULES: '', LOG_LEVEL: 'info' };
});

afterEach(async () => {
  await cronq?.stop({ graceMs: 1_000 });
  cronq = null;
});

const jobRow = async (id: number) =>
  (await t.sql('SELECT status, cancelled_by, cancel_reason, finished_at, lease_until, attempts FROM cronq_jobs WHERE id = ?', [id]))[0];

/** Inserts a job by SQL in `status`, with a finished_at for finished ones. */
async function crafted(key: string, status: string, kind = 'report', queue = 'default'): Promise<number> {
  const r: any = await t.sql(
    `INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, attempts, max_attempts, finished_time)
     VALUES (?, ?, ?, '{}', ?, 0, 3, IF(? IN ('done', 'dead', 'cancelled'), UTC_TIMESTAMP(6), '1970-01-01'))`,
    [queue, kind, key, status, status],
  );
  return r.insertId;
}

describe('cancelling a waiting job', () => {
  it('never runs it, records who and why, and keeps its key taken so its schedule does not enqueue it again', async () => {
    const ran: string[] = [];
    const nightly = defineSchedule({ name: 'nightly', cron: '0 3 * * *', timezone: 'UTC', period: 'day', handle: (job) => void ran.push(job.key) });
    const other = defineTask({ name: 'other', handle: (job) => void ran.push(job.key) });
    const log = new EventLog();
    cronq = createCronq({ databaseUrl: t.url, tasks: [nightly, other], logger: log.logger, scheduler: false, pollInterval: '50ms' });
    const at = new Date('2026-11-30T05:00:00Z');
    expect(await cronq.admin.tick('nightly', { at })).toMatchObject({ status: 'enqueued', inserted: 1 });
    const [{ id, job_key: key }] = await t.sql("SELECT id, job_key FROM cronq_jobs WHERE schedule_name = 'nightly'");

    const cli = await runCli(['cancel', '--key', key, '--reason', 'report retired', '--by', 'ops@example'], env);
    expect(cli.stderr).toBe('');
    expect(cli.code).toBe(0);
    expect(cli.stdout.trim()).toBe(`cancelled job ${id} (key ${key}): it will not run`);
    expect(await jobRow(id)).toMatchObject({ status: 'cancelled', cancelled_by: 'ops@example', cancel_reason: 'report retired', lease_until: null });
    expect((await jobRow(id)).finished_at).not.toBeNull();

    expect(await cronq.admin.tick('nightly', { at })).toMatchObject({ status: 'enqueued', inserted: 0, existing: 1 });
    await cronq.start();
    await cronq.enqueue({ kind: 'other', key: 'after' });
    await log.waitFor('job_completed', 1, 15_000, (e) => e.kind === 'other');
    expect(ran).toEqual(['after']);
    expect(await jobRow(id)).toMatchObject({ status: 'cancelled', attempts: 0 });
    expect((await cronq.admin.stats()).queues).toMatchObject([{ queue: 'default', cancelled: 1, done: 1 }]);
  });

  it('records the process user@host when no one is named', async () => {
    const id = await crafted('by-default', 'ready');
    cronq = createCronq({ databaseUrl: t.url, workers: false, scheduler: false });
    expect(await cronq.admin.cancel({ id }, { reason: 'not needed' })).toMatchObject({ status: 'cancelled', jobId: id, was: 'ready' });
    expect((await jobRow(id)).cancelled_by).toMatch(/^.+@.+$/);
  });
});

describe('cancelling a running job', () => {
  it('aborts its signal at the next lease renewal with JobCancelledError and discards its result', async () => {
    const log = new EventLog();
    let reason: unknown;
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const slow = defineTask({
      name: 'slow',
      lease: '1s',
      handle: (_job, ctx) =>
        new Promise<void>((resolve) => {
          ctx.signal.addEventListener('abort', () => {
            reason = ctx.signal.reason;
            resolve(); // returns as if it succeeded: the fence must discard it
          });
          started();
        }),
    });
    cronq = createCronq({ databaseUrl: t.url, tasks: [slow], logger: log.logger, scheduler: false, pollInterval: '50ms' });
    await cronq.start();
    const { id } = await cronq.enqueue({ kind: 'slow', key: 'slow:1' });
    await running;

    const cancelledAt = Date.now();
    expect(await cronq.admin.cancel({ id }, { reason: 'runaway', by: 'ops' })).toMatchObject({ status: 'cancelled', was: 'reserved' });
    const [event] = await log.waitFor('job_cancelled');
    expect(Date.now() - cancelledAt).toBeLessThan(5_000); // renewals run every third of the 1 s lease
    expect(event).toMatchObject({ job_id: id, key: 'slow:1', cancelled_by: 'ops', cancel_reason: 'runaway' });
    expect(reason).toBeInstanceOf(JobCancelledError);
    expect(reason).toBeInstanceOf(LeaseLostError);
    await cronq.stop({ graceMs: 1_000 });
    cronq = null;
    expect(log.named('job_completed')).toEqual([]);
    expect(await jobRow(id)).toMatchObject({ status: 'cancelled', cancelled_by: 'ops', cancel_reason: 'runaway' });
  });

  it('is never brought back by lease recovery', async () => {
    const id = await crafted('claimed', 'ready');
    const [job] = await claimReady(t.database.claims, { queues: ['default'], limit: 1, leases: THIRTY_SECOND_LEASES, lockedBy: 'test:1' });
    expect(job.id).toBe(id);
    cronq = createCronq({ databaseUrl: t.url, workers: false, scheduler: false });
    expect(await cronq.admin.cancel({ id }, { reason: 'stop', by: 'ops' })).toMatchObject({ status: 'cancelled', was: 'reserved' });
    await t.sql('UPDATE cronq_jobs SET lease_deadline = UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE WHERE id = ?', [id]);
    expect(await recoverExpiredLeases(t.database.db, 100)).toEqual({ returned: 0, dead: 0 });
    expect(await jobRow(id)).toMatchObject({ status: 'cancelled' });
  });
});

describe('cancelling many jobs', () => {
  it('cancels every waiting and running job matching the filter in batches, and nothing else', async () => {
    const ready = [await crafted('a1', 'ready', 'a'), await crafted('a2', 'ready', 'a'), await crafted('a3', 'ready', 'a')];
    const running = await crafted('a4', 'ready', 'a', 'night');
    await t.sql("UPDATE cronq_jobs SET status = 'reserved', lease_fence = REPEAT('b', 32), lease_deadline = UTC_TIMESTAMP(6) + INTERVAL 1 MINUTE WHERE id = ?", [running]);
    const done = await crafted('a5', 'done', 'a');
    const otherKind = await crafted('b1', 'ready', 'b');
    expect(await cancelMatching(t.database.db, { kind: 'a' }, { by: 'ops', reason: 'bad deploy' }, { batchSize: 2 })).toEqual({ ready: 3, running: 1, skippedHeld: 0 });
    for (const id of [...ready, running]) expect((await jobRow(id)).status).toBe('cancelled');
    expect((await jobRow(done)).status).toBe('done');
    expect((await jobRow(otherKind)).status).toBe('ready');
  });

  it('says how many matching jobs another transaction held through both passes, and a second run cancels them', async () => {
    const ids = [await crafted('h1', 'ready', 'h'), await crafted('h2', 'ready', 'h'), await crafted('h3', 'ready', 'h')];
    const result = await whileLocked(t.url, { sql: 'SELECT id FROM cronq_jobs WHERE id = ? FOR UPDATE', values: [ids[1]] }, () =>
      cancelMatching(t.database.db, { kind: 'h' }, { by: 'ops', reason: 'stop' }, { batchSize: 2 }),
    );
    expect(result).toEqual({ ready: 2, running: 0, skippedHeld: 1 });
    expect((await jobRow(ids[1])).status).toBe('ready');
    const cli = await runCli(['cancel', '--all-matching', '--kind', 'h', '--reason', 'stop'], env);
    expect(cli).toMatchObject({ code: 0, stderr: '' });
    expect(cli.stdout.trim()).toBe('cancelled 1 job (kind h): 1 waiting, 0 running (their handlers stop at the next lease renewal)');
  });

  it('prints how many it cancelled from the CLI', async () => {
    await crafted('q1', 'ready', 'a', 'night');
    await crafted('q2', 'ready', 'b', 'night');
    await crafted('q3', 'ready', 'a', 'default');
    const cli = await runCli(['cancel', '--all-matching', '--queue', 'night', '--reason', 'queue retired'], env);
    expect(cli.stderr).toBe('');
    expect(cli.stdout.trim()).toBe('cancelled 2 jobs (queue night): 2 waiting, 0 running (their handlers stop at the next lease renewal)');
    expect(await t.sql("SELECT job_key FROM cronq_jobs WHERE status = 'ready'")).toEqual([{ job_key: 'q3' }]);
  });
});

describe('cronq cancel refuses', () => {
  it('an unknown id, a finished job and a job already cancelled: one line, exit 64, nothing changed', async () => {
    const done = await crafted('done:1', 'done');
    const unknown = await runCli(['cancel', String(done + 1000), '--reason', 'x'], env);
    expect([unknown.code, unknown.stdout, unknown.stderr]).toEqual([64, '', `cronq cancel: no job with id ${done + 1000}; nothing changed\n`]);

    const finished = await runCli(['cancel', String(done), '--reason', 'x'], env);
    expect([finished.code, finished.stdout, finished.stderr]).toEqual([64, '', `cronq cancel: job ${done} (key done:1) is already 'done'; nothing changed\n`]);
    expect(await jobRow(done)).toMatchObject({ status: 'done', cancelled_by: null, cancel_reason: null });

    const cancelled = await crafted('c:1', 'ready');
    expect((await runMain(['cancel', String(cancelled), '--reason', 'first', '--by', 'ann'], env)).code).toBe(0);
    const again = await runMain(['cancel', '--key', 'c:1', '--reason', 'second', '--by', 'bob'], env);
    expect([again.code, again.stderr]).toEqual([64, `cronq cancel: job ${cancelled} (key c:1) is already 'cancelled' by ann (first); nothing changed\n`]);
    expect(await jobRow(cancelled)).toMatchObject({ cancelled_by: 'ann', cancel_reason: 'first' });

    const noKey = await runMain(['cancel', '--key', 'nope', '--reason', 'x'], env);
    expect([noKey.code, noKey.stderr]).toEqual([64, "cronq cancel: no job with key 'nope'; nothing changed\n"]);
  });

  it('bad usage before touching the database', async () => {
    const id = await crafted('usage', 'ready');
    const cases: Array<[string[], string]> = [
      [['cancel', String(id)], 'cronq cancel: --reason R is required (it is recorded in cancel_reason)'],
      [['cancel', String(id), '--reason', ' '], 'cronq cancel: --reason R is required (it is recorded in cancel_reason)'],
      [['cancel', String(id), '--reason', 'x'.repeat(256)], 'cronq cancel: --reason is longer than 255 characters'],
      [['cancel', '--reason', 'x'], 'cronq cancel: give a job ID, --key KEY or --all-matching (see cronq cancel --help)'],
      [['cancel', String(id), '--key', 'k', '--reason', 'x'], 'cronq cancel: give only one of a job ID, --key KEY and --all-matching'],
      [['cancel', String(id), '--kind', 'a', '--reason', 'x'], 'cronq cancel: --kind and --queue select jobs only with --all-matching'],
      [['cancel', 'abc', '--reason', 'x'], "cronq cancel: ID must be a job id (cronq_jobs.id), a whole number from 1 (got 'abc')"],
    ];
    for (const [args, message] of cases) {
      const r = await runMain(args, { ...env, DATABASE_URL: 'mysql://root@127.0.0.1:1/nowhere' });
      expect([r.code, r.stdout, r.stderr], args.join(' ')).toEqual([64, '', `${message}\n`]);
    }
    expect((await jobRow(id)).status).toBe('ready');
  });
});

describe('retention', () => {
  it('prunes cancelled jobs like done ones', async () => {
    const id = await crafted('old-cancelled', 'cancelled');
    await t.sql('UPDATE cronq_jobs SET finished_time = UTC_TIMESTAMP(6) - INTERVAL 2 DAY WHERE id = ?', [id]);
    await crafted('old-ready', 'ready');
    const cutoff = await cutoffBefore(t.database.db, 86_400_000);
    expect(await countPrunable(t.database.db, 'doneJobs', cutoff)).toBe(1);
  });
});
