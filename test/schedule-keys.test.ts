import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createCronq, defineSchedule, type ScheduleOptions } from '../src/index.ts';
import { systemClock } from '../src/schedule/clock.ts';
import { assessHealth } from '../src/schedule/health.ts';
import { finishedTickNote, noteSaysKeysTaken, refuseScheduleKey } from '../src/schedule/fanout.ts';
import { NOTE_MAX } from '../src/store/ledger.ts';
import { ScheduleTicker } from '../src/schedule/ticker.ts';
import { Store } from '../src/store/index.ts';
import { useTestDatabase } from './support/db.ts';
import { EventLog } from './support/events.ts';
import { REPO_ROOT } from './support/cli.ts';
import { runMain } from './support/runMain.ts';

/** A schedule's keys taken by jobs it did not enqueue: the tick tells them apart from its own. */
const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_schedule_ticks'] });

const at = (iso: string) => new Date(iso);

function schedule(options: Partial<ScheduleOptions> = {}) {
  return defineSchedule({ name: 'daily', cron: '0 2 * * *', timezone: 'UTC', period: 'day', handle: () => undefined, ...options } as ScheduleOptions);
}

function ticker(s: ReturnType<typeof schedule>, log: EventLog) {
  return new ScheduleTicker(s, { store: new Store(t.database), clock: systemClock, log: log.logger, claimedBy: 'test:1' });
}

async function lastTickAt(name: string, iso: string) {
  await t.sql(
    "INSERT INTO cronq_schedule_ticks (schedule_name, scheduled_at, period_key, outcome, started_at, finished_at) VALUES (?, ?, 'seed', 'enqueued', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
    [name, iso.replace('T', ' ').replace('Z', '')],
  );
}

/** Inserts a job as a hand enqueue writes it (no schedule fields unless given); returns its id. */
async function jobHolding(key: string, kind: string, scheduleName: string | null = null, periodKey: string | null = null): Promise<number> {
  const result: any = await t.sql('INSERT INTO cronq_jobs (kind, job_key, payload, schedule_name, period_key) VALUES (?, ?, ?, ?, ?)', [kind, key, '{}', scheduleName, periodKey]);
  return Number(result.insertId);
}

async function tickRow(name: string, iso: string) {
  const [row] = await t.sql(
    'SELECT outcome, jobs_enqueued, jobs_existing, note, finished_at IS NOT NULL AS finished FROM cronq_schedule_ticks WHERE schedule_name = ? AND scheduled_at = ?',
    [name, iso.replace('T', ' ').replace('Z', '')],
  );
  return { ...row, finished: Boolean(row.finished) };
}

