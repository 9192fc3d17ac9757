import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createCronq, defineSchedule, defineTask, JobTimeoutError, UsageError, type Cronq, type Task } from '../src/index.ts';
import { useTestDatabase } from './support/db.ts';
import { runCli } from './support/cli.ts';
import { EventLog } from './support/events.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_dead_letters'] });
let cronq: Cronq | null = null;
let log: EventLog;

beforeEach(() => {
  log = new EventLog('info');
});
afterEach(async () => {
  await cronq?.stop({ graceMs: 500 });
  cronq = null;
});

function start(tasks: Task[], options: Partial<Parameters<typeof createCronq>[0]> = {}): Promise<Cronq> {
  cronq = createCronq({ databaseUrl: t.url, tasks, logger: log.logger, concurrency: 4, pollInterval: '50ms', ...options });
  return cronq.start().then(() => cronq!);
}

describe('hostile handler errors', () => {
  it('a handler throwing a 1 MB message does not stall the daemon: other jobs keep completing and renewing, last_error is bounded', async () => {
    const sizes = [1_000_000, 1_000_000];
    const messages = [
      'a0+.-'.repeat(sizes[0] / 5), // a run the quadratic URL regex choked on
      `mysql://user:${'x'.repeat(sizes[1])}`, // scheme://user: and no '@'
    ];
    const c = await start([
      defineTask({
        name: 'loud',
        maxAttempts: 1,
        handle: (job) => {
          throw new Error(messages[Number(job.key.split(':')[1])]);
        },
      }),
      // Runs across several renewals of a 1 s lease: a stalled event loop would lose it.
      defineTask({ name: 'steady', lease: '1s', handle: () => new Promise((resolve) => setTimeout(resolve, 1_500)) }),
      defineTask({ name: 'quick', handle: () => undefined }),
    ]);
    await c.enqueue({ kind: 'steady', key: 'steady:1' });
    await c.enqueueMany([0, 1].map((i) => ({ kind: 'loud', key: `loud:${i}` })));
    await c.enqueueMany(Array.from({ length: 20 }, (_, i) => ({ kind: 'quick', key: `quick:${i}` })));
    await log.waitFor('job_dead', 2);
    await log.waitFor('job_completed', 21);
    expect(log.named('job_lease_lost')).toEqual([]);
    const rows = await t.sql("SELECT job_key, status, attempts, CHAR_LENGTH(last_error) AS n FROM cronq_jobs WHERE kind <> 'quick' ORDER BY job_key");
    expect(rows).toEqual([
      { job_key: 'loud:0', status: 'dead', attempts: 1, n: expect.any(Number) },
      { job_key: 'loud:1', status: 'dead', attempts: 1, n: expect.any(Number) },
      { job_key: 'steady:1', status: 'done', attempts: 1, n: null },
    ]);
    for (const row of rows.slice(0, 2)) expect(row.n).toBeLessThanOrEqual(2000);
    const reasons = await t.sql('SELECT failure_reason FROM cronq_dead_letters ORDER BY job_key');
    expect(reasons[0].failure_reason).toMatch(/^Error: (a0\+\.-)+.*\[truncated\]$/);
    expect(reasons[1].failure_reason).toMatch(/^Error: mysql:\/\/user:x+… \[truncated\]$/);
    for (const e of log.named('job_failed')) expect(e.error.length).toBeLessThanOrEqual(2000);
  });

  it('fails the attempt with a readable reason whatever the handler throws, never leaving the job reserved', async () => {
    const revoked = Proxy.revocable({}, {});
    revoked.revoke();
    const thrown: Array<[unknown, RegExp]> = [
      [Object.create(null), /^non-error thrown: an object without a message$/],
      [{ weird: true }, /^non-error thrown: an object with keys weird$/],
      [{ toString: () => { throw new Error('nope'); } }, /^non-error thrown: an object with keys toString$/],
      [revoked.proxy, /^non-error thrown: an object that cannot be read$/],
      [new Proxy(new Error('x'), { get: () => { throw new Error('trap'); } }), /^Error: \(no readable message\)$/],
      [Symbol('sym'), /^non-error thrown: Symbol\(sym\)$/],
      [null, /^non-error thrown: null$/],
      [undefined, /^non-error thrown: undefined$/],
      ['s'.repeat(500_000), /^non-error thrown: s+… \[truncated\]$/],
    ];
    const c = await start([
      defineTask({
        name: 'odd',
        maxAttempts: 1,
        async handle(job) {
          throw thrown[Number(job.key.split(':')[1])][0];
        },
      }),
      defineTask({
        name: 'odd-then',
        maxAttempts: 1,
        handle: () => ({
          get then() {
            throw new Error('a then getter that throws');
          },
        }),
      }),
      defineTask({
        name: 'odd-sync',
        maxAttempts: 2,
        backoff: { base: '1h' },
        handle() {
          throw Object.create(null);
        },
      }),
    ]);
    await c.enqueueMany(thrown.map((_, i) => ({ kind: 'odd', key: `odd:${i}` })));
    await c.enqueue({ kind: 'odd-sync', key: 'odd-sync:0' });
    await c.enqueue({ kind: 'odd-then', key: 'odd-then:0' });
    await log.waitFor('job_dead', thrown.length + 1);
    await log.waitFor('job_failed', thrown.length + 2);
    expect(log.named('job_run_error')).toEqual([]);
    const [thenLetter] = await t.sql("SELECT failure_reason FROM cronq_dead_letters WHERE kind = 'odd-then'");
    expect(thenLetter.failure_reason).toBe('Error: a then getter that throws');
    const letters = await t.sql("SELECT job_key, failure_reason FROM cronq_dead_letters WHERE kind = 'odd'");
    for (const letter of letters) {
      const [, expected] = thrown[Number(letter.job_key.split(':')[1])];
      expect(letter.failure_reason).toMatch(expected);
      expect(letter.failure_reason.length).toBeLessThanOrEqual(2000);
    }
    const [retried] = await t.sql("SELECT status, last_error FROM cronq_jobs WHERE kind = 'odd-sync'");
    expect(retried.status).not.toBe('reserved');
    expect(retried.last_error).toBe('non-error thrown: an object without a message');
  });
});

