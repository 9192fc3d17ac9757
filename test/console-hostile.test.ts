/**
 * The console and its HTTP server under hostile input, over plain HTTP (no browser):
 * malformed URLs, out-of-range values, a database that does not answer, forged notices.
 * Whatever arrives, the answer is a clear 4xx or 503, never a 500, a stack trace or SQL.
 */
import { createHmac } from 'node:crypto';
import { connect as connectSocket } from 'node:net';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCronq, defineSchedule, defineTask, type Cronq } from '../src/index.ts';
import { ConsoleAuth, sessionHash } from '../src/http/console/auth.ts';
import { ConsoleGate } from '../src/http/console/gate.ts';
import { SignInLimit } from '../src/http/console/signInLimit.ts';
import { PAYLOAD_SHOWN_MAX } from '../src/http/console/payload.ts';
import { CONSOLE_WAIT_MS, createConsole } from '../src/http/console/router.ts';
import { startHttpServer, type HttpServer } from '../src/http/server.ts';
import { silentLogger } from '../src/logger.ts';
import { TIMEOUTS } from '../src/db/client.ts';
import { useTestDatabase } from './support/db.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_pauses'] });
const TOKEN = 'ops:correct-horse-battery-staple';
const auth = () => new ConsoleAuth({ name: 'ops', secret: TOKEN.slice(4) });
const report = defineSchedule({ name: 'nightly-report', cron: '0 2 * * *', timezone: 'Europe/Paris', period: 'day', handle() {} });
const mail = defineTask({ name: 'send-mail', handle() {} });

let cronq: Cronq;
let server: HttpServer;
let base: string;

async function serve(admin: Cronq['admin'], consoleAuth = auth()): Promise<HttpServer> {
  return startHttpServer(
    { host: '127.0.0.1', port: 0 },
    {
      health: async () => ({ status: 'ok' }) as any,
      metrics: async () => ({ contentType: 'text/plain', body: '' }),
      console: createConsole({ admin, auth: consoleAuth, log: silentLogger() }),
    },
    silentLogger(),
  );
}

beforeAll(async () => {
  cronq = createCronq({ databaseUrl: t.url, tasks: [report, mail], workers: false, scheduler: false, logger: false });
  server = await serve(cronq.admin);
  base = `http://127.0.0.1:${server.port}`;
});

afterAll(async () => {
  await server?.close();
  await cronq?.stop({ graceMs: 0 });
});

const bearer = { Authorization: `Bearer ${TOKEN}` };
const form = { 'Content-Type': 'application/x-www-form-urlencoded', ...bearer };

describe('the console while the database does not answer', () => {
  it('answers 503 with Retry-After and a plain explanation, no address, SQL or stack', async () => {
    // Port 1 refuses every connection: each admin call fails as in an outage.
    const down = createCronq({ databaseUrl: 'mysql://root@127.0.0.1:1/cronq_nowhere', tasks: [report, mail], workers: false, scheduler: false, logger: false });
    const s = await serve(down.admin);
    try {
      for (const path of ['/', '/schedules', '/schedules/nightly-report', '/dead', '/dead/1', '/jobs/welcome%3A42']) {
        const res = await fetch(`http://127.0.0.1:${s.port}${path}`);
        const body = await res.text();
        expect(res.status, path).toBe(503);
        expect(res.headers.get('retry-after'), path).toBe('5');
        expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
        expect(body).toContain('The database is not answering');
        expect(body).not.toMatch(/127\.0\.0\.1|cronq_nowhere|ECONNREFUSED|SELECT|\bat \S+ \(/);
      }
      const post = await fetch(`http://127.0.0.1:${s.port}/schedules/nightly-report/pause`, { method: 'POST', headers: form, body: 'reason=x', redirect: 'manual' });
      expect(post.status).toBe(503);
    } finally {
      await s.close();
      await down.stop({ graceMs: 0 });
    }
  });
});

describe('the console given values out of range', () => {
  it.each<[string, string, RegExp]>([
    ['a ledger page before year 9999', '/schedules/nightly-report?before=%2B275760-09-13T00:00:00.000Z', /before must be a Date from year 1 to 9999/],
    ['a ledger page before year 1', '/schedules/nightly-report?before=0000-01-01', /before must be a Date from year 1 to 9999/],
    ['dead letter 0', '/dead/0', /id must be a whole number from 1/],
    // Date.parse guesses at these (1 is 2001-01-01, 2026-02-30 is March 2, a time without zone is the host's,
    // -2026-01-01 and +2026-01-01 are 2026, -000000-01-01 is 2001): refused, not read as another instant.
    ...['1', '-1', 'x', '2026-02-30', '2026-12-03T24:00Z', '2026-12-03 17:40', '2026-12-03T17:40', '12/03/2026', '-2026-01-01', '+2026-01-01', '-000000-01-01', '12345-01-01'].map((text): [string, string, RegExp] => [
      `a ledger page before '${text}'`,
      `/schedules/nightly-report?before=${encodeURIComponent(text)}`,
      new RegExp(`before must be an ISO 8601 date or instant with a zone, such as 2026-12-01T02:00:00Z \\(got &#39;${text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}&#39;\\)`),
    ]),
  ])('answers %s with 400 naming the bad value, not 500', async (_, path, line) => {
    const res = await fetch(`${base}${path}`);
    expect(res.status).toBe(400);
    expect(await res.text()).toMatch(line);
  });
});

describe('the console given malformed URLs', () => {
  it('answers an action on a schedule name with broken percent-encoding as on no such schedule, not 500', async () => {
    const res = await fetch(`${base}/schedules/%E0%A4%A/pause`, { method: 'POST', headers: form, body: 'reason=x', redirect: 'manual' });
    expect(res.status).toBe(303);
    expect(decodeURIComponent(res.headers.get('location')!)).toContain('no schedule %E0%A4%A');
    expect(await t.sql('SELECT * FROM cronq_pauses')).toEqual([]);
  });

  it('answers a request target that is neither a path nor an http:// URL with 400, and keeps serving', async () => {
    const { request } = await import('node:http');
    const status = await new Promise<number>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port: server.port, path: 'http://[', method: 'GET' }, (res) => {
        res.resume();
        resolve(res.statusCode!);
      });
      req.on('error', reject);
      req.end();
    });
    expect(status).toBe(400);
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
  });

  /** The status and body of GET `target` sent as the request target exactly as written (fetch would resolve it first). */
  const raw = (target: string, host = `127.0.0.1:${server.port}`) =>
    new Promise<{ status: number; body: string }>(async (resolve, reject) => {
      const { request } = await import('node:http');
      const req = request({ host: '127.0.0.1', port: server.port, path: target, method: 'GET', headers: { host } }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode!, body }));
      });
      req.on('error', reject);
      req.end();
    });

  it('serves the path of the request target exactly: a doubled slash or a backslash names no host, so //healthz is neither the health check nor the overview', async () => {
    for (const target of ['//healthz', '//healthz/', '//dead', '/\\healthz', '//metrics?x=1']) {
      const answer = await raw(target);
      expect(answer.status, target).toBe(404);
      expect(answer.body, target).not.toMatch(/"status"|Overview/);
    }
    expect((await raw('/healthz?verbose=1')).status).toBe(200);
  });

  it('serves an absolute-form target (http://HOST/PATH) by its path, taking its host as the one the request names; other forms answer 400', async () => {
    const health = await raw(`http://127.0.0.1:${server.port}/healthz`);
    expect(health.status).toBe(200);
    expect(JSON.parse(health.body)).toEqual({ status: 'ok' });
    expect((await raw('HTTP://localhost/dead')).body).toContain('<h1>Dead letters</h1>');
    expect((await raw('http://localhost')).status).toBe(200); // an empty path is /
    // Its host replaces the Host header (RFC 9112 §3.2.2): on loopback, a foreign one is refused whatever the header says.
    expect((await raw('http://evil.example/healthz')).status).toBe(403);
    expect((await raw('http://localhost/healthz', 'evil.example')).status).toBe(200);
    for (const target of ['https://localhost/healthz', 'ftp://localhost/healthz', 'http://ops@localhost/healthz', 'http:///healthz', '*']) {
      const answer = await raw(target);
      expect(answer.status, target).toBe(400);
      expect(answer.body, target).toBe('bad request: the request target is neither a path (/...) nor an http:// URL\n');
    }
  });
});

