/**
 * A cluster-wide concurrency limit per kind (`defineTask({ concurrency })`): claims of a
 * limited kind take turns on its cronq_kind_limits row and never reserve more than the
 * limit together; an expired lease frees its place.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import { afterAll, describe, expect, it } from 'vitest';
import { createCronq, type Cronq } from '../src/cronq.ts';
import { claimReady, type QueueLimit } from '../src/store/claims.ts';
import { insertJobsIfAbsent } from '../src/store/jobs.ts';
import { defineTask } from '../src/tasks/define.ts';
import { toJobRow } from '../src/enqueue/jobRow.ts';
import { TaskRegistry } from '../src/tasks/registry.ts';
import { defineSchedule } from '../src/schedule/define.ts';
import { LimitedQueues } from '../src/worker/limitedQueues.ts';
import { REPO_ROOT, runCli } from './support/cli.ts';
import { useTestDatabase } from './support/db.ts';
import { EventLog, eventually } from './support/events.ts';
import { jobRow, THIRTY_SECOND_LEASES } from './support/jobs.ts';
import { interceptedClaims } from './support/claimsPool.ts';

const t = useTestDatabase();
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** The most runs open at once, walking start/end events in the order the database numbered them. */
function peakOverlap(events: Array<{ event: string }>): number {
  let open = 0;
  let peak = 0;
  for (const e of events) {
    open += e.event === 'start' ? 1 : -1;
    peak = Math.max(peak, open);
  }
  return peak;
}

describe('defining a limited kind', () => {
  it('gives a limited task a queue of its own by default and refuses a limit that is not a whole number from 1', () => {
    expect(defineTask({ name: 'reports', concurrency: 2, handle() {} })).toMatchObject({ queue: 'reports', concurrency: 2 });
    expect(defineTask({ name: 'reports', concurrency: 2, queue: 'slow', handle() {} }).queue).toBe('slow');
    expect(defineTask({ name: 'plain', handle() {} })).toMatchObject({ queue: 'default', concurrency: null });
    for (const bad of [0, 1.5, -1, '2', 10_001]) {
      expect(() => defineTask({ name: 'reports', concurrency: bad as number, handle() {} })).toThrow(
        /task 'reports': concurrency must be a whole number from 1 to 10000/,
      );
    }
  });

  it('gives a limited schedule a queue of its own too', () => {
    expect(defineSchedule({ name: 'nightly', cron: '0 2 * * *', concurrency: 1, handle() {} })).toMatchObject({ queue: 'nightly', concurrency: 1 });
  });

  it('refuses a limited kind that shares its queue with another kind, naming both', () => {
    const limited = defineTask({ name: 'reports', concurrency: 2, queue: 'shared', handle() {} });
    const other = defineTask({ name: 'mail', queue: 'shared', handle() {} });
    expect(() => new TaskRegistry([other, limited])).toThrow(/'reports' .* and 'mail' .* share queue 'shared', but 'reports' has a concurrency limit/);
    expect(() => new TaskRegistry([limited, other])).toThrow(/'mail' .* and 'reports' .* share queue 'shared', but 'reports' has a concurrency limit/);
    expect(new TaskRegistry([defineTask({ name: 'a', handle() {} }), defineTask({ name: 'b', handle() {} })]).size).toBe(2);
  });

  it('refuses to enqueue a limited kind into a queue other than its own, where its limit would not hold', () => {
    const tasks = new TaskRegistry([defineTask({ name: 'reports', concurrency: 2, handle() {} })]);
    expect(() => toJobRow({ kind: 'reports', key: 'r1', queue: 'default' }, tasks)).toThrow(
      /job "r1": kind 'reports' has a concurrency limit and runs only in its own queue 'reports' \(got queue "default"\)/,
    );
    expect(toJobRow({ kind: 'reports', key: 'r2' }, tasks).queue).toBe('reports');
    expect(toJobRow({ kind: 'reports', key: 'r3', queue: 'reports' }, tasks).queue).toBe('reports');
  });

  it('cronq start refuses such a folder with one line and exit 64', async () => {
    const root = join(REPO_ROOT, 'test', '.tmp');
    mkdirSync(root, { recursive: true });
    const dir = mkdtempSync(join(root, 'limits-'));
    dirs.push(dir);
    writeFileSync(
      join(dir, 'tasks.ts'),
      "import { defineTask } from 'cronq';\n" +
        "export const a = defineTask({ name: 'reports', concurrency: 2, queue: 'shared', handle() {} });\n" +
        "export const b = defineTask({ name: 'mail', queue: 'shared', handle() {} });\n",
    );
    const r = await runCli(['start', '--schedules', dir], { DATABASE_URL: 'mysql://root@127.0.0.1:1/unused' });
    expect(r.code).toBe(64);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/share queue 'shared', but 'reports' has a concurrency limit and needs a queue of its own/);
  });
});