describe('a tick whose key another job holds', () => {
  it('a job of another kind holding the next key: the tick logs job_key_taken, notes it, does not count it existing, and is no success', async () => {
    const s = schedule();
    const log = new EventLog();
    await lastTickAt('daily', '2026-12-03T02:00:00Z');
    // `cronq enqueue report --key daily:2026-12-04` from an instance that loaded no schedules.
    const holder = await jobHolding('daily:2026-12-04', 'report');
    await ticker(s, log).catchUp(at('2026-12-04T02:00:00.100Z'));

    const note = `1 key held by jobs this schedule did not enqueue, first daily:2026-12-04 (kind report, job ${holder})`;
    expect(await tickRow('daily', '2026-12-04T02:00:00Z')).toEqual({ outcome: 'enqueued', jobs_enqueued: 0, jobs_existing: 0, note, finished: true });
    const taken = log.named('job_key_taken');
    expect(taken).toHaveLength(1);
    expect(taken[0]).toMatchObject({
      level: 40,
      schedule: 'daily',
      scheduled_at: '2026-12-04T02:00:00.000Z',
      period_key: '2026-12-04',
      count: 1,
      job_key: 'daily:2026-12-04',
      held_by_kind: 'report',
      held_by_job: holder,
    });
    expect(log.named('schedule_tick')[0]).toMatchObject({ enqueued: 0, existing: 0, conflicting: 1 });
    // The schedule's job never ran as the schedule: its last success is still the tick before.
    const health = await assessHealth(s, new Store(t.database), at('2026-12-04T03:00:00Z'));
    expect(health.lastSuccessAt).toEqual(at('2026-12-03T02:00:00Z'));
    expect(await t.sql('SELECT kind, schedule_name FROM cronq_jobs')).toEqual([{ kind: 'report', schedule_name: null }]);
  });

  it('in a fan-out, keys held by a hand job or by another period are conflicting, its own earlier rows of the period existing, tick after tick', async () => {
    const s = schedule({
      name: 'sq',
      period: 'month',
      async *jobs() {
        for (let i = 0; i < 30; i++) yield { key: `user:${i}` };
      },
    });
    const log = new EventLog();
    await lastTickAt('sq', '2026-12-01T02:00:00Z');
    const hand = await jobHolding('sq:user:3:2026-12', 'other');
    await jobHolding('sq:user:7:2026-12', 'sq', 'sq', '2026-11'); // a row this schedule wrote for another period
    const note = `2 keys held by jobs this schedule did not enqueue, first sq:user:3:2026-12 (kind other, job ${hand})`;

    await ticker(s, log).catchUp(at('2026-12-02T02:00:00.100Z'));
    expect(await tickRow('sq', '2026-12-02T02:00:00Z')).toMatchObject({ jobs_enqueued: 28, jobs_existing: 0, note });
    // The month's later ticks (the safety net) find their own 28 rows existing and the 2 still taken.
    await ticker(s, log).catchUp(at('2026-12-03T02:00:00.100Z'));
    expect(await tickRow('sq', '2026-12-03T02:00:00Z')).toMatchObject({ jobs_enqueued: 0, jobs_existing: 28, note });
    expect(log.named('job_key_taken').map((e) => [e.scheduled_at, e.count, e.job_key, e.held_by_kind, e.held_by_job])).toEqual([
      ['2026-12-02T02:00:00.000Z', 2, 'sq:user:3:2026-12', 'other', hand],
      ['2026-12-03T02:00:00.000Z', 2, 'sq:user:3:2026-12', 'other', hand],
    ]);
    const [{ n }] = await t.sql("SELECT COUNT(*) AS n FROM cronq_jobs WHERE schedule_name = 'sq' AND period_key = '2026-12'");
    expect(Number(n)).toBe(28);
  });

  it('admin.tick counts a key held by another kind as conflicting, apart from the existing, naming its holder', async () => {
    const s = schedule();
    const holder = await jobHolding('daily:2026-11-20', 'report');
    const cronq = createCronq({ databaseUrl: t.url, logger: false, tasks: [s] });
    try {
      expect(await cronq.admin.tick('daily', { at: at('2026-11-20T03:00:00Z') })).toMatchObject({
        status: 'enqueued',
        inserted: 0,
        existing: 0,
        conflicting: 1,
        firstConflict: { key: 'daily:2026-11-20', kind: 'report', jobId: holder },
      });
    } finally {
      await cronq.stop();
    }
  });

  it('health reads the taken keys in the note itself, never in a refused entity quoted after it', () => {
    expect(noteSaysKeysTaken('2 keys held by jobs this schedule did not enqueue, first daily:2026-12-04 (kind report, job 1)')).toBe(true);
    expect(noteSaysKeysTaken('caught up; 1 key held by jobs this schedule did not enqueue, first daily:x (kind report, job 1)')).toBe(true);
    // A key from jobs() that holds the words, quoted by the refused-entities part: not a taken key.
    expect(noteSaysKeysTaken('1 entity refused, first: u; 1 key held by jobs this schedule did not enqueue: key too long')).toBe(false);
    expect(noteSaysKeysTaken('caught up')).toBe(false);
    expect(noteSaysKeysTaken(null)).toBe(false);
  });

  it("keeps the taken keys' words in a finished tick's note however long the tick's own note, cut as the column cuts it", () => {
    // A cron edit's note quoting two long crons fills the column on its own.
    const own = `caught up; cron changed from \`${'0 '.repeat(60)}* * *\` to \`${'5 '.repeat(60)}* * *\``;
    const taken = '1 key held by jobs this schedule did not enqueue, first daily:x (kind report, job 1)';
    const note = finishedTickNote(own, taken, '1 entity refused, first: u: key too long')!;
    expect(note.length).toBeGreaterThan(NOTE_MAX);
    expect(noteSaysKeysTaken(note.slice(0, NOTE_MAX))).toBe(true);
    expect(finishedTickNote(null, null, null)).toBeNull();
    expect(finishedTickNote('caught up', null, null)).toBe('caught up');
  });

  it('cronq tick counts a held key apart, names its holder on stderr and exits 1', async () => {
    mkdirSync(join(REPO_ROOT, 'test', '.tmp'), { recursive: true });
    const dir = mkdtempSync(join(REPO_ROOT, 'test', '.tmp', 'keys-'));
    try {
      writeFileSync(join(dir, 'daily.ts'), "import { defineSchedule } from 'cronq';\nexport default defineSchedule({ name: 'daily', cron: '0 2 * * *', timezone: 'UTC', period: 'day', handle() {} });\n");
      const holder = await jobHolding('daily:2026-11-20', 'report');
      const r = await runMain(['tick', 'daily', '--at', '2026-11-20T03:00:00Z', '--schedules', dir], { DATABASE_URL: t.url });
      expect(r.code).toBe(1);
      expect(r.stdout).toBe('daily tick 2026-11-20T02:00:00.000Z (period 2026-11-20): 0 enqueued, 0 already present, 1 held by jobs this schedule did not enqueue\n');
      expect(r.stderr).toBe(
        `cronq tick: 1 of this tick's keys are held by jobs this schedule did not enqueue (first daily:2026-11-20: kind report, job ${holder}): their schedule jobs were not enqueued, and those keys stay taken until the holders' rows are deleted\n`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('enqueue refuses exactly the keys a tick could write: the period key in range, an entity only with a fan-out', () => {
    const shapes = new Map([
      ['daily', { period: 'day' as const, fansOut: false }],
      ['yearly', { period: 'year' as const, fansOut: true }],
      ['mins', { period: 'minute' as const, fansOut: true }],
      ['weekly', { period: 'week' as const, fansOut: false }],
    ]);
    const refused = (key: string) => {
      try {
        refuseScheduleKey(key, shapes);
        return false;
      } catch {
        return true;
      }
    };
    // 3000-W01: the ISO week-year of 30 December 2999.
    for (const key of ['daily:2026-12-04', 'yearly:user:7:2026', 'mins:a:b:2026-12-03T08:00', 'weekly:2026-W53', 'weekly:3000-W01']) expect(refused(key), key).toBe(true);
    // Follow-ups and keys no tick writes: an entity where there is no fan-out, none where there is, fields out of range.
    for (const key of ['daily:x:2026-12-04', 'daily:2026-12-04:mail', 'daily:2026-13-04', 'yearly:order:4711', 'yearly:2026', 'mins:a:2026-12-03T24:00', 'other:2026-12-04']) {
      expect(refused(key), key).toBe(false);
    }
  });
});
