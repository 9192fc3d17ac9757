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
import { queuesMostBehindFirst } from '../src/store/stats.ts';
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
