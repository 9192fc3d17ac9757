import { describe, expect, it } from 'vitest';
import { age, statsText } from '../src/cli/commands/stats.ts';
import { collectStats, COUNT_CAPS } from '../src/store/stats.ts';
import { runCli } from './support/cli.ts';
import { runMain } from './support/runMain.ts';
import { useTestDatabase } from './support/db.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_dead_letters'] });

let seq = 0;
/** Inserts `count` jobs; `availableIn` is seconds from now by the database clock (negative: in the past). */
async function jobs(queue: string, status: string, count: number, availableIn = 0): Promise<void> {
  for (let i = 0; i < count; i++) {
    await t.sql(
      `INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, available_at)
       VALUES (?, 'k', ?, '{}', ?, UTC_TIMESTAMP(6) + INTERVAL ? SECOND)`,
      [queue, `j${seq++}`, status, availableIn],
    );
  }
}

async function deadLetters(count: number, reviewed: boolean): Promise<void> {
  for (let i = 0; i < count; i++) {
    await t.sql(
      `INSERT INTO cronq_dead_letters (job_id, queue, kind, job_key, payload, failure_reason, attempts, reviewed_at)
       VALUES (1, 'default', 'k', ?, '{}', 'Error: x', 1, ${reviewed ? 'UTC_TIMESTAMP(6)' : 'NULL'})`,
      [`d${seq++}`],
    );
  }
}

