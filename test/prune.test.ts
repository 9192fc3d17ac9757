import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { UsageError } from '../src/errors.ts';
import { pruneOnce } from '../src/maintenance/prune.ts';
import { Store } from '../src/store/index.ts';
import { defineSchedule } from '../src/schedule/define.ts';
import { checkRetention, retentionNeed } from '../src/schedule/retention.ts';
import { DaemonProcess, runCli } from './support/cli.ts';
import { useTestDatabase } from './support/db.ts';

const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;
const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_dead_letters', 'cronq_schedule_ticks'] });
let env: Record<string, string>;
const daemons: DaemonProcess[] = [];

beforeAll(() => {
  env = { DATABASE_URL: t.url, CRONQ_SCHEDULES: 'test/fixtures/schedules-daemon', LOG_LEVEL: 'info' };
});
afterAll(async () => {
  await Promise.all(daemons.map((d) => d.kill()));
});

let seq = 0;

/** A job row in `status`, finished (or, for ready/reserved, last touched) `daysAgo` by the database clock. */
async function job(status: 'ready' | 'reserved' | 'done' | 'dead' | 'cancelled', daysAgo: number): Promise<number> {
  const key = `prune:${status}:${daysAgo}:${seq++}`;
  const finished = status === 'done' || status === 'dead' || status === 'cancelled';
  const row: any = await t.sql(
    `INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, attempts, lease_fence, lease_deadline, created_at, updated_at, finished_time)
     VALUES ('default', 'traced', ?, '{}', ?, 1, IF(? = 'reserved', REPEAT('a', 32), ''),
       IF(? = 'reserved', UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, '1970-01-01'),
       UTC_TIMESTAMP(6) - INTERVAL ? SECOND, UTC_TIMESTAMP(6) - INTERVAL ? SECOND,
       IF(?, UTC_TIMESTAMP(6) - INTERVAL ? SECOND, '1970-01-01'))`,
    [key, status, status, status, daysAgo * 86_400 + 60, daysAgo * 86_400, finished, daysAgo * 86_400],
  );
  if (status === 'dead') {
    await t.sql(
      `INSERT INTO cronq_dead_letters (job_id, queue, kind, job_key, payload, failure_reason, attempts, dead_at)
       VALUES (?, 'default', 'traced', ?, '{}', 'Error: boom', 1, UTC_TIMESTAMP(6) - INTERVAL ? SECOND)`,
      [row.insertId, key, daysAgo * 86_400],
    );
  }
  return Number(row.insertId);
}

/** A tick ledger row of `schedule` at `scheduledDaysAgo`, finished `finishedDaysAgo` (null: fan-out unfinished). */
async function tick(schedule: string, scheduledDaysAgo: number, finishedDaysAgo: number | null, outcome = 'enqueued'): Promise<number> {
  const row: any = await t.sql(
    `INSERT INTO cronq_schedule_ticks (schedule_name, scheduled_at, period_key, outcome, started_at, finished_at)
     VALUES (?, UTC_TIMESTAMP(6) - INTERVAL ? SECOND, 'p', ?, UTC_TIMESTAMP(6) - INTERVAL ? SECOND,
       IF(? IS NULL, NULL, UTC_TIMESTAMP(6) - INTERVAL ? SECOND))`,
    [schedule, scheduledDaysAgo * 86_400, outcome, scheduledDaysAgo * 86_400, finishedDaysAgo, (finishedDaysAgo ?? 0) * 86_400],
  );
  return Number(row.insertId);
}

const ids = async (table: string) => (await t.sql(`SELECT id FROM ${table} ORDER BY id`)).map((r: any) => Number(r.id));

