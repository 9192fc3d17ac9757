import { createServer, connect as tcpConnect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { request as httpRequest } from 'node:http';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CronqHealth } from '../src/cronq.ts';
import { UsageError } from '../src/errors.ts';
import { parseHttpAddress } from '../src/http/address.ts';
import { HealthCheck, type HealthReport } from '../src/http/health.ts';
import { CronqMetrics, MAX_KIND_SERIES } from '../src/http/metrics.ts';
import { startHttpServer, type HttpServer } from '../src/http/server.ts';
import { silentLogger } from '../src/logger.ts';
import type { JobStatus } from '../src/db/schema.ts';
import type { Stats } from '../src/store/stats.ts';
import { DaemonProcess, runCli } from './support/cli.ts';
import { EventLog } from './support/events.ts';
import { useTestDatabase } from './support/db.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_dead_letters'] });
let env: Record<string, string>;
let daemons: DaemonProcess[] = [];
const servers: HttpServer[] = [];

// Registered after useTestDatabase, so (hooks unwind as a stack) it runs before the drop.
afterAll(async () => {
  await Promise.all(daemons.map((d) => d.kill()));
  await Promise.all(servers.map((s) => s.close()));
});
// A test's daemons are gone before the next test empties the tables.
afterEach(async () => {
  await Promise.all(daemons.map((d) => d.kill()));
  daemons = [];
});
beforeEach(async () => {
  env = { DATABASE_URL: t.url, CRONQ_SCHEDULES: 'test/fixtures/schedules-daemon', LOG_LEVEL: 'info' };
});

function daemon(args: string[], extra: Record<string, string> = {}): DaemonProcess {
  const d = new DaemonProcess(['--poll', '50ms', '--http', '127.0.0.1:0', ...args], { ...env, ...extra });
  daemons.push(d);
  return d;
}

/** The daemon's base URL once its engine has started (it binds before, answering 503 until then). */
async function listening(d: DaemonProcess): Promise<string> {
  const [event] = await d.waitFor('http_listening');
  await d.waitFor('daemon_started');
  return `http://127.0.0.1:${event.port}`;
}

