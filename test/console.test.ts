/**
 * The web console in a real browser: Debian's headless Chromium driven by puppeteer-core,
 * against a live server on the test database. Plain HTTP for the refusals (CSRF, Origin,
 * no token).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createCronq, defineSchedule, defineTask, type Cronq } from '../src/index.ts';
import { ConsoleAuth } from '../src/http/console/auth.ts';
import { createConsole } from '../src/http/console/router.ts';
import { startHttpServer, type HttpServer } from '../src/http/server.ts';
import { silentLogger } from '../src/logger.ts';
import { useTestDatabase } from './support/db.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_dead_letters', 'cronq_pauses', 'cronq_schedule_ticks', 'cronq_daemons'] });
const TOKEN = 'ops:correct-horse-battery-staple';
const CHROMIUM = process.env.CRONQ_CHROMIUM ?? '/usr/bin/chromium';
const XSS = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">';

let cronq: Cronq;
let browser: Browser;
let withToken: HttpServer;
let readOnly: HttpServer;
let base: string;
let readOnlyBase: string;

const report = defineSchedule({ name: 'nightly-report', cron: '0 2 * * *', timezone: 'Europe/Paris', period: 'day', handle() {} });
const mail = defineTask({ name: 'send-mail', handle() {} });

beforeAll(async () => {
  cronq = createCronq({ databaseUrl: t.url, tasks: [report, mail], workers: false, scheduler: false, logger: false });
  const endpoints = (token: string | null) => ({
    health: async () => ({ status: 'ok' }) as any,
    metrics: async () => ({ contentType: 'text/plain', body: '' }),
    console: createConsole({ admin: cronq.admin, auth: new ConsoleAuth(token ? { name: 'ops', secret: token.slice(4) } : null), log: silentLogger() }),
  });
  withToken = await startHttpServer({ host: '127.0.0.1', port: 0 }, endpoints(TOKEN), silentLogger());
  readOnly = await startHttpServer({ host: '127.0.0.1', port: 0 }, endpoints(null), silentLogger());
  base = `http://127.0.0.1:${withToken.port}`;
  readOnlyBase = `http://127.0.0.1:${readOnly.port}`;
  browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--headless=new'] });
});

afterAll(async () => {
  await browser?.close();
  await withToken?.close();
  await readOnly?.close();
  await cronq?.stop({ graceMs: 0 });
});

let deadLetterId: number;
let deadJobId: number;

/** A dead job with a hostile payload and reason, done jobs over the last minutes, a daemon, ledger rows. */
beforeEach(async () => {
  await t.sql(`INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, attempts, available_at, last_error)
    VALUES ('mail', 'send-mail', 'welcome:42', ?, 'dead', 5, UTC_TIMESTAMP(6), ?)`, [JSON.stringify({ note: XSS }), `Error: ${XSS}`]);
  [{ id: deadJobId }] = await t.sql("SELECT id FROM cronq_jobs WHERE job_key = 'welcome:42'");
  await t.sql(`INSERT INTO cronq_dead_letters (job_id, queue, kind, job_key, payload, failure_reason, attempts)
    VALUES (?, 'mail', 'send-mail', 'welcome:42', ?, ?, 5)`, [deadJobId, JSON.stringify({ note: XSS }), `Error: SMTP 550 for ${XSS}\n    at send (mail.ts:1)`]);
  [{ id: deadLetterId }] = await t.sql('SELECT id FROM cronq_dead_letters');
  for (let minutesAgo = 0; minutesAgo < 30; minutesAgo += 1) {
    await t.sql(`INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, attempts, available_at, finished_time)
      VALUES ('mail', 'send-mail', ?, '{}', 'done', 1, UTC_TIMESTAMP(6) - INTERVAL ? MINUTE, UTC_TIMESTAMP(6) - INTERVAL ? MINUTE)`, [`done:${minutesAgo}`, minutesAgo, minutesAgo]);
  }
  await t.sql(`INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, attempts, lease_deadline, lease_fence, lease_holder)
    VALUES ('mail', 'send-mail', 'running:1', '{}', 'reserved', 1, UTC_TIMESTAMP(6) + INTERVAL 1 MINUTE, REPEAT('a', 32), 'worker-7:4242')`);
  await t.sql(`INSERT INTO cronq_daemons (id, host, pid, kinds, queues, started_at, heartbeat_at) VALUES ('worker-7:4242', 'worker-7', 4242, '["send-mail"]', NULL, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`);
  await t.sql(`INSERT INTO cronq_schedule_ticks (schedule_name, scheduled_at, period_key, outcome, jobs_enqueued, jobs_existing, note, started_at, finished_at)
    VALUES ('nightly-report', UTC_TIMESTAMP() - INTERVAL 1 DAY, 'd1', 'enqueued', 1, 0, NULL, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)),
           ('nightly-report', UTC_TIMESTAMP() - INTERVAL 2 DAY, 'd2', 'skipped', 0, 0, 'paused by alice: db migration', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`);
});