describe('a pool holding back a full limited queue', () => {
  const tasks = [defineTask({ name: 'capped', concurrency: 2, handle() {} }), defineTask({ name: 'plain', handle() {} })];

  it('leaves a queue found at its limit out of claims until the next poll, and claims every other queue meanwhile', () => {
    const limited = new LimitedQueues(tasks, 200);
    expect([...limited.byQueue]).toEqual([['capped', { kind: 'capped', maxRunning: 2 }]]);
    const queues = ['capped', 'default'];
    expect(limited.claimable(queues, 1_000)).toBe(queues);
    limited.reachedLimit(['capped'], 1_000);
    expect(limited.claimable(queues, 1_100)).toEqual(['default']);
    expect(limited.claimable(queues, 1_200)).toEqual(queues);
  });

  it('claims it again as soon as a run of its kind ends here', () => {
    const limited = new LimitedQueues(tasks, 200);
    limited.reachedLimit(['capped'], 1_000);
    expect(limited.runEnded('default')).toBe(false);
    expect(limited.runEnded('capped')).toBe(true);
    expect(limited.claimable(['capped'], 1_001)).toEqual(['capped']);
    expect(limited.runEnded('capped')).toBe(false); // nothing held back: no wake-up needed
  });
});

describe('claiming a limited queue', () => {
  const limit: QueueLimit = { kind: 'capped', maxRunning: 2 };
  const claim = (n: number, atLimit?: Set<string>) =>
    claimReady(t.database.claims, {
      queues: ['capped'],
      limit: n,
      leases: THIRTY_SECOND_LEASES,
      lockedBy: 'test:1',
      limits: new Map([['capped', limit]]),
      atLimit,
    });

  it('reserves no more than the limit counting live reservations, and an expired lease frees its place', async () => {
    await t.sql('DELETE FROM cronq_jobs');
    await t.sql("REPLACE INTO cronq_kind_limits (kind, max_running) VALUES ('capped', 2)");
    await insertJobsIfAbsent(t.database.db, Array.from({ length: 5 }, (_, i) => jobRow(`capped-${i}`, { kind: 'capped', queue: 'capped' })));
    const first = new Set<string>();
    expect(await claim(10, first)).toHaveLength(2);
    expect([...first]).toEqual(['capped']);
    const second = new Set<string>();
    expect(await claim(10, second)).toHaveLength(0);
    expect([...second]).toEqual(['capped']);

    // A daemon died holding one: once its lease runs out, that place is free again.
    await t.sql("UPDATE cronq_jobs SET lease_deadline = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE status = 'reserved' ORDER BY id LIMIT 1");
    expect(await claim(10)).toHaveLength(1);
    expect(await claim(10)).toHaveLength(0);

    // The row's value holds (a later daemon's, or one set by hand), from the next claim on.
    await t.sql("UPDATE cronq_kind_limits SET max_running = 4 WHERE kind = 'capped'");
    expect(await claim(10)).toHaveLength(2);
    const [{ n }] = await t.sql("SELECT COUNT(*) AS n FROM cronq_jobs WHERE status = 'reserved' AND lease_until > UTC_TIMESTAMP(6)");
    expect(Number(n)).toBe(4);
    const cronq = createCronq({ databaseUrl: t.url, logger: false });
    try {
      expect(await cronq.admin.limits()).toEqual([{ kind: 'capped', maxRunning: 4, running: 4, updatedAt: expect.any(Date) }]);
    } finally {
      await cronq.stop();
    }
  });

  it('reads the payloads of only the rows it keeps: a queue at its limit costs no payload transfer', async () => {
    await t.sql('DELETE FROM cronq_jobs');
    await t.sql("REPLACE INTO cronq_kind_limits (kind, max_running) VALUES ('capped', 2)");
    const big = (i: number) => JSON.stringify({ i, pad: 'p'.repeat(200_000) });
    await insertJobsIfAbsent(t.database.db, Array.from({ length: 6 }, (_, i) => jobRow(`big-${i}`, { kind: 'capped', queue: 'capped', payloadJson: big(i) })));
    // Every payload character the claim's statements bring back, whatever statement it is in.
    let received = 0;
    const tally = (value: unknown): void => {
      if (Array.isArray(value)) value.forEach(tally);
      else if (value !== null && typeof value === 'object' && typeof (value as { payload?: unknown }).payload === 'string') received += (value as { payload: string }).payload.length;
    };
    const counted = interceptedClaims(t.database.claims, async (sql, send) => {
      const result = (await send(sql)) as [unknown, unknown];
      tally(result[0]);
      return result;
    });
    const claimCapped = (n: number) =>
      claimReady(counted, { queues: ['capped'], limit: n, leases: THIRTY_SECOND_LEASES, lockedBy: 'test:1', limits: new Map([['capped', { kind: 'capped', maxRunning: 2 }]]) });

    const first = await claimCapped(10); // room for 2 of the 6 it finds
    expect(first.map((j) => JSON.parse(j.payloadText).i)).toEqual([0, 1]);
    expect(received).toBe(2 * big(0).length);
    received = 0;
    expect(await claimCapped(10)).toEqual([]); // at its limit: none of the rows it finds is kept
    expect(received).toBe(0);
  });

  it('reads one limited queue per claim, so no two claims ever wait on each other for limit rows', async () => {
    await t.sql('DELETE FROM cronq_jobs');
    await t.sql("REPLACE INTO cronq_kind_limits (kind, max_running) VALUES ('one', 5), ('two', 5)");
    await insertJobsIfAbsent(
      t.database.db,
      ['one', 'two'].flatMap((q) => Array.from({ length: 3 }, (_, i) => jobRow(`${q}-${i}`, { kind: q, queue: q }))),
    );
    const limits = new Map([
      ['one', { kind: 'one', maxRunning: 5 }],
      ['two', { kind: 'two', maxRunning: 5 }],
    ]);
    const request = { queues: ['one', 'two', 'default'], limit: 10, leases: THIRTY_SECOND_LEASES, lockedBy: 'test:1', limits };
    expect((await claimReady(t.database.claims, request, 0)).map((j) => j.queue)).toEqual(['one', 'one', 'one']);
    expect((await claimReady(t.database.claims, request, 1)).map((j) => j.queue)).toEqual(['two', 'two', 'two']);
  });

  it('holds a kind whose limit row is set to 0 by hand: nothing is claimed until it is raised, and cronq limits marks it held', async () => {
    await t.sql('DELETE FROM cronq_jobs');
    await t.sql("REPLACE INTO cronq_kind_limits (kind, max_running) VALUES ('capped', 0)");
    await insertJobsIfAbsent(t.database.db, Array.from({ length: 3 }, (_, i) => jobRow(`held-${i}`, { kind: 'capped', queue: 'capped' })));
    const atLimit = new Set<string>();
    expect(await claim(10, atLimit)).toHaveLength(0);
    expect([...atLimit]).toEqual(['capped']);
    const text = await runCli(['limits'], { DATABASE_URL: t.url });
    expect(text.stdout).toMatch(/^capped\s+0 \(held\)\s+0\s+\d{4}-/m);
    await t.sql("UPDATE cronq_kind_limits SET max_running = 1 WHERE kind = 'capped'");
    expect(await claim(10)).toHaveLength(1);
  });

  it('claims nothing from a limited queue whose limit row is missing', async () => {
    await t.sql('DELETE FROM cronq_jobs');
    await t.sql("DELETE FROM cronq_kind_limits WHERE kind = 'capped'");
    await insertJobsIfAbsent(t.database.db, [jobRow('capped-alone', { kind: 'capped', queue: 'capped' })]);
    expect(await claim(10)).toHaveLength(0);
  });
});

