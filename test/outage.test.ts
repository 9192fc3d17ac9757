import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCronq } from '../src/cronq.ts';
import { DaemonProcess } from './support/cli.ts';
import { eventually } from './support/events.ts';
import { findServerBinary, PrivateServer, queryOnce } from './support/privateServer.ts';

/**
 * The daemon against a database that goes away: a private MariaDB/MySQL server (never
 * the shared one) is stopped cleanly, then crashed, under a `cronq start` draining
 * 3,000 jobs whose effect is a row in a table with a unique key.
 *
 * Without a mariadbd/mysqld binary on this machine the test fails saying so, unless
 * DATABASE_URL points the suite at a server elsewhere (a CI service container, say):
 * then it is reported as skipped, with the reason in its name.
 */
const TOTAL = 3_000;
const OUTAGE_MS = 3_000; // longer than the fixture's 2 s lease: in-flight leases expire while the server is down
const haveBinary = findServerBinary() !== null;
const skip = !haveBinary && Boolean(process.env.DATABASE_URL);

let server: PrivateServer;
let url: string;
let daemon: DaemonProcess | undefined;
let traceDir: string;

/** One statement on a connection of its own (queryOnce). */
const query = <T = any>(statement: string, values: unknown[] = []) => queryOnce<T>(url, statement, values);

const doneCount = async () => Number((await query("SELECT COUNT(*) AS n FROM cronq_jobs WHERE status = 'done'"))[0].n);