describe('the HTTP server under many connections', () => {
  const open = (port: number): Promise<import('node:net').Socket> =>
    new Promise((resolve, reject) => {
      const s = connectSocket(port, '127.0.0.1', () => resolve(s));
      s.on('error', reject);
    });
  const closing = (s: import('node:net').Socket) => new Promise<void>((resolve) => s.on('close', () => resolve()));

  it('serves a request sent at once while MAX_HTTP_CONNECTIONS connections trickle their headers (slowloris): the oldest of them is closed to make room', async () => {
    const { MAX_HTTP_CONNECTIONS } = await import('../src/http/server.ts');
    const slow = [];
    for (let i = 0; i < MAX_HTTP_CONNECTIONS; i += 1) {
      const s = await open(server.port);
      s.on('error', () => undefined);
      s.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\n'); // headers never finished
      slow.push(s);
    }
    try {
      const oldestClosed = closing(slow[0]);
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
      await oldestClosed;
      expect(slow.slice(1).every((s) => !s.destroyed)).toBe(true);
    } finally {
      for (const s of slow) s.destroy();
    }
  });

  it('closes one connection more as it arrives when all MAX_HTTP_CONNECTIONS are being answered, and serving resumes as they finish', async () => {
    const { MAX_HTTP_CONNECTIONS } = await import('../src/http/server.ts');
    let scrapes = 0;
    let allIn!: () => void;
    const allScraping = new Promise<void>((resolve) => (allIn = resolve));
    let answer!: () => void;
    const answered = new Promise<void>((resolve) => (answer = resolve));
    const s = await startHttpServer(
      { host: '127.0.0.1', port: 0 },
      {
        health: async () => ({ status: 'ok' }) as any,
        metrics: async () => {
          if (++scrapes === MAX_HTTP_CONNECTIONS) allIn();
          await answered;
          return { contentType: 'text/plain', body: '' };
        },
      },
      silentLogger(),
    );
    const busy = [];
    try {
      for (let i = 0; i < MAX_HTTP_CONNECTIONS; i += 1) {
        const c = await open(s.port);
        c.on('error', () => undefined);
        c.write('GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n');
        c.resume();
        busy.push(c);
      }
      await allScraping;
      const extra = await open(s.port);
      extra.on('error', () => undefined);
      extra.resume();
      await closing(extra);
      expect(busy.every((c) => !c.destroyed)).toBe(true);
      answer();
      expect((await fetch(`http://127.0.0.1:${s.port}/healthz`)).status).toBe(200);
    } finally {
      answer();
      for (const c of busy) c.destroy();
      await s.close();
    }
  });
});

describe('the HTTP server and slow clients', () => {
  it('closes a connection whose headers trickle in for longer than the 10 s headers timeout', async () => {
    const { connect } = await import('node:net');
    const started = Date.now();
    const socket = connect(server.port, '127.0.0.1', () => socket.write('GET / HTTP/1.1\r\nHost: x\r\n'));
    socket.on('error', () => undefined);
    const trickle = setInterval(() => socket.writable && socket.write('X-Slow: 1\r\n'), 500);
    const closedAfterMs = await new Promise<number | null>((resolve) => {
      socket.on('close', () => resolve(Date.now() - started));
      setTimeout(() => resolve(null), 13_000);
    });
    clearInterval(trickle);
    socket.destroy();
    expect(closedAfterMs).not.toBeNull();
    expect(closedAfterMs!).toBeGreaterThanOrEqual(10_000);
  }, 20_000);
});

describe('clients that leave before their request is answered', () => {
  it('are no server error: a POST cut off mid-body is logged at debug only, its path cut short, never as http_error', async () => {
    const { EventLog } = await import('./support/events.ts');
    const log = new EventLog('debug');
    const s = await startHttpServer(
      { host: '127.0.0.1', port: 0 },
      { health: async () => ({ status: 'ok' }) as any, metrics: async () => ({ contentType: 'text/plain', body: '' }), console: createConsole({ admin: cronq.admin, auth: auth(), log: log.logger }) },
      log.logger,
    );
    try {
      const socket = connectSocket(s.port, '127.0.0.1');
      socket.on('error', () => undefined);
      const head = `POST /schedules/${'x'.repeat(8_000)}/pause HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\nreason=`;
      await new Promise<void>((resolve) => socket.write(head, () => resolve()));
      socket.destroy();
      const [gone] = await log.waitFor('http_client_gone');
      expect(gone.level).toBe(20);
      expect(gone.path.length).toBeLessThanOrEqual(121);
      expect(log.named('http_error')).toEqual([]);
    } finally {
      await s.close();
    }
  });
});