describe('pruneOnce', () => {
  it('deletes exactly the done jobs finished before the cutoff, in batches, and keeps dead, ready, reserved and young done jobs', async () => {
    const keep: number[] = [];
    const old: number[] = [];
    // Interleaved, so every batch and scan window sees rows it must leave alone.
    for (let i = 0; i < 7; i++) {
      old.push(await job('done', 40 + i));
      keep.push(await job('dead', 40 + i));
      if (i % 2 === 0) keep.push(await job('ready', 40 + i), await job('reserved', 40 + i));
    }
    keep.push(await job('done', 29), await job('done', 0));
    const letters = await ids('cronq_dead_letters');

    const result = await pruneOnce(new Store(t.database), { olderThanMs: 30 * DAY_MS, batchSize: 3, scanSpan: 4, pauseMs: 0 });

    expect(result).toMatchObject({ jobs: 7, ticks: 0, batches: 3, dryRun: false });
    expect(Math.abs(result.cutoff.getTime() - (Date.now() - 30 * DAY_MS))).toBeLessThan(60_000);
    expect(await ids('cronq_jobs')).toEqual(keep.sort((a, b) => a - b));
    expect(await ids('cronq_dead_letters')).toEqual(letters);
  });

  it('with dryRun counts the same rows and deletes nothing', async () => {
    for (let i = 0; i < 4; i++) await job('done', 31 + i);
    await job('done', 1);
    await job('dead', 90);
    await tick('nightly', 60, 60);
    await tick('nightly', 59, 59);
    const before = await ids('cronq_jobs');

    const dry = await pruneOnce(new Store(t.database), { olderThanMs: 30 * DAY_MS, dryRun: true });
    expect(dry).toMatchObject({ jobs: 4, ticks: 1, batches: 0, dryRun: true });
    expect(await ids('cronq_jobs')).toEqual(before);
    expect(await ids('cronq_schedule_ticks')).toHaveLength(2);

    const real = await pruneOnce(new Store(t.database), { olderThanMs: 30 * DAY_MS, pauseMs: 0 });
    expect(real).toMatchObject({ jobs: 4, ticks: 1 });
  });

  it("deletes old finished tick rows but never a schedule's latest row or an unfinished fan-out", async () => {
    const gone = [await tick('nightly', 50, 50), await tick('nightly', 45, 45, 'skipped')];
    const unfinished = await tick('nightly', 44, null);
    const latestOld = await tick('nightly', 40, 40); // latest of its schedule: catch-up resumes here
    const onlyRow = await tick('weekly', 300, 300);
    const young = [await tick('hourly', 2, 2), await tick('hourly', 1, 1)];

    const result = await pruneOnce(new Store(t.database), { olderThanMs: 30 * DAY_MS, batchSize: 1, pauseMs: 0 });

    expect(result).toMatchObject({ jobs: 0, ticks: 2, batches: 2 });
    expect(await ids('cronq_schedule_ticks')).toEqual([unfinished, latestOld, onlyRow, ...young]);
    expect(gone).toHaveLength(2);
  });

  it('finds the old rows behind a long run of ids it must keep and across sparse ids', async () => {
    for (let i = 0; i < 30; i++) await job('dead', 100);
    await t.sql('ALTER TABLE cronq_jobs AUTO_INCREMENT = 1000000');
    const old = await job('done', 100);
    const result = await pruneOnce(new Store(t.database), { olderThanMs: 30 * DAY_MS, batchSize: 2, scanSpan: 5, pauseMs: 0 });
    expect(result.jobs).toBe(1);
    expect(await ids('cronq_jobs')).not.toContain(old);
    expect(await ids('cronq_jobs')).toHaveLength(30);
  });
});

