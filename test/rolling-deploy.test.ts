import { hostname } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { createCronq, defineTask, type Cronq, type Task } from '../src/index.ts';
import { DaemonProcess } from './support/cli.ts';
import { EventLog, eventually } from './support/events.ts';
import { useTestDatabase } from './support/db.ts';

/**
 * A rolling deploy: daemons of two versions, with different task sets, on one database.
 * Each records itself in cronq_daemons with the kinds it runs; a job of a kind a daemon
 * does not know goes back for one that does, and goes dead only once no daemon has
 * served its kind for the grace.
 */
const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_dead_letters', 'cronq_daemons'] });
const running: Cronq[] = [];

afterEach(async () => {
  await Promise.all(running.splice(0).map((c) => c.stop({ graceMs: 1_000 })));
});

function daemon(lockedBy: string, tasks: Task[], log: EventLog, options: Partial<Parameters<typeof createCronq>[0]> = {}): Cronq {
  const c = createCronq({ databaseUrl: t.url, tasks, logger: log.logger, allowUnknownKind: true, lockedBy, concurrency: 8, pollInterval: '50ms', ...options });
  running.push(c);
  return c;
}

const task = (name: string, ran: string[]) => defineTask({ name, handle: (job) => void ran.push(job.key) });

describe('rolling deploys', () => {
  it('two daemons with different task sets drain 400 jobs of both kinds: none dead, each run once by the daemon that knows its kind, no attempt spent on the other', async () => {
    const ranOld: string[] = [];
    const ranNew: string[] = [];
    const oldLog = new EventLog('info');
    const newLog = new EventLog('info');
    const old = daemon('old-version:1', [task('report', ranOld), task('shared', ranOld)], oldLog);
    const current = daemon('new-version:2', [task('invoice', ranNew), task('shared', ranNew)], newLog);
    await Promise.all([old.start(), current.start()]);

    const jobs = Array.from({ length: 400 }, (_, i) => ({ kind: ['report', 'invoice'][i % 2], key: `deploy:${i}`, maxAttempts: 1 }));
    expect(await old.enqueueMany(jobs)).toEqual({ inserted: 400, existing: 0 });
    await eventually(
      async () => Number((await t.sql("SELECT COUNT(*) AS n FROM cronq_jobs WHERE status = 'done'"))[0].n) === 400,
      30_000,
      'all 400 jobs done',
    );

    expect(await t.sql('SELECT id FROM cronq_dead_letters')).toEqual([]);
    const rows = await t.sql('SELECT kind, attempts, locked_by, COUNT(*) AS n FROM cronq_jobs GROUP BY kind, attempts, locked_by ORDER BY kind');
    expect(rows.map((r) => ({ ...r, n: Number(r.n) }))).toEqual([
      { kind: 'invoice', attempts: 1, locked_by: 'new-version:2', n: 200 },
      { kind: 'report', attempts: 1, locked_by: 'old-version:1', n: 200 },
    ]);
    expect(ranOld).toHaveLength(200);
    expect(ranNew).toHaveLength(200);
    // Logged once per kind and daemon, however many claims it took.
    for (const [log, kind] of [[oldLog, 'invoice'], [newLog, 'report']] as const) {
      const unknown = log.named('job_kind_unknown');
      expect(unknown.length).toBeLessThanOrEqual(1);
      for (const e of unknown) expect(e).toMatchObject({ kind, served_elsewhere: true });
      expect(log.named('job_failed')).toEqual([]);
    }
    console.log(
      `rolling deploy: released by the old daemon ${oldLog.named('job_claimed').length - 200}, by the new ${newLog.named('job_claimed').length - 200}`,
    );
  }, 60_000);

  it('a job of a kind no daemon serves goes dead after the grace, measured from its creation, with its attempt restored on every release', async () => {
    const log = new EventLog('info');
    const c = daemon('only:1', [task('known', [])], log, { unknownKindGraceMs: 1_500 });
    await c.start();
    const { id } = await c.enqueue({ kind: 'ghost', key: 'ghost:1', maxAttempts: 1 });
    const [dead] = await log.waitFor('job_dead', 1, 15_000);
    expect(dead.job_id).toBe(id);
    const [letter] = await t.sql(
      'SELECT l.failure_reason, l.attempts, TIMESTAMPDIFF(MICROSECOND, j.created_at, l.dead_at) / 1000 AS waited_ms FROM cronq_dead_letters l JOIN cronq_jobs j ON j.id = l.job_id',
    );
    expect(letter.failure_reason).toBe("PermanentError: unknown kind: no daemon has served 'ghost' on queue 'default' for 1500ms");
    expect(letter.attempts).toBe(1); // released without cost before, dead on the claim after the grace
    expect(Number(letter.waited_ms)).toBeGreaterThanOrEqual(1_500);
    expect(log.named('job_claimed').length).toBeGreaterThanOrEqual(2);
    expect(log.named('job_kind_unknown')).toEqual([expect.objectContaining({ kind: 'ghost', served_elsewhere: false })]);
  }, 30_000);

  it('a kind whose daemon stopped cleanly stays served for the grace after its stop, then its jobs go dead', async () => {
    const log = new EventLog('info');
    const gone = daemon('gone:1', [task('legacy', [])], new EventLog('info'));
    await gone.start();
    await gone.stop();
    const [row] = await t.sql("SELECT stopped_at, heartbeat_at FROM cronq_daemons WHERE id = 'gone:1'");
    expect(row.stopped_at).not.toBeNull();

    const c = daemon('left:2', [task('known', [])], log, { unknownKindGraceMs: 2_000 });
    await c.start();
    // Created well before the stop: the wait is measured from the last heartbeat, not the job's age.
    await t.sql("INSERT INTO cronq_jobs (queue, kind, job_key, payload, max_attempts, available_at, created_at, updated_at) VALUES ('default', 'legacy', 'legacy:1', '{}', 3, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) - INTERVAL 1 DAY, UTC_TIMESTAMP(6))");
    await c.enqueue({ kind: 'known', key: 'wake' }); // wakes the idle pool
    await log.waitFor('job_kind_unknown');
    await log.waitFor('job_dead', 1, 15_000);
    const [letter] = await t.sql(
      "SELECT l.attempts, TIMESTAMPDIFF(MICROSECOND, d.heartbeat_at, l.dead_at) / 1000 AS after_stop_ms FROM cronq_dead_letters l, cronq_daemons d WHERE d.id = 'gone:1'",
    );
    expect(letter.attempts).toBe(1);
    expect(Number(letter.after_stop_ms)).toBeGreaterThanOrEqual(2_000);
  }, 30_000);

  it('cronq start --unknown-kind-grace sets the grace: a kind nobody serves goes dead after it, the daemon logging job_kind_unknown once', async () => {
    const d = new DaemonProcess(['--no-migrate', '--no-scheduler', '--poll', '50ms', '--unknown-kind-grace', '1s'], {
      DATABASE_URL: t.url,
      CRONQ_SCHEDULES: 'test/fixtures/schedules-effects',
    });
    try {
      await d.waitFor('worker_started');
      const enqueuer = createCronq({ databaseUrl: t.url, logger: false, allowUnknownKind: true });
      await enqueuer.enqueue({ kind: 'retired', key: 'retired:1' });
      await enqueuer.stop();
      await d.waitFor('job_dead');
      const [letter] = await t.sql('SELECT failure_reason, attempts FROM cronq_dead_letters');
      expect(letter).toEqual({ failure_reason: "PermanentError: unknown kind: no daemon has served 'retired' on queue 'default' for 1s", attempts: 1 });
      expect(d.events('job_kind_unknown')).toHaveLength(1);
      d.signal('SIGTERM');
      expect(await d.exited).toBe(0);
      const [row] = await t.sql('SELECT kinds, stopped_at FROM cronq_daemons WHERE id = ?', [`${hostname()}:${d.child.pid}`]);
      expect(row.stopped_at).not.toBeNull();
    } finally {
      await d.kill();
    }
  }, 30_000);

  it('each daemon with workers records its kinds and queues, refreshes its heartbeat from the database clock, and records a clean stop', async () => {
    const c = daemon('beating:1', [task('a', []), task('b', [])], new EventLog('info'), { heartbeatInterval: '100ms', queues: ['q1', 'q2'] });
    await c.start();
    const [first] = await t.sql("SELECT host, pid, kinds, queues, started_at, heartbeat_at, stopped_at FROM cronq_daemons WHERE id = 'beating:1'");
    const json = (v: unknown) => (typeof v === 'string' ? JSON.parse(v) : v);
    expect({ ...first, kinds: json(first.kinds), queues: json(first.queues) }).toMatchObject({
      pid: process.pid,
      kinds: ['a', 'b'],
      queues: ['q1', 'q2'],
      stopped_at: null,
    });
    await eventually(async () => {
      const [now] = await t.sql("SELECT heartbeat_at FROM cronq_daemons WHERE id = 'beating:1'");
      return now.heartbeat_at.getTime() > first.heartbeat_at.getTime();
    }, 10_000, 'a later heartbeat');
    await c.stop();
    const [stopped] = await t.sql("SELECT stopped_at FROM cronq_daemons WHERE id = 'beating:1'");
    expect(stopped.stopped_at).not.toBeNull();
  }, 30_000);
});