describe('hostile effect errors', () => {
  it('fail the attempt with a readable reason when an effect throws an error whose message getter throws, or a revoked Proxy, never leaving the job reserved', async () => {
    // Telling the database's trouble from the effect's read the value unguarded: the run gave up, its job left reserved.
    const revoked = Proxy.revocable({}, {});
    revoked.revoke();
    const unreadable = new Error('x');
    Object.defineProperty(unreadable, 'message', { get: () => { throw new Error('no'); } });
    const thrown = [unreadable, revoked.proxy];
    const c = await start([
      defineTask({
        name: 'odd-effect',
        maxAttempts: 1,
        handle(job, ctx) {
          ctx.effect(async () => {
            throw thrown[Number(job.key.split(':')[1])];
          });
        },
      }),
    ]);
    await c.enqueueMany(thrown.map((_, i) => ({ kind: 'odd-effect', key: `odd-effect:${i}` })));
    await log.waitFor('job_dead', 2);
    expect(log.named('job_run_error')).toEqual([]);
    const letters = await t.sql("SELECT failure_reason FROM cronq_dead_letters WHERE kind = 'odd-effect' ORDER BY job_key");
    expect(letters.map((l) => l.failure_reason)).toEqual(['Error: (no readable message)', 'non-error thrown: an object that cannot be read']);
  });
});

describe('payloads and passwords stay out of error text', () => {
  it("masks a DATABASE_URL password holding a space, '@', '/' or '#' in the CLI's message, whatever the URL's shape", async () => {
    const urls = [
      'mysql://root:my SECRET@127.0.0.1:3306/',
      'mysql://root:my SECRET@[::1/cronq',
      'mysql://root:my@SE/CRET#x@127.0.0.1:3306/',
    ];
    const results = await Promise.all(urls.map((url) => runCli(['stats'], { DATABASE_URL: url, CRONQ_SCHEDULES: 'test/fixtures/schedules-daemon' })));
    for (const result of results) {
      expect(result.code).toBe(64);
      expect(result.stderr).toMatch(/^cronq stats: DATABASE_URL .*mysql:\/\/root:\*\*\*@/);
      expect(result.stderr).not.toMatch(/SECRET|SE\/CRET/);
    }
  });

  it('LOG_LEVEL=debug prints neither the statement nor the payload of a failed enqueue', async () => {
    await t.sql("CREATE TRIGGER refuse_all BEFORE INSERT ON cronq_jobs FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by a trigger'");
    try {
      const result = await runCli(
        ['enqueue', 'anything', '--key', 'k:1', '--payload', '{"card":"PAYLOAD-MARK-4242"}', '--allow-unknown-kind'],
        { DATABASE_URL: t.url, CRONQ_SCHEDULES: 'test/fixtures/schedules-daemon', LOG_LEVEL: 'debug' },
      );
      expect(result.code).toBe(1);
      expect(result.stderr).toContain('refused by a trigger');
      expect(result.stderr).not.toContain('PAYLOAD-MARK');
      expect(result.stderr).not.toMatch(/INSERT INTO/i);
    } finally {
      await t.sql('DROP TRIGGER refuse_all');
    }
  });
});

