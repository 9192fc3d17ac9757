import { describe, expect, it } from 'vitest';
import { createCronq, defineSchedule, defineTask, EnqueueError, EnqueueRefusedError, TickFanoutError, UsageError, type ScheduleOptions } from '../src/index.ts';
import { CronqMetrics } from '../src/http/metrics.ts';
import { silentLogger } from '../src/logger.ts';
import { collectStats } from '../src/store/stats.ts';
import { payloadShape } from '../src/store/refusal.ts';
import { checkJobContent } from '../src/enqueue/jobRow.ts';
import { systemClock } from '../src/schedule/clock.ts';
import { ScheduleTicker } from '../src/schedule/ticker.ts';
import { runCli } from './support/cli.ts';
import { Store } from '../src/store/index.ts';
import { isLockConflict } from '../src/db/client.ts';
import { useTestDatabase } from './support/db.ts';
import { EventLog } from './support/events.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_schedule_ticks'] });

const at = (iso: string) => new Date(iso);
const FAST_RETRY = { attempts: 3, backoff: { baseMs: 5, maxMs: 20 } };

function nested(levels: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < levels; i++) value = { v: value };
  return value;
}

function schedule(options: Partial<ScheduleOptions>) {
  return defineSchedule({ name: 'bulk', cron: '0 2 * * *', timezone: 'UTC', period: 'day', handle: () => undefined, ...options } as ScheduleOptions);
}

function ticker(s: ReturnType<typeof schedule>, log = new EventLog()) {
  return new ScheduleTicker(s, { store: new Store(t.database), clock: systemClock, log: log.logger, claimedBy: 'test:1', fanoutRetry: FAST_RETRY });
}

async function lastTickAt(name: string, iso: string) {
  await t.sql(
    "INSERT INTO cronq_schedule_ticks (schedule_name, scheduled_at, period_key, outcome, started_at, finished_at) VALUES (?, ?, 'seed', 'enqueued', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
    [name, iso.replace('T', ' ').replace('Z', '')],
  );
}

async function ticks(name = 'bulk') {
  return t.sql(
    "SELECT DATE_FORMAT(scheduled_at, '%Y-%m-%d') AS day, outcome, note, jobs_enqueued, finished_at IS NOT NULL AS finished FROM cronq_schedule_ticks WHERE schedule_name = ? AND period_key <> 'seed' ORDER BY scheduled_at",
    [name],
  );
}

const count = async (where = '1') => Number((await t.sql(`SELECT COUNT(*) AS n FROM cronq_jobs WHERE ${where}`))[0].n);

