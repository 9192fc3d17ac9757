import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createCronq } from '../src/cronq.ts';
import { DaemonProcess } from './support/cli.ts';
import { useTestDatabase } from './support/db.ts';
import { eventually } from './support/events.ts';

/**
 * Several `cronq start` processes share one database and drain one queue. Each delivery
 * appends `pid key` to its own process's trace file; each job's effect is a row in a
 * table with a unique key, written in the fenced completion.
 */
const TOTAL = 2_000;
const DAEMONS = 3;
const t = useTestDatabase();
let traceDir: string;
const daemons: DaemonProcess[] = [];

beforeAll(async () => {
  await t.sql('CREATE TABLE effects (id BIGINT AUTO_INCREMENT PRIMARY KEY, job_key VARCHAR(255) NOT NULL, UNIQUE KEY effects_job_key (job_key))');
  traceDir = mkdtempSync(join(tmpdir(), 'cronq-multi-'));
});

afterAll(async () => {
  await Promise.all(daemons.map((d) => d.kill()));
  rmSync(traceDir, { recursive: true, force: true });
});

it('three daemons draining one queue of 2,000 jobs run each job exactly once, and each records itself as host:pid in locked_by', async () => {
  for (let i = 0; i < DAEMONS; i++) {
    daemons.push(
      new DaemonProcess(['--concurrency', '8', '--poll', '50ms', '--no-migrate'], {
        DATABASE_URL: t.url,
        CRONQ_SCHEDULES: 'test/fixtures/schedules-effects',
        CRONQ_TEST_TRACE: join(traceDir, `trace.${i}`),
        CRONQ_TEST_LEASE: '30s', // no lease may expire here: a second delivery would be a bug, not recovery
      }),
    );
  }
  await Promise.all(daemons.map((d) => d.waitFor('worker_started')));

  // Enqueued from here, after every daemon is polling, so they all find work.
  const cronq = createCronq({ databaseUrl: t.url, logger: false, allowUnknownKind: true });
  await cronq.enqueueMany(Array.from({ length: TOTAL }, (_, i) => ({ kind: 'effect', key: `multi:${i}` })));
  await cronq.stop();
  await eventually(
    async () => Number((await t.sql("SELECT COUNT(*) AS n FROM cronq_jobs WHERE status = 'done'"))[0].n) === TOTAL,
    60_000,
    `all ${TOTAL} jobs done`,
  );

  const jobs = await t.sql('SELECT job_key, status, attempts, locked_by FROM cronq_jobs');
  expect(jobs).toHaveLength(TOTAL);
  expect(jobs.every((j) => j.status === 'done' && j.attempts === 1)).toBe(true);
  const [effects] = await t.sql('SELECT COUNT(*) AS n, COUNT(DISTINCT job_key) AS keys_ FROM effects');
  expect([Number(effects.n), Number(effects.keys_)]).toEqual([TOTAL, TOTAL]);
  expect(await t.sql('SELECT id FROM cronq_dead_letters')).toEqual([]);

  // Every delivery, across all processes: exactly one per job.
  const deliveries = daemons.flatMap((_, i) => {
    try {
      return readFileSync(join(traceDir, `trace.${i}`), 'utf8').trim().split('\n');
    } catch {
      return []; // a daemon that got no job wrote no trace
    }
  });
  expect(deliveries).toHaveLength(TOTAL);
  expect(new Set(deliveries.map((l) => l.split(' ')[1])).size).toBe(TOTAL);

  // locked_by is host:pid of the process that ran the job, as its trace says.
  const pids = daemons.map((d) => d.child.pid!);
  const ranBy = new Map(deliveries.map((l) => [l.split(' ')[1], Number(l.split(' ')[0])]));
  for (const job of jobs) expect(job.locked_by).toBe(`${hostname()}:${ranBy.get(job.job_key)}`);
  const perDaemon = pids.map((pid) => jobs.filter((j) => j.locked_by === `${hostname()}:${pid}`).length);
  expect(perDaemon.reduce((a, b) => a + b, 0)).toBe(TOTAL);
  expect(perDaemon.filter((n) => n > 0).length).toBeGreaterThanOrEqual(2);
  console.log(`jobs per daemon: ${perDaemon.join(', ')}`);

  for (const d of daemons) {
    expect(d.events('job_failed')).toEqual([]);
    expect(d.events('job_lease_lost')).toEqual([]);
    d.signal('SIGTERM');
  }
  expect(await Promise.all(daemons.map((d) => d.exited))).toEqual(daemons.map(() => 0));
}, 90_000);