describe('task timeout', () => {
  it('fails an attempt past its timeout (retryable) and frees the slot, whether or not the handler listens to its signal', async () => {
    const reasons: unknown[] = [];
    const c = await start(
      [
        // Never settles and never looks at its signal.
        defineTask({ name: 'deaf', timeout: '300ms', maxAttempts: 3, backoff: { base: '1h' }, handle: () => new Promise(() => {}) }),
        defineTask({
          name: 'listens',
          timeout: '300ms',
          maxAttempts: 3,
          backoff: { base: '1h' },
          handle: (_job, ctx) =>
            new Promise((_resolve, reject) =>
              ctx.signal.addEventListener('abort', () => {
                reasons.push(ctx.signal.reason);
                reject(ctx.signal.reason);
              }),
            ),
        }),
        defineTask({ name: 'quick', handle: () => undefined }),
      ],
      { concurrency: 2 },
    );
    await c.enqueueMany([{ kind: 'deaf', key: 'deaf:1' }, { kind: 'listens', key: 'listens:1' }]);
    await log.waitFor('job_failed', 2);
    // Both slots are free again: a job enqueued now runs at once.
    await c.enqueue({ kind: 'quick', key: 'quick:after' });
    await log.waitFor('job_completed', 1);
    expect(reasons).toHaveLength(1);
    expect(reasons[0]).toBeInstanceOf(JobTimeoutError);
    const rows = await t.sql("SELECT job_key, status, attempts, last_error FROM cronq_jobs WHERE kind <> 'quick' ORDER BY job_key");
    expect(rows).toEqual([
      { job_key: 'deaf:1', status: 'ready', attempts: 1, last_error: 'JobTimeoutError: timed out after 300ms' },
      { job_key: 'listens:1', status: 'ready', attempts: 1, last_error: 'JobTimeoutError: timed out after 300ms' },
    ]);
    expect(c.health().oldestRunningJobAgeMs).toBe(0);
  });

  it('reports the age of the oldest job running in this process, 0 when none', async () => {
    const c = await start([
      defineTask({ name: 'waits', handle: (_job, ctx) => new Promise((resolve) => ctx.signal.addEventListener('abort', resolve)) }),
    ]);
    expect(c.health().oldestRunningJobAgeMs).toBe(0);
    await c.enqueue({ kind: 'waits', key: 'waits:1' });
    await log.waitFor('job_claimed', 1);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(c.health().oldestRunningJobAgeMs).toBeGreaterThanOrEqual(150);
  });

  it('refuses a bad timeout on a task or a schedule, naming it', () => {
    expect(() => defineTask({ name: 'bad', timeout: 'soon', handle: () => undefined })).toThrow(UsageError);
    expect(() => defineTask({ name: 'bad', timeout: 0, handle: () => undefined })).toThrow(/task 'bad': timeout must be between/);
    expect(() => defineSchedule({ name: 'bad', cron: '* * * * *', timeout: '30d', handle: () => undefined })).toThrow(/schedule 'bad': timeout/);
  });

  it('refuses a backoff over a year, whose retry the database could not date, naming it', () => {
    expect(() => defineTask({ name: 'bad', backoff: { base: '1000w' }, handle: () => undefined })).toThrow(/^task 'bad': backoff.base must be at most 365d \(got "1000w"\)$/);
    expect(() => defineTask({ name: 'bad', backoff: { base: '1000000w' }, handle: () => undefined })).toThrow(/^task 'bad': backoff.base: '1000000w' is longer than 36500d \(100 years\)$/);
    expect(() => defineTask({ name: 'bad', backoff: { max: 1e11 }, handle: () => undefined })).toThrow(/^task 'bad': backoff.max must be at most 365d \(got 100000000000\)$/);
    expect(() => defineTask({ name: 'bad', backoff: { max: 1e15 }, handle: () => undefined })).toThrow(/^task 'bad': backoff.max: 1000000000000000 is longer than 36500d \(100 years\)$/);
    expect(() => defineSchedule({ name: 'bad', cron: '* * * * *', backoff: { base: '400d' }, handle: () => undefined })).toThrow(/^schedule 'bad': backoff.base must be at most 365d/);
    expect(defineTask({ name: 'ok', backoff: { base: '1h', max: '365d' }, handle: () => undefined }).backoff).toEqual({ baseMs: 3_600_000, maxMs: 365 * 86_400_000 });
  });
});

describe('hostile fan-outs', () => {
  it('stop() returns within its grace while a fan-out waits for ever on its next entity, writing what it yielded and handing its tick back', async () => {
    let waiting!: () => void;
    const stuck = new Promise<void>((resolve) => (waiting = resolve));
    const schedule = defineSchedule({
      name: 'stuck',
      cron: '* * * * * *',
      catchUp: false,
      async *jobs() {
        yield { key: 'first' };
        waiting();
        await new Promise(() => undefined); // an API call that never answers
      },
      handle: () => undefined,
    });
    const c = await start([schedule], { workers: false });
    await stuck;
    const stoppedAt = Date.now();
    await c.stop({ graceMs: 200 });
    cronq = null;
    expect(Date.now() - stoppedAt).toBeLessThan(5_000);
    expect(log.named('schedule_tick_interrupted')).toMatchObject([{ enqueued: 1 }]);
    expect(await t.sql("SELECT job_key FROM cronq_jobs WHERE kind = 'stuck'")).toEqual([{ job_key: expect.stringMatching(/^stuck:first:/) }]);
    const [tick] = await t.sql("SELECT finished_at, fanout_until <= UTC_TIMESTAMP(6) AS lease_over FROM cronq_schedule_ticks WHERE schedule_name = 'stuck'");
    expect(tick).toEqual({ finished_at: null, lease_over: 1 });
  });
});