describe('the console given control and bidi characters', () => {
  // What a page must never carry raw: C0 controls but tab and newline, DEL, C1, bidi marks, overrides and isolates, and what shows as nothing.
  const HIDDEN = /[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u061c\u180e\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/;

  it('shows them as visible escapes in keys, kinds, queues, errors, payloads and pause reasons: a key cannot pass for another', async () => {
    const key = 'refund:\u202E0000001-resu';
    await t.sql(`INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, attempts, available_at, last_error)
      VALUES (?, ?, ?, ?, 'dead', 5, UTC_TIMESTAMP(6), ?)`, ['mail\u2066x', 'send\x1bmail', key, '{"note":"\u202Eevil\u0085"}', 'Error: \x00NUL \x1b[2J \u200Fmark \u200bzw\ufeff\n    at x (y.ts:1)']);
    const [{ id }] = await t.sql('SELECT id FROM cronq_jobs WHERE job_key = ?', [key]);
    await t.sql(`INSERT INTO cronq_dead_letters (job_id, queue, kind, job_key, payload, failure_reason, reason_group, attempts)
      VALUES (?, ?, ?, ?, '{"note":"\u202Eevil"}', ?, ?, 5)`, [id, 'mail\u2066x', 'send\x1bmail', key, 'Error: \x9b31m \u061c', 'Error: \x9b31m \u061c']);
    const [{ id: letter }] = await t.sql('SELECT id FROM cronq_dead_letters');
    await cronq.admin.pauses.pause('schedule', 'nightly-report', { reason: 'db \u202Enoitargim', by: 'alice' });
    try {
      for (const path of [`/jobs/${id}`, `/jobs/${encodeURIComponent(key)}`, '/dead', `/dead/${letter}`, '/schedules', '/schedules/nightly-report']) {
        const res = await fetch(`${base}${path}`, { headers: bearer });
        const body = await res.text();
        expect(res.status, path).toBe(200);
        expect(HIDDEN.exec(body), path).toBeNull();
      }
      const job = await (await fetch(`${base}/jobs/${id}`, { headers: bearer })).text();
      expect(job).toContain('<dd>refund:\\u202e0000001-resu</dd>');
      expect(job).toContain('<dd>send\\x1bmail</dd>');
      expect(job).toContain('<dd>mail\\u2066x</dd>');
      expect(job).toContain('Error: \\x00NUL \\x1b[2J \\u200fmark \\u200bzw\\ufeff\n    at x');
      expect(job).toMatch(/<pre id="payload">.*\\u202eevil\\x85/);
      expect(await (await fetch(`${base}/schedules`)).text()).toContain('db \\u202enoitargim');
      // A filter field sends back the exact value it was given.
      const filtered = await (await fetch(`${base}/dead?kind=${encodeURIComponent('send\x1bmail')}`, { headers: bearer })).text();
      expect(filtered).toContain('name="kind" value="send\x1bmail"');
      expect(filtered).toContain('<input type="hidden" name="kind" value="send\x1bmail">');
      expect(filtered).toContain('<td>send\\x1bmail</td>');
    } finally {
      await t.sql('DELETE FROM cronq_dead_letters');
      await t.sql('DELETE FROM cronq_jobs');
    }
  });
});

describe('the console search box', () => {
  it('finds the key exactly as typed, white space included, and offers the trimmed text when nothing matches', async () => {
    for (const key of ['pad:a', 'pad:a ', ' pad:a', 'pad:b']) {
      await t.sql(`INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, attempts, available_at) VALUES ('mail', 'send-mail', ?, '{}', 'ready', 0, UTC_TIMESTAMP(6))`, [key]);
    }
    try {
      for (const key of ['pad:a', 'pad:a ', ' pad:a']) {
        const res = await fetch(`${base}/jobs?q=${encodeURIComponent(key)}`);
        expect(res.status, key).toBe(200);
        expect(await res.text(), key).toContain(`<dt>Key</dt><dd>${key}</dd>`);
      }
      const none = await fetch(`${base}/jobs?q=${encodeURIComponent(' pad:b ')}`);
      expect(none.status).toBe(404);
      expect(await none.text()).toContain('<a href="/jobs?q=pad%3Ab">Search for <code>pad:b</code> without it</a>');
    } finally {
      await t.sql('DELETE FROM cronq_jobs');
    }
  });
  it('names, beside the job of an id, the other job whose key is those digits, and shows it at /jobs?key= (the key 4711 showed job #4711 alone)', async () => {
    await t.sql(`INSERT INTO cronq_jobs (id, queue, kind, job_key, payload, status, attempts, available_at) VALUES
      (5, 'mail', 'send-mail', 'welcome:1', '{}', 'ready', 0, UTC_TIMESTAMP(6)), (6, 'mail', 'send-mail', '5', '{}', 'ready', 0, UTC_TIMESTAMP(6)), (7, 'mail', 'send-mail', '7', '{}', 'ready', 0, UTC_TIMESTAMP(6))`);
    try {
      for (const url of [`${base}/jobs/5`, `${base}/jobs?q=5`]) {
        const body = await (await fetch(url)).text();
        expect(body, url).toContain('<dt>Key</dt><dd>welcome:1</dd>');
        expect(body, url).toContain('Job #6 has the key <code>5</code>: <a href="/jobs?key=5">show it</a>');
      }
      const byKey = await fetch(`${base}/jobs?key=5`);
      expect(byKey.status).toBe(200);
      expect(await byKey.text()).toContain('<dt>Key</dt><dd>5</dd>');
      // A job whose own key is its id is no other job: no note.
      expect(await (await fetch(`${base}/jobs/7`)).text()).not.toContain('has the key');
      // By key only: digits no key has are no job, whatever the ids.
      const none = await fetch(`${base}/jobs?key=6`);
      expect(none.status).toBe(404);
      expect(await none.text()).toContain('No job with key <code>6</code>.');
      // Its link to the text without white space stays a search by key: ?q=5 is job #5, not the key 5.
      const padded = await (await fetch(`${base}/jobs?key=${encodeURIComponent(' 5')}`)).text();
      expect(padded).toContain('<a href="/jobs?key=5">Search for <code>5</code> without it</a>');
    } finally {
      await t.sql('DELETE FROM cronq_jobs');
    }
  });

  it('finds a job whose key is digits no job id can be (0, 000) by its key, not 400 for id 0', async () => {
    for (const key of ['0', '000']) {
      await t.sql(`INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, attempts, available_at) VALUES ('mail', 'send-mail', ?, '{}', 'ready', 0, UTC_TIMESTAMP(6))`, [key]);
    }
    try {
      for (const key of ['0', '000']) {
        for (const url of [`${base}/jobs/${key}`, `${base}/jobs?q=${key}`]) {
          const res = await fetch(url);
          expect(res.status, url).toBe(200);
          expect(await res.text(), url).toContain(`<dt>Key</dt><dd>${key}</dd>`);
        }
      }
      const none = await fetch(`${base}/jobs/00`);
      expect(none.status).toBe(404);
      expect(await none.text()).toContain('No job with id or key <code>00</code>.');
    } finally {
      await t.sql('DELETE FROM cronq_jobs');
    }
  });
});

describe('the console and a large payload', () => {
  it('shows a token holder the start of a megabyte payload, saying how large it is, not the whole of it escaped', async () => {
    const payload = `{"a":"${'&'.repeat(1_000_000)}"}`;
    await t.sql(`INSERT INTO cronq_jobs (id, queue, kind, job_key, payload, status, attempts, available_at) VALUES (7, 'mail', 'send-mail', 'big:1', ?, 'dead', 5, UTC_TIMESTAMP(6))`, [payload]);
    await t.sql(`INSERT INTO cronq_dead_letters (id, job_id, queue, kind, job_key, payload, failure_reason, reason_group, attempts) VALUES (3, 7, 'mail', 'send-mail', 'big:1', ?, 'Error: x', 'Error: x', 5)`, [payload]);
    try {
      for (const [path, whole] of [['/jobs/big:1', 'admin.job()'], ['/dead/3', 'cronq dead show 3 --json']]) {
        const res = await fetch(`${base}${path}`, { headers: bearer });
        const body = await res.text();
        expect(res.status, path).toBe(200);
        // Whole, every & escaped: a 5 MB page.
        expect(body.length, path).toBeLessThan(400_000);
        expect(body, path).toContain(`<pre id="payload">{&quot;a&quot;:&quot;&amp;&amp;`);
        expect(body, path).toContain(`Only its first ${PAYLOAD_SHOWN_MAX} characters are shown: the payload holds ${payload.length} bytes (read it whole with <code>${whole}</code>)`);
      }
    } finally {
      await t.sql('DELETE FROM cronq_dead_letters');
      await t.sql('DELETE FROM cronq_jobs');
    }
  });
});

describe('the console notice', () => {
  it('says a discard discarded, one dead letter or all matching (it said "discardd")', async () => {
    const letter = async (id: number) =>
      t.sql(`INSERT INTO cronq_dead_letters (id, job_id, queue, kind, job_key, payload, failure_reason, reason_group, attempts) VALUES (?, ?, 'mail', 'send-mail', ?, '{}', 'Error: x', 'Error: x', 5)`, [id, 100 + id, `gone:${id}`]);
    await letter(1);
    await letter(2);
    try {
      const notice = async (path: string, body: string) => {
        const res = await fetch(`${base}${path}`, { method: 'POST', headers: form, body, redirect: 'manual' });
        expect(res.status, path).toBe(303);
        return new URL(res.headers.get('location')!, base).searchParams.get('done');
      };
      expect(await notice('/dead/1/discard', 'reason=old')).toBe('dead letter #1: discarded');
      expect(await notice('/dead/discard', 'reason=old&kind=send-mail&queue=')).toBe('discarded 1 dead letter(s)');
    } finally {
      await t.sql('DELETE FROM cronq_dead_letters');
    }
  });

  it('refuses a bulk review whose filter has a field it does not know, or one given twice, touching nothing (it acted on every dead letter)', async () => {
    await t.sql(`INSERT INTO cronq_dead_letters (id, job_id, queue, kind, job_key, payload, failure_reason, reason_group, attempts) VALUES
      (1, 101, 'mail', 'send-mail', 'k:1', '{}', 'Error: x', 'Error: x', 5), (2, 102, 'reports', 'report', 'k:2', '{}', 'Error: x', 'Error: x', 5)`);
    try {
      for (const [body, refusal] of [
        ['reason=old&knd=report', 'refused: the filter has no field &#39;knd&#39; (kind, queue)'],
        ['reason=old&kind=report&kind=send-mail', 'refused: the filter&#39;s kind is given twice'],
        ['reason=old&kind=report&queue=reports&queue=mail', 'refused: the filter&#39;s queue is given twice'],
      ]) {
        for (const action of ['/dead/discard', '/dead/requeue']) {
          const res = await fetch(`${base}${action}`, { method: 'POST', headers: form, body, redirect: 'manual' });
          expect(res.status, `${action} ${body}`).toBe(400);
          expect(await res.text()).toContain(refusal);
        }
      }
      expect(await t.sql('SELECT id FROM cronq_dead_letters WHERE reviewed_at IS NOT NULL')).toEqual([]);
      // What the page's own form posts still works: both fields, empty meaning any.
      const res = await fetch(`${base}/dead/discard`, { method: 'POST', headers: form, body: 'reason=old&kind=report&queue=', redirect: 'manual' });
      expect(new URL(res.headers.get('location')!, base).searchParams.get('done')).toBe('discarded 1 dead letter(s)');
    } finally {
      await t.sql('DELETE FROM cronq_dead_letters');
    }
  });

  it('refuses a bulk review whose filter is in the address (POST /dead/requeue?kind=report), touching nothing: the address was ignored, so it acted on every dead letter', async () => {
    await t.sql(`INSERT INTO cronq_dead_letters (id, job_id, queue, kind, job_key, payload, failure_reason, reason_group, attempts) VALUES
      (1, 101, 'mail', 'send-mail', 'k:1', '{}', 'Error: x', 'Error: x', 5), (2, 102, 'reports', 'report', 'k:2', '{}', 'Error: x', 'Error: x', 5)`);
    try {
      // As the page's GET filter reads it (/dead?kind=report): a script may well post it there too.
      for (const query of ['?kind=report', '?queue=reports', '?kind=report&queue=reports', '?knd=report']) {
        for (const action of ['/dead/discard', '/dead/requeue']) {
          const res = await fetch(`${base}${action}${query}`, { method: 'POST', headers: form, body: 'reason=old', redirect: 'manual' });
          expect(res.status, `${action}${query}`).toBe(400);
          expect(await res.text()).toContain('refused: the filter goes in the form&#39;s fields (kind, queue), not the address');
        }
      }
      expect(await t.sql('SELECT id FROM cronq_dead_letters WHERE reviewed_at IS NOT NULL')).toEqual([]);
    } finally {
      await t.sql('DELETE FROM cronq_dead_letters');
    }
  });

  it('shows the outcome an action redirected with, but not words a link from elsewhere put in ?done=', async () => {
    const forged = await (await fetch(`${base}/?done=${encodeURIComponent('Session expired: sign in again at http://evil.example')}`)).text();
    expect(forged).not.toContain('evil.example');
    expect(forged).not.toContain('class="flash"');

    const acted = await fetch(`${base}/schedules/nightly-report/pause`, { method: 'POST', headers: form, body: 'reason=quarter close', redirect: 'manual' });
    expect(acted.status).toBe(303);
    const back = await (await fetch(new URL(acted.headers.get('location')!, base))).text();
    expect(back).toMatch(/<p class="flash" role="status">paused: [^<]*quarter close/);

    // The real notice's words under another page's seal, or edited, are not shown either.
    const edited = new URL(acted.headers.get('location')!, base);
    edited.searchParams.set('done', 'paused: go to http://evil.example');
    expect(await (await fetch(edited)).text()).not.toContain('evil.example');
  });

  it('cuts a long outcome between characters, never inside an emoji, and still redirects with it', async () => {
    // One of the two reasons puts an emoji across the notice's cut, whatever the prefix's length.
    for (const reason of ['😀'.repeat(200), `x${'😀'.repeat(200)}`]) {
      await t.sql('DELETE FROM cronq_pauses');
      const acted = await fetch(`${base}/schedules/nightly-report/pause`, { method: 'POST', headers: form, body: `reason=${encodeURIComponent(reason)}`, redirect: 'manual' });
      expect(acted.status).toBe(303);
      const back = await (await fetch(new URL(acted.headers.get('location')!, base))).text();
      expect(back).toMatch(/<p class="flash" role="status">paused: [^<]*😀/);
      expect(back).not.toContain('\uFFFD');
    }
  });
});

describe('the console headers', () => {
  it('sends the pages’ no-script, no-framing, no-sniffing headers on refusals and errors too', async () => {
    const responses = [
      await fetch(`${base}/dead/1/requeue`, { method: 'POST', body: 'reason=x' }), // 403: no token
      await fetch(`${base}/dead/0`), // 400
      await fetch(`${base}/dead/requeue`, { method: 'POST', headers: form, body: 'x'.repeat(20_000) }), // 413
    ];
    for (const res of responses) {
      expect(res.headers.get('content-security-policy'), String(res.status)).toContain("frame-ancestors 'none'");
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      expect(res.headers.get('referrer-policy')).toBe('same-origin');
    }
  });
});

describe('the dead-letter page on many distinct reasons', () => {
  it('lists only the largest groups, saying there are more, so the page stays small whatever the table holds', async () => {
    // 3,000 reasons no normalisation merges (hex digests), and one group of 3 that must come first.
    await t.sql(`INSERT INTO cronq_dead_letters (job_id, queue, kind, job_key, payload, failure_reason, reason_group, attempts)
      SELECT seq, 'mail', 'send-mail', CONCAT('k', seq), '{}', CONCAT('Error: ', SHA2(seq, 256)), CONCAT('Error: ', SHA2(seq, 256)), 5 FROM seq_1_to_3000`);
    await t.sql(`INSERT INTO cronq_dead_letters (job_id, queue, kind, job_key, payload, failure_reason, reason_group, attempts)
      SELECT seq, 'mail', 'send-mail', CONCAT('big', seq), '{}', 'Error: SMTP down', 'Error: SMTP down', 5 FROM seq_3001_to_3003`);
    try {
      const res = await fetch(`${base}/dead`);
      const body = await res.text();
      expect(res.status).toBe(200);
      const groups = body.slice(body.indexOf('<h2>Groups</h2>'), body.indexOf('<h2>Oldest awaiting review</h2>'));
      const rows = groups.match(/<tr>/g)!.length - 1; // less the header row
      expect(rows).toBe(100);
      expect(groups).toMatch(/<tbody><tr><td><a [^>]*>send-mail<\/a><\/td><td>Error: SMTP down<\/td><td class="n">3<\/td>/);
      expect(body).toContain('Only the 100 largest groups are listed');
      expect(body.length).toBeLessThan(200_000);
    } finally {
      await t.sql('DELETE FROM cronq_dead_letters');
    }
  });
});

describe('the console under a flood of requests', () => {
  it('renders a couple of pages at a time, answering the excess 503, so the engine’s statements on the shared pool are not kept waiting', async () => {
    // Each /dead groups every dead letter: a slow page, as on a big table.
    await t.sql(`INSERT INTO cronq_dead_letters (job_id, queue, kind, job_key, payload, failure_reason, reason_group, attempts)
      SELECT seq, 'mail', 'send-mail', CONCAT('k', seq), '{}', CONCAT('Error: ', SHA2(seq, 256)), CONCAT('Error: ', SHA2(seq, 256)), 5 FROM seq_1_to_30000`);
    try {
      await cronq.admin.ping();
      const alone = Date.now();
      await (await fetch(`${base}/dead`)).text();
      const pageMs = Date.now() - alone;
      const flood = Array.from({ length: 60 }, () => fetch(`${base}/dead`).then(async (r) => (await r.text(), r.status)));
      await new Promise((resolve) => setTimeout(resolve, 50));
      const started = Date.now();
      await cronq.admin.ping(); // an engine statement on the same pool, as a completion would be
      const pingMs = Date.now() - started;
      const statuses = await Promise.all(flood);
      expect(statuses).toContain(200);
      expect(statuses).toContain(503);
      expect(statuses.every((s) => s === 200 || s === 503)).toBe(true);
      // At most the pages already rendering are ahead of it, not the whole flood.
      expect(pingMs).toBeLessThan(Math.max(3 * pageMs, 1_000));
    } finally {
      await t.sql('DELETE FROM cronq_dead_letters');
    }
  }, 60_000);
  it('answers every request within seconds while a table it reads is locked: one queued behind pages waiting out the lock is turned away 503, not served 10 s later', async () => {
    const holder = await mysql.createConnection({ uri: t.url });
    const wasS = TIMEOUTS.metadataLockWaitS;
    TIMEOUTS.metadataLockWaitS = 2; // read by each connection as it connects: the cronq below waits 2 s for a locked table, not 10
    const locked = createCronq({ databaseUrl: t.url, tasks: [report, mail], workers: false, scheduler: false, logger: false });
    const lockedServer = await serve(locked.admin);
    try {
      await locked.admin.ping();
      await holder.query('LOCK TABLES cronq_dead_letters WRITE');
      const started = Date.now();
      const answers = await Promise.all(
        Array.from({ length: 10 }, () => fetch(`http://127.0.0.1:${lockedServer.port}/dead/1`).then(async (r) => ({ status: r.status, body: await r.text(), ms: Date.now() - started }))),
      );
      expect(answers.map((a) => a.status)).toEqual(Array(10).fill(503));
      expect(answers.some((a) => a.body.includes('The console is busy with other requests'))).toBe(true);
      // Two at a time waited out the lock (2 s each): the last of ten was answered after 10 s.
      expect(Math.max(...answers.map((a) => a.ms))).toBeLessThan(CONSOLE_WAIT_MS + 2 * 2_000 + 1_500);
    } finally {
      await holder.query('UNLOCK TABLES');
      await holder.end();
      TIMEOUTS.metadataLockWaitS = wasS;
      await lockedServer.close();
      await locked.stop({ graceMs: 0 });
    }
  }, 30_000);
  /**
   * Locks the tables the console reads, starts `reads` (given the console's port and admin)
   * on a daemon of concurrency 1 (a pool of concurrency + 2 = 3 for the engine), waits until
   * `waiting` of them wait for the lock, then times an engine statement on the same pool,
   * as a completion would be: under 1.5 s means the reads left the engine its connections.
   */
  async function engineStatementMsWhile(reads: (port: number, admin: Cronq['admin']) => Array<Promise<unknown>>, waiting: number): Promise<number> {
    const holder = await mysql.createConnection({ uri: t.url });
    const wasS = TIMEOUTS.metadataLockWaitS;
    TIMEOUTS.metadataLockWaitS = 4; // read by each connection as it connects
    const small = createCronq({ databaseUrl: t.url, tasks: [report, mail], concurrency: 1, workers: false, scheduler: false, logger: false });
    const smallServer = await serve(small.admin);
    try {
      await small.admin.ping();
      await holder.query('LOCK TABLES cronq_dead_letters WRITE, cronq_schedule_ticks WRITE');
      const started = reads(smallServer.port, small.admin);
      const waitingNow = async () => {
        const [list] = await holder.query<any[]>(`SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE STATE = 'Waiting for table metadata lock' AND DB = DATABASE()`);
        return Number(list[0].n);
      };
      while ((await waitingNow()) < waiting) await new Promise((resolve) => setImmediate(resolve));
      const at = Date.now();
      await small.admin.ping();
      const ms = Date.now() - at;
      await Promise.all(started);
      return ms;
    } finally {
      await holder.query('UNLOCK TABLES');
      await holder.end();
      TIMEOUTS.metadataLockWaitS = wasS;
      await smallServer.close();
      await small.stop({ graceMs: 0 });
    }
  }
  const page = (port: number, path: string) => fetch(`http://127.0.0.1:${port}${path}`).then((r) => r.text(), () => null);

  it.each([['/dead'], ['/']])('holds at most one connection of the engine’s pool per page: two %s pages waiting out locked tables leave a small pool (concurrency 1) free for the engine', async (path) => {
    // Each page has two reads that need these tables (/dead its groups and its oldest
    // letters, / the counts and last ticks, and the schedules' health); read in parallel,
    // two pages waited with all three connections, and the engine's statement with them.
    expect(await engineStatementMsWhile((port) => [page(port, path), page(port, path)], 2)).toBeLessThan(1_500);
  }, 30_000);
  it('leaves a small pool (concurrency 1) free for the engine while two console pages and a /metrics collection wait out locked tables', async () => {
    // Before the console had connections of its own, these three reads held the whole pool of 3.
    const reads = (port: number, admin: Cronq['admin']) => [page(port, '/dead'), page(port, '/dead'), admin.stats().catch(() => null)]; // stats: what a /metrics collection reads
    expect(await engineStatementMsWhile(reads, 3)).toBeLessThan(1_500);
  }, 30_000);
});

describe('ConsoleGate', () => {
  it('turns a request away once it has queued for `waitMs`, and hands a later release to the next waiter, not to it', async () => {
    const gate = new ConsoleGate({ running: 1, waiting: 2, waitMs: 50 });
    const first = await gate.enter();
    expect(await gate.enter()).toBeNull(); // queued 50 ms, never let in
    const later = gate.enter();
    first!();
    const release = await later;
    expect(release).not.toBeNull();
    expect(await gate.enter()).toBeNull(); // the one slot is still held: it waited and was turned away
    release!();
    expect(await gate.enter()).not.toBeNull();
  });
  it('admits `running` at once, queues `waiting` in arrival order, turns the rest away, and hands a released slot to the next', async () => {
    const gate = new ConsoleGate({ running: 1, waiting: 2 });
    const first = await gate.enter();
    const order: string[] = [];
    const second = gate.enter().then((release) => (order.push('second'), release));
    const third = gate.enter().then((release) => (order.push('third'), release));
    expect(await gate.enter()).toBeNull();
    first!();
    first!(); // a second release of the same slot frees nothing more
    const secondRelease = await second;
    expect(order).toEqual(['second']);
    secondRelease!();
    (await third)!();
    expect(order).toEqual(['second', 'third']);
    // All slots free again: one runs at once, two may queue.
    const again = await gate.enter();
    expect(again).not.toBeNull();
  });
});

describe('the console and other methods', () => {
  it.each(['PUT', 'DELETE', 'PATCH', 'OPTIONS'])('answers %s with 405 naming the methods it serves, changing nothing', async (method) => {
    const res = await fetch(`${base}/schedules/nightly-report/pause`, { method, headers: form, body: method === 'OPTIONS' ? undefined : 'reason=x' });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('GET, HEAD, POST');
    expect(await t.sql('SELECT * FROM cronq_pauses')).toEqual([]);
  });
});

describe('console sessions', () => {
  const HOUR = 3_600_000;
  const cookieOf = (session: string) => ({ cookie: `cronq_console=${session}` });

  it('last 12 hours from sign-in: an older session, a tampered or future issue time, or another token’s session acts as nobody', () => {
    const a = auth();
    const signedIn = Date.UTC(2026, 11, 1, 8, 0, 0);
    const session = a.session(signedIn);
    expect(a.operatorOf(cookieOf(session), signedIn + 11 * HOUR + 59 * 60_000)).toMatchObject({ name: 'ops', via: 'cookie', session });
    expect(a.operatorOf(cookieOf(session), signedIn + 12 * HOUR + 1_000)).toBeNull();
    const [issued, nonce, mac] = session.split('.');
    expect(a.operatorOf(cookieOf(`${Number(issued) + 3_600}.${nonce}.${mac}`), signedIn + 13 * HOUR)).toBeNull(); // re-dated: its HMAC no longer matches
    expect(a.operatorOf(cookieOf(a.session(signedIn + HOUR)), signedIn)).toBeNull(); // issued an hour ahead of this clock
    expect(a.operatorOf(cookieOf(a.session(signedIn + 60_000)), signedIn)).not.toBeNull(); // a minute ahead: clocks differ that much
    const other = new ConsoleAuth({ name: 'ops', secret: 'another-secret-of-enough-length' });
    expect(a.operatorOf(cookieOf(other.session(signedIn)), signedIn)).toBeNull();
    expect(a.operatorOf(cookieOf(`${issued}.${nonce}.${mac}x`), signedIn)).toBeNull();
    // A cookie of the form before sign-outs were recorded (no nonce), from a daemon not yet upgraded, holds until it expires.
    const older = `${issued}.${createHmac('sha256', TOKEN.slice(4)).update(`session:ops:${issued}`).digest('base64url')}`;
    expect(a.operatorOf(cookieOf(older), signedIn)).toMatchObject({ via: 'cookie', session: older });
    expect(a.operatorOf(cookieOf(older), signedIn + 12 * HOUR + 1_000)).toBeNull();
    // One spelling per session, as a sign-out names the cookie's hash: its time with leading zeros is no session.
    for (const respelt of [`0${session}`, `00${session}`, `0${older}`]) expect(a.operatorOf(cookieOf(respelt), signedIn), respelt).toBeNull();
    // Each session's forms carry its own CSRF token.
    const later = a.session(signedIn + 60_000);
    expect(a.csrfMatches(a.csrf(session), session)).toBe(true);
    expect(a.csrfMatches(a.csrf(later), session)).toBe(false);
    expect(a.csrfMatches(a.csrf(session), undefined)).toBe(false);
  });

  it('sets a cookie that expires with the session, and refuses an action from a session past it', async () => {
    const res = await fetch(`${base}/login`, { method: 'POST', redirect: 'manual', body: `token=${encodeURIComponent(TOKEN)}`, headers: { 'Content-Type': 'application/x-www-form-urlencoded' } });
    expect(res.status).toBe(303);
    expect(res.headers.get('set-cookie')).toMatch(/^cronq_console=\d+\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]+; Path=\/; HttpOnly; SameSite=Strict; Max-Age=43200$/);
    const expired = auth().session(Date.now() - 13 * HOUR);
    const post = await fetch(`${base}/schedules/nightly-report/pause`, {
      method: 'POST',
      redirect: 'manual',
      body: `reason=x&csrf=${auth().csrf(expired)}`,
      headers: { 'Content-Type': 'application/x-www-form-urlencoded', Cookie: `cronq_console=${expired}`, Origin: base },
    });
    expect(post.status).toBe(403);
    expect(await post.text()).toMatch(/sign in with the console token first/);
    expect(await t.sql('SELECT * FROM cronq_pauses')).toEqual([]);
  });
});

