import { afterEach, describe, expect, it } from 'vitest';
import { createCronq, defineSchedule, defineTask, DatabaseUnreachableError, PermanentError, UsageError, type Cronq } from '../src/index.ts';
import { useTestDatabase } from './support/db.ts';
import { EventLog } from './support/events.ts';

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
      refusedCount: 0,
      refused: [],
    });
    expect(await cronq.admin.tick('daily-report', { at })).toMatchObject({ status: 'enqueued', inserted: 0, existing: 1 });

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
      `INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, attempts, max_attempts, finished_at)
       VALUES ('default', 'daily-report', 'old', '{}', 'done', 1, 5, UTC_TIMESTAMP(6) - INTERVAL 4 DAY)`,
    );
    expect(await cronq.admin.prune({ olderThanMs: 3 * 24 * HOUR_MS, dryRun: true })).toMatchObject({ jobs: 1, dryRun: true });
    expect(await cronq.admin.prune({ olderThanMs: 3 * 24 * HOUR_MS })).toMatchObject({ jobs: 1, dryRun: false });
    expect((await cronq.admin.stats()).queues).toEqual([]);
  });
});