describe('collectStats', () => {
  it('counts jobs per queue and status, and dead letters awaiting review', async () => {
    await jobs('default', 'ready', 3, -120);
    await jobs('default', 'ready', 1, -5);
    await jobs('default', 'reserved', 2);
    await jobs('default', 'done', 5);
    await jobs('default', 'dead', 1);
    await jobs('mail', 'done', 2);
    await jobs('night', 'ready', 2, 3600);
    await deadLetters(4, false);
    await deadLetters(2, true);

    const stats = await collectStats(t.database.db);
    expect(stats.deadLetters).toEqual({ awaitingReview: 4, capped: false });
    expect(stats.queues.map((q) => q.queue)).toEqual(['default', 'mail', 'night']);
    const [byDefault, mail, night] = stats.queues;
    expect(byDefault).toMatchObject({ queue: 'default', ready: 4, reserved: 2, done: 5, dead: 1 });
    // Ages come from the database clock: the oldest runnable job became available 120 s ago.
    expect(byDefault.oldestReadyAgeSeconds).toBeGreaterThanOrEqual(120);
    expect(byDefault.oldestReadyAgeSeconds).toBeLessThan(130);
    expect(mail).toEqual({ queue: 'mail', ready: 0, reserved: 0, done: 2, dead: 0, cancelled: 0, capped: [], oldestReadyAgeSeconds: null });
    // Ready but scheduled for later: counted as ready, but nothing is waiting.
    expect(night).toEqual({ queue: 'night', ready: 2, reserved: 0, done: 0, dead: 0, cancelled: 0, capped: [], oldestReadyAgeSeconds: null });
  });

  it('ignores future jobs when a queue has both waiting and scheduled ones', async () => {
    await jobs('q', 'ready', 1, 7200);
    await jobs('q', 'ready', 1, -30);
    const [q] = (await collectStats(t.database.db)).queues;
    expect(q.ready).toBe(2);
    expect(q.oldestReadyAgeSeconds).toBeGreaterThanOrEqual(30);
    expect(q.oldestReadyAgeSeconds).toBeLessThan(40);
  });

  it('counts history up to its cap and says the count is a lower bound, while live work below its cap stays exact', async () => {
    const cap = COUNT_CAPS.done;
    const digit = `(${Array.from({ length: 10 }, (_, d) => `SELECT ${d} AS d`).join(' UNION ALL ')})`;
    await t.sql(
      `INSERT INTO cronq_jobs (queue, kind, job_key, payload, status)
       SELECT 'big', 'k', CONCAT('h', i), '{}', IF(i < ?, 'done', 'ready')
       FROM (SELECT a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d AS i FROM ${digit} a, ${digit} b, ${digit} c, ${digit} e, ${digit} f) n
       WHERE i < ?`,
      [cap + 500, cap + 2_500],
    );
    await jobs('small', 'done', 3);
    const [big, small] = (await collectStats(t.database.db)).queues;
    expect(big).toMatchObject({ queue: 'big', done: cap, ready: 2_000, capped: ['done'] });
    // Exactly the cap is exact.
    await t.sql("DELETE FROM cronq_jobs WHERE queue = 'big' AND status = 'done' ORDER BY id LIMIT 500");
    expect((await collectStats(t.database.db)).queues[0]).toMatchObject({ queue: 'big', done: cap, capped: [] });
    expect(small).toMatchObject({ queue: 'small', done: 3, capped: [] });
    expect(statsText({ queues: [big, small], deadLetters: { awaitingReview: 0, capped: false }, schedules: [], pauses: [] })).toContain(`${cap}+`);
  });

  it('lists every queue of every status, whatever their names sort like', async () => {
    const names = ['a', 'a ', 'B', 'zz', 'é', 'q-1', 'q-10', 'q-2'];
    for (const [i, name] of names.entries()) await jobs(name, ['ready', 'reserved', 'done', 'dead', 'cancelled'][i % 5], 1);
    const queues = (await collectStats(t.database.db)).queues;
    expect(queues.map((q) => q.queue).sort()).toEqual([...names].sort());
    expect(queues.every((q) => q.ready + q.reserved + q.done + q.dead + q.cancelled === 1)).toBe(true);
  });

  it('reports no queues and zero dead letters on an empty database', async () => {
    expect(await collectStats(t.database.db)).toEqual({
      queues: [],
      deadLetters: { awaitingReview: 0, capped: false },
      schedules: [],
      pauses: [],
      unknownStatus: { jobs: 0, capped: false, exampleIds: [] },
    });
  });

  it('counts and names jobs whose status an UPDATE without strict mode set to a value outside the enum, which nothing else sees', async () => {
    await jobs('default', 'ready', 3);
    await t.sql(`SET SESSION sql_mode = ''`);
    try {
      await t.sql(`UPDATE cronq_jobs SET status = 'retry' ORDER BY id LIMIT 2`);
    } finally {
      await t.sql(`SET SESSION sql_mode = DEFAULT`);
    }
    const ids = (await t.sql(`SELECT id FROM cronq_jobs WHERE status + 0 = 0 ORDER BY id`)).map((r) => Number(r.id));
    expect(ids).toHaveLength(2);
    const stats = await collectStats(t.database.db);
    expect(stats.unknownStatus).toEqual({ jobs: 2, capped: false, exampleIds: ids });
    expect(stats.queues).toEqual([expect.objectContaining({ queue: 'default', ready: 1, reserved: 0, done: 0, dead: 0, cancelled: 0 })]);
    const shown = await runCli(['stats'], { DATABASE_URL: t.url, CRONQ_SCHEDULES: '' });
    expect(shown).toMatchObject({ code: 0, stderr: '' });
    expect(shown.stdout).toContain(
      `jobs with an unknown status (written by hand with strict mode off; they never run): 2, ids ${ids.join(', ')} (SELECT id, job_key FROM cronq_jobs WHERE status = '')`,
    );
  });
});

