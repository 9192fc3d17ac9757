import { createServer, connect as tcpConnect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createCronq, defineSchedule, defineTask, DatabaseBusyError, DatabaseUnreachableError, PermanentError, UsageError, type Cronq } from '../src/index.ts';
import { useTestDatabase } from './support/db.ts';
import { EventLog } from './support/events.ts';
import { whileLocked } from './support/rowLock.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_dead_letters'] });
let cronq: Cronq | null = null;

afterEach(async () => {
  await cronq?.stop({ graceMs: 1_000 });
  cronq = null;
});

const daily = defineSchedule({ name: 'daily-report', cron: '0 3 * * *', timezone: 'UTC', period: 'day', handle() {} });
const monthly = defineSchedule({ name: 'monthly-report', cron: '0 2 1 * *', period: 'month', catchUp: { window: '40d', mode: 'all' }, handle() {} });
const HOUR_MS = 3_600_000;

describe('the admin API', () => {
  it('triages a dead letter: list, groups, show, requeue once, stats, without exposing the database', async () => {
    const log = new EventLog();
    const doomed = defineTask({
      name: 'doomed',
      handle() {
        throw new PermanentError('no such user 42');
      },
    });
    cronq = createCronq({ databaseUrl: t.url, tasks: [doomed], logger: log.logger, scheduler: false, pollInterval: '50ms' });
    expect('database' in cronq).toBe(false);
    await cronq.start();
    const { id: jobId } = await cronq.enqueue({ kind: 'doomed', key: 'user:42' });
    await log.waitFor('job_dead');

    const { letters, more } = await cronq.admin.deadLetters.list();
    expect(more).toBe(false);
    expect(letters).toMatchObject([{ jobId, kind: 'doomed', key: 'user:42', reviewedAt: null }]);
    expect(await cronq.admin.deadLetters.groups()).toMatchObject([{ kind: 'doomed', count: 1, exampleId: letters[0].id }]);
    expect(await cronq.admin.deadLetters.get(letters[0].id)).toMatchObject({ jobId, job: { status: 'dead' } });
    expect(await cronq.admin.deadLetters.get(letters[0].id + 1000)).toBeNull();
    expect((await cronq.admin.stats()).deadLetters).toEqual({ awaitingReview: 1, capped: false });

    expect(await cronq.admin.deadLetters.requeue(letters[0].id, 'user restored')).toMatchObject({ status: 'done', jobId, key: 'user:42' });
    expect(await cronq.admin.deadLetters.discard(letters[0].id, 'twice')).toMatchObject({ status: 'already_reviewed' });
    await expect(cronq.admin.deadLetters.discard(letters[0].id, ' ')).rejects.toThrow(UsageError);
    expect((await cronq.admin.deadLetters.list()).letters).toEqual([]);
  });

  it('fires a schedule now, harmlessly again, and lists its coming fire times and ledger rows', async () => {
    cronq = createCronq({ databaseUrl: t.url, tasks: [daily], workers: false, scheduler: false });
    expect(await cronq.admin.tick('weekly-report')).toEqual({ status: 'no_schedule', schedule: 'weekly-report' });
    const at = new Date('2026-11-30T05:00:00Z');
    const first = await cronq.admin.tick('daily-report', { at });
    expect(first).toEqual({
      status: 'enqueued',
      schedule: 'daily-report',
      fireAt: new Date('2026-11-30T03:00:00Z'),
      periodKey: '2026-11-30',
      inserted: 1,
      existing: 0,
      conflicting: 0,
      firstConflict: null,
      refusedCount: 0,
      refused: [],
    });
    expect(await cronq.admin.tick('daily-report', { at })).toMatchObject({ status: 'enqueued', inserted: 0, existing: 1, conflicting: 0 });

    expect(await cronq.admin.schedules({ from: at, count: 2 })).toEqual([
      {
        name: 'daily-report',
        cron: '0 3 * * *',
        timezone: 'UTC',
        period: 'day',
        next: [new Date('2026-12-01T03:00:00Z'), new Date('2026-12-02T03:00:00Z')],
        lastTick: null, // a tick run by hand writes no ledger row
        paused: null,
        health: { schedule: 'daily-report', expectWithinMs: null, lastSuccessAt: null, overdue: false, overdueSince: null },
      },
    ]);
    expect(await cronq.admin.recentTicks('daily-report')).toEqual([]);
    await expect(cronq.admin.schedules({ count: 0 })).rejects.toThrow(/count must be a whole number from 1 to 1000/);
  });

  it('tells a bad tick instant or an unknown schedule as such while the database is down, before reading its clock', async () => {
    cronq = createCronq({ databaseUrl: 'mysql://root@127.0.0.1:1/nowhere', tasks: [daily], workers: false, scheduler: false, logger: false });
    await expect(cronq.admin.tick('daily-report', { at: new Date('garbage') })).rejects.toBeInstanceOf(UsageError);
    await expect(cronq.admin.tick('daily-report', { at: new Date(Date.now() + HOUR_MS) })).rejects.toThrow(/^at must not be later than now \(\S+Z by this host's clock/);
    expect(await cronq.admin.tick('no-such-schedule')).toEqual({ status: 'no_schedule', schedule: 'no-such-schedule' });
    await expect(cronq.admin.tick('daily-report', { at: new Date('1969-12-31T23:00:00Z') })).rejects.toThrow(/^at must be 1970 or later \(got 1969-12-31T23:00:00\.000Z\)$/);
    await expect(cronq.admin.tick('daily-report')).rejects.toBeInstanceOf(DatabaseUnreachableError);
  });

  it('refuses to tick a fire time later than now, which would take its period key so that its real run never happened', async () => {
    cronq = createCronq({ databaseUrl: t.url, tasks: [daily], workers: false, scheduler: false, logger: false });
    for (const at of [new Date('2999-12-31T23:59:59Z'), new Date(Date.now() + 60_000)]) {
      const error = await cronq.admin.tick('daily-report', { at }).then(() => null, (e: unknown) => e);
      expect(error).toBeInstanceOf(UsageError);
      expect((error as Error).message).toMatch(/^at must not be later than now \(\S+Z by (?:this host's|the database's) clock, 5s of clock skew allowed\): a coming fire time ticked now would take its period's key, and its real run would find it taken and never run \(got \S+Z\)$/);
    }
    expect(await t.sql('SELECT job_key FROM cronq_jobs')).toEqual([]);
    // Now, and a little ahead for clock skew, run today's fire as ever.
    expect(await cronq.admin.tick('daily-report', { at: new Date(Date.now() + 4_000) })).toMatchObject({ status: 'enqueued', inserted: 1 });
    expect(await cronq.admin.tick('daily-report')).toMatchObject({ status: 'enqueued', inserted: 0, existing: 1 });
  });

  it('does not tick a paused schedule unless forced: it answers with the pause, enqueues nothing, and the pause stays', async () => {
    cronq = createCronq({ databaseUrl: t.url, tasks: [daily], workers: false, scheduler: false, logger: false });
    try {
      const paused = await cronq.admin.pauses.pause('schedule', 'daily-report', { reason: 'quarter close', by: 'ann' });
      expect(paused.status).toBe('paused');
      const at = new Date('2026-11-30T05:00:00Z');
      expect(await cronq.admin.tick('daily-report', { at })).toEqual({ status: 'paused', schedule: 'daily-report', pause: paused.status === 'paused' && paused.pause });
      expect(await cronq.admin.tick('daily-report', { at, force: false })).toMatchObject({ status: 'paused' });
      expect(await t.sql('SELECT job_key FROM cronq_jobs')).toEqual([]);
      expect(await cronq.admin.tick('daily-report', { at, force: true })).toMatchObject({ status: 'enqueued', fireAt: new Date('2026-11-30T03:00:00Z'), inserted: 1 });
      expect(await cronq.admin.pauses.list()).toMatchObject([{ target: 'schedule', name: 'daily-report', reason: 'quarter close' }]);
      await expect(cronq.admin.tick('daily-report', { force: 'yes' as never })).rejects.toThrow(/^tick: force must be true or false \(got "yes"\)$/);
    } finally {
      await t.sql('DELETE FROM cronq_pauses');
    }
  });

  it('a call that waits out a row lock another transaction holds fails with DatabaseBusyError, changing nothing, and works once the lock is gone', async () => {
    await t.sql("INSERT INTO cronq_jobs (queue, kind, job_key, payload) VALUES ('default', 'report', 'locked:1', '{}')");
    const [{ id }] = await t.sql("SELECT id FROM cronq_jobs WHERE job_key = 'locked:1'");
    const error = await whileLocked(t.url, { sql: 'SELECT id FROM cronq_jobs WHERE id = ? FOR UPDATE', values: [id] }, async () => {
      cronq = createCronq({ databaseUrl: t.url, tasks: [daily], workers: false, scheduler: false, logger: false });
      return cronq.admin.cancel({ id }, { reason: 'not needed' }).then(() => null, (e: unknown) => e);
    });
    expect(error).toBeInstanceOf(DatabaseBusyError);
    expect(error).toMatchObject({ call: 'cronq.admin.cancel', reason: expect.stringMatching(/^ER_LOCK_WAIT_TIMEOUT /) });
    expect((error as Error).message).toMatch(/^cronq\.admin\.cancel\(\): the database is busy \(ER_LOCK_WAIT_TIMEOUT [^\n]+\); try again$/);
    expect((error as Error).message).not.toMatch(/SELECT|UPDATE|cronq_jobs|Failed query/);
    expect(await t.sql('SELECT status FROM cronq_jobs WHERE id = ?', [id])).toEqual([{ status: 'ready' }]);
    expect(await cronq!.admin.cancel({ id }, { reason: 'not needed' })).toMatchObject({ status: 'cancelled', jobId: id });
  });

  it('a tick whose fan-out waits out a lock on its job key fails with DatabaseBusyError, not as the fan-out\'s own failure', async () => {
    const at = new Date('2026-11-30T05:00:00Z');
    // Another transaction inserting the same key, not yet committed: the tick's insert waits for it.
    const lock = { sql: "INSERT INTO cronq_jobs (queue, kind, job_key, payload) VALUES ('default', 'daily-report', 'daily-report:2026-11-30', '{}')" };
    const error = await whileLocked(t.url, lock, async () => {
      cronq = createCronq({ databaseUrl: t.url, tasks: [daily], workers: false, scheduler: false, logger: false });
      return cronq.admin.tick('daily-report', { at }).then(() => null, (e: unknown) => e);
    });
    expect(error).toBeInstanceOf(DatabaseBusyError);
    expect((error as Error).message).toMatch(/^cronq\.admin\.tick\(\): the database is busy \(ER_LOCK_WAIT_TIMEOUT /);
    expect(await cronq!.admin.tick('daily-report', { at })).toMatchObject({ status: 'enqueued', inserted: 1 });
  });

  it('refuses bad input with a UsageError naming it, never a driver error carrying the SQL: ids, dates, targets, reasons', async () => {
    cronq = createCronq({ databaseUrl: t.url, tasks: [daily], logger: false });
    const { admin } = cronq;
    const bad: Array<[string, () => Promise<unknown>, RegExp]> = [
      ['get NaN', () => admin.deadLetters.get(Number('x')), /^id must be a whole number from 1 \(got NaN\)$/],
      ['requeue 1.5', () => admin.deadLetters.requeue(1.5, 'why'), /^id must be a whole number from 1 \(got 1.5\)$/],
      ['discard -1', () => admin.deadLetters.discard(-1, 'why'), /^id must be a whole number from 1 \(got -1\)$/],
      // From a URL or a form: it read `got 5`, an id it takes.
      ['requeue "5"', () => admin.deadLetters.requeue('5' as never, 'why'), /^id must be a whole number from 1 \(got the string "5"\)$/],
      ['job id "5"', () => admin.job({ id: '5' as never }), /^id must be a whole number from 1 \(got the string "5"\)$/],
      ['cancel id NaN', () => admin.cancel({ id: Number.NaN }, { reason: 'why' }), /^id must be a whole number from 1 \(got NaN\)$/],
      ['cancel null', () => admin.cancel(null as never, { reason: 'why' }), /^a job is named by \{ id \} or \{ key \}$/],
      ['cancel no reason', () => admin.cancel({ id: 1 }, {} as never), /^a reason is required$/],
      ['cancelMatching no reason', () => admin.cancelMatching({ kind: 'x' }, { reason: 5 } as never), /^a reason is required$/],
      ['cancelMatching null', () => admin.cancelMatching(null as never, { reason: 'why' }), /^cancelMatching: a filter must be an object \({} matches every row; got null\)$/],
      ['requeue no reason', () => admin.deadLetters.requeue(1, undefined as never), /^a reason is required$/],
      ['job id NaN', () => admin.job({ id: Number.NaN }), /^id must be a whole number from 1 \(got NaN\)$/],
      ['job undefined', () => admin.job(undefined as never), /^a job is named by \{ id \} or \{ key \}$/],
      ['daemons NaN', () => admin.daemons({ withinMs: Number.NaN }), /^withinMs must be a whole number from 0/],
      ['tick at NaN', () => admin.tick('daily-report', { at: new Date(Number.NaN) }), /^at must be a valid Date$/],
      ['tick at past 9999', () => admin.tick('daily-report', { at: new Date(8.64e15) }), /^at must be a Date from year 1 to 9999/],
      // Croner's fire times end with 2999: a later instant would read as "no fire time", or as the last one of 2999.
      ['tick at 3000', () => admin.tick('daily-report', { at: new Date('3000-01-01T00:00:00Z') }), /^at must be before the year 3000: cron fire times are computed up to the end of 2999 \(got 3000-01-01T00:00:00\.000Z\)$/],
      ['schedules from 5000', () => admin.schedules({ from: new Date('5000-06-01T00:00:00Z') }), /^from must be before the year 3000/],
      ['schedules from NaN', () => admin.schedules({ from: new Date(Number.NaN) }), /^from must be a valid Date$/],
      ['recentTicks before NaN', () => admin.recentTicks('daily-report', 5, { before: new Date(Number.NaN) }), /^before must be a valid Date$/],
      ['scheduleHealth at NaN', () => admin.scheduleHealth({ at: new Date(Number.NaN) }), /^at must be a valid Date$/],
    ];
    for (const [what, call, message] of bad) {
      const error = await call().then(() => null, (e: unknown) => e);
      expect(error, what).toBeInstanceOf(UsageError);
      expect((error as Error).message, what).toMatch(message);
    }
    expect(await admin.deadLetters.get(1)).toBeNull();
    expect(await admin.job({ key: 'nope' })).toBeNull();
  });

  it('refuses a retention the loaded schedules do not cover before touching the database', async () => {
    cronq = createCronq({ databaseUrl: 'mysql://root@127.0.0.1:1/nowhere', tasks: [monthly], workers: false, scheduler: false });
    await expect(cronq.admin.prune({ olderThanMs: 30 * 24 * HOUR_MS })).rejects.toThrow(/olderThanMs 30d is shorter than schedule 'monthly-report' needs/);
    await expect(cronq.admin.ping()).rejects.toThrow(DatabaseUnreachableError);
  });

  it('prunes (or counts) done jobs past a covered retention', async () => {
    cronq = createCronq({ databaseUrl: t.url, tasks: [daily], workers: false, scheduler: false });
    await cronq.admin.ping();
    await cronq.admin.checkSchema();
    await t.sql(
      `INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, attempts, max_attempts, finished_time)
       VALUES ('default', 'daily-report', 'old', '{}', 'done', 1, 5, UTC_TIMESTAMP(6) - INTERVAL 4 DAY)`,
    );
    expect(await cronq.admin.prune({ olderThanMs: 3 * 24 * HOUR_MS, dryRun: true })).toMatchObject({ jobs: 1, dryRun: true });
    expect(await cronq.admin.prune({ olderThanMs: 3 * 24 * HOUR_MS })).toMatchObject({ jobs: 1, dryRun: false });
    expect((await cronq.admin.stats()).queues).toEqual([]);
  });
});

/** A TCP proxy to the test server that, once `drop` is set, closes every connection the moment the client sends anything. */
async function droppingProxy(target: URL): Promise<{ url: string; drop(): void; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let dropping = false;
  const server = createServer((client) => {
    const upstream = tcpConnect(Number(target.port || 3306), target.hostname);
    sockets.add(client).add(upstream);
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('data', (d) => (dropping ? close() : upstream.write(d)));
    upstream.on('data', (d) => client.write(d));
    client.on('close', close).on('error', close);
    upstream.on('close', close).on('error', close);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(target);
  url.host = `127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    url: url.toString(),
    drop: () => void (dropping = true),
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe('admin calls without a database', () => {
  /** Every kind of admin call, each needing the database. */
  const calls = (admin: Cronq['admin']): Array<[string, () => Promise<unknown>]> => [
    ['stats', () => admin.stats()],
    ['deadLetters.list', () => admin.deadLetters.list()],
    ['deadLetters.requeue', () => admin.deadLetters.requeue(1, 'retry')],
    ['pauses.list', () => admin.pauses.list()],
    ['cancel', () => admin.cancel({ id: 1 }, { reason: 'no longer needed' })],
    ['limits', () => admin.limits()],
    ['job', () => admin.job({ key: 'nope' })],
    ['daemons', () => admin.daemons()],
  ];

  it('after stop(), every admin call rejects with one UsageError saying so, never the SQL', async () => {
    const stopped = createCronq({ databaseUrl: t.url, logger: false, workers: false, scheduler: false });
    await stopped.admin.stats();
    await stopped.stop();
    for (const [what, call] of [...calls(stopped.admin), ['ping', () => stopped.admin.ping()] as [string, () => Promise<unknown>]]) {
      const error = await call().then(() => null, (e: unknown) => e);
      expect(error, what).toBeInstanceOf(UsageError);
      expect((error as Error).message, what).toBe(`cronq.admin.${what}() after stop(): a stopped cronq cannot be used again (its database pool is closed); create another with createCronq`);
    }
  });

  it('a connection that drops mid-call rejects with DatabaseUnreachableError naming host and port, never the SQL', async () => {
    const proxy = await droppingProxy(new URL(t.url));
    const dropped = createCronq({ databaseUrl: proxy.url, logger: false, workers: false, scheduler: false });
    try {
      await dropped.admin.stats();
      proxy.drop();
      for (const [what, call] of calls(dropped.admin)) {
        const error = await call().then(() => null, (e: unknown) => e);
        expect(error, what).toBeInstanceOf(DatabaseUnreachableError);
        const message = (error as Error).message;
        expect(message, what).toMatch(new RegExp(`^cronq\\.admin\\.${what.replace('.', '\\.')}\\(\\): cannot reach the database at 127\\.0\\.0\\.1:\\d+ \\(database '${t.name}'\\): `));
        expect(message, what).not.toMatch(/SELECT|UPDATE|cronq_jobs|cronq_dead|cronq_pauses|Failed query|params/);
        expect(message.split('\n'), what).toHaveLength(1);
        expect(JSON.stringify((error as Error).cause ?? null), what).not.toMatch(/SELECT|UPDATE|Failed query/);
      }
    } finally {
      await dropped.stop();
      await proxy.close();
    }
  });
});