describe('a fan-out with entities the database refuses', () => {
  it('enqueues the other 998 of 1,000 entities and records the lone surrogate and the 80-level payload', async () => {
    const s = schedule({
      async *jobs() {
        for (let i = 0; i < 1000; i++) {
          if (i === 300) yield { key: 'user:cut-emoji', payload: { name: 'Ada \ud83d' } };
          else if (i === 700) yield { key: 'user:deep', payload: nested(80) };
          else yield { key: `user:${i}`, payload: { i } };
        }
      },
    });
    await lastTickAt('bulk', '2026-11-01T02:00:00Z');
    const log = new EventLog();
    await ticker(s, log).catchUp(at('2026-11-02T02:00:00.100Z'));
    expect(await count()).toBe(998);
    expect(await count("job_key IN ('bulk:user:cut-emoji:2026-11-02', 'bulk:user:deep:2026-11-02')")).toBe(0);
    const [tick] = await ticks();
    expect(tick).toMatchObject({ outcome: 'enqueued', jobs_enqueued: 998, finished: 1 });
    expect(tick.note).toMatch(/^2 entities refused, first: bulk:user:cut-emoji:2026-11-02: payload holds a lone UTF-16 surrogate/);
    const refused = log.named('job_refused');
    expect(refused.map((e) => e.job_key)).toEqual(['bulk:user:cut-emoji:2026-11-02', 'bulk:user:deep:2026-11-02']);
    expect(refused[1].reason).toMatch(/^payload is JSON nested 80 levels deep/);
    expect(JSON.stringify(refused)).not.toContain('Ada');
    expect(log.named('jobs_refused')).toMatchObject([{ count: 2 }]);
  });

  it('refuses an entity with a key too long, a key holding a lone surrogate or no key alone, and one larger than max_allowed_packet naming its key', async () => {
    const [{ bytes }] = await t.sql('SELECT @@max_allowed_packet AS bytes');
    const s = schedule({
      async *jobs() {
        yield { key: 'ok:1' };
        yield { key: 'k'.repeat(300) };
        yield { nokey: true } as never;
        yield { key: 'huge', payload: { blob: 'x'.repeat(Number(bytes)) } };
        yield { key: 'cut:\ud83d' };
        yield { key: 'ok:2' };
      },
    });
    await lastTickAt('bulk', '2026-11-01T02:00:00Z');
    const log = new EventLog();
    await ticker(s, log).catchUp(at('2026-11-02T02:00:00.100Z'));
    expect((await t.sql('SELECT job_key FROM cronq_jobs ORDER BY job_key')).map((r) => r.job_key)).toEqual(['bulk:ok:1:2026-11-02', 'bulk:ok:2:2026-11-02']);
    const refused = log.named('job_refused');
    expect(refused.map((e) => e.reason)).toEqual([
      expect.stringMatching(/^job key is \d+ characters long; at most 255/),
      expect.stringMatching(/^jobs\(\) yielded something other than/),
      expect.stringMatching(/^job is \d+ bytes as SQL, more than one statement may carry .*max_allowed_packet/),
      expect.stringMatching(/^job key holds a lone UTF-16 surrogate/),
    ]);
    expect(refused[2].job_key).toBe('bulk:huge:2026-11-02');
    expect((await ticks())[0]).toMatchObject({ outcome: 'enqueued', jobs_enqueued: 2, finished: 1 });
  });

  it('refuses alone an entity whose key or payload getter throws, or whose payload JSON throws a revoked Proxy', async () => {
    const revoked = Proxy.revocable({}, {});
    revoked.revoke();
    const unreadable = revoked.proxy;
    const s = schedule({
      async *jobs() {
        yield { key: 'ok:1' };
        yield {
          get key(): string {
            throw new Error('key getter broke');
          },
        };
        yield { key: 'bad-payload', get payload(): unknown { throw new Error('payload getter broke'); } };
        yield { key: 'bad-json', payload: { toJSON: () => { throw unreadable; } } };
        // (A Proxy whose get trap throws fails jobs() itself: yield awaits it, reading its then.)
        yield { key: 'ok:2' };
      },
    });
    await lastTickAt('bulk', '2026-11-01T02:00:00Z');
    const log = new EventLog();
    await ticker(s, log).catchUp(at('2026-11-02T02:00:00.100Z'));
    expect((await t.sql('SELECT job_key FROM cronq_jobs ORDER BY job_key')).map((r) => r.job_key)).toEqual(['bulk:ok:1:2026-11-02', 'bulk:ok:2:2026-11-02']);
    expect(log.named('job_refused').map((e) => [e.job_key, e.reason])).toEqual([
      ['entity #2', 'reading what jobs() yielded threw: Error: key getter broke'],
      ['entity #3', 'reading what jobs() yielded threw: Error: payload getter broke'],
      ['bulk:bad-json:2026-11-02', 'payload cannot be stored as JSON: non-error thrown: an object that cannot be read'],
    ]);
    expect((await ticks())[0]).toMatchObject({ outcome: 'enqueued', jobs_enqueued: 2, finished: 1 });
  });
});