/** The value of one sample line (`name{labels} value`) in Prometheus text, or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

const okHealth = (over: Partial<CronqHealth> = {}): CronqHealth => ({
  database: true,
  databaseLastOkAt: Date.now(),
  workers: true,
  lastClaimLoopAt: Date.now(),
  scheduler: null,
  oldestRunningJobAgeMs: 0,
  ...over,
});

const report = (over: Partial<HealthReport> = {}): HealthReport => ({
  status: 'ok',
  database: true,
  workers: true,
  scheduler: null,
  claimLoopAgeMs: 3,
  databaseOkAgeMs: 3,
  ...over,
});

describe('parseHttpAddress', () => {
  it('reads host and port, IPv6 in brackets, port 0 for any free port', () => {
    expect(parseHttpAddress('127.0.0.1:9464', '--http')).toEqual({ host: '127.0.0.1', port: 9464 });
    expect(parseHttpAddress('0.0.0.0:1', '--http')).toEqual({ host: '0.0.0.0', port: 1 });
    expect(parseHttpAddress('localhost:65535', '--http')).toEqual({ host: 'localhost', port: 65535 });
    expect(parseHttpAddress('[::1]:9464', '--http')).toEqual({ host: '::1', port: 9464 });
    expect(parseHttpAddress('127.0.0.1:0', '--http')).toEqual({ host: '127.0.0.1', port: 0 });
  });

  it.each(['9464', ':9464', '127.0.0.1', '127.0.0.1:', '127.0.0.1:65536', '127.0.0.1:-1', '::1:9464', 'bad host:80', '[nope]:80', 'a_b:80'])(
    'refuses %j with one line naming the flag',
    (value) => {
      expect(() => parseHttpAddress(value, '--http')).toThrow(UsageError);
      expect(() => parseHttpAddress(value, '--http')).toThrow(/^--http must be HOST:PORT, e\.g\. 127\.0\.0\.1:9464 \(got/);
    },
  );
});

describe('parseHttpAddress reasons', () => {
  it.each([
    ['0.0.0.0:abc', 'the port must be 1-65535 (0: any free port)'],
    ['127.0.0.1:-1', 'the port must be 1-65535 (0: any free port)'],
    ['localhost:9464x', 'the port must be 1-65535 (0: any free port)'],
    ['[::1]:http', 'the port must be 1-65535 (0: any free port)'],
    ['::1:9464', 'an IPv6 host needs brackets, [::1]:9464'],
    ['127.0.0.1', 'no port'],
    ['http://127.0.0.1:9464', 'an address, not a URL: leave out http://'],
    ['https://localhost:9464/metrics', 'an address, not a URL: leave out https://'],
  ])('%j is refused for what is wrong with it: %s', (value, why) => {
    expect(() => parseHttpAddress(value, '--http')).toThrow(`--http must be HOST:PORT, e.g. 127.0.0.1:9464 (got '${value}': ${why})`);
  });
});

describe('HealthCheck', () => {
  it('is ok while the engine answers, the claim loop goes round and the scheduler runs', async () => {
    const check = new HealthCheck({ health: () => okHealth({ scheduler: true }), ping: async () => true, pollMs: 200 });
    expect(await check.report()).toMatchObject({ status: 'ok', database: true, workers: true, scheduler: true });
  });

  it('reports the failing part false and the status unavailable', async () => {
    const now = Date.now();
    const stale = new HealthCheck({ health: () => okHealth({ lastClaimLoopAt: now - 5_001 }), ping: async () => true, pollMs: 200, now: () => now });
    expect(await stale.report()).toMatchObject({ status: 'unavailable', database: true, workers: false, claimLoopAgeMs: 5_001 });
    // A slow poll stretches the limit to 3 × poll.
    const slowPoll = new HealthCheck({ health: () => okHealth({ lastClaimLoopAt: now - 5_001 }), ping: async () => true, pollMs: 2_000, now: () => now });
    expect(await slowPoll.report()).toMatchObject({ status: 'ok', workers: true });
    const dbDown = new HealthCheck({ health: () => okHealth({ database: false }), ping: async () => true, pollMs: 200 });
    expect(await dbDown.report()).toMatchObject({ status: 'unavailable', database: false, workers: true });
    const stopped = new HealthCheck({ health: () => okHealth({ workers: null, lastClaimLoopAt: null, scheduler: false }), ping: async () => true, pollMs: 200 });
    expect(await stopped.report()).toMatchObject({ status: 'unavailable', workers: null, scheduler: false });
  });

  it('pings the database when no engine statement succeeded lately, and trusts a good ping for a while', async () => {
    let now = Date.now();
    let pings = 0;
    let answers = false;
    const check = new HealthCheck({
      health: () => okHealth({ databaseLastOkAt: now - 60_000, workers: null, lastClaimLoopAt: null, scheduler: true }),
      ping: async () => {
        pings += 1;
        return answers;
      },
      pollMs: 200,
      now: () => now,
    });
    expect(await check.report()).toMatchObject({ status: 'unavailable', database: false });
    answers = true;
    expect(await check.report()).toMatchObject({ status: 'ok', database: true, databaseOkAgeMs: 0 });
    now += 1_000;
    expect(await check.report()).toMatchObject({ status: 'ok', database: true, databaseOkAgeMs: 1_000 });
    expect(pings).toBe(2);
  });
});

describe('CronqMetrics', () => {
  // Only the sections the metrics read; Stats may grow more.
  const stats = {
    queues: [{ queue: 'default', ready: 2, reserved: 1, done: 5, dead: 1, cancelled: 3, capped: [] as JobStatus[], oldestReadyAgeSeconds: 1.5 }],
    deadLetters: { awaitingReview: 1, capped: false },
    schedules: [
      {
        schedule: 'nightly',
        lastTick: { scheduledAt: '2026-11-30T02:00:00.000Z', periodKey: '2026-11-30', outcome: 'enqueued', caughtUp: false, finishedAt: null },
        latenessMs: 250,
      },
    ],
  } as Stats;

  it('reads the database once per scrape and reports what the engine observed', async () => {
    let collects = 0;
    const metrics = new CronqMetrics({ collect: async () => (collects++, stats) });
    metrics.jobClaimed(3);
    metrics.jobCompleted('report', 0.2);
    metrics.jobFailed('report', true);
    metrics.jobFailed('report', false);
    metrics.jobDead('report');
    metrics.leaseLost('report');
    metrics.leasesRecovered(2, 1);
    metrics.shutdownReleased(1);
    metrics.tick('nightly', 1_500, 4);
    const [a, b] = await Promise.all([metrics.scrape(), metrics.scrape()]);
    expect(collects).toBe(1);
    expect(b.body).toBe(a.body);
    expect(a.contentType).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = a.body;
    for (const [series, value] of [
      ['cronq_jobs_claimed_total', 3],
      ['cronq_jobs_completed_total{kind="report"}', 1],
      ['cronq_jobs_failed_total{kind="report",retry="true"}', 1],
      ['cronq_jobs_failed_total{kind="report",retry="false"}', 1],
      ['cronq_jobs_dead_total{kind="report"}', 1],
      ['cronq_leases_lost_total{kind="report"}', 1],
      ['cronq_leases_recovered_total{outcome="returned"}', 2],
      ['cronq_leases_recovered_total{outcome="dead"}', 1],
      ['cronq_jobs_released_on_shutdown_total', 1],
      ['cronq_job_duration_seconds_count{kind="report"}', 1],
      ['cronq_schedule_ticks_total{schedule="nightly"}', 1],
      ['cronq_schedule_jobs_enqueued_total{schedule="nightly"}', 4],
      ['cronq_schedule_tick_lateness_seconds_sum{schedule="nightly"}', 1.5],
      ['cronq_jobs{queue="default",status="ready"}', 2],
      ['cronq_jobs{queue="default",status="done"}', 5],
      ['cronq_jobs{queue="default",status="cancelled"}', 3],
      ['cronq_queue_oldest_ready_age_seconds{queue="default"}', 1.5],
      ['cronq_dead_letters_awaiting_review', 1],
      ['cronq_schedule_last_tick_timestamp_seconds{schedule="nightly"}', Date.parse('2026-11-30T02:00:00Z') / 1000],
      ['cronq_schedule_last_tick_lateness_seconds{schedule="nightly"}', 0.25],
      ['cronq_database_up', 1],
    ] as const) {
      expect(sample(text, series), series).toBe(value);
    }
    for (const line of text.split('\n').filter((l) => l && !l.startsWith('#'))) expect(line).toMatch(/^cronq_/);
    await metrics.scrape();
    expect(collects).toBe(2);
  });

  it('still answers when the database does not: counters kept, database gauges absent, cronq_database_up 0', async () => {
    let down = false;
    const metrics = new CronqMetrics({
      collect: async () => {
        if (down) throw new Error('ECONNREFUSED');
        return stats;
      },
    });
    metrics.jobClaimed(1);
    await metrics.scrape();
    down = true;
    const { body } = await metrics.scrape();
    expect(sample(body, 'cronq_database_up')).toBe(0);
    expect(sample(body, 'cronq_jobs_claimed_total')).toBe(1);
    expect(sample(body, 'cronq_jobs{queue="default",status="ready"}')).toBeUndefined();
    expect(sample(body, 'cronq_dead_letters_awaiting_review')).toBeUndefined();
    expect(sample(body, 'cronq_pauses_empty_name')).toBeUndefined();
  });

  it('keeps a bounded number of kind series, counting the kinds past the bound under kind="(other kinds)"', async () => {
    // Kinds come from whoever enqueues (--allow-unknown-kind): each one that went dead would add series for good.
    const metrics = new CronqMetrics({ collect: async () => stats });
    const kinds = Array.from({ length: MAX_KIND_SERIES + 5 }, (_, i) => `typo-${i}`);
    for (const kind of kinds) {
      metrics.jobFailed(kind, false);
      metrics.jobDead(kind);
    }
    metrics.jobCompleted('typo-0', 0.1); // a kind seen before keeps its own series
    const { body } = await metrics.scrape();
    const deadSeries = body.split('\n').filter((line) => line.startsWith('cronq_jobs_dead_total{'));
    expect(deadSeries).toHaveLength(MAX_KIND_SERIES + 1);
    expect(sample(body, 'cronq_jobs_dead_total{kind="(other kinds)"}')).toBe(5);
    expect(sample(body, 'cronq_jobs_failed_total{kind="(other kinds)",retry="false"}')).toBe(5);
    expect(sample(body, `cronq_jobs_dead_total{kind="typo-${MAX_KIND_SERIES - 1}"}`)).toBe(1);
    expect(sample(body, 'cronq_jobs_completed_total{kind="typo-0"}')).toBe(1);
  });

  it('treats a collect slower than its timeout as the database being down', async () => {
    const metrics = new CronqMetrics({ collect: () => new Promise<Stats>(() => {}), collectTimeoutMs: 50 });
    expect(sample((await metrics.scrape()).body, 'cronq_database_up')).toBe(0);
  });
});

describe('the HTTP server', () => {
  async function serve(health: () => Promise<HealthReport>): Promise<string> {
    const server = await startHttpServer(
      { host: '127.0.0.1', port: 0 },
      { health, metrics: async () => ({ contentType: 'text/plain; version=0.0.4; charset=utf-8', body: 'cronq_up 1\n' }) },
      silentLogger(),
    );
    servers.push(server);
    return `http://127.0.0.1:${server.port}`;
  }

  it('answers /healthz 200 with the report when ok, 503 with the same shape when a part is down', async () => {
    let current = report();
    const base = await serve(async () => current);
    const ok = await fetch(`${base}/healthz`);
    expect(ok.status).toBe(200);
    expect(ok.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(await ok.json()).toEqual(current);
    current = report({ status: 'unavailable', database: false });
    const down = await fetch(`${base}/healthz?verbose=1`);
    expect(down.status).toBe(503);
    expect(await down.json()).toEqual(current);
  });

  it('serves /metrics with its content type, 404 elsewhere, 405 for other methods', async () => {
    const base = await serve(async () => report());
    const metrics = await fetch(`${base}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(await metrics.text()).toBe('cronq_up 1\n');
    expect((await fetch(`${base}/`)).status).toBe(404);
    expect((await fetch(`${base}/healthz/x`)).status).toBe(404);
    const post = await fetch(`${base}/healthz`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
  });

  it('answers 500 when a source throws, and keeps serving', async () => {
    let fail = true;
    const base = await serve(async () => {
      if (fail) throw new Error('boom');
      return report();
    });
    expect((await fetch(`${base}/healthz`)).status).toBe(500);
    fail = false;
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
  });

  it('logs at most errorLogLimit http_error lines per window, each path cut short, then one line counting those left out', async () => {
    const log = new EventLog('info');
    const server = await startHttpServer(
      { host: '127.0.0.1', port: 0 },
      { health: async () => report(), metrics: async () => Promise.reject(new Error('boom')) },
      log.logger,
      { errorLogLimit: { lines: 3, windowMs: 300 } },
    );
    servers.push(server);
    const long = `/metrics?${'x'.repeat(8_000)}`;
    for (let i = 0; i < 20; i += 1) expect((await fetch(`http://127.0.0.1:${server.port}${long}`)).status).toBe(500);
    const [summary] = await log.waitFor('http_errors_suppressed');
    expect(summary).toMatchObject({ level: 40, suppressed: 17 });
    expect(log.named('http_error')).toHaveLength(3);
    for (const line of log.named('http_error')) expect(line.path.length).toBeLessThanOrEqual(121);
    // The next window logs again.
    expect((await fetch(`http://127.0.0.1:${server.port}/metrics`)).status).toBe(500);
    await log.waitFor('http_error', 4);
  });

  it('logs the host it really listens on: 0.0.0.0 for --http 0:PORT', async () => {
    const log = new EventLog('info');
    const server = await startHttpServer({ host: '0', port: 0 }, { health: async () => report(), metrics: async () => ({ contentType: 'text/plain', body: '' }) }, log.logger);
    servers.push(server);
    expect(server.host).toBe('0.0.0.0');
    const [event] = await log.waitFor('http_listening');
    expect(event).toMatchObject({ host: '0.0.0.0', port: server.port });
  });

  it('answers 503 on every path while the daemon is starting, then serves', async () => {
    let starting = true;
    const server = await startHttpServer(
      { host: '127.0.0.1', port: 0 },
      { health: async () => report(), metrics: async () => ({ contentType: 'text/plain', body: 'm 1\n' }), starting: () => starting },
      silentLogger(),
    );
    servers.push(server);
    const base = `http://127.0.0.1:${server.port}`;
    const health = await fetch(`${base}/healthz`);
    expect([health.status, health.headers.get('retry-after'), await health.json()]).toEqual([503, '1', { status: 'starting' }]);
    const metrics = await fetch(`${base}/metrics`);
    expect([metrics.status, await metrics.text()]).toEqual([503, 'starting\n']);
    starting = false;
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect(await (await fetch(`${base}/metrics`)).text()).toBe('m 1\n');
  });

  it('on loopback, answers only requests naming a loopback host: a page that rebinds its own name to 127.0.0.1 reads nothing', async () => {
    const endpoints = { health: async () => report(), metrics: async () => ({ contentType: 'text/plain', body: 'cronq_up 1\n' }) };
    const local = await startHttpServer({ host: '127.0.0.1', port: 0 }, endpoints, silentLogger());
    const everywhere = await startHttpServer({ host: '0.0.0.0', port: 0 }, endpoints, silentLogger());
    servers.push(local, everywhere);
    const status = (port: number, path: string, host: string) =>
      new Promise<number>((resolve, reject) => {
        const req = httpRequest({ host: '127.0.0.1', port, path, headers: { host } }, (res) => {
          res.resume();
          resolve(res.statusCode!);
        });
        req.on('error', reject);
        req.end();
      });
    for (const path of ['/healthz', '/metrics', '/']) {
      for (const foreign of ['evil.example', `evil.example:${local.port}`, 'localhost.evil.example', '127.0.0.1.evil.example', '[::2]', '[::1]evil.example', '[::1]:80, evil.example', 'localhost:80:80']) {
        expect(await status(local.port, path, foreign), `${path} ${foreign}`).toBe(403);
      }
    }
    for (const own of [`127.0.0.1:${local.port}`, 'localhost', `LOCALHOST:${local.port}`, 'app.localhost', `[::1]:${local.port}`, '127.1.2.3']) {
      expect(await status(local.port, '/healthz', own), own).toBe(200);
    }
    expect(await status(everywhere.port, '/healthz', 'evil.example')).toBe(200); // reachable from the network anyway
  });

  it('refuses an address in use with one line naming it', async () => {
    const first = await startHttpServer({ host: '127.0.0.1', port: 0 }, { health: async () => report(), metrics: async () => ({ contentType: 'text/plain', body: '' }) }, silentLogger());
    servers.push(first);
    await expect(
      startHttpServer({ host: '127.0.0.1', port: first.port }, { health: async () => report(), metrics: async () => ({ contentType: 'text/plain', body: '' }) }, silentLogger()),
    ).rejects.toThrow(new UsageError(`cannot listen on 127.0.0.1:${first.port} for --http: EADDRINUSE`));
  });
});

describe('pipelined requests a client never reads', () => {
  it('are answered at most MAX_REQUESTS_IN_FLIGHT at a time per connection: one more closes it, and the requests already read do no work', async () => {
    const { MAX_REQUESTS_IN_FLIGHT } = await import('../src/http/server.ts');
    let scrapes = 0;
    let answer!: () => void;
    const answered = new Promise<void>((resolve) => (answer = resolve));
    const server = await startHttpServer(
      { host: '127.0.0.1', port: 0 },
      {
        health: async () => report(),
        metrics: async () => {
          scrapes += 1;
          await answered; // each scrape stays in flight until the test lets it go
          return { contentType: 'text/plain', body: 'cronq_up 1\n' };
        },
      },
      silentLogger(),
    );
    servers.push(server);
    const socket = tcpConnect(server.port, '127.0.0.1');
    socket.on('error', () => undefined);
    // The answers never come (the scrapes hang), so reading changes nothing; it lets the socket see the close.
    socket.resume();
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.write('GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n'.repeat(5_000));
    await closed;
    expect(scrapes).toBe(MAX_REQUESTS_IN_FLIGHT);
    // Other connections are served meanwhile.
    expect((await fetch(`http://127.0.0.1:${server.port}/healthz`)).status).toBe(200);
    answer();
    expect(scrapes).toBe(MAX_REQUESTS_IN_FLIGHT);
  });

  it('share one collection and one rendering of the metrics among concurrent scrapes', async () => {
    let collects = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const metrics = new CronqMetrics({ collect: async () => (collects++, await gate, { queues: [], deadLetters: { awaitingReview: 0, capped: false } }) as unknown as Stats });
    let renders = 0;
    const render = metrics.registry.metrics.bind(metrics.registry);
    metrics.registry.metrics = () => (renders++, render());
    const scrapes = Array.from({ length: 100 }, () => metrics.scrape());
    release();
    const bodies = new Set((await Promise.all(scrapes)).map((s) => s.body));
    expect([collects, renders, bodies.size]).toEqual([1, 1, 1]);
  });

  it('never run a second collection while one the 5 s bound gave up on still runs: the next scrape waits for that one', async () => {
    let collects = 0;
    let finish!: () => void;
    const metrics = new CronqMetrics({
      collect: () => (collects++, new Promise<Stats>((resolve) => (finish = () => resolve({ queues: [], deadLetters: { awaitingReview: 0, capped: false } } as unknown as Stats)))),
      collectTimeoutMs: 20,
    });
    for (let i = 0; i < 3; i += 1) expect(sample((await metrics.scrape()).body, 'cronq_database_up')).toBe(0);
    expect(collects).toBe(1);
    finish();
    await new Promise((resolve) => setImmediate(resolve));
    const next = metrics.scrape();
    finish();
    expect(sample((await next).body, 'cronq_database_up')).toBe(1);
    expect(collects).toBe(2);
  });
});

describe('cronq start --http', () => {
  it('serves /healthz and /metrics with real numbers after running jobs, and closes on SIGTERM', async () => {
    const d = daemon([]);
    const base = await listening(d);
    await d.waitFor('worker_started');
    for (const key of ['m:1', 'm:2', 'm:3']) expect((await runCli(['enqueue', 'traced', '--key', key], env)).code).toBe(0);
    expect((await runCli(['enqueue', 'fails', '--key', 'm:dead'], env)).code).toBe(0);
    await d.waitFor('job_completed', 3);
    await d.waitFor('job_dead');

    const health = await fetch(`${base}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ status: 'ok', database: true, workers: true, scheduler: null });

    const scrape = await fetch(`${base}/metrics`);
    expect(scrape.status).toBe(200);
    expect(scrape.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await scrape.text();
    expect(sample(text, 'cronq_jobs{queue="default",status="done"}')).toBe(3);
    expect(sample(text, 'cronq_jobs{queue="default",status="dead"}')).toBe(1);
    expect(sample(text, 'cronq_jobs{queue="default",status="ready"}')).toBe(0);
    expect(sample(text, 'cronq_dead_letters_awaiting_review')).toBe(1);
    expect(sample(text, 'cronq_database_up')).toBe(1);
    expect(sample(text, 'cronq_jobs_claimed_total')).toBe(4);
    expect(sample(text, 'cronq_jobs_completed_total{kind="traced"}')).toBe(3);
    expect(sample(text, 'cronq_job_duration_seconds_count{kind="traced"}')).toBe(3);
    expect(sample(text, 'cronq_jobs_failed_total{kind="fails",retry="false"}')).toBe(1);
    expect(sample(text, 'cronq_jobs_dead_total{kind="fails"}')).toBe(1);

    d.signal('SIGTERM');
    expect(await d.exited).toBe(0);
    await expect(fetch(`${base}/healthz`)).rejects.toThrow();
  });

  it('answers 503 with database false while the database is unreachable, and 200 again once it is back', async () => {
    const proxy = await tcpProxy(new URL(t.url));
    try {
      const url = new URL(t.url);
      url.host = `127.0.0.1:${proxy.port}`;
      const d = daemon([], { DATABASE_URL: url.toString() });
      const base = await listening(d);
      expect((await fetch(`${base}/healthz`)).status).toBe(200);

      proxy.down();
      await d.waitFor('db_unavailable');
      const down = await fetch(`${base}/healthz`);
      expect(down.status).toBe(503);
      expect(await down.json()).toMatchObject({ status: 'unavailable', database: false });
      const scrape = await (await fetch(`${base}/metrics`)).text();
      expect(sample(scrape, 'cronq_database_up')).toBe(0);
      expect(scrape).toContain('cronq_jobs_claimed_total 0');

      proxy.up();
      await d.waitFor('db_recovered');
      const back = await fetch(`${base}/healthz`);
      expect(back.status).toBe(200);
      expect(sample(await (await fetch(`${base}/metrics`)).text(), 'cronq_database_up')).toBe(1);
    } finally {
      await proxy.close();
    }
  });

  it.each([
    ['in use', 'EADDRINUSE'],
    ['not on this host', 'EADDRNOTAVAIL'],
  ])('refuses an address %s at once, with one line naming --http and exit 64, before loading, migrating or starting anything', async (_, code) => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      // 192.0.2.1 (TEST-NET-1) is no interface of this host.
      const address = code === 'EADDRINUSE' ? `127.0.0.1:${(taken.address() as AddressInfo).port}` : '192.0.2.1:9464';
      const never = `${t.name}_never`;
      const r = await runCli(['start', '--http', address], { ...env, DATABASE_URL: t.url.replace(/[^/]+$/, never) });
      expect(r.stderr).toBe(`cronq start: cannot listen on ${address} for --http: ${code}\n`);
      expect(r.code).toBe(64);
      expect(r.stdout).not.toMatch(/schedules_loaded|migrat|worker_started|scheduler_started|daemon_started/);
      expect(await t.sql('SELECT schema_name FROM information_schema.schemata WHERE schema_name = ?', [never])).toEqual([]);
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  });

  it.each([['127.0.0.1'], [':9464'], ['127.0.0.1:65536'], ['no host:80']])('refuses --http %j with one line and exit 64', async (value) => {
    const r = await runCli(['start', '--http', value], env);
    expect(r.code).toBe(64);
    expect(r.stderr).toMatch(/^cronq start: --http must be HOST:PORT/);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });
});

/** A TCP proxy to the database that the test can cut (every connection dropped, new ones refused) and restore. */
async function tcpProxy(target: URL): Promise<{ port: number; down(): void; up(): void; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let open = true;
  const server: Server = createServer((client) => {
    if (!open) {
      client.destroy();
      return;
    }
    const upstream = tcpConnect(Number(target.port || 3306), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => undefined);
    }
    client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    down() {
      open = false;
      for (const s of sockets) s.destroy();
    },
    up() {
      open = true;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