describe('checkRetention', () => {
  const monthly = defineSchedule({ name: 'monthly', cron: '0 2 1 * *', period: 'month', catchUp: { window: '40d' }, handle() {} });
  const weekdays = defineSchedule({ name: 'weekdays', cron: '0 9 * * 1-5', catchUp: { window: '1d' }, handle() {} });
  const noCatchUp = defineSchedule({ name: 'often', cron: '*/5 * * * *', period: 'tick', catchUp: false, handle() {} });

  it('needs the catch-up window plus one period: a calendar period, or for tick the longest gap between fires', () => {
    expect(retentionNeed(monthly)).toEqual({ windowMs: 40 * DAY_MS, periodMs: 31 * DAY_MS + HOUR_MS, totalMs: 71 * DAY_MS + HOUR_MS });
    // Friday 09:00 to Monday 09:00.
    expect(retentionNeed(weekdays)).toEqual({ windowMs: DAY_MS, periodMs: 3 * DAY_MS, totalMs: 4 * DAY_MS });
    // No catch-up still enqueues a tick up to the 60 s lateness tolerance late.
    expect(retentionNeed(noCatchUp)).toEqual({ windowMs: 60_000, periodMs: 300_000, totalMs: 360_000 });
  });

  it('refuses a retention shorter than a schedule needs, naming the schedule and the minimum', () => {
    expect(() => checkRetention(71 * DAY_MS + HOUR_MS, [weekdays, monthly], '--done-older-than')).not.toThrow();
    let error: unknown;
    try {
      checkRetention(30 * DAY_MS, [weekdays, monthly], '--done-older-than');
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(UsageError);
    expect((error as Error).message).toMatch(/^--done-older-than 30d is shorter than schedule 'monthly' needs: .*Use at least 72d, which covers every schedule$/);
    expect((error as Error).message).not.toContain('\n');
    expect(() => checkRetention(30 * 60_000, [], '--done-older-than')).toThrow(/below the minimum of 1h/);
    // The schedule needing the most is named, whatever the order: one correction suffices.
    expect(() => checkRetention(2 * DAY_MS, [weekdays, monthly], '--done-older-than')).toThrow(
      /^--done-older-than 2d is shorter than schedule 'monthly' needs: .*Use at least 72d, which covers every schedule$/,
    );
  });
});

describe('cronq prune', () => {
  it('deletes the old done jobs and says how many; --dry-run only counts', async () => {
    await job('done', 120);
    await job('done', 95);
    await job('done', 3);
    await job('dead', 120);

    const dry = await runCli(['prune', '--dry-run'], env);
    expect(dry).toMatchObject({ code: 0, stderr: '' });
    expect(dry.stdout).toMatch(/^would delete 2 done or cancelled jobs and 0 tick ledger rows finished before \d{4}-\d\d-\d\dT/);
    expect(await ids('cronq_jobs')).toHaveLength(4);

    const real = await runCli(['prune', '--done-older-than', '100d', '--json'], env);
    expect(real.code).toBe(0);
    expect(JSON.parse(real.stdout)).toMatchObject({ dryRun: false, jobs: 1, ticks: 0, batches: 1 });
    const rest = await runCli(['prune'], env);
    expect(rest.stdout).toMatch(/^deleted 1 done or cancelled job and 0 tick ledger rows finished before .* \(1 batch\)\n$/);
    expect(await t.sql("SELECT status FROM cronq_jobs ORDER BY id")).toEqual([{ status: 'done' }, { status: 'dead' }]);
  });

  it('counts the cancelled jobs it deletes with the done ones, and says so', async () => {
    await job('done', 120);
    await job('cancelled', 120);
    const r = await runCli(['prune', '--dry-run'], env);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout).toMatch(/^would delete 2 done or cancelled jobs and 0 tick ledger rows finished before /);
  });

  it('works with its default retention on the example schedules shipped in schedules/', async () => {
    const r = await runCli(['prune', '--dry-run'], { ...env, CRONQ_SCHEDULES: 'schedules' });
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout).toMatch(/^would delete 0 done or cancelled jobs/);
  });

  it.each([
    [['--done-older-than', '30'], /--done-older-than must be at least 1h/],
    [['--done-older-than', 'a month'], /--done-older-than: 'a month' is not a duration/],
    [['--done-older-than', '30d', '--schedules', 'test/fixtures/schedules-prune'], /schedule 'monthly-report' needs: .*Use at least 72d/],
    [['--older-than', '30d'], /Unknown option '--older-than'/],
  ])('refuses %j with one line and exit 64, deleting nothing', async (args, message) => {
    await job('done', 100);
    const r = await runCli(['prune', ...args], env);
    expect(r.code).toBe(64);
    expect(r.stderr).toMatch(message);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(await ids('cronq_jobs')).toHaveLength(1);
  });
});

describe('cronq start --prune-done-older-than', () => {
  it('prunes in the background from start', async () => {
    const old = await job('done', 10);
    const kept = [await job('done', 0), await job('dead', 10)];
    const d = new DaemonProcess(['--prune-done-older-than', '1d'], env);
    daemons.push(d);
    const [pruned] = await d.waitFor('pruned');
    expect(pruned).toMatchObject({ jobs: 1, ticks: 0, batches: 1 });
    expect(await ids('cronq_jobs')).toEqual(kept);
    expect(await ids('cronq_jobs')).not.toContain(old);
    d.signal('SIGTERM');
    expect(await d.exited).toBe(0);
  });

  it.each([
    [['--prune-done-older-than', '1d', '--schedules', 'test/fixtures/schedules-prune'], /^cronq start: --prune-done-older-than 1d is shorter than schedule 'monthly-report' needs/],
    [['--prune-done-older-than', '59m'], /--prune-done-older-than must be at least 1h/],
  ])('refuses %j at start with one line and exit 64', async (args, message) => {
    const r = await runCli(['start', ...args], env);
    expect(r.code).toBe(64);
    expect(r.stderr).toMatch(message);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });
});