describe('a fan-out that keeps failing', () => {
  it('is retried a bounded number of times, then recorded as failed, and later ticks go on', async () => {
    let attempts = 0;
    const s = schedule({
      catchUp: { mode: 'all', window: '10d' },
      async *jobs({ periodKey }) {
        for (let i = 0; i < 5; i++) yield { key: `user:${i}` };
        if (periodKey === '2026-11-02') {
          attempts += 1;
          throw new Error('the user directory answered 503\nwith a body');
        }
      },
    });
    await lastTickAt('bulk', '2026-11-01T02:00:00Z');
    const log = new EventLog();
    await ticker(s, log).catchUp(at('2026-11-03T02:00:00.100Z'));
    expect(attempts).toBe(3);
    expect(await ticks()).toEqual([
      { day: '2026-11-02', outcome: 'failed', note: 'failed after 3 attempts: Error: the user directory answered 503', jobs_enqueued: 5, finished: 1 },
      { day: '2026-11-03', outcome: 'enqueued', note: null, jobs_enqueued: 5, finished: 1 },
    ]);
    expect(log.named('tick_failed')).toHaveLength(1);
    expect(log.named('schedule_tick_retry')).toHaveLength(2);
    // A later pass neither resumes nor repeats the failed tick.
    await ticker(s, log).catchUp(at('2026-11-03T02:00:30Z'));
    expect(attempts).toBe(3);
    const [stats] = (await collectStats(t.database.db)).schedules;
    expect(stats.lastTick.outcome).toBe('enqueued');
  });

  it('waits its backoff between attempts even while the clock reads no valid time (a clock option gone wrong), not retrying at once', async () => {
    const startedAt: number[] = [];
    const s = schedule({
      async *jobs() {
        startedAt.push(performance.now());
        yield { key: 'user:1' };
        throw new Error('the user directory answered 503');
      },
    });
    // What guardClock makes of a clock whose now() throws; sleepUntil of no valid instant resolves at once, as the host's does.
    const broken = { now: () => new Date(Number.NaN), sleepUntil: systemClock.sleepUntil };
    const retry = { attempts: 2, backoff: { baseMs: 300, maxMs: 300 } };
    const log = new EventLog();
    await new ScheduleTicker(s, { store: new Store(t.database), clock: broken, log: log.logger, claimedBy: 'test:1', fanoutRetry: retry }).catchUp(at('2026-11-02T02:00:00.100Z'));
    expect(startedAt).toHaveLength(2);
    // The backoff is jittered between half its ceiling and all of it: 150 to 300 ms.
    expect(startedAt[1] - startedAt[0]).toBeGreaterThanOrEqual(140);
  });

  it('is recorded as failed like any other when jobs() throws something whose very type cannot be read (a revoked Proxy, an unreadable message)', async () => {
    // Telling the database's trouble from the fan-out's read the value unguarded: every
    // scheduler pass failed on its TypeError, and the schedule never ticked again.
    const revoked = Proxy.revocable({}, {});
    revoked.revoke();
    const unreadable = new Error('x');
    Object.defineProperty(unreadable, 'message', { get: () => { throw new Error('no'); } });
    const thrown: Record<string, unknown> = { '2026-11-02': revoked.proxy, '2026-11-03': unreadable };
    const s = schedule({
      catchUp: { mode: 'all', window: '10d' },
      async *jobs({ periodKey }) {
        yield { key: 'user:1' };
        if (periodKey in thrown) throw thrown[periodKey];
      },
    });
    await lastTickAt('bulk', '2026-11-01T02:00:00Z');
    await ticker(s).catchUp(at('2026-11-04T02:00:00.100Z'));
    expect(await ticks()).toEqual([
      { day: '2026-11-02', outcome: 'failed', note: 'failed after 3 attempts: non-error thrown: an object that cannot be read', jobs_enqueued: 1, finished: 1 },
      { day: '2026-11-03', outcome: 'failed', note: 'failed after 3 attempts: Error: (no readable message)', jobs_enqueued: 1, finished: 1 },
      { day: '2026-11-04', outcome: 'enqueued', note: null, jobs_enqueued: 1, finished: 1 },
    ]);
  });

  it('shows a failed last tick in stats and metrics', async () => {
    await t.sql(
      "INSERT INTO cronq_schedule_ticks (schedule_name, scheduled_at, period_key, outcome, note, started_at, finished_at) VALUES ('bulk', '2026-11-02 02:00:00', '2026-11-02', 'failed', 'failed after 5 attempts: Error: boom', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
    );
    const stats = await collectStats(t.database.db);
    expect(stats.schedules[0].lastTick).toMatchObject({ outcome: 'failed', note: 'failed after 5 attempts: Error: boom' });
    const metrics = new CronqMetrics({ collect: () => collectStats(t.database.db) });
    metrics.tickFailed('bulk');
    const { body } = await metrics.scrape();
    expect(body).toContain('cronq_schedule_ticks_failed_total{schedule="bulk"} 1');
    expect(body).toContain('cronq_schedule_last_tick_outcome{schedule="bulk",outcome="failed"} 1');
    expect(body).toContain('cronq_schedule_last_tick_outcome{schedule="bulk",outcome="enqueued"} 0');
    const listed = await runCli(['schedules', '--json'], { DATABASE_URL: t.url, CRONQ_SCHEDULES: 'test/fixtures/schedules-fanout' });
    expect(JSON.parse(listed.stdout)[0].lastTick).toMatchObject({ outcome: 'failed', note: 'failed after 5 attempts: Error: boom' });
  });
});

