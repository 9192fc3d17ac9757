import { sql } from 'drizzle-orm';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createCronq, defineTask, PermanentError, type Cronq, type Task } from '../src/index.ts';
import { retryDelayMs, backoffCeilingMs } from '../src/runtime/backoff.ts';
import { noopObserver } from '../src/observe.ts';
import { useTestDatabase } from './support/db.ts';
import { EventLog, eventually } from './support/events.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_dead_letters'] });
let cronq: Cronq | null = null;
let log: EventLog;

beforeAll(async () => {
  await t.sql('CREATE TABLE effects (job_key VARCHAR(255) PRIMARY KEY, attempt INT NOT NULL)');
});
beforeEach(async () => {
  log = new EventLog();
  await t.sql('DELETE FROM effects');
});
afterEach(async () => {
  await cronq?.stop({ graceMs: 1_000 });
  cronq = null;
});

function start(tasks: Task[], options: Partial<Parameters<typeof createCronq>[0]> = {}): Promise<Cronq> {
  cronq = createCronq({ databaseUrl: t.url, tasks, logger: log.logger, allowUnknownKind: true, concurrency: 4, pollInterval: '50ms', ...options });
  return cronq.start().then(() => cronq!);
}

describe('backoff', () => {
  it('grows exponentially from base, stays within [ceiling/2, ceiling] and never passes max', () => {
    const backoff = { baseMs: 1_000, maxMs: 60_000 };
    expect([1, 2, 3, 4, 7, 30].map((a) => backoffCeilingMs(backoff, a))).toEqual([1_000, 2_000, 4_000, 8_000, 60_000, 60_000]);
    for (let attempt = 1; attempt <= 12; attempt++) {
      const ceiling = backoffCeilingMs(backoff, attempt);
      for (const r of [0, 0.25, 0.5, 0.999999]) {
        const delay = retryDelayMs(backoff, attempt, () => r);
        expect(delay).toBeGreaterThanOrEqual(ceiling / 2);
        expect(delay).toBeLessThanOrEqual(ceiling);
      }
    }
  });

  it('spreads fifty jobs failing together over a range instead of one instant', () => {
    const delays = Array.from({ length: 50 }, () => retryDelayMs({ baseMs: 60_000, maxMs: 3_600_000 }, 1));
    expect(new Set(delays).size).toBeGreaterThan(40);
    expect(Math.max(...delays) - Math.min(...delays)).toBeGreaterThan(10_000);
  });
});