describe('signing out of the console', () => {
  const formPost = (url: string, path: string, body: string, cookie?: string) =>
    fetch(`${url}${path}`, { method: 'POST', redirect: 'manual', body, headers: { 'Content-Type': 'application/x-www-form-urlencoded', Origin: url, ...(cookie ? { Cookie: cookie } : {}) } });
  const signIn = async (url: string) => {
    const res = await formPost(url, '/login', `token=${encodeURIComponent(TOKEN)}`);
    expect(res.status).toBe(303);
    return res.headers.get('set-cookie')!.split(';')[0];
  };
  const pause = (url: string, cookie: string) => formPost(url, '/schedules/nightly-report/pause', `reason=x&csrf=${auth().csrf(cookie.split('=')[1])}`, cookie);
  const signedInAs = async (url: string, cookie: string) => /signed in as <strong>ops<\/strong>/.test(await (await fetch(`${url}/`, { headers: { Cookie: cookie } })).text());

  it('revokes the session on every console of the database: a copy of the old cookie then acts as nobody, on another daemon too, while another session goes on', async () => {
    // Two daemons' consoles behind one address: each its own process state, one database.
    const other = await serve(cronq.admin);
    const otherBase = `http://127.0.0.1:${other.port}`;
    try {
      const copied = await signIn(base);
      const kept = await signIn(otherBase);
      expect(copied).not.toBe(kept); // two sign-ins in one second are two sessions
      expect(await signedInAs(otherBase, copied)).toBe(true);
      const out = await formPost(base, '/logout', '', copied);
      expect(out.status).toBe(303);
      expect(out.headers.get('set-cookie')).toMatch(/^cronq_console=; .*Max-Age=0$/);
      for (const url of [base, otherBase]) {
        expect(await signedInAs(url, copied)).toBe(false);
        const refused = await pause(url, copied);
        expect(refused.status).toBe(403);
        expect(await refused.text()).toMatch(/this session was signed out; sign in again/);
      }
      expect(await t.sql('SELECT * FROM cronq_pauses')).toEqual([]);
      // Nor does a failed sign-in carrying the old cookie show it as signed in.
      const wrong = await formPost(base, '/login', 'token=ops%3Anot-the-secret-at-all', copied);
      expect(wrong.status).toBe(403);
      expect(await wrong.text()).not.toMatch(/signed in as <strong>ops<\/strong>/);
      expect(await signedInAs(base, kept)).toBe(true);
      expect((await pause(base, kept)).status).toBe(303);
      // The record is kept until the session would have expired anyway, never the cookie itself.
      const [row] = await t.sql('SELECT session_hash, expires_at FROM cronq_console_sign_outs');
      expect(row.session_hash).toMatch(/^[0-9a-f]{64}$/);
      expect(row.session_hash).not.toContain(copied.split('=')[1]);
      expect(new Date(row.expires_at).getTime() - Date.now()).toBeGreaterThan(11.9 * 3_600_000);
    } finally {
      await other.close();
      await t.sql('DELETE FROM cronq_console_sign_outs');
    }
  });

  it('refuses a signed-out cookie re-written with zeros before its sign-in time: the same session, not a new one that got past its sign-out', async () => {
    const cookie = await signIn(base);
    const [, value] = cookie.split('=');
    expect((await formPost(base, '/logout', '', cookie)).status).toBe(303);
    try {
      for (const padded of [`0${value}`, `00${value}`]) {
        const copy = `cronq_console=${padded}`;
        // Without the secret: a page signed in as the copy would hand out its forms' CSRF token.
        const page = await (await fetch(`${base}/schedules`, { headers: { Cookie: copy } })).text();
        expect(page, padded).not.toMatch(/signed in as <strong>ops<\/strong>/);
        expect(page, padded).not.toMatch(/name="csrf"/);
        const refused = await formPost(base, '/schedules/nightly-report/pause', `reason=x&csrf=${auth().csrf(padded)}`, copy);
        expect(refused.status, padded).toBe(403);
      }
      // A fresh session is never issued with one either, so none is turned away.
      expect((await signIn(base)).split('=')[1]).toMatch(/^[1-9]/);
      expect(await t.sql('SELECT * FROM cronq_pauses')).toEqual([]);
    } finally {
      await t.sql('DELETE FROM cronq_console_sign_outs');
    }
  });

  it("refuses a signed-out cookie on a daemon whose clock is behind the database's once its sign-out is pruned: a session expires by the database's clock", async () => {
    const HOUR = 3_600_000;
    const token = { name: 'ops', secret: TOKEN.slice(4) };
    // Signed in 12 h 15 min ago (this host's clock is the database's here) and signed out an hour after.
    const signedInMs = Date.now() - 12 * HOUR - 15 * 60_000;
    const cookie = `cronq_console=${auth().session(signedInMs)}`;
    const then = await serve(cronq.admin, new ConsoleAuth(token, () => signedInMs + HOUR));
    // A daemon whose clock is 30 minutes behind: by it, the session is 11 h 45 min old.
    const behind = await serve(cronq.admin, new ConsoleAuth(token, () => Date.now() - 30 * 60_000));
    try {
      expect((await formPost(`http://127.0.0.1:${then.port}`, '/logout', '', cookie)).status).toBe(303);
      // Another sign-out prunes the first, past its expiry by the database's clock.
      expect((await formPost(base, '/logout', '', await signIn(base))).status).toBe(303);
      expect(await t.sql('SELECT * FROM cronq_console_sign_outs WHERE session_hash = ?', [sessionHash(cookie.split('=')[1])])).toEqual([]);
      const behindBase = `http://127.0.0.1:${behind.port}`;
      expect(await signedInAs(behindBase, cookie)).toBe(false);
      const refused = await pause(behindBase, cookie);
      expect(refused.status).toBe(403);
      expect(await refused.text()).toMatch(/refused: this session has expired; sign in again/);
      expect(await t.sql('SELECT * FROM cronq_pauses')).toEqual([]);
      // Nor does it take a session past 12 hours by the database's clock that nobody signed out; a younger one it takes.
      expect(await signedInAs(behindBase, `cronq_console=${auth().session(Date.now() - 12 * HOUR - 60_000)}`)).toBe(false);
      expect(await signedInAs(behindBase, `cronq_console=${auth().session(Date.now() - 11 * HOUR)}`)).toBe(true);
    } finally {
      await then.close();
      await behind.close();
      await t.sql('DELETE FROM cronq_console_sign_outs');
    }
  });

  it('prunes sign-outs past their expiry when it records one', async () => {
    await t.sql("INSERT INTO cronq_console_sign_outs (session_hash, expires_at) VALUES (REPEAT('a', 64), UTC_TIMESTAMP(6) - INTERVAL 1 SECOND), (REPEAT('b', 64), UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)");
    const cookie = await signIn(base);
    expect((await formPost(base, '/logout', '', cookie)).status).toBe(303);
    // Whole hashes compared: the new session's own hash starts with 'a' one time in 16.
    const left = (await t.sql('SELECT session_hash FROM cronq_console_sign_outs')).map((r) => r.session_hash).sort();
    expect(left).toEqual(['b'.repeat(64), sessionHash(cookie.split('=')[1])].sort());
    await t.sql('DELETE FROM cronq_console_sign_outs');
  });
});

