import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CronqMetrics } from '../src/http/metrics.ts';
import { createCronq, defineSchedule, UsageError, type Cronq } from '../src/index.ts';
import type { Clock } from '../src/schedule/clock.ts';
import { HealthWatch } from '../src/schedule/healthWatch.ts';
import { Store } from '../src/store/index.ts';
import { useTestDatabase } from './support/db.ts';
import { EventLog } from './support/events.ts';
import { runCli } from './support/cli.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_schedule_ticks'] });
let cronq: Cronq | null = null;

afterEach(async () => {
  await cronq?.stop();
  cronq = null;
});

const nightly = defineSchedule({ name: 'nightly', cron: '0 3 * * *', timezone: 'UTC', period: 'day', expect: { within: '2h' }, handle() {} });
const unwatched = defineSchedule({ name: 'unwatched', cron: '0 3 * * *', timezone: 'UTC', period: 'day', handle() {} });

/** A finished tick-ledger row of `schedule` at `at` ('YYYY-MM-DD HH:MM:SS', UTC), and its one job in `jobStatus` (none: no job). */
async function tick(schedule: string, at: string, outcome: 'enqueued' | 'skipped' | 'failed', jobStatus?: 'ready' | 'reserved' | 'done' | 'dead' | 'cancelled') {
  const periodKey = at.slice(0, 10);
  await t.sql(
    `INSERT INTO cronq_schedule_ticks (schedule_name, scheduled_at, period_key, outcome, jobs_enqueued, started_at, finished_at)
     VALUES (?, ?, ?, ?, ?, ?, ?)`,
    [schedule, at, periodKey, outcome, jobStatus ? 1 : 0, at, at],
  );
  if (jobStatus) {
    await t.sql(
      `INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, attempts, max_attempts, schedule_name, period_key, scheduled_at)
       VALUES ('default', ?, ?, '{}', ?, 1, 3, ?, ?, ?)`,
      [schedule, `${schedule}:${periodKey}`, jobStatus, schedule, periodKey, at],
    );
  }
}

const at = (iso: string) => new Date(iso);

function open(): Cronq {
  cronq = createCronq({ databaseUrl: t.url, tasks: [nightly, unwatched], workers: false, scheduler: false });
  return cronq;
}