describe('worker', () => {
  it('runs a job once and marks it done, with its effect committed in the same transaction', async () => {
    const c = await start([
      defineTask({
        name: 'charge',
        async handle(job, ctx) {
          ctx.effect(async (tx) => {
            await tx.execute(sql`INSERT INTO effects (job_key, attempt) VALUES (${job.key}, ${job.attempt})`);
          });
        },
      }),
    ]);
    const { id, created } = await c.enqueue({ kind: 'charge', key: 'charge:user:1:2026-11', payload: { userId: 1 } });
    expect(created).toBe(true);
    await log.waitFor('job_completed', 1);
    const [job] = await t.sql('SELECT status, attempts, finished_at FROM cronq_jobs WHERE id = ?', [id]);
    expect(job.status).toBe('done');
    expect(job.attempts).toBe(1);
    expect(job.finished_at).not.toBeNull();
    expect(await t.sql('SELECT job_key, attempt FROM effects')).toEqual([{ job_key: 'charge:user:1:2026-11', attempt: 1 }]);
  });

  it('hands the handler its job: payload, key, attempt and queue', async () => {
    const seen: unknown[] = [];
    const c = await start([
      defineTask({
        name: 'inspect',
        queue: 'reports',
        maxAttempts: 7,
        handle: (job) => {
          seen.push(job);
        },
      }),
    ]);
    const { id } = await c.enqueue({ kind: 'inspect', key: 'inspect:1', payload: { a: [1, 'two'] } });
    await log.waitFor('job_completed');
    expect(seen).toEqual([
      { id, kind: 'inspect', key: 'inspect:1', queue: 'reports', payload: { a: [1, 'two'] }, attempt: 1, maxAttempts: 7, periodKey: null, scheduledAt: null },
    ]);
  });

  it('retries a failing handler with backoff until it succeeds', async () => {
    const c = await start([
      defineTask({
        name: 'flaky',
        backoff: { base: '10ms', max: '40ms' },
        handle(job) {
          if (job.attempt < 3) throw new Error(`transient ${job.attempt}`);
        },
      }),
    ]);
    const { id } = await c.enqueue({ kind: 'flaky', key: 'flaky:1' });
    await log.waitFor('job_completed');
    const failed = log.named('job_failed');
    expect(failed.map((e) => e.attempt)).toEqual([1, 2]);
    expect(failed.every((e) => e.retry_in_ms >= 5 && e.retry_in_ms <= 40)).toBe(true);
    const [job] = await t.sql('SELECT status, attempts, last_error FROM cronq_jobs WHERE id = ?', [id]);
    expect(job).toEqual({ status: 'done', attempts: 3, last_error: null });
  });

  it('sends a PermanentError to the dead letters at once, whatever attempts remain', async () => {
    const c = await start([
      defineTask({
        name: 'strict',
        maxAttempts: 10,
        handle() {
          throw new PermanentError('account closed');
        },
      }),
    ]);
    const { id } = await c.enqueue({ kind: 'strict', key: 'strict:1' });
    await log.waitFor('job_dead');
    const [job] = await t.sql('SELECT status, attempts FROM cronq_jobs WHERE id = ?', [id]);
    expect(job).toEqual({ status: 'dead', attempts: 1 });
    const [letter] = await t.sql('SELECT job_id, failure_reason FROM cronq_dead_letters');
    expect(letter).toEqual({ job_id: id, failure_reason: 'PermanentError: account closed' });
  });

  it('sends an exhausted job to the dead letters after its last attempt', async () => {
    const c = await start([
      defineTask({
        name: 'doomed',
        maxAttempts: 2,
        backoff: { base: '1ms', max: '2ms' },
        handle() {
          throw new Error('still broken');
        },
      }),
    ]);
    await c.enqueue({ kind: 'doomed', key: 'doomed:1' });
    await log.waitFor('job_dead');
    const [letter] = await t.sql('SELECT failure_reason, attempts FROM cronq_dead_letters');
    expect(letter).toEqual({ failure_reason: 'Error: still broken', attempts: 2 });
  });

  it('sends a job of an unknown kind to the dead letters without running anything once no daemon has served it for the grace (0 here)', async () => {
    const c = await start([], { unknownKindGraceMs: 0 });
    await c.enqueue({ kind: 'nobody-handles-this', key: 'orphan:1' });
    await log.waitFor('job_dead');
    const [letter] = await t.sql('SELECT failure_reason, attempts FROM cronq_dead_letters');
    expect(letter.failure_reason).toMatch(/unknown kind: no daemon has served 'nobody-handles-this'/);
  });

  it("sends a job whose payload its task's parse rejects to the dead letters without running it", async () => {
    let ran = false;
    const c = await start([
      defineTask({
        name: 'typed',
        maxAttempts: 5,
        parse(payload) {
          const userId = (payload as { userId?: unknown }).userId;
          if (!Number.isInteger(userId)) throw new TypeError('userId must be an integer');
          return { userId: userId as number };
        },
        handle: () => void (ran = true),
      }),
    ]);
    await c.enqueue({ kind: 'typed', key: 'typed:bad', payload: { userId: 'forty-two' } });
    await log.waitFor('job_dead');
    expect(ran).toBe(false);
    const [letter] = await t.sql('SELECT failure_reason, attempts FROM cronq_dead_letters');
    expect(letter).toEqual({ failure_reason: 'PermanentError: payload rejected by parse: TypeError: userId must be an integer', attempts: 1 });
    await c.enqueue({ kind: 'typed', key: 'typed:good', payload: { userId: 42 } });
    await log.waitFor('job_completed');
    expect(ran).toBe(true);
  });

  it('skips a job the database refuses to reserve, naming it, and goes on claiming the others', async () => {
    // A trigger stands in for what can make an UPDATE of one row fail every time (on
    // MariaDB, a payload breaking the JSON CHECK constraint, written with checks off).
    await t.sql(
      "CREATE TRIGGER poison_guard BEFORE UPDATE ON cronq_jobs FOR EACH ROW BEGIN IF OLD.job_key = 'poison' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'this row cannot be reserved'; END IF; END",
    );
    try {
      await t.sql("INSERT INTO cronq_jobs (kind, job_key, payload, available_at) VALUES ('steady', 'poison', '{}', UTC_TIMESTAMP(6) - INTERVAL 1 HOUR)");
      const [{ id: poisonId }] = await t.sql("SELECT id FROM cronq_jobs WHERE job_key = 'poison'");
      const c = await start([defineTask({ name: 'steady', handle: () => undefined })], { concurrency: 8 });
      await c.enqueueMany(Array.from({ length: 20 }, (_, i) => ({ kind: 'steady', key: `steady:${i}` })));
      await log.waitFor('job_completed', 20);
      const [unclaimable] = await log.waitFor('job_unclaimable');
      expect(unclaimable.job_id).toBe(poisonId);
      expect(unclaimable.error).toMatch(/this row cannot be reserved/);
      const [poison] = await t.sql("SELECT status, attempts FROM cronq_jobs WHERE job_key = 'poison'");
      expect(poison).toEqual({ status: 'ready', attempts: 0 });
    } finally {
      await t.sql('DROP TRIGGER IF EXISTS poison_guard');
    }
  });

  it('retries a claim that lost a lock race (deadlock) instead of taking its job for one the database refuses', async () => {
    // A trigger makes the reservation of one row fail twice as InnoDB fails a deadlock's
    // victim (errno 1213), then succeed; the count lives in a MEMORY table, which the
    // failed statement's rollback does not undo.
    await t.sql('CREATE TABLE race_count (n INT NOT NULL) ENGINE=MEMORY');
    await t.sql('INSERT INTO race_count VALUES (0)');
    await t.sql(
      `CREATE TRIGGER lose_race BEFORE UPDATE ON cronq_jobs FOR EACH ROW BEGIN
        IF OLD.job_key = 'raced' AND NEW.status = 'reserved' AND (SELECT n FROM race_count) < 2 THEN
          UPDATE race_count SET n = n + 1;
          SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213, MESSAGE_TEXT = 'Deadlock found when trying to get lock; try restarting transaction';
        END IF;
      END`,
    );
    try {
      let ran = 0;
      const c = await start([defineTask({ name: 'raced', handle: () => void (ran += 1) })]);
      await c.enqueue({ kind: 'raced', key: 'raced' });
      await log.waitFor('job_completed');
      expect(ran).toBe(1);
      expect(log.events.filter((e) => e.event === 'job_unclaimable')).toEqual([]);
      expect(await t.sql('SELECT n FROM race_count')).toEqual([{ n: 2 }]);
    } finally {
      await t.sql('DROP TRIGGER IF EXISTS lose_race');
    }
  });

  it('still skips a job whose every reservation fails as a lost lock race, after a few tries', async () => {
    await t.sql(
      `CREATE TRIGGER always_race BEFORE UPDATE ON cronq_jobs FOR EACH ROW BEGIN
        IF OLD.job_key = 'stuck' AND NEW.status = 'reserved' THEN
          SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213, MESSAGE_TEXT = 'Deadlock found when trying to get lock; try restarting transaction';
        END IF;
      END`,
    );
    try {
      await t.sql("INSERT INTO cronq_jobs (kind, job_key, payload, available_at) VALUES ('steady', 'stuck', '{}', UTC_TIMESTAMP(6) - INTERVAL 1 HOUR)");
      const [{ id: stuckId }] = await t.sql("SELECT id FROM cronq_jobs WHERE job_key = 'stuck'");
      const c = await start([defineTask({ name: 'steady', handle: () => undefined })], { concurrency: 8 });
      await c.enqueueMany(Array.from({ length: 5 }, (_, i) => ({ kind: 'steady', key: `steady:${i}` })));
      await log.waitFor('job_completed', 5);
      const [unclaimable] = await log.waitFor('job_unclaimable');
      expect(unclaimable.job_id).toBe(stuckId);
      expect(unclaimable.error).toMatch(/Deadlock found/);
    } finally {
      await t.sql('DROP TRIGGER IF EXISTS always_race');
    }
  });

  it('a failing effect rolls back done and counts as a failed attempt', async () => {
    const c = await start([
      defineTask({
        name: 'effect-fails',
        maxAttempts: 1,
        handle(_job, ctx) {
          ctx.effect(async (tx) => {
            await tx.execute(sql`INSERT INTO effects (job_key, attempt) VALUES ('x', 1)`);
            throw new Error('constraint says no');
          });
        },
      }),
    ]);
    await c.enqueue({ kind: 'effect-fails', key: 'ef:1' });
    await log.waitFor('job_dead');
    expect(await t.sql('SELECT * FROM effects')).toEqual([]);
  });

  it('aborts the handler and discards its result when the lease is lost mid-run', async () => {
    let aborted: unknown;
    const c = await start([
      defineTask({
        name: 'slow',
        lease: '1s',
        async handle(job, ctx) {
          await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
          aborted = ctx.signal.reason;
          ctx.effect(async (tx) => {
            await tx.execute(sql`INSERT INTO effects (job_key, attempt) VALUES (${job.key}, ${job.attempt})`);
          });
        },
      }),
    ]);
    const { id } = await c.enqueue({ kind: 'slow', key: 'slow:1' });
    await eventually(async () => (await t.sql("SELECT id FROM cronq_jobs WHERE status = 'reserved'")).length === 1);
    // Someone else takes the job over (as recovery and a second worker would).
    await t.sql('UPDATE cronq_jobs SET lease_fence = ? WHERE id = ?', ['f'.repeat(32), id]);
    await log.waitFor('job_lease_lost');
    expect((aborted as Error).name).toBe('LeaseLostError');
    await c.stop({ graceMs: 1_000 });
    expect(await t.sql('SELECT * FROM effects')).toEqual([]);
    const [job] = await t.sql('SELECT status, lease_token FROM cronq_jobs WHERE id = ?', [id]);
    expect(job).toEqual({ status: 'reserved', lease_token: 'f'.repeat(32) });
    expect(log.named('job_completed')).toHaveLength(0);
  });

  it('renews the lease while a long handler runs, so recovery leaves it alone', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const c = await start([defineTask({ name: 'long', lease: '1s', handle: () => gate })], { recoveryInterval: '100ms' });
    const { id } = await c.enqueue({ kind: 'long', key: 'long:1' });
    await log.waitFor('job_claimed');
    const first = await t.sql('SELECT lease_until FROM cronq_jobs WHERE id = ?', [id]);
    await eventually(async () => {
      const [r] = await t.sql('SELECT lease_until FROM cronq_jobs WHERE id = ?', [id]);
      return r.lease_until.getTime() > first[0].lease_until.getTime() + 500;
    }, 5_000, 'two renewals');
    release();
    await log.waitFor('job_completed');
    expect(log.named('leases_recovered')).toHaveLength(0);
  });

  it('recovers a job whose worker vanished and runs it again', async () => {
    await t.sql(
      "INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, attempts, max_attempts, lease_fence, lease_deadline, lease_holder) VALUES ('default', 'again', 'again:1', '{}', 'reserved', 1, 3, ?, UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, 'gone:1')",
      ['a'.repeat(32)],
    );
    await start([defineTask({ name: 'again', handle: () => undefined })], { recoveryInterval: '50ms' });
    const [recovered] = await log.waitFor('leases_recovered');
    expect(recovered.count).toBe(1);
    await log.waitFor('job_completed');
    const [job] = await t.sql("SELECT status, attempts FROM cronq_jobs WHERE job_key = 'again:1'");
    expect(job).toEqual({ status: 'done', attempts: 2 });
  });

  it('never runs more handlers at once than its concurrency', async () => {
    let running = 0;
    let peak = 0;
    const c = await start(
      [
        defineTask({
          name: 'count',
          async handle() {
            running += 1;
            peak = Math.max(peak, running);
            await new Promise((r) => setTimeout(r, 5));
            running -= 1;
          },
        }),
      ],
      { concurrency: 3 },
    );
    await c.enqueueMany(Array.from({ length: 30 }, (_, i) => ({ kind: 'count', key: `count:${i}` })));
    await log.waitFor('job_completed', 30);
    expect(peak).toBe(3);
  });

  it('on stop, lets a running handler finish within the grace period', async () => {
    const c = await start([
      defineTask({
        name: 'finishing',
        handle: () => new Promise((r) => setTimeout(r, 200)),
      }),
    ]);
    const { id } = await c.enqueue({ kind: 'finishing', key: 'finishing:1' });
    await log.waitFor('job_claimed');
    await c.stop({ graceMs: 5_000 });
    const [job] = await t.sql('SELECT status FROM cronq_jobs WHERE id = ?', [id]);
    expect(job.status).toBe('done');
  });

  it('on stop, aborts a handler that outlives the grace period and releases its job with the attempt restored', async () => {
    let reason: unknown;
    const c = await start([
      defineTask({
        name: 'stubborn',
        handle: (_job, ctx) =>
          new Promise((_resolve, reject) =>
            ctx.signal.addEventListener('abort', () => {
              reason = ctx.signal.reason;
              reject(ctx.signal.reason);
            }),
          ),
      }),
    ]);
    const { id } = await c.enqueue({ kind: 'stubborn', key: 'stubborn:1' });
    await log.waitFor('job_claimed');
    const result = await c.stop({ graceMs: 100 });
    expect((reason as Error).name).toBe('ShutdownAbortError');
    expect(result.abandoned).toBe(1);
    const [job] = await t.sql('SELECT status, attempts, lease_token FROM cronq_jobs WHERE id = ?', [id]);
    expect(job).toEqual({ status: 'ready', attempts: 0, lease_token: null });
    expect(await t.sql('SELECT * FROM cronq_dead_letters')).toEqual([]);
  });

  it('releases claimed-but-unstarted jobs when stop arrives during the claim', async () => {
    let ran = false;
    const c = await start([defineTask({ name: 'never', handle: () => void (ran = true) })], { postClaimPauseMs: 300 });
    const { id } = await c.enqueue({ kind: 'never', key: 'never:1' });
    await eventually(async () => (await t.sql("SELECT id FROM cronq_jobs WHERE status = 'reserved'")).length === 1);
    await c.stop({ graceMs: 1_000 });
    expect(ran).toBe(false);
    expect(log.named('claim_released_on_shutdown').map((e) => e.job_id)).toEqual([id]);
    const [job] = await t.sql('SELECT status, attempts FROM cronq_jobs WHERE id = ?', [id]);
    expect(job).toEqual({ status: 'ready', attempts: 0 });
  });

  it('starts a job enqueued in the same process without waiting for the next poll', async () => {
    const started: number[] = [];
    const c = await start([defineTask({ name: 'quick', handle: () => void started.push(performance.now()) })], { pollInterval: '10s' });
    await eventually(async () => log.named('worker_started').length === 1);
    await new Promise((r) => setTimeout(r, 100)); // let the loop go idle on its 10 s poll
    const before = performance.now();
    await c.enqueue({ kind: 'quick', key: 'quick:1' });
    await log.waitFor('job_completed', 1, 2_000);
    expect(started[0] - before).toBeLessThan(1_000);
  });
});