async function open(url: string): Promise<{ page: Page; status: number }> {
  const page = await browser.newPage();
  const response = await page.goto(url, { waitUntil: 'domcontentloaded' });
  return { page, status: response!.status() };
}

async function signIn(): Promise<Page> {
  const { page } = await open(`${base}/login`);
  await page.type('#token', TOKEN);
  await Promise.all([page.waitForNavigation(), page.click('button[type=submit]:not(nav button)')]);
  return page;
}

const text = (page: Page) => page.$eval('body', (el) => (el as unknown as { innerText: string }).innerText);

describe('the web console, read-only pages', () => {
  it('shows queues, completions per minute, dead letters awaiting review and the daemons seen on the overview', async () => {
    const { page, status } = await open(base);
    expect(status).toBe(200);
    const body = await text(page);
    expect(body).toContain('30 completed in the last hour');
    expect(body).toContain('1 awaiting review');
    expect(body).toContain('worker-7:4242');
    expect(await page.$$eval('svg.chart rect', (bars) => bars.length)).toBe(60);
    await page.close();
  });

  it('lists schedules with zone, next fire times, last tick and state, and pages a schedule ledger newest first', async () => {
    const { page, status } = await open(`${base}/schedules`);
    expect(status).toBe(200);
    const body = await text(page);
    expect(body).toContain('nightly-report');
    expect(body).toContain('Europe/Paris');
    expect(body).toContain('enqueued');
    await Promise.all([page.waitForNavigation(), page.click('a[href="/schedules/nightly-report"]')]);
    const ledger = await page.$$eval('tbody tr', (rows) => rows.map((r) => r.textContent ?? ''));
    expect(ledger).toHaveLength(2);
    expect(ledger[0]).toContain('d1');
    expect(ledger[1]).toContain('skipped');
    expect(ledger[1]).toContain('paused by alice: db migration');
    await page.close();
  });

  it('groups dead letters by kind and reason, and shows one with its full reason but no payload to a reader without the token', async () => {
    const { page } = await open(`${base}/dead`);
    const body = await text(page);
    expect(body).toContain('send-mail');
    expect(body).toContain('Error: SMTP 550 for');
    await Promise.all([page.waitForNavigation(), page.click(`a[href="/dead/${deadLetterId}"]`)]);
    expect(await text(page)).toContain('at send (mail.ts:1)');
    expect(await page.$('#payload')).toBeNull();
    expect(await text(page)).toContain('Payloads are shown to token holders only');
    expect(await page.$('form[method=post][action$="/requeue"]')).toBeNull();
    await page.close();
  });

  it('shows a job by id or key with its attempts, last error and lease holder', async () => {
    const { page, status } = await open(`${base}/jobs/running%3A1`);
    expect(status).toBe(200);
    expect(await text(page)).toContain('worker-7:4242');
    await page.type('#job-q', String(deadJobId));
    await Promise.all([page.waitForNavigation(), page.click('nav button[type=submit]')]);
    const body = await text(page);
    expect(body).toContain('welcome:42');
    expect(body).toContain('5 of 5');
    expect(body).toContain('Error: <script>');
    expect((await open(`${base}/jobs/no-such-key`)).status).toBe(404);
    await page.close();
  });
});