describe('schedule health', () => {
  it('is overdue once a tick whose job died is older than expect.within, until a later tick completes', async () => {
    await tick('nightly', '2026-11-29 03:00:00', 'enqueued', 'done');
    await tick('nightly', '2026-11-30 03:00:00', 'enqueued', 'dead');
    const admin = open().admin;
    const [before] = await admin.scheduleHealth({ at: at('2026-11-30T04:59:59Z') });
    expect(before).toEqual({ schedule: 'nightly', expectWithinMs: 7_200_000, lastSuccessAt: at('2026-11-29T03:00:00Z'), overdue: false, overdueSince: null });
    const [late] = await admin.scheduleHealth({ at: at('2026-11-30T05:00:00Z') });
    expect(late).toMatchObject({ overdue: true, overdueSince: at('2026-11-30T05:00:00Z'), lastSuccessAt: at('2026-11-29T03:00:00Z') });

    await tick('nightly', '2026-12-01 03:00:00', 'enqueued', 'done');
    const [recovered] = await admin.scheduleHealth({ at: at('2026-12-01T06:00:00Z') });
    expect(recovered).toMatchObject({ overdue: false, lastSuccessAt: at('2026-12-01T03:00:00Z') });
  });

  it('is overdue when no daemon enqueued the next tick at all, and counts a running or skipped tick as not yet complete', async () => {
    await tick('nightly', '2026-11-29 03:00:00', 'enqueued', 'done');
    const admin = open().admin;
    expect((await admin.scheduleHealth({ at: at('2026-11-30T04:00:00Z') }))[0].overdue).toBe(false);
    expect((await admin.scheduleHealth({ at: at('2026-11-30T05:00:01Z') }))[0]).toMatchObject({ overdue: true, overdueSince: at('2026-11-30T05:00:00Z') });

    await tick('nightly', '2026-11-30 03:00:00', 'enqueued', 'reserved');
    await tick('nightly', '2026-12-01 03:00:00', 'skipped');
    expect((await admin.scheduleHealth({ at: at('2026-12-01T06:00:00Z') }))[0]).toMatchObject({ overdue: true, lastSuccessAt: at('2026-11-29T03:00:00Z') });
  });

  it('reports the last success of a schedule without expect but never calls it overdue', async () => {
    await tick('unwatched', '2026-11-01 03:00:00', 'enqueued', 'done');
    await tick('unwatched', '2026-11-02 03:00:00', 'failed');
    const health = await open().admin.scheduleHealth({ at: at('2026-12-01T00:00:00Z') });
    expect(health[1]).toEqual({ schedule: 'unwatched', expectWithinMs: null, lastSuccessAt: at('2026-11-01T03:00:00Z'), overdue: false, overdueSince: null });
    expect(health[0]).toMatchObject({ schedule: 'nightly', lastSuccessAt: null, overdue: false }); // never ticked: no baseline
  });

  it('refuses an expect.within that is not a duration of at least a minute', () => {
    const define = (within: unknown) => () => defineSchedule({ name: 'x', cron: '* * * * *', expect: { within: within as string }, handle() {} });
    expect(define('10s')).toThrow(new UsageError(`schedule 'x': expect.within must be at least 1m (got "10s")`));
    expect(define('soon')).toThrow(UsageError);
  });

  it('logs schedule_overdue once per incident and schedule_recovered when a later tick completes', async () => {
    await tick('nightly', '2026-11-29 03:00:00', 'enqueued', 'done');
    await tick('nightly', '2026-11-30 03:00:00', 'enqueued', 'dead');
    let now = at('2026-11-30T06:00:00Z');
    const clock: Clock = { now: () => now, sleepUntil: async () => {} };
    const log = new EventLog();
    const watch = new HealthWatch([nightly, unwatched], { store: new Store(t.database), clock, log: log.logger });
    await watch.checkOnce();
    await watch.checkOnce();
    expect(log.named('schedule_overdue')).toMatchObject([
      { schedule: 'nightly', overdue_since: '2026-11-30T05:00:00.000Z', last_success_at: '2026-11-29T03:00:00.000Z', expect_within_ms: 7_200_000 },
    ]);
    await tick('nightly', '2026-12-01 03:00:00', 'enqueued', 'done');
    now = at('2026-12-01T04:00:00Z');
    await watch.checkOnce();
    await watch.checkOnce();
    expect(log.named('schedule_recovered')).toMatchObject([{ schedule: 'nightly', last_success_at: '2026-12-01T03:00:00.000Z' }]);
    expect(log.named('schedule_overdue')).toHaveLength(1);
  });

  it('judges nothing while the clock reads no valid time: an overdue schedule is not said to have recovered, nor a healthy one overdue', async () => {
    await tick('nightly', '2026-11-29 03:00:00', 'enqueued', 'done');
    await tick('nightly', '2026-11-30 03:00:00', 'enqueued', 'dead');
    let now = at('2026-11-30T06:00:00Z');
    // A clock option gone wrong reads as an invalid Date (guardClock): NaN is never past a deadline.
    const clock: Clock = { now: () => now, sleepUntil: async () => {} };
    const log = new EventLog();
    const watch = new HealthWatch([nightly], { store: new Store(t.database), clock, log: log.logger });
    await watch.checkOnce();
    expect(log.named('schedule_overdue')).toHaveLength(1);
    now = new Date(Number.NaN);
    await watch.checkOnce();
    expect(log.named('schedule_recovered')).toEqual([]);
    now = at('2026-11-30T06:01:00Z');
    await watch.checkOnce();
    // Still the one incident: the clock's bad reading ended nothing.
    expect(log.named('schedule_overdue')).toHaveLength(1);
    expect(log.named('schedule_recovered')).toEqual([]);
  });

  it('is exported to Prometheus: overdue for schedules with expect, last success for every schedule', async () => {
    const metrics = new CronqMetrics({
      collect: async () => ({
        queues: [],
        deadLetters: { awaitingReview: 0, capped: false },
        schedules: [],
        pauses: [],
        health: [
          { schedule: 'nightly', expectWithinMs: 7_200_000, lastSuccessAt: at('2026-11-29T03:00:00Z'), overdue: true, overdueSince: at('2026-11-30T05:00:00Z') },
          { schedule: 'unwatched', expectWithinMs: null, lastSuccessAt: at('2026-11-01T03:00:00Z'), overdue: false, overdueSince: null },
        ],
      }),
    });
    const { body } = await metrics.scrape();
    expect(body).toContain('cronq_schedule_overdue{schedule="nightly"} 1');
    expect(body).not.toContain('cronq_schedule_overdue{schedule="unwatched"}');
    expect(body).toContain(`cronq_schedule_last_success_timestamp_seconds{schedule="nightly"} ${Date.parse('2026-11-29T03:00:00Z') / 1000}`);
    expect(body).toContain(`cronq_schedule_last_success_timestamp_seconds{schedule="unwatched"} ${Date.parse('2026-11-01T03:00:00Z') / 1000}`);
  });

  it('shows in cronq schedules --json and cronq stats', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cronq-health-'));
    writeFileSync(
      join(dir, 'hourly.ts'),
      `import { defineSchedule } from '${join(process.cwd(), 'src/index.ts')}';
export default defineSchedule({ name: 'hourly', cron: '0 * * * *', period: 'hour', expect: { within: '1h' }, catchUp: false, handle: () => {} });
`,
    );
    const [{ fiveHoursAgo }] = await t.sql("SELECT DATE_FORMAT(UTC_TIMESTAMP() - INTERVAL 5 HOUR, '%Y-%m-%d %H:00:00') AS fiveHoursAgo");
    await tick('hourly', fiveHoursAgo, 'enqueued', 'done');
    const env = { DATABASE_URL: t.url, CRONQ_SCHEDULES: dir, LOG_LEVEL: 'info' };
    const lastSuccessAt = `${fiveHoursAgo.replace(' ', 'T')}.000Z`;
    const listed = await runCli(['schedules', '--json', '--count', '1'], env);
    expect(listed.stderr).toBe('');
    expect(JSON.parse(listed.stdout)).toMatchObject([{ name: 'hourly', expectWithinMs: 3_600_000, lastSuccessAt, overdue: true }]);
    const stats = await runCli(['stats'], env);
    expect(stats.stdout).toMatch(new RegExp(`hourly\\s+1h\\s+${lastSuccessAt.replace(/[.]/g, '\\.')}\\s+OVERDUE since `));
  });
});