describe('claiming ahead (prefetch)', () => {
  /** An observer that records the size of every claim. */
  function claimSizes() {
    const sizes: number[] = [];
    const observer = { ...noopObserver, jobClaimed: (n: number) => void sizes.push(n) };
    return { sizes, observer };
  }

  it('claims more than its free slots while handlers finish faster than a claim, never running more than its concurrency', async () => {
    const { sizes, observer } = claimSizes();
    let running = 0;
    let peak = 0;
    const c = await start(
      [
        defineTask({
          name: 'instant',
          handle: () => {
            running += 1;
            peak = Math.max(peak, running);
            running -= 1;
          },
        }),
      ],
      { concurrency: 2, observer },
    );
    await c.enqueueMany(Array.from({ length: 400 }, (_, i) => ({ kind: 'instant', key: `instant:${i}` })));
    await log.waitFor('job_completed', 400);
    expect(Math.max(...sizes)).toBeGreaterThan(2);
    expect(peak).toBeLessThanOrEqual(2);
    expect(await t.sql("SELECT status, attempts, COUNT(*) AS n FROM cronq_jobs GROUP BY status, attempts")).toEqual([{ status: 'done', attempts: 1, n: 400 }]);
  });

  it('with prefetch 0, claims only for free slots', async () => {
    const { sizes, observer } = claimSizes();
    const c = await start([defineTask({ name: 'instant', handle: () => undefined })], { concurrency: 2, prefetch: 0, observer });
    await c.enqueueMany(Array.from({ length: 200 }, (_, i) => ({ kind: 'instant', key: `instant:${i}` })));
    await log.waitFor('job_completed', 200);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(2);
  });

  /**
   * Fast jobs first (so the pool learns to read ahead), then one that holds the only slot
   * until the test lets it go, then more fast jobs: some of those are claimed ahead and
   * wait behind it.
   */
  async function fastSlowFast(fastLease: string) {
    const ran = new Set<number>();
    let letGo!: () => void;
    const slowMayFinish = new Promise<void>((r) => (letGo = r));
    let slowStarted!: () => void;
    const slowRunning = new Promise<void>((r) => (slowStarted = r));
    const c = await start(
      [
        defineTask({ name: 'fast', lease: fastLease, handle: (job) => void ran.add(job.id) }),
        defineTask({
          name: 'slow',
          handle: () => {
            slowStarted();
            return slowMayFinish;
          },
        }),
      ],
      { concurrency: 1 },
    );
    const past = (s: number) => new Date(Date.now() - 600_000 + s * 1000);
    // The fast ones set the pace; 'slow' comes last (one enqueueMany: claimed by range, in order).
    await c.enqueueMany([
      ...Array.from({ length: 300 }, (_, i) => ({ kind: 'fast', key: `before:${i}`, runAt: past(0) })),
      { kind: 'slow', key: 'slow', runAt: past(1) },
    ]);
    await slowRunning;
    // Enqueued while 'slow' holds the only slot, so none of these can run before it: the
    // pool claims some ahead on the fast pace. Told by the claim event, not by polling for
    // reserved rows (with a 1 s lease one may be released again before a poll sees it).
    await c.enqueueMany(Array.from({ length: 50 }, (_, i) => ({ kind: 'fast', key: `after:${i}`, runAt: past(2) })));
    const after = new Set((await t.sql("SELECT id FROM cronq_jobs WHERE job_key LIKE 'after:%'")).map((r) => Number(r.id)));
    await log.waitFor('job_claimed', 1, 15_000, (e) => after.has(Number(e.job_id)));
    return { c, letGo, ran };
  }

  it('releases a job claimed ahead that waited a third of its lease, attempt restored, and runs it later', async () => {
    const { letGo } = await fastSlowFast('1s');
    const [released] = await log.waitFor('claim_released_unstarted');
    expect(released.kind).toBe('fast');
    // (Its row may be claimed again at once, so its attempts are checked at the end: every
    // job done at attempt 1 means the release gave the attempt back.)
    letGo();
    await log.waitFor('job_completed', 351);
    expect(await t.sql("SELECT status, attempts, COUNT(*) AS n FROM cronq_jobs GROUP BY status, attempts")).toEqual([{ status: 'done', attempts: 1, n: 351 }]);
  });

  it('on stop, releases every job claimed ahead with its attempt restored', async () => {
    const { c, letGo, ran } = await fastSlowFast('60s'); // nothing goes stale before the stop
    // Reserved jobs that have not run: claimed ahead, waiting behind the slow one. (A job
    // can have run with its completion not yet written, and a later claim lane can deliver
    // its batch before an earlier one's, so neither the key nor the order tells.) No job
    // starts while the slow one holds the only slot, so this snapshot stays true until letGo.
    const aheadIds = (await t.sql("SELECT id FROM cronq_jobs WHERE status = 'reserved' AND kind = 'fast'"))
      .map((r) => r.id)
      .filter((id) => !ran.has(id));
    const stopped = c.stop({ graceMs: 5_000 });
    letGo();
    await stopped;
    const released = log.named('claim_released_on_shutdown').map((e) => e.job_id);
    expect(aheadIds.length).toBeGreaterThan(0);
    expect(released).toEqual(expect.arrayContaining(aheadIds));
    expect(await t.sql("SELECT id FROM cronq_jobs WHERE status = 'reserved'")).toEqual([]);
    const [{ n }] = await t.sql(`SELECT COUNT(*) AS n FROM cronq_jobs WHERE id IN (${released.join(',')}) AND status = 'ready' AND attempts = 0`);
    expect(n).toBe(released.length);
    expect((await t.sql("SELECT status FROM cronq_jobs WHERE job_key = 'slow'"))[0].status).toBe('done');
  });
});