describe('schedule stats', () => {
  it("reports each schedule's latest tick and how late its latest enqueued tick started", async () => {
    await t.sql(
      `INSERT INTO cronq_schedule_ticks (schedule_name, scheduled_at, period_key, outcome, caught_up, started_at, finished_at) VALUES
        ('report', '2026-11-01 02:00:00', '2026-11-01', 'enqueued', FALSE, '2026-11-01 02:00:00.040', '2026-11-01 02:00:00.090'),
        ('report', '2026-11-02 02:00:00', '2026-11-02', 'enqueued', FALSE, '2026-11-02 02:00:00.012', NULL),
        ('hourly', '2026-11-02 01:00:00', '2026-11-02T01', 'enqueued', TRUE, '2026-11-02 01:05:00', '2026-11-02 01:05:01'),
        ('hourly', '2026-11-02 02:00:00', '2026-11-02T02', 'skipped', TRUE, '2026-11-02 03:00:00', '2026-11-02 03:00:00')`,
    );
    try {
      expect((await collectStats(t.database.db)).schedules).toEqual([
        {
          schedule: 'hourly',
          lastTick: { scheduledAt: '2026-11-02T02:00:00.000Z', periodKey: '2026-11-02T02', outcome: 'skipped', caughtUp: true, note: null, finishedAt: '2026-11-02T03:00:00.000Z' },
          latenessMs: 300_000,
        },
        {
          schedule: 'report',
          lastTick: { scheduledAt: '2026-11-02T02:00:00.000Z', periodKey: '2026-11-02', outcome: 'enqueued', caughtUp: false, note: null, finishedAt: null },
          latenessMs: 12,
        },
      ]);
    } finally {
      await t.sql('DELETE FROM cronq_schedule_ticks');
    }
  });
});

describe('stats text', () => {
  it('renders a table of queues (cancelled jobs included) and the dead-letter count', () => {
    const text = statsText({
      queues: [
        { queue: 'default', ready: 12, reserved: 3, done: 1500, dead: 2, cancelled: 4, capped: [], oldestReadyAgeSeconds: 192.5 },
        { queue: 'night', ready: 0, reserved: 0, done: 7, dead: 0, cancelled: 0, capped: [], oldestReadyAgeSeconds: null },
      ],
      deadLetters: { awaitingReview: 2, capped: false },
      schedules: [],
      pauses: [],
    });
    expect(text).toBe(
      [
        'QUEUE    READY  RESERVED  DONE  DEAD  CANCELLED  OLDEST READY',
        'default     12         3  1500     2          4        3m 12s',
        'night        0         0     7     0          0             -',
        '',
        'dead letters awaiting review: 2',
      ].join('\n'),
    );
  });

  it('prints ages coarsely', () => {
    expect([age(null), age(0.42), age(42), age(192), age(5 * 3600 + 120), age(2 * 86_400 + 3 * 3600)]).toEqual([
      '-',
      '0.4s',
      '42s',
      '3m 12s',
      '5h 02m',
      '2d 03h',
    ]);
  });
});

describe('cronq stats (CLI)', () => {
  it('prints the same numbers as JSON and as a table', async () => {
    await jobs('default', 'ready', 2, -60);
    await jobs('default', 'dead', 1);
    await deadLetters(1, false);
    const env = { DATABASE_URL: t.url, CRONQ_SCHEDULES: '' };
    const json = await runCli(['stats', '--json'], env);
    expect(json).toMatchObject({ code: 0, stderr: '' });
    const stats = JSON.parse(json.stdout);
    expect(stats).toEqual({
      queues: [{ queue: 'default', ready: 2, reserved: 0, done: 0, dead: 1, cancelled: 0, capped: [], oldestReadyAgeSeconds: expect.any(Number) }],
      deadLetters: { awaitingReview: 1, capped: false },
      schedules: [],
      pauses: [],
      unknownStatus: { jobs: 0, capped: false, exampleIds: [] },
      health: expect.any(Array), // the schedules folder's (schedule-health.test.ts covers it)
    });
    expect(stats.queues[0].oldestReadyAgeSeconds).toBeGreaterThanOrEqual(60);
    const text = await runCli(['stats'], env);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^QUEUE\s+READY\s+RESERVED\s+DONE\s+DEAD\s+CANCELLED\s+OLDEST READY\ndefault\s+2\s+0\s+0\s+1\s+0\s+1m \d\ds\n\ndead letters awaiting review: 1\n$/);
  });

  it('refuses an unknown flag with one line and exit 64', async () => {
    const bad = await runMain(['stats', '--verbose'], { DATABASE_URL: t.url });
    expect(bad).toEqual({ code: 64, stdout: '', stderr: "cronq stats: Unknown option '--verbose' (see cronq stats --help)\n" });
  });
});