describe('the web console, for a token holder', () => {
  it('renders a payload containing <script> as text: nothing runs', async () => {
    const page = await signIn();
    await page.goto(`${base}/dead/${deadLetterId}`);
    expect(await page.$eval('#payload', (el) => el.textContent)).toContain('<script>window.pwned = 1</script>');
    expect(await page.evaluate('window.pwned')).toBeUndefined();
    expect(await page.$$('main script, main img')).toHaveLength(0);
    await page.close();
  });

  it('requeues a dead letter by clicking, recording who and why', async () => {
    const page = await signIn();
    await page.goto(`${base}/dead/${deadLetterId}`);
    await page.type(`form[action="/dead/${deadLetterId}/requeue"] input[name=reason]`, 'SMTP fixed');
    await Promise.all([page.waitForNavigation(), page.click(`form[action="/dead/${deadLetterId}/requeue"] button`)]);
    expect(await text(page)).toContain(`dead letter #${deadLetterId}: requeued`);
    const [job] = await t.sql('SELECT status, attempts FROM cronq_jobs WHERE id = ?', [deadJobId]);
    expect(job).toEqual({ status: 'ready', attempts: 0 });
    const [letter] = await t.sql('SELECT reviewed_at IS NOT NULL AS reviewed, resolution FROM cronq_dead_letters WHERE id = ?', [deadLetterId]);
    expect(letter).toEqual({ reviewed: 1, resolution: 'requeued: [console:ops] SMTP fixed' });
    await page.close();
  });

  it('pauses a schedule by clicking, as console:NAME with the reason given', async () => {
    const page = await signIn();
    await page.goto(`${base}/schedules`);
    await page.type('form[action="/schedules/nightly-report/pause"] input[name=reason]', 'quarter close');
    await Promise.all([page.waitForNavigation(), page.click('form[action="/schedules/nightly-report/pause"] button')]);
    const pauses = await t.sql('SELECT target, name, reason, paused_by FROM cronq_pauses');
    expect(pauses).toEqual([{ target: 'schedule', name: 'nightly-report', reason: 'quarter close', paused_by: 'console:ops' }]);
    expect(await text(page)).toContain('Resume');
    await page.close();
  });
});

describe('the web console refuses', () => {
  const post = (url: string, body: string, headers: Record<string, string> = {}) =>
    fetch(url, { method: 'POST', redirect: 'manual', body, headers: { 'Content-Type': 'application/x-www-form-urlencoded', ...headers } });
  const session = async () => {
    const res = await post(`${base}/login`, `token=${encodeURIComponent(TOKEN)}`);
    expect(res.status).toBe(303);
    return res.headers.get('set-cookie')!.split(';')[0];
  };
  const unchanged = async () => {
    expect((await t.sql('SELECT status FROM cronq_jobs WHERE id = ?', [deadJobId]))[0].status).toBe('dead');
    expect(await t.sql('SELECT * FROM cronq_pauses')).toEqual([]);
  };

  it('an action without the token (403), and any action when no token is configured, changing nothing', async () => {
    expect((await post(`${base}/dead/${deadLetterId}/requeue`, 'reason=x')).status).toBe(403);
    expect((await post(`${base}/schedules/nightly-report/pause`, 'reason=x', { Authorization: 'Bearer ops:wrong-secret-wrong-secret' })).status).toBe(403);
    expect((await post(`${readOnlyBase}/dead/${deadLetterId}/requeue`, 'reason=x', { Authorization: `Bearer ${TOKEN}` })).status).toBe(403);
    await unchanged();
  });

  it('a form post with the session cookie but without this session’s CSRF token, or from another origin', async () => {
    const cookie = await session();
    expect((await post(`${base}/dead/${deadLetterId}/requeue`, 'reason=x', { Cookie: cookie })).status).toBe(403);
    expect((await post(`${base}/dead/${deadLetterId}/requeue`, 'reason=x&csrf=forged', { Cookie: cookie })).status).toBe(403);
    const csrf = new ConsoleAuth({ name: 'ops', secret: TOKEN.slice(4) }).csrf(decodeURIComponent(cookie.split('=')[1]));
    const evil = await post(`${base}/schedules/nightly-report/pause`, `reason=x&csrf=${csrf}`, { Cookie: cookie, Origin: 'https://evil.example' });
    expect(evil.status).toBe(403);
    await unchanged();
    // The same post from this origin goes through: the refusals above were the checks.
    const ok = await post(`${base}/schedules/nightly-report/pause`, `reason=x&csrf=${csrf}`, { Cookie: cookie, Origin: base });
    expect(ok.status).toBe(303);
    expect(await t.sql('SELECT paused_by FROM cronq_pauses')).toEqual([{ paused_by: 'console:ops' }]);
  });
});

describe('console screenshots', () => {
  it('captures the overview, schedules and dead-letter pages as PNG (into $CRONQ_SCREENSHOTS_DIR when set)', async () => {
    const dir = process.env.CRONQ_SCREENSHOTS_DIR ?? join(tmpdir(), `cronq-console-${process.pid}`);
    mkdirSync(dir, { recursive: true });
    const page = await signIn();
    await page.setViewport({ width: 1100, height: 720 });
    for (const [file, path] of [['console-overview.png', '/'], ['console-schedules.png', '/schedules'], ['console-dead-letters.png', '/dead']]) {
      await page.goto(`${base}${path}`);
      const png = await page.screenshot({ fullPage: true });
      expect(Buffer.from(png).subarray(1, 4).toString()).toBe('PNG');
      writeFileSync(join(dir, file), png);
    }
    await page.close();
  });
});