describe('queues', () => {
  it('a pool serving every queue finds a queue it has never seen, enqueued by another process', async () => {
    const c = await start([defineTask({ name: 'anywhere', handle: () => undefined })], { pollInterval: '50ms' });
    await log.waitFor('worker_started');
    const other = createCronq({ databaseUrl: t.url, logger: false, tasks: [defineTask({ name: 'anywhere', handle: () => undefined })] });
    const ids: number[] = [];
    try {
      ids.push((await other.enqueue({ kind: 'anywhere', key: 'new-queue:1', queue: 'brand-new' })).id);
      ids.push((await other.enqueue({ kind: 'anywhere', key: 'default:1' })).id);
    } finally {
      await other.stop();
    }
    // `other` never started workers: only the running pool can have completed them.
    const completed = await log.waitFor('job_completed', 2);
    expect(completed.map((e) => e.job_id).sort()).toEqual(ids.sort());
    expect(c.health().workers).toBe(true);
    expect(await t.sql("SELECT queue, status FROM cronq_jobs ORDER BY queue")).toEqual([
      { queue: 'brand-new', status: 'done' },
      { queue: 'default', status: 'done' },
    ]);
  });

  /** Runs `body` while four loops enqueue `busy` jobs into 'default' in this process, each waking the pool with its id. */
  async function whileEnqueueingLocally(c: Cronq, body: () => Promise<void>): Promise<void> {
    let streaming = true;
    let n = 0;
    // Keys of their own per test: re-inserting keys of rows just deleted (not yet purged) can deadlock.
    const prefix = `local:${Date.now()}`;
    const local = Array.from({ length: 4 }, async () => {
      while (streaming) await c.enqueue({ kind: 'busy', key: `${prefix}:${n++}` });
    });
    try {
      await log.waitFor('job_completed', 20); // the stream is under way
      await body();
    } finally {
      streaming = false;
      await Promise.all(local);
    }
  }

  /** Enqueues a job from another process (into `queue`) while local enqueues stream; expects it claimed within `boundMs`. */
  async function claimedFromElsewhereWithin(boundMs: number, queue?: string) {
    const busy = defineTask({ name: 'busy', handle: () => undefined });
    const c = await start([busy], { pollInterval: '200ms' });
    await log.waitFor('worker_started');
    const other = createCronq({ databaseUrl: t.url, logger: false, tasks: [busy] });
    try {
      await whileEnqueueingLocally(c, async () => {
        const sentAt = Date.now();
        const { id } = await other.enqueue({ kind: 'busy', key: 'elsewhere', ...(queue ? { queue } : {}) });
        await log.waitFor('job_claimed', 1, 5_000, (e) => e.job_id === id);
        expect(Date.now() - sentAt).toBeLessThan(boundMs);
      });
    } finally {
      await other.stop();
    }
  }

  it('claims a job enqueued by another process within a poll interval while local enqueues keep waking the pool', async () => {
    await claimedFromElsewhereWithin(2_000);
  });

  it('a pool serving every queue finds a queue only another process fills while local enqueues keep waking it', async () => {
    await claimedFromElsewhereWithin(3_000, 'brand-new'); // the queue list is read at least once a second
  });

  it('claims only from its own queues when given a list', async () => {
    const c = await start([defineTask({ name: 'mine', handle: () => undefined })], { queues: ['a', 'b'] });
    await c.enqueueMany(['a', 'b', 'c'].map((queue) => ({ kind: 'mine', key: `in:${queue}`, queue })));
    await log.waitFor('job_completed', 2);
    await c.stop({ graceMs: 1_000 });
    expect(await t.sql("SELECT queue, status FROM cronq_jobs ORDER BY queue")).toEqual([
      { queue: 'a', status: 'done' },
      { queue: 'b', status: 'done' },
      { queue: 'c', status: 'ready' },
    ]);
  });
});

