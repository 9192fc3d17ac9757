/**
 * The console's run button (POST /schedules/NAME/run), over plain HTTP with a Bearer
 * token: what it shows after running a schedule, and after declining to run a paused one.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCronq, defineSchedule, type Cronq } from '../src/index.ts';
import { ConsoleAuth } from '../src/http/console/auth.ts';
import { createConsole } from '../src/http/console/router.ts';
import { startHttpServer, type HttpServer } from '../src/http/server.ts';
import { silentLogger } from '../src/logger.ts';
import { useTestDatabase } from './support/db.ts';
import { whileLocked } from './support/rowLock.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_pauses'] });
const TOKEN = 'ops:correct-horse-battery-staple';
const report = defineSchedule({ name: 'nightly-report', cron: '0 2 * * *', timezone: 'Europe/Paris', period: 'day', handle() {} });
/** Fans out one good entity, then two that cannot become jobs (a key too long to store, no key at all). */
const fanout = defineSchedule({
  name: 'per-tenant',
  cron: '0 3 * * *',
  period: 'day',
  async *jobs() {
    yield { key: 'acme', payload: {} };
    yield { key: `${'k'.repeat(100_000)}\u001b[2J`, payload: {} };
    yield { payload: {} } as any;
  },
  handle() {},
});

let cronq: Cronq;
let server: HttpServer;
let base: string;

beforeAll(async () => {
  cronq = createCronq({ databaseUrl: t.url, tasks: [report, fanout], workers: false, scheduler: false, logger: false });
  const handler = createConsole({ admin: cronq.admin, auth: new ConsoleAuth({ name: 'ops', secret: TOKEN.slice(4) }), log: silentLogger() });
  server = await startHttpServer({ host: '127.0.0.1', port: 0 }, { health: async () => ({ status: 'ok' }) as any, metrics: async () => ({ contentType: 'text/plain', body: '' }), console: handler }, silentLogger());
  base = `http://127.0.0.1:${server.port}`;
});

afterAll(async () => {
  await server?.close();
  await cronq?.stop({ graceMs: 0 });
});

/** Presses the run button of `name`; resolves with the notice of the page it redirects back to. */
async function run(name: string): Promise<string> {
  const acted = await fetch(`${base}/schedules/${name}/run`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: `Bearer ${TOKEN}` },
    body: '',
    redirect: 'manual',
  });
  expect(acted.status).toBe(303);
  const back = await (await fetch(new URL(acted.headers.get('location')!, base))).text();
  return /<p class="flash" role="status">([^<]*)<\/p>/.exec(back)?.[1] ?? '';
}

describe('the console run button', () => {
  it('runs the schedule now and says how many jobs it enqueued', async () => {
    expect(await run('nightly-report')).toMatch(/^nightly-report run for \S+Z: 1 enqueued, 0 already there$/);
    expect(await t.sql("SELECT kind FROM cronq_jobs")).toEqual([{ kind: 'nightly-report' }]);
  });

  it('says how many entities were refused, naming the first in a bounded line: their jobs were not enqueued', async () => {
    const notice = await run('per-tenant');
    expect(notice).toMatch(/^per-tenant run for \S+Z: 1 enqueued, 0 already there, 2 refused \(first per-tenant:[^ ]*…[^:]*: job key is 100[0-9]{3} characters long; at most \d+ are allowed\)$/);
    expect(notice.length).toBeLessThan(400);
    expect(await t.sql('SELECT kind FROM cronq_jobs')).toEqual([{ kind: 'per-tenant' }]);
  });

  it('on a paused schedule runs nothing and says it is paused: resume it first', async () => {
    await cronq.admin.pauses.pause('schedule', 'nightly-report', { reason: 'quarter close', by: 'ann' });
    expect(await run('nightly-report')).toMatch(/^nightly-report: paused: resume it first \(paused by ann since \S+Z: quarter close\)$/);
    expect(await t.sql('SELECT kind FROM cronq_jobs')).toEqual([]);
    expect(await t.sql('SELECT name FROM cronq_pauses')).toEqual([{ name: 'nightly-report' }]);
  });

  it('while another transaction holds the key the run would write, answers 503 busy with Retry-After, not an error page', async () => {
    // The run's job key for the current period: learnt by running once, then taken away.
    await cronq.admin.tick('nightly-report');
    const [{ job_key: key }] = await t.sql('SELECT job_key FROM cronq_jobs');
    await t.sql('DELETE FROM cronq_jobs');
    const uncommitted = {
      sql: `INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, attempts, max_attempts, available_at, created_at, updated_at)
        VALUES ('default', 'nightly-report', ?, '{}', 'ready', 0, 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`,
      values: [key],
    };
    await whileLocked(t.url, uncommitted, async () => {
      // Its sessions open now, so their lock waits are the second whileLocked sets.
      const busy = createCronq({ databaseUrl: t.url, tasks: [report], workers: false, scheduler: false, logger: false });
      const handler = createConsole({ admin: busy.admin, auth: new ConsoleAuth({ name: 'ops', secret: TOKEN.slice(4) }), log: silentLogger() });
      const busyServer = await startHttpServer({ host: '127.0.0.1', port: 0 }, { health: async () => ({ status: 'ok' }) as any, metrics: async () => ({ contentType: 'text/plain', body: '' }), console: handler }, silentLogger());
      try {
        const answer = await fetch(`http://127.0.0.1:${busyServer.port}/schedules/nightly-report/run`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: `Bearer ${TOKEN}` },
          body: '',
          redirect: 'manual',
        });
        expect(answer.status).toBe(503);
        expect(answer.headers.get('retry-after')).toBe('1');
        expect(await answer.text()).toContain('The database is busy (a lock wait or deadlock behind another transaction); try again in a moment.');
      } finally {
        await busyServer.close();
        await busy.stop({ graceMs: 0 });
      }
    });
    expect(await t.sql('SELECT job_key FROM cronq_jobs')).toEqual([]);
  });
});