describe('guessing the console token', () => {
  const login = (url: string, token: string) =>
    fetch(`${url}/login`, { method: 'POST', redirect: 'manual', body: `token=${encodeURIComponent(token)}`, headers: { 'Content-Type': 'application/x-www-form-urlencoded' } });

  it('turns an address away with 429 and Retry-After after ten wrong tokens, the right one included, while its pages stay readable', async () => {
    const s = await serve(cronq.admin);
    const url = `http://127.0.0.1:${s.port}`;
    try {
      for (let i = 0; i < 5; i++) expect((await login(url, `ops:wrong-guess-number-${i}`)).status).toBe(403);
      for (let i = 0; i < 5; i++) {
        const res = await fetch(`${url}/`, { headers: { Authorization: `Bearer ops:another-wrong-guess-${i}` } });
        expect(res.status).toBe(200); // read-only, as without a token
      }
      const refused = await login(url, TOKEN);
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(55);
      expect(await refused.text()).toMatch(/Too many wrong console tokens from this address; try again in \d+ s\./);
      const bearerRefused = await fetch(`${url}/schedules/nightly-report/pause`, { method: 'POST', headers: form, body: 'reason=x', redirect: 'manual' });
      expect(bearerRefused.status).toBe(429);
      expect(await t.sql('SELECT * FROM cronq_pauses')).toEqual([]);
      expect((await fetch(`${url}/schedules`)).status).toBe(200);
    } finally {
      await s.close();
    }
  });

  it('counts login forms sent at once: their tokens are checked against the limit once their bodies arrive, not only when their headers did', async () => {
    const s = await serve(cronq.admin);
    try {
      // Each request's headers are answered `100 Continue` (so the console has seen them)
      // before any body is sent: all fifteen pass the look at the headers together.
      const sockets = await Promise.all(
        Array.from({ length: 15 }, (_, i) => {
          const body = `token=ops%3Aparallel-wrong-guess-${String(i).padStart(2, '0')}`;
          return new Promise<{ send: () => Promise<string> }>((resolve, reject) => {
            const socket = connectSocket(s.port, '127.0.0.1');
            let text = '';
            const done = new Promise<string>((ended) => socket.on('end', () => ended(text)));
            socket.on('error', reject);
            socket.on('data', (chunk) => {
              text += chunk.toString('latin1');
              if (text.startsWith('HTTP/1.1 100')) resolve({ send: () => (socket.write(body), done) });
            });
            socket.write(
              `POST /login HTTP/1.1\r\nHost: 127.0.0.1:${s.port}\r\nConnection: close\r\nContent-Type: application/x-www-form-urlencoded\r\n` +
                `Content-Length: ${body.length}\r\nExpect: 100-continue\r\n\r\n`,
            );
          });
        }),
      );
      const answers = await Promise.all(sockets.map((socket) => socket.send()));
      const statuses = answers.map((text) => Number(/HTTP\/1\.1 (?!100)(\d{3})/.exec(text)?.[1]));
      expect(statuses.filter((status) => status === 403)).toHaveLength(10);
      expect(statuses.filter((status) => status === 429)).toHaveLength(5);
    } finally {
      await s.close();
    }
  });

  it('counts an IPv6 client by its /64 network, as one host is usually given a whole /64, and an IPv4-mapped address as the IPv4 one', () => {
    const limit = new SignInLimit({ failures: 3, windowMs: 60_000, addresses: 100 }, () => 0);
    limit.failed('2001:db8:1:2::1');
    limit.failed('2001:0DB8:0001:0002:ffff:0:0:9');
    limit.failed('2001:db8:1:2:3:4:5.6.7.8');
    expect(limit.retryAfterS('2001:db8:1:2::abcd')).toBe(60);
    expect(limit.retryAfterS('2001:db8:1:3::1')).toBe(0);
    limit.failed('::ffff:192.0.2.7');
    limit.failed('192.0.2.7');
    limit.failed('::ffff:192.0.2.7');
    expect(limit.retryAfterS('192.0.2.7')).toBe(60);
    expect(limit.retryAfterS('192.0.2.8')).toBe(0);
  });

  it('counts per address and per window, starts over on the right token, and remembers a bounded number of addresses', () => {
    let now = 0;
    const limit = new SignInLimit({ failures: 3, windowMs: 1_000, addresses: 2 }, () => now);
    for (let i = 0; i < 3; i++) limit.failed('a');
    expect(limit.retryAfterS('a')).toBe(1);
    expect(limit.retryAfterS('b')).toBe(0);
    now = 999;
    expect(limit.retryAfterS('a')).toBe(1);
    now = 1_000;
    expect(limit.retryAfterS('a')).toBe(0);
    limit.failed('b');
    limit.failed('b');
    limit.succeeded('b');
    limit.failed('b');
    limit.failed('b');
    expect(limit.retryAfterS('b')).toBe(0);
    limit.failed('b');
    expect(limit.retryAfterS('b')).toBe(1);
    limit.failed('c');
    limit.failed('d'); // a third address: the oldest ('b') is forgotten
    expect(limit.retryAfterS('b')).toBe(0);
  });
});
