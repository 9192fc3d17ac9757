/**
 * The overview and the stats behind /metrics with thousands of queues: their statements
 * do not grow with every queue (a statement per queue made 3,300 queues take 4–5 s).
 */
import { describe, expect, it } from 'vitest';
import { createAdmin } from '../src/admin.ts';
import type { Database } from '../src/db/client.ts';
import { overviewPage, OVERVIEW_QUEUES } from '../src/http/console/pages/overview.ts';
import { Store } from '../src/store/index.ts';
import { COMPLETION_QUEUES_MAX, COMPLETION_LAG_MAX_MS, recentDoneQueues } from '../src/store/console.ts';
import { COUNT_CAPS, queuesMostBehindFirst } from '../src/store/stats.ts';
import type { JobStatus } from '../src/db/schema.ts';
import { useTestDatabase } from './support/db.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs'] });
const QUEUES = 600;

/** An admin over the test database whose statements are counted. */
function countedAdmin(): { admin: ReturnType<typeof createAdmin>; statements: () => number } {
  let sent = 0;
  const db = new Proxy(t.database.db, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver);
      if (name !== 'execute' || typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        sent += 1;
        return value.apply(target, args);
      };
    },
  });
  const database = Object.create(t.database, { db: { value: db } }) as Database;
  return { admin: createAdmin({ store: new Store(database), database, schedules: async () => [], stopped: () => false }), statements: () => sent };
}

/** QUEUES queues `q000`…, each a done job and a ready one that became available `i` minutes ago (q599 waited longest). */
async function manyQueues(): Promise<void> {
  const values: string[] = [];
  for (let i = 0; i < QUEUES; i++) {
    const q = `q${String(i).padStart(3, '0')}`;
    values.push(`('${q}', 'k', '${q}:ready', '{}', 'ready', UTC_TIMESTAMP(6) - INTERVAL ${i} MINUTE, DEFAULT)`);
    values.push(`('${q}', 'k', '${q}:done', '{}', 'done', UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE, UTC_TIMESTAMP(6))`);
  }
  await t.sql(`INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, available_at, finished_time) VALUES ${values.join(', ')}`);
}

describe('the overview with many queues', () => {
  it(`lists the ${OVERVIEW_QUEUES} queues most behind, says how many more there are, and sends a bounded number of statements`, async () => {
    await manyQueues();
    const { admin, statements } = countedAdmin();
    const { status, body } = await overviewPage({ admin, query: new URLSearchParams(), viewer: { operator: null, actionsEnabled: false }, csrf: null, notice: null });
    expect(status).toBe(200);
    const rows = [...body.text.matchAll(/<tr><td>(q\d{3})<\/td>/g)].map((m) => m[1]);
    expect(rows).toHaveLength(OVERVIEW_QUEUES);
    expect(rows.slice(0, 3)).toEqual(['q599', 'q598', 'q597']); // oldest waiting job first
    expect(body.text).toContain(`${QUEUES - OVERVIEW_QUEUES} more queues are not`);
    expect(body.text).toContain(`${QUEUES} completed in the last hour`);
    // The queue list (1), their counts (1 per 100 pairs shown), dead letters (1), the clock
    // and the completions (1 + 1 per 100 queues with recent done jobs, 1,000 at most), their queue list (1), daemons (1).
    expect(statements()).toBeLessThanOrEqual(5 + Math.ceil((2 * OVERVIEW_QUEUES) / 100) + Math.ceil(Math.min(QUEUES, COMPLETION_QUEUES_MAX) / 100));
  });

  it('counts every queue for stats (and /metrics) in a few statements', async () => {
    await manyQueues();
    await t.sql(`INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, available_at) VALUES ('q000', 'k', 'q000:later', '{}', 'ready', UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)`);
    const { admin, statements } = countedAdmin();
    const stats = await admin.stats();
    expect(stats.queues).toHaveLength(QUEUES);
    expect(stats.queues[0]).toMatchObject({ queue: 'q000', ready: 2, done: 1, reserved: 0, capped: [] });
    expect(stats.queues[599]).toMatchObject({ queue: 'q599', ready: 1, done: 1 });
    expect(stats.queues[599].oldestReadyAgeSeconds).toBeGreaterThanOrEqual(599 * 60);
    expect(statements()).toBeLessThanOrEqual(10);
  });
});