describe('three daemons sharing a limit', () => {
  const instances: Cronq[] = [];
  afterAll(async () => {
    await Promise.all(instances.map((c) => c.stop({ graceMs: 1_000 })));
  });

  it('never run more than 2 jobs of a kind limited to 2 at once, and do run 2 at once', async () => {
    await t.sql('DELETE FROM cronq_jobs');
    await t.sql('CREATE TABLE runs (seq BIGINT AUTO_INCREMENT PRIMARY KEY, job_id BIGINT NOT NULL, event VARCHAR(5) NOT NULL)');
    const recorder = mysql.createPool({ uri: t.url, connectionLimit: 6 });
    try {
      const capped = defineTask({
        name: 'capped-run',
        concurrency: 2,
        async handle(job) {
          await recorder.query("INSERT INTO runs (job_id, event) VALUES (?, 'start')", [job.id]);
          await new Promise((resolve) => setTimeout(resolve, 100));
          await recorder.query("INSERT INTO runs (job_id, event) VALUES (?, 'end')", [job.id]);
        },
      });
      for (let i = 0; i < 3; i++) {
        // One handler each: two at once can only be two daemons, so the limit is tested
        // across them (with room for five, one daemon's quick re-claims could take every job).
        const cronq = createCronq({ databaseUrl: t.url, logger: false, tasks: [capped], concurrency: 1, pollInterval: '50ms', lockedBy: `limit-test:${i}` });
        instances.push(cronq);
        await cronq.start();
      }
      await instances[0].enqueueMany(capped, Array.from({ length: 30 }, (_, i) => ({ key: `capped-run:${i}`, payload: null })));
      await eventually(
        async () => Number((await t.sql("SELECT COUNT(*) AS n FROM cronq_jobs WHERE kind = 'capped-run' AND status = 'done'"))[0].n) === 30,
        30_000,
        'all 30 limited jobs done',
      );
      const events = await t.sql<{ event: string }>('SELECT event FROM runs ORDER BY seq');
      expect(events).toHaveLength(60);
      expect(peakOverlap(events)).toBe(2);
      const lockedBy = await t.sql<{ locked_by: string }>("SELECT DISTINCT locked_by FROM cronq_jobs WHERE kind = 'capped-run'");
      expect(lockedBy.length).toBeGreaterThan(1); // the limit was shared, not one daemon's doing
      expect(await t.sql("SELECT kind, max_running FROM cronq_kind_limits WHERE kind = 'capped-run'")).toEqual([{ kind: 'capped-run', max_running: 2 }]);

      // What an operator sees: the limit in force and how many of the kind run now.
      const listed = await runCli(['limits', '--json'], { DATABASE_URL: t.url });
      expect(listed.code).toBe(0);
      expect(JSON.parse(listed.stdout)).toContainEqual(expect.objectContaining({ kind: 'capped-run', maxRunning: 2, running: 0 }));
      const text = await runCli(['limits'], { DATABASE_URL: t.url });
      expect(text.stdout).toMatch(/KIND\s+LIMIT\s+RUNNING\s+SET AT\n.*capped-run\s+2\s+0\s+\d{4}-/);
    } finally {
      await recorder.end();
    }
  });
});