describe('a tick run by hand whose fan-out fails midway', () => {
  it('rejects in one line naming the schedule, the fire time and the jobs enqueued before it, which stay', async () => {
    const s = schedule({
      async *jobs() {
        for (let i = 0; i < 5; i++) yield { key: `user:${i}` };
        throw new Error('the user directory answered 503\nwith a body');
      },
    });
    const cronq = createCronq({ databaseUrl: t.url, tasks: [s], workers: false, scheduler: false, logger: false });
    try {
      const tick = () => cronq.admin.tick('bulk', { at: at('2026-11-30T05:00:00Z') }).then(() => null, (e: unknown) => e);
      const error = await tick();
      expect(error).toBeInstanceOf(TickFanoutError);
      expect((error as Error).message).toBe(
        'tick bulk at 2026-11-30T02:00:00.000Z (period 2026-11-30): fan-out failed after 5 jobs enqueued (0 already present): Error: the user directory answered 503',
      );
      expect(error).toMatchObject({ schedule: 'bulk', fireAt: at('2026-11-30T02:00:00Z'), periodKey: '2026-11-30', written: { inserted: 5, existing: 0 } });
      expect(await count()).toBe(5);
      expect(((await tick()) as Error).message).toContain('fan-out failed after 0 jobs enqueued (5 already present)');
    } finally {
      await cronq.stop();
    }
  });

  /** `cronq tick NAME` for 2026-11-30 on the schedules-fanout-fails folder. */
  const tickOfFailing = (name: string) =>
    runCli(['tick', name, '--at', '2026-11-30T05:00:00Z'], { DATABASE_URL: t.url, CRONQ_SCHEDULES: 'test/fixtures/schedules-fanout-fails' });

  it('rejects with that one line when jobs() throws a revoked Proxy, not with a TypeError of its own', async () => {
    const revoked = Proxy.revocable({}, {});
    revoked.revoke();
    const s = schedule({
      async *jobs() {
        yield { key: 'user:0' };
        throw revoked.proxy;
      },
    });
    const cronq = createCronq({ databaseUrl: t.url, tasks: [s], workers: false, scheduler: false, logger: false });
    try {
      const error = await cronq.admin.tick('bulk', { at: at('2026-11-30T05:00:00Z') }).then(() => null, (e: unknown) => e);
      expect(error).toBeInstanceOf(TickFanoutError);
      expect((error as Error).message).toBe(
        'tick bulk at 2026-11-30T02:00:00.000Z (period 2026-11-30): fan-out failed after 1 job enqueued (0 already present): non-error thrown: an object that cannot be read',
      );
    } finally {
      await cronq.stop();
    }
  });

  it('cronq tick prints that one line and exits 1', async () => {
    const r = await tickOfFailing('explodes');
    expect(r).toEqual({
      code: 1,
      stdout: '',
      stderr: 'cronq tick: tick explodes at 2026-11-30T02:00:00.000Z (period 2026-11-30): fan-out failed after 3 jobs enqueued (0 already present): Error: fan-out exploded\n',
    });
    expect(await count("schedule_name = 'explodes'")).toBe(3);
  });

  it('cronq tick with entities refused names the first on stderr and exits 1: that part of the period did not run', async () => {
    const r = await tickOfFailing('refuses');
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^refuses tick 2026-11-30T02:00:00\.000Z \(period 2026-11-30\): 2 enqueued, 0 already present, 1 refused \(first refuses:e:cut:2026-11-30: payload holds a lone UTF-16 surrogate/);
    expect(r.stderr).toMatch(/^cronq tick: 1 of this tick's entities was refused \(first refuses:e:cut:2026-11-30: payload holds a lone UTF-16 surrogate[^\n]*\): its job was not enqueued; fix what jobs\(\) yields, then run the tick again\n$/);
    expect(await count("schedule_name = 'refuses'")).toBe(2);
  });

  it('cronq tick whose jobs() calls process.exit(0) says so in one line and exits 70, never 0', async () => {
    const r = await tickOfFailing('exits');
    expect(r).toEqual({
      code: 70,
      stdout: '',
      stderr: "cronq tick: process.exit(0) was called before the command finished (by a schedule's jobs() or a handler?): exiting with 70\n",
    });
  });
});

describe('enqueueMany and enqueue', () => {
  const task = defineTask({ name: 'blob', handle: () => undefined });
  const open = () => createCronq({ databaseUrl: t.url, tasks: [task], logger: silentLogger() });

  it('enqueueMany writes 1,000 jobs of 20 KB each, in statements below max_allowed_packet', async () => {
    const cronq = open();
    try {
      const blob = 'x'.repeat(20_000);
      const result = await cronq.enqueueMany(Array.from({ length: 1000 }, (_, i) => ({ kind: 'blob', key: `blob:${i}`, payload: { blob } })));
      expect(result).toEqual({ inserted: 1000, existing: 0 });
    } finally {
      await cronq.stop();
    }
    expect(await count()).toBe(1000);
  });

  it('enqueueMany writes every job the database accepts, then names the refused ones', async () => {
    const cronq = open();
    const [{ bytes }] = await t.sql('SELECT @@max_allowed_packet AS bytes');
    let error: unknown;
    try {
      const jobs = Array.from({ length: 500 }, (_, i) => ({ kind: 'blob', key: `many:${i}`, payload: { i } as unknown }));
      jobs[10].payload = { s: '\udc00 secret' };
      jobs[400].payload = { blob: 'y'.repeat(Number(bytes)) };
      await cronq.enqueueMany(jobs);
    } catch (e) {
      error = e;
    } finally {
      await cronq.stop();
    }
    expect(error).toBeInstanceOf(EnqueueRefusedError);
    const refused = error as EnqueueRefusedError;
    expect(refused.refusedCount).toBe(2);
    expect(refused.refused.map((r) => r.key).sort()).toEqual(['many:10', 'many:400']);
    expect(refused.refused.find((r) => r.key === 'many:400')?.reason).toMatch(/max_allowed_packet/);
    expect(refused.written).toEqual({ inserted: 498, existing: 0 });
    expect(refused.message).not.toMatch(/secret|yyyy/);
    expect(await count()).toBe(498);
  });

  it('enqueueMany of a stream refused at a bad job counts the jobs read before it that the database refused, not only those written', async () => {
    const cronq = open();
    async function* jobs() {
      yield { kind: 'blob', key: 'stream:0', payload: { s: '\udc00 secret' } as unknown };
      yield { kind: 'blob', key: 'stream:1', payload: {} };
      yield { kind: 'blob', key: 'stream:2', payload: {} };
      yield { kind: 'blob', payload: {} } as never;
    }
    try {
      const refusal = await cronq.enqueueMany(jobs()).catch((e: Error) => e);
      expect(refusal).toBeInstanceOf(UsageError);
      expect((refusal as Error).message).toMatch(/^enqueueMany: job 3 of the stream \(from 0\): .*; the jobs read before it were written \(2 new, 0 already present\), but for 1 the database refused$/);
      expect((refusal as Error).message).not.toContain('secret');
    } finally {
      await cronq.stop();
    }
    expect(await count()).toBe(2);
  });

  it('enqueue names the key and the server reason, never the payload, whatever fails', async () => {
    const cronq = open();
    try {
      const refused = await cronq.enqueue({ kind: 'blob', key: 'one:1', payload: { s: 'secret \ud800' } }).catch((e) => e);
      expect(refused).toBeInstanceOf(EnqueueRefusedError);
      expect(refused.message).toMatch(/^the database refused job "one:1": payload holds a lone UTF-16 surrogate .*\(errno \d+\)$/);
      expect(refused.message).not.toContain('secret');
      await t.sql("CREATE TRIGGER refuse_all BEFORE INSERT ON cronq_jobs FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'no inserts today'");
      try {
        const failed = await cronq.enqueue({ kind: 'blob', key: 'one:2', payload: { s: 'secret' } }).catch((e) => e);
        expect(failed).toBeInstanceOf(EnqueueError);
        expect(failed.message).toBe('enqueueing job "one:2" failed: ER_SIGNAL_EXCEPTION: no inserts today');
        expect(JSON.stringify(failed, Object.getOwnPropertyNames(failed))).not.toMatch(/secret|INSERT/);
        const many = await cronq.enqueueMany([{ kind: 'blob', key: 'one:3', payload: { s: 'secret' } }]).catch((e) => e);
        expect(many).toBeInstanceOf(EnqueueError);
        expect(many.message).not.toMatch(/secret|INSERT/);
      } finally {
        await t.sql('DROP TRIGGER refuse_all');
      }
    } finally {
      await cronq.stop();
    }
  });

  it('cronq enqueue says what is wrong with a payload the database refuses, in one line, exit 64', async () => {
    const env = { DATABASE_URL: t.url, CRONQ_SCHEDULES: 'test/fixtures/schedules-daemon' };
    for (const [payload, message] of [
      ['{"a":"\\ud800"}', /payload holds a lone UTF-16 surrogate/],
      [JSON.stringify(nested(40)), /payload is JSON nested 40 levels deep/],
    ] as const) {
      const r = await runCli(['enqueue', 'traced', '--key', 'cli:1', '--payload', payload], env);
      expect(r.code).toBe(64);
      expect(r.stderr).toMatch(message);
      expect(r.stderr).not.toMatch(/AUTOEXTEND|INSERT/);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stdout).toBe('');
    }
    expect(await count()).toBe(0);
  });
});