describe('enqueue through createCronq', () => {
  it('takes queue and maxAttempts from the task unless the enqueue says otherwise', async () => {
    const c = createCronq({ databaseUrl: t.url, logger: false, tasks: [defineTask({ name: 'billing', queue: 'money', maxAttempts: 9, handle: () => undefined })] });
    cronq = c;
    await c.enqueue({ kind: 'billing', key: 'b:1' });
    await c.enqueue({ kind: 'billing', key: 'b:2', queue: 'urgent', maxAttempts: 2 });
    const rows = await t.sql('SELECT job_key, queue, max_attempts FROM cronq_jobs ORDER BY job_key');
    expect(rows).toEqual([
      { job_key: 'b:1', queue: 'money', max_attempts: 9 },
      { job_key: 'b:2', queue: 'urgent', max_attempts: 2 },
    ]);
  });

  it('enqueueMany streams from an async generator in batches and reports new and existing', async () => {
    const c = createCronq({ databaseUrl: t.url, logger: false, allowUnknownKind: true });
    cronq = c;
    async function* jobs(from: number, to: number) {
      for (let i = from; i < to; i++) yield { kind: 'bulk', key: `bulk:${i}`, payload: { i } };
    }
    expect(await c.enqueueMany(jobs(0, 2_500))).toEqual({ inserted: 2_500, existing: 0 });
    expect(await c.enqueueMany(jobs(2_000, 3_000))).toEqual({ inserted: 500, existing: 500 });
    const [{ n }] = await t.sql('SELECT COUNT(*) AS n FROM cronq_jobs');
    expect(Number(n)).toBe(3_000);
  });

  it('refuses a bad job before touching the database', async () => {
    const c = createCronq({ databaseUrl: t.url, logger: false, allowUnknownKind: true });
    cronq = c;
    await expect(c.enqueue({ kind: 'x', key: '' })).rejects.toThrow('job key is missing');
    await expect(c.enqueue({ kind: 'x', key: 'k'.repeat(256) })).rejects.toThrow(/256 characters long; at most 255/);
    await expect(c.enqueue({ kind: 'x', key: 'k', maxAttempts: 0 })).rejects.toThrow(/maxAttempts must be a whole number/);
    await expect(c.enqueue({ kind: 'x', key: 'k', payload: { n: 1n } })).rejects.toThrow(/cannot be stored as JSON/);
    expect(await t.sql('SELECT id FROM cronq_jobs')).toEqual([]);
  });

  it('names a payload that cannot be JSON in one bounded line, as fan-outs do', async () => {
    const c = createCronq({ databaseUrl: t.url, logger: false, allowUnknownKind: true });
    cronq = c;
    const payload = {
      toJSON() {
        throw new Error(`${'x'.repeat(50_000)}\nsecond line`);
      },
    };
    const error = await c.enqueue({ kind: 'x', key: 'k', payload }).catch((e: Error) => e);
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toMatch(/^job "k": payload cannot be stored as JSON: (Error: )?x+…?$/);
    expect((error as Error).message.length).toBeLessThan(300);
    expect(await t.sql('SELECT id FROM cronq_jobs')).toEqual([]);
  });
});