describe('stats (and /metrics) with one queue past the counting prefix', () => {
  const SMALL_QUEUES = 5_000;
  const BIG_QUEUE_READY = 120_000;

  it(`counts ${SMALL_QUEUES} small queues behind a queue of ${BIG_QUEUE_READY} ready jobs in as few statements as without it`, async () => {
    // 'a-big' sorts first: its entries fill the whole counting prefix of the claim index.
    await t.sql(`INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, available_at)
      SELECT 'a-big', 'k', CONCAT('big:', seq), '{}', 'ready', UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE FROM seq_1_to_${BIG_QUEUE_READY}`);
    await t.sql(`INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, available_at)
      SELECT CONCAT('q', LPAD(seq, 4, '0')), 'k', CONCAT('small:', seq), '{}', 'ready', UTC_TIMESTAMP(6) FROM seq_1_to_${SMALL_QUEUES}`);
    await t.sql(`INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, available_at, finished_time)
      SELECT CONCAT('q', LPAD(seq, 4, '0')), 'k', CONCAT('done:', seq), '{}', 'done', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) FROM seq_1_to_${SMALL_QUEUES}`);
    const { admin, statements } = countedAdmin();
    const stats = await admin.stats();
    expect(stats.queues).toHaveLength(SMALL_QUEUES + 1);
    expect(stats.queues[0]).toMatchObject({ queue: 'a-big', ready: 100_000, capped: ['ready'] });
    expect(stats.queues.slice(1).every((q) => q.ready === 1 && q.done === 1 && q.capped.length === 0)).toBe(true);
    expect(statements()).toBeLessThanOrEqual(10);
  }, 60_000);

  it('counts as a plain count does when the prefix stops inside queues of two statuses, the last status included', async () => {
    const insert = (queue: string, status: string, n: number, from = 1) =>
      t.sql(`INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, available_at, finished_time)
        SELECT ${queue}, 'k', CONCAT(${queue}, ':${status}:', seq), '{}', '${status}', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) FROM seq_${from}_to_${from + n - 1}`);
    // 150 small ready queues, one of 105,000 ready jobs, 150 more; one of 100,000 cancelled jobs, then 150 small cancelled ones.
    await insert(`CONCAT('a', LPAD(seq, 3, '0'))`, 'ready', 150);
    await insert(`'m-big'`, 'ready', 105_000);
    await insert(`CONCAT('r', LPAD(seq, 3, '0'))`, 'ready', 150);
    await insert(`'c-big'`, 'cancelled', 100_000);
    await insert(`CONCAT('z', LPAD(seq, 3, '0'))`, 'cancelled', 150);
    const { admin, statements } = countedAdmin();
    const stats = await admin.stats();
    const plain = await t.sql<{ queue: string; status: JobStatus; n: number }>('SELECT queue, status, COUNT(*) AS n FROM cronq_jobs GROUP BY queue, status');
    const expected = new Map<string, Record<string, unknown>>();
    for (const { queue, status, n } of plain) {
      const q = expected.get(queue) ?? { queue, ready: 0, reserved: 0, done: 0, dead: 0, cancelled: 0, capped: [] };
      q[status] = Math.min(Number(n), COUNT_CAPS[status]);
      if (Number(n) > COUNT_CAPS[status]) (q.capped as string[]).push(status);
      expected.set(queue, q);
    }
    expect(stats.queues.map(({ oldestReadyAgeSeconds, ...counts }) => counts)).toEqual([...expected.values()].sort((a, b) => ((a.queue as string) < (b.queue as string) ? -1 : 1)));
    expect(stats.queues.find((q) => q.queue === 'm-big')).toMatchObject({ ready: 100_000, capped: ['ready'] });
    expect(stats.queues.find((q) => q.queue === 'c-big')).toMatchObject({ cancelled: 10_000, capped: ['cancelled'] });
    expect(statements()).toBeLessThanOrEqual(10);
  }, 60_000);
});

describe('the queues the completions chart reads', () => {
  it(`are those with a done job available within the lag bound, the latest first, ${COMPLETION_QUEUES_MAX} at most`, () => {
    const lagUs = COMPLETION_LAG_MAX_MS * 1000;
    const done = (queue: string, latestUs: number) => ({ status: 'done' as const, queue, latestUs });
    expect(recentDoneQueues([done('old', lagUs + 1), done('b', 5), done('a', 9), { status: 'ready', queue: 'r', latestUs: 0 }, done('edge', lagUs)])).toEqual({ queues: ['b', 'a', 'edge'], leftOut: false });
    const many = Array.from({ length: COMPLETION_QUEUES_MAX + 5 }, (_, i) => done(`q${i}`, i));
    const picked = recentDoneQueues(many.reverse());
    expect(picked.leftOut).toBe(true);
    expect(picked.queues).toHaveLength(COMPLETION_QUEUES_MAX);
    expect(picked.queues[0]).toBe('q0');
    expect(picked.queues).not.toContain(`q${COMPLETION_QUEUES_MAX}`);
  });
});

describe('queues most behind first', () => {
  it('puts the longest-waiting ready work first, then queues running jobs, then the rest, each by name', () => {
    const held = (status: 'ready' | 'reserved' | 'done', queue: string, waitedUs: number) => ({ status, queue, waitedUs, latestUs: waitedUs });
    expect(
      queuesMostBehindFirst([held('ready', 'b', 5), held('ready', 'a', 50), held('ready', 'later', -10), held('reserved', 'later', 0), held('done', 'c', 99), held('reserved', 'd', 1), held('done', 'aa', 1)]),
    ).toEqual(['a', 'b', 'd', 'later', 'aa', 'c']);
  });
});