describe('checkJobContent', () => {
  it('refuses a payload nested too deeply for JSON.stringify in words, not as a stack overflow', () => {
    expect(checkJobContent('deep:1', nested(200_000))).toEqual({
      field: 'payload',
      problem: 'payload is JSON nested too deeply to write (thousands of levels), deeper than the database accepts (MariaDB takes 32, MySQL 100)',
    });
  });
});

describe('payloadShape', () => {
  it('finds lone surrogates, raw or escaped, and the nesting depth, in one pass', () => {
    expect(payloadShape('{"a":"\\ud83d\\ude00"}')).toEqual({ loneSurrogateAt: null, depth: 1 });
    expect(payloadShape('{"a":"\\ud83d"}').loneSurrogateAt).toBe(6);
    expect(payloadShape('{"a":"x\\\\ud800"}').loneSurrogateAt).toBe(null); // an escaped backslash, then text
    expect(payloadShape('["\udc00"]').loneSurrogateAt).toBe(2);
    expect(payloadShape('[[[{"a":"]]]"}]]]').depth).toBe(4);
    const long = `[${'"ok",'.repeat(200_000)}"\\ud800"]`;
    const started = performance.now();
    expect(payloadShape(long).loneSurrogateAt).toBe(long.length - 8);
    expect(performance.now() - started).toBeLessThan(1_000);
  });
});