/** User + system CPU time of a process so far, in ms (Linux /proc). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // utime, stime in USER_HZ (100)
}

describe.skipIf(skip)(
  skip ? 'database outage (skipped: no mariadbd/mysqld binary here and DATABASE_URL points elsewhere)' : 'database outage',
  () => {
    beforeAll(async () => {
      server = await PrivateServer.create();
      url = `${server.url}/cronq_outage`;
      const cronq = createCronq({ databaseUrl: url, logger: false, allowUnknownKind: true });
      await cronq.migrate();
      await query('CREATE TABLE effects (id BIGINT AUTO_INCREMENT PRIMARY KEY, job_key VARCHAR(255) NOT NULL, UNIQUE KEY effects_job_key (job_key))');
      // Attempts to spare: each lease recovered in an outage costs one, and none may go dead.
      const jobs = Array.from({ length: TOTAL }, (_, i) => ({ kind: 'effect', key: `outage:${i}`, maxAttempts: 10 }));
      expect(await cronq.enqueueMany(jobs)).toEqual({ inserted: TOTAL, existing: 0 });
      await cronq.stop();
      traceDir = mkdtempSync(join(tmpdir(), 'cronq-outage-'));
    });

    afterAll(async () => {
      await daemon?.kill();
      await server?.destroy();
      if (traceDir) rmSync(traceDir, { recursive: true, force: true });
    });

    it(
      'a daemon draining 3,000 jobs survives a clean stop and a crash of its database: it logs each outage once, does not spin, and every job ends done with its effect written exactly once',
      async () => {
        const trace = join(traceDir, 'trace');
        daemon = new DaemonProcess(['--concurrency', '16', '--poll', '50ms'], {
          DATABASE_URL: url,
          CRONQ_SCHEDULES: 'test/fixtures/schedules-effects',
          CRONQ_TEST_TRACE: trace,
          LOG_LEVEL: 'debug', // db_error lines (one per failed statement after the first) are debug
        });
        const d = daemon;
        const pid = d.child.pid!;
        await d.waitFor('worker_started');
        const outages: Array<{ kind: string; cpuMs: number; wallMs: number; dbErrors: number; where?: Record<string, number> }> = [];

        async function outage(kind: 'stop' | 'crash', n: number): Promise<void> {
          const errorsBefore = d.events('db_error').length;
          const downAt = Date.now();
          const cpuBefore = cpuMs(pid);
          if (kind === 'stop') await server.stop();
          else await server.crash();
          await d.waitFor('db_unavailable', n, 15_000);
          // The outage itself is the scenario, not a wait for a result: keep the server down past the lease.
          await new Promise((r) => setTimeout(r, Math.max(0, OUTAGE_MS - (Date.now() - downAt))));
          outages.push({
            kind,
            cpuMs: cpuMs(pid) - cpuBefore,
            wallMs: Date.now() - downAt,
            dbErrors: d.events('db_error').length - errorsBefore,
          });
          // Where the failed statements came from, for the assertion messages below.
          const byWhere: Record<string, number> = {};
          for (const e of d.events('db_error').slice(errorsBefore)) byWhere[e.where] = (byWhere[e.where] ?? 0) + 1;
          outages.at(-1)!.where = byWhere;
          expect(d.child.exitCode, `the daemon exited during the ${kind} outage:\n${d.stderr}`).toBeNull();
          await server.start();
          await d.waitFor('db_recovered', n, 20_000);
        }

        await eventually(async () => (await doneCount()) >= 600, 30_000, '600 jobs done before the first outage');
        await outage('stop', 1);
        const afterFirst = await doneCount();
        await eventually(async () => (await doneCount()) >= afterFirst + 600, 30_000, '600 more jobs done after the first outage');
        await outage('crash', 2);
        await eventually(async () => (await doneCount()) === TOTAL, 40_000, `all ${TOTAL} jobs done`);

        expect(d.child.exitCode, 'the daemon never exited').toBeNull();
        const jobs = await query("SELECT status, COUNT(*) AS n, SUM(attempts) AS attempts FROM cronq_jobs GROUP BY status");
        expect(jobs.map((r) => [r.status, Number(r.n)])).toEqual([['done', TOTAL]]);
        const [effects] = await query('SELECT COUNT(*) AS n, COUNT(DISTINCT job_key) AS keys_ FROM effects');
        expect([Number(effects.n), Number(effects.keys_)]).toEqual([TOTAL, TOTAL]);
        expect(await query('SELECT id FROM cronq_dead_letters')).toEqual([]);
        // A repeated effect would have hit the unique key and failed its job: none did, and
        // database trouble never counted as a handler failure.
        expect(d.events('job_failed')).toEqual([]);
        expect(d.events('job_run_error')).toEqual([]);

        // Each outage logged once, its end once.
        expect(d.events('db_unavailable')).toHaveLength(2);
        expect(d.events('db_recovered')).toHaveLength(2);
        // Completions the outages cost (the finisher gave up before the database came back)
        // came back through their leases: every extra attempt is one job that recovery
        // returned to the queue. (Often there are none: finishing jobs wait out the outage
        // and write their results while their leases last.)
        const returned = d.events('leases_recovered').reduce((sum, e) => sum + e.returned, 0);
        expect(Number(jobs[0].attempts) - TOTAL).toBe(returned);
        // Handlers ran at least once per job, more for the recovered ones; effects stayed at one each.
        const deliveries = readFileSync(trace, 'utf8').trim().split('\n');
        expect(new Set(deliveries.map((l) => l.split(' ')[1])).size).toBe(TOTAL);
        expect(deliveries.length).toBeGreaterThanOrEqual(TOTAL);

        // No spinning: backing off, the daemon used little CPU and few statements while down.
        for (const o of outages) {
          expect(o.cpuMs / o.wallMs, `CPU share during the ${o.kind} outage: ${JSON.stringify(o)}`).toBeLessThan(0.25);
          expect(o.dbErrors, `failed statements during the ${o.kind} outage: ${JSON.stringify(o)}`).toBeLessThan(150);
        }
        console.log(
          `outage: ${JSON.stringify(outages)}; ${deliveries.length} deliveries for ${TOTAL} jobs; ${returned} leases recovered; ` +
            `abandoned finishes ${d.events('job_finish_abandoned').length}; lease lost ${d.events('job_lease_lost').length}`,
        );

        d.signal('SIGTERM');
        expect(await d.exited).toBe(0);
      },
      90_000,
    );
  },
);