describe('a job of a limited kind enqueued into another queue', () => {
  it('is moved into its kind’s queue, attempt restored, and runs within the limit there', async () => {
    await t.sql('DELETE FROM cronq_jobs');
    // Enqueued by a process that does not know the task (allowUnknownKind): into 'default'.
    const elsewhere = createCronq({ databaseUrl: t.url, logger: false, workers: false, scheduler: false, allowUnknownKind: true });
    await elsewhere.enqueueMany(Array.from({ length: 6 }, (_, i) => ({ kind: 'misplaced', key: `misplaced:${i}` })));
    await elsewhere.stop();
    expect(await t.sql("SELECT DISTINCT queue FROM cronq_jobs WHERE kind = 'misplaced'")).toEqual([{ queue: 'default' }]);

    let running = 0;
    let peak = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const task = defineTask({
      name: 'misplaced',
      concurrency: 2,
      async handle() {
        peak = Math.max(peak, ++running);
        if (peak >= 2) release();
        await gate;
        await new Promise((resolve) => setImmediate(resolve));
        running -= 1;
      },
    });
    const log = new EventLog();
    const cronq = createCronq({ databaseUrl: t.url, logger: log.logger, tasks: [task], concurrency: 8, scheduler: false, pollInterval: '50ms' });
    await cronq.start();
    try {
      await eventually(
        async () => Number((await t.sql("SELECT COUNT(*) AS n FROM cronq_jobs WHERE kind = 'misplaced' AND status = 'done'"))[0].n) === 6,
        20_000,
        'all 6 misplaced jobs done',
      );
    } finally {
      await cronq.stop();
    }
    expect(peak).toBe(2);
    expect(await t.sql("SELECT DISTINCT queue, attempts FROM cronq_jobs WHERE kind = 'misplaced'")).toEqual([{ queue: 'misplaced', attempts: 1 }]);
    const moved = log.named('job_moved_to_limited_queue');
    expect(moved[0]).toMatchObject({ kind: 'misplaced', from_queue: 'default', queue: 'misplaced', level: 40 });
    expect(log.events.filter((e) => e.event === 'job_moved_to_limited_queue' && e.level === 40)).toHaveLength(1); // warned once per kind
  });
});