describe('a fan-out blocked by another transaction', () => {
  it('is not recorded as failed when its writes time out waiting for a lock: a later pass enqueues the tick', async () => {
    await lastTickAt('bulk', '2026-11-01T02:00:00Z');
    const s = schedule({ async *jobs() { yield { key: 'user:1' }; } });
    // Another session holds the gap every new bulk key falls in (REPEATABLE READ next-key locks).
    const holder = await t.database.claims.getConnection();
    try {
      await holder.query('SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ');
      await holder.query('START TRANSACTION');
      await holder.query("SELECT id FROM cronq_jobs FORCE INDEX (cronq_jobs_job_key) WHERE job_key >= 'bulk:' FOR UPDATE");
      const log = new EventLog();
      const failed = await ticker(s, log).catchUp(at('2026-11-02T02:00:00.100Z')).then(() => null, (error: unknown) => error);
      expect(isLockConflict(failed)).toBe(true); // the pass fails as in an outage
      expect(log.named('tick_failed')).toEqual([]);
      expect(await ticks()).toEqual([expect.objectContaining({ day: '2026-11-02', jobs_enqueued: 0, finished: 0 })]);
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
    await ticker(s).catchUp(at('2026-11-02T02:00:30Z'));
    expect(await ticks()).toEqual([{ day: '2026-11-02', outcome: 'enqueued', note: null, jobs_enqueued: 1, finished: 1 }]);
  }, 30_000);
});
