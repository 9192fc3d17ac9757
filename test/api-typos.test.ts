import { describe, expect, it } from 'vitest';
import { createCronq, defineSchedule, defineTask, EnqueueError, UsageError, type CronqOptions } from '../src/index.ts';
import { REPO_ROOT, runProcess } from './support/cli.ts';
import { useTestDatabase } from './support/db.ts';

// A typo or an undefined value in the library API must never quietly widen or drop what a call
// does: a bulk filter that matches every row, an option left at its default, a run time lost.
const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_dead_letters'] });
const report = defineTask({ name: 'report', handle: () => undefined });
const keep = defineTask({ name: 'keep-me', handle: () => undefined });

function refusal(work: () => unknown): Error {
  try {
    work();
  } catch (error) {
    return error as Error;
  }
  throw new Error('not refused');
}

async function refusalOf(work: Promise<unknown>): Promise<Error> {
  return work.then(
    () => {
      throw new Error('not refused');
    },
    (error: Error) => error,
  );
}

const count = async (where = '1=1') => Number((await t.sql<{ n: number }>(`SELECT COUNT(*) AS n FROM cronq_jobs WHERE ${where}`))[0].n);

describe('createCronq options', () => {
  it('refuses an unknown option, naming the one it most likely meant', () => {
    const error = refusal(() => createCronq({ databaseUrl: t.url, logger: false, concurency: 64 } as CronqOptions));
    expect(error).toBeInstanceOf(UsageError);
    expect(error.message).toBe("createCronq: unknown option 'concurency' (did you mean 'concurrency'?)");
    expect(refusal(() => createCronq({ databaseUrl: t.url, logger: false, pollIntervl: '5s' } as CronqOptions)).message).toMatch(/did you mean 'pollInterval'\?/);
  });

  it('refuses options of the wrong shape in one line each, before anything connects', () => {
    const cases: Array<[unknown, RegExp]> = [
      [null, /^createCronq: options must be an object \(got null\)$/],
      ['mysql://x', /^createCronq: options must be an object \(got string\)$/],
      [{ databaseUrl: 42 }, /^createCronq: databaseUrl must be a mysql:\/\/ URL \(got number\)$/],
      [{ databaseUrl: '' }, /^createCronq: databaseUrl must be a mysql:\/\/ URL \(got an empty string\)$/],
      [{ workers: 'no' }, /^createCronq: workers must be true or false \(got string\)$/],
      [{ catchUncaught: 'yes' }, /^createCronq: catchUncaught must be true or false/],
      [{ schedulesDir: 5 }, /^createCronq: schedulesDir must be a folder's path, or null for none \(got number\)$/],
      [{ clock: {} }, /^createCronq: clock must have now\(\) and sleepUntil\(at, signal\) methods$/],
      [{ clock: { now: () => new Date() } }, /clock must have now\(\) and sleepUntil/],
      [{ observer: 5 }, /^createCronq: observer must be an object of callbacks \(got number\)$/],
    ];
    for (const [options, message] of cases) {
      const error = refusal(() => createCronq(options as CronqOptions));
      expect(error, JSON.stringify(options)).toBeInstanceOf(UsageError);
      expect(error.message, JSON.stringify(options)).toMatch(message);
    }
  });

  it('refuses a duration that is neither text nor a number (an object, true, null, an array) in one line naming it, wherever one is taken', () => {
    // From JavaScript (or a config file's JSON): each was a TypeError from inside the parser (text.charCodeAt is not a function).
    const handle = () => undefined;
    const cases: Array<[() => unknown, string]> = [
      [() => createCronq({ databaseUrl: t.url, logger: false, pollInterval: {} as never }), 'pollInterval: an object is not a duration'],
      [() => createCronq({ databaseUrl: t.url, logger: false, heartbeatInterval: true as never }), 'heartbeatInterval: true is not a duration'],
      [() => createCronq({ databaseUrl: t.url, logger: false, pruneDoneOlderThan: null as never }), 'pruneDoneOlderThan: null is not a duration'],
      [() => defineTask({ name: 'x', handle, lease: {} as never }), "task 'x': lease: an object is not a duration"],
      [() => defineTask({ name: 'x', handle, timeout: null as never }), "task 'x': timeout: null is not a duration"],
      [() => defineTask({ name: 'x', handle, timeout: [] as never }), "task 'x': timeout: an array is not a duration"],
      [() => defineTask({ name: 'x', handle, backoff: { base: {} as never } }), "task 'x': backoff.base: an object is not a duration"],
      [() => defineSchedule({ name: 's', cron: '@daily', handle, catchUp: { window: {} as never } }), "schedule 's': catchUp.window: an object is not a duration"],
      [() => defineSchedule({ name: 's', cron: '@daily', handle, expect: { within: {} as never } }), "schedule 's': expect.within: an object is not a duration"],
    ];
    for (const [work, message] of cases) {
      const error = refusal(work);
      expect(error, message).toBeInstanceOf(UsageError);
      expect(error.message).toBe(`${message} (use e.g. 100ms, 2s, 5m, 1h, 40d, or a number of milliseconds)`);
    }
  });

  it('refuses an option value JSON cannot write (a bigint, an object that holds itself) in one line naming the option, not a TypeError from writing the message', () => {
    const handle = () => undefined;
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    const cases: Array<[() => unknown, RegExp]> = [
      [() => defineTask({ name: 'x', handle, maxAttempts: 5n as never }), /^task 'x': maxAttempts must be a whole number from 1 to \d+ \(got a bigint\)$/],
      [() => defineTask({ name: 'x', handle, concurrency: 2n as never }), /concurrency must be a whole number from 1 to \d+ \(got a bigint\)$/],
      [() => defineSchedule({ name: 's', cron: '@daily', handle, period: circular as never }), /^schedule 's': period must be one of .* \(got an object\)$/],
      [() => defineSchedule({ name: 's', cron: '@daily', handle, overlap: 1n as never }), /^schedule 's': overlap must be 'allow' or 'skip' \(got a bigint\)$/],
      [() => defineSchedule({ name: 's', cron: '@daily', handle, catchUp: { mode: circular as never } }), /^schedule 's': catchUp.mode must be 'all' or 'latest' \(got an object\)$/],
      [() => defineSchedule({ name: 's', cron: '@daily', handle, catchUp: { max: 3n as never } }), /^schedule 's': catchUp.max must be a whole number from 1 to \d+ \(got a bigint\)$/],
    ];
    for (const [work, message] of cases) {
      const error = refusal(work);
      expect(error, String(message)).toBeInstanceOf(UsageError);
      expect(error.message).toMatch(message);
    }
    // What JSON writes is shown as before.
    expect(refusal(() => defineTask({ name: 'x', handle, maxAttempts: '5' as never })).message).toBe('task \'x\': maxAttempts must be a whole number from 1 to 1000 (got "5")');
  });

  it('quotes a refused option value in a bounded line: a long string or a big object is cut, a function is named', () => {
    const handle = () => undefined;
    const long = refusal(() => defineSchedule({ name: 's', cron: '@daily', handle, period: 'x'.repeat(100_000) as never })).message;
    expect(long).toMatch(/^schedule 's': period must be one of .* \(got "x{64}…"\)$/);
    const big = refusal(() => defineSchedule({ name: 's', cron: '@daily', handle, overlap: { list: Array.from({ length: 10_000 }, (_, i) => i) } as never })).message;
    expect(big.length).toBeLessThan(300);
    expect(refusal(() => defineSchedule({ name: 's', cron: '@daily', handle, catchUp: { mode: handle as never } })).message).toMatch(/\(got a function\)$/);
  });

  it('refuses a misspelt observer callback, or a callback that is no function, but not an observer\'s own state', () => {
    expect(refusal(() => createCronq({ databaseUrl: t.url, logger: false, observer: { jobComplete() {} } as never })).message).toBe(
      "createCronq: observer: unknown callback 'jobComplete' (did you mean 'jobCompleted'?)",
    );
    expect(refusal(() => createCronq({ databaseUrl: t.url, logger: false, observer: { jobCompleted: 5 } as never })).message).toBe('createCronq: observer.jobCompleted must be a function (got number)');
    class Counting {
      completed = 0;
      jobCompleted() {
        this.completed += 1;
      }
    }
    expect(() => createCronq({ databaseUrl: t.url, logger: false, observer: new Counting() })).not.toThrow();
  });

  it('takes an observer of some callbacks only, and tells it those', async () => {
    let completed = 0;
    const cronq = createCronq({ databaseUrl: t.url, logger: false, tasks: [report], observer: { jobCompleted: () => void completed++ } });
    try {
      await cronq.enqueue(report, { key: 'report:observed', payload: {} });
      await cronq.start();
      await expect.poll(() => completed, { timeout: 10_000 }).toBe(1);
    } finally {
      await cronq.stop();
    }
  });

  it('lets the process exit once stop() has resolved, not after the grace period', async () => {
    const app = `import { createCronq } from './src/index.ts';
      const cronq = createCronq({ databaseUrl: ${JSON.stringify(t.url)}, logger: false, schedulesDir: null });
      await cronq.start();
      await cronq.stop({ graceMs: 60_000 });
      process.stdout.write(String(Date.now()));`;
    const run = await runProcess(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', app], { cwd: REPO_ROOT, timeoutMs: 30_000 });
    expect(run.code, run.stderr).toBe(0);
    // A timer left from the grace would hold the process for the whole minute.
    expect(Date.now() - Number(run.stdout)).toBeLessThan(5_000);
  });
});

describe('enqueue fields', () => {
  it('refuses a field a job does not have, naming the one it most likely meant, and writes nothing', async () => {
    const cronq = createCronq({ databaseUrl: t.url, logger: false, tasks: [report] });
    try {
      const tomorrow = new Date(Date.now() + 86_400_000);
      const error = await refusalOf(cronq.enqueue(report, { key: 'report:typo', runat: tomorrow } as never));
      expect(error).toBeInstanceOf(UsageError);
      expect(error.message).toBe(`job "report:typo": unknown field 'runat' (did you mean 'runAt'?)`);
      expect((await refusalOf(cronq.enqueue({ kind: 'report', key: 'report:typo', maxAttempt: 3 } as never))).message).toMatch(/unknown field 'maxAttempt' \(did you mean 'maxAttempts'\?\)/);
      expect(await count()).toBe(0);
    } finally {
      await cronq.stop();
    }
  });

  it("refuses a kind given by name as the first argument (the CLI's order), or a kind beside a task handle that is not the task's, saying what to write, and writes nothing", async () => {
    const cronq = createCronq({ databaseUrl: t.url, logger: false, tasks: [report, keep] });
    try {
      // It said `enqueue: unknown option 'key' (known: tx, allowUnknownKind)`, reading the job as the call's options.
      expect((await refusalOf(cronq.enqueue('report' as never, { key: 'report:1' } as never))).message).toBe(
        `enqueue: the first argument must be a task (defineTask, defineSchedule) or a job ({ kind, key, payload }); got the string "report": enqueue({ kind: "report", key, payload })`,
      );
      expect((await refusalOf(cronq.enqueueMany('report' as never, [{ key: 'report:2' }] as never))).message).toMatch(/^enqueueMany: the first argument must be a task \(defineTask, defineSchedule\) or jobs; got the string "report"/);
      // The handle's kind won, silently: the job went to another handler than the one named.
      expect((await refusalOf(cronq.enqueue(report, { key: 'report:3', kind: 'keep-me' } as never))).message).toBe(
        `job "report:3": kind "keep-me" is not the task's ("report"): leave kind out with a task handle, or enqueue({ kind, key, payload }) without one`,
      );
      expect(await count()).toBe(0);
      expect((await cronq.enqueue(report, { key: 'report:4', kind: 'report', payload: {} } as never)).created).toBe(true);
    } finally {
      await cronq.stop();
    }
  });

  it('refuses call options it does not know, and a tx that cannot run statements', async () => {
    const cronq = createCronq({ databaseUrl: t.url, logger: false, tasks: [report] });
    try {
      expect((await refusalOf(cronq.enqueue(report, { key: 'report:o', payload: {} }, { allowUnknwnKind: true } as never))).message).toBe(
        "enqueue: unknown option 'allowUnknwnKind' (did you mean 'allowUnknownKind'?)",
      );
      expect((await refusalOf(cronq.enqueue(report, { key: 'report:o', payload: {} }, { tx: {} } as never))).message).toMatch(/^enqueue: tx must be a Drizzle transaction/);
      expect((await refusalOf(cronq.enqueueMany(report, [], { tx: 'tx' } as never))).message).toMatch(/^enqueue: tx must be a Drizzle transaction/);
      // null stays "none", as JavaScript callers have passed it.
      expect(await cronq.enqueue(report, { key: 'report:null', payload: {} }, null as never)).toMatchObject({ created: true });
      expect(await cronq.enqueue(report, { key: 'report:null-tx', payload: {} }, { tx: null } as never)).toMatchObject({ created: true });
      expect(await count()).toBe(2);
    } finally {
      await cronq.stop();
    }
  });

  it('checks every job of an array before writing any: one bad job refuses the call, naming its index', async () => {
    const cronq = createCronq({ databaseUrl: t.url, logger: false, tasks: [report] });
    try {
      const jobs = Array.from({ length: 2_500 }, (_, i) => ({ key: `report:${i}`, payload: i === 2_400 ? { amount: 10n } : { i } }));
      const error = await refusalOf(cronq.enqueueMany(report, jobs));
      expect(error).toBeInstanceOf(UsageError);
      expect(error.message).toMatch(/^enqueueMany: jobs\[2400\]: job "report:2400": payload cannot be stored as JSON: .*BigInt.*; nothing was written$/);
      expect((await refusalOf(cronq.enqueueMany(report, [{ key: 'report:a', payload: {} }, null as never]))).message).toBe('enqueueMany: jobs[1]: a job must be an object; nothing was written');
      expect(await count()).toBe(0);
      expect((await refusalOf(cronq.enqueueMany(report, null as never))).message).toBe('enqueueMany: jobs must be an array or an iterable of jobs (got null)');
      expect((await refusalOf(cronq.enqueueMany(report, { key: 'report:b' } as never))).message).toMatch(/jobs must be an array or an iterable of jobs \(got object\)/);
    } finally {
      await cronq.stop();
    }
  });

  it('refuses a bad job of a stream (any other iterable) naming which one it was and what was written before it, which stays written', async () => {
    const cronq = createCronq({ databaseUrl: t.url, logger: false, tasks: [report] });
    try {
      await cronq.enqueue(report, { key: 'report:s1', payload: {} });
      function* jobs() {
        for (let i = 0; i < 3; i++) yield { key: `report:s${i}`, payload: {} };
        yield { key: '', payload: {} };
        yield { key: 'report:s9', payload: {} };
      }
      // It said only `job key is missing`: not which call, which job, nor what it had written.
      const error = await refusalOf(cronq.enqueueMany(report, jobs()));
      expect(error).toBeInstanceOf(UsageError);
      expect(error.message).toBe('enqueueMany: job 3 of the stream (from 0): job key is missing; the jobs read before it were written (2 new, 1 already present)');
      expect((await t.sql<{ job_key: string }>("SELECT job_key FROM cronq_jobs ORDER BY job_key")).map((r) => r.job_key)).toEqual(['report:s0', 'report:s1', 'report:s2']);
    } finally {
      await cronq.stop();
    }
  });
});

describe('enqueue errors', () => {
  it('an unreachable server fails an enqueue with an EnqueueError naming the job, the server and the database', async () => {
    const cronq = createCronq({ databaseUrl: 'mysql://root@127.0.0.1:1/nowhere', logger: false });
    try {
      const one = await refusalOf(cronq.enqueue({ kind: 'x', key: 'order:7' }, { allowUnknownKind: true }));
      expect(one).toBeInstanceOf(EnqueueError);
      expect(one.message).toMatch(/^enqueueing job "order:7" \(reaching the database at 127\.0\.0\.1:1, database 'nowhere'\) failed: ECONNREFUSED/);
      const many = await refusalOf(cronq.enqueueMany([{ kind: 'x', key: 'order:8' }], { allowUnknownKind: true }));
      expect(many.message).toMatch(/^enqueueMany \(reaching the database at 127\.0\.0\.1:1, database 'nowhere'\) failed: ECONNREFUSED/);
    } finally {
      await cronq.stop();
    }
  });
});

describe('admin call options', () => {
  it('refuses a misspelt option of any admin call instead of using its default (tick would run today\'s fire)', async () => {
    const cronq = createCronq({ databaseUrl: t.url, logger: false, tasks: [report] });
    try {
      const admin = cronq.admin;
      const cases: Array<[string, Promise<unknown>, string]> = [
        ['tick', admin.tick('report', { att: new Date('2026-06-01T12:00:00Z') } as never), "tick: unknown option 'att' (did you mean 'at'?)"],
        ['cancel', admin.cancel({ key: 'report:x' }, { reason: 'x', byy: 'alice' } as never), "cancel: unknown option 'byy' (did you mean 'by'?)"],
        ['cancelMatching', admin.cancelMatching({}, { reasn: 'x' } as never), "cancelMatching: unknown option 'reasn' (did you mean 'reason'?)"],
        ['schedules', admin.schedules({ cuont: 3 } as never), "schedules: unknown option 'cuont' (did you mean 'count'?)"],
        ['daemons', admin.daemons({ within: 5 } as never), "daemons: unknown option 'within' (did you mean 'withinMs'?)"],
        ['scheduleHealth', admin.scheduleHealth({ att: new Date() } as never), "scheduleHealth: unknown option 'att' (did you mean 'at'?)"],
        ['recentTicks', admin.recentTicks('report', 5, { befor: new Date() } as never), "recentTicks: unknown option 'befor' (did you mean 'before'?)"],
        ['completions', admin.completions({ queue: ['a'] } as never), "completions: unknown option 'queue' (did you mean 'queues'?)"],
      ];
      for (const [what, call, message] of cases) expect((await refusalOf(call)).message, what).toBe(message);
      expect(await count()).toBe(0);
    } finally {
      await cronq.stop();
    }
  });
});

describe('admin call arguments that would be half read', () => {
  it('refuses a job named by both id and key, an empty key, a misspelt pause option, and extra resume arguments, changing nothing', async () => {
    const cronq = createCronq({ databaseUrl: t.url, logger: false, workers: false, scheduler: false, tasks: [report] });
    try {
      await cronq.enqueue(report, { key: 'report:1', payload: null });
      const [{ id }] = await t.sql<{ id: number }>("SELECT id FROM cronq_jobs WHERE job_key = 'report:1'");
      const admin = cronq.admin;
      const cases: Array<[string, Promise<unknown>, string | RegExp]> = [
        ['cancel id and key', admin.cancel({ id: Number(id), key: 'x' } as never, { reason: 'x' }), 'cancel: a job is named by { id } or { key }, not both'],
        ['job id and key', admin.job({ id: Number(id), key: 'report:1' } as never), 'job: a job is named by { id } or { key }, not both'],
        ['job empty key', admin.job({ key: '' }), 'job: key must be a non-empty string (got "")'],
        ['cancel empty key', admin.cancel({ key: '' }, { reason: 'x' }), 'cancel: key must be a non-empty string (got "")'],
        ['job key typo', admin.job({ kye: 'report:1' } as never), "job: unknown field 'kye' (did you mean 'key'?)"],
        ['pause reasn', admin.pauses.pause('queue', 'q1', { reasn: 'x' } as never), "pauses.pause: unknown option 'reasn' (did you mean 'reason'?)"],
        ['pause options not an object', admin.pauses.pause('queue', 'q1', 'x' as never), 'pauses.pause: options must be an object ({ reason?, by? })'],
        ['resume options', (admin.pauses.resume as (...a: unknown[]) => Promise<unknown>)('queue', 'q1', { reason: 'x' }), /^pauses\.resume takes \(target, name\) only/],
        ['list arguments', (admin.pauses.list as (...a: unknown[]) => Promise<unknown>)('queue'), /^pauses\.list takes no arguments/],
        ['recentTicks empty name', admin.recentTicks('', 5), /^recentTicks: schedule name must be 1-64 letters/],
        ['completions empty queue', admin.completions({ queues: [''] }), /^completions: queues entry must be 1-64 letters/],
      ];
      for (const [what, call, message] of cases) {
        const error = await refusalOf(call);
        expect(error, what).toBeInstanceOf(UsageError);
        if (typeof message === 'string') expect(error.message, what).toBe(message);
        else expect(error.message, what).toMatch(message);
      }
      expect(await t.sql("SELECT status FROM cronq_jobs WHERE job_key = 'report:1'")).toEqual([{ status: 'ready' }]);
      expect(await admin.pauses.list()).toEqual([]);
    } finally {
      await cronq.stop();
    }
  });

  it('refuses a retention that is not a whole number of milliseconds, and a listing count past 1000, before the database', async () => {
    // Nothing listens here: a call that reached the database would fail differently.
    const cronq = createCronq({ databaseUrl: 'mysql://root@127.0.0.1:1/nowhere', logger: false, workers: false, scheduler: false });
    try {
      const admin = cronq.admin;
      const retention = /^olderThanMs must be a whole number of milliseconds from 3600000 \(1h\) to 3153600000000 \(100 years\) \(got /;
      for (const olderThanMs of [Number.POSITIVE_INFINITY, Number.NaN, 86_400_000.5, -86_400_000, 1e17]) {
        for (const call of [admin.prune({ olderThanMs, dryRun: true }), admin.prune({ olderThanMs }), admin.checkRetention(olderThanMs)]) {
          const error = await refusalOf(call);
          expect(error, String(olderThanMs)).toBeInstanceOf(UsageError);
          expect(error.message, String(olderThanMs)).toMatch(retention);
        }
      }
      expect((await refusalOf(admin.prune({ olderThanMs: '30d' } as never))).message).toMatch(/\(got string\)$/);
      expect((await refusalOf(admin.deadLetters.list({ limit: 1001 }))).message).toBe('limit must be a whole number from 1 to 1000 (got 1001)');
      expect((await refusalOf(admin.deadLetters.groups({ limit: 1001 }))).message).toBe('limit must be a whole number from 1 to 1000 (got 1001)');
    } finally {
      await cronq.stop();
    }
  });

  it('cronq dead list --limit takes 1 to 1000, as the README says', async () => {
    const r = await runProcess(process.execPath, [`${REPO_ROOT}/bin/cronq.js`, 'dead', 'list', '--limit', '1000000'], { cwd: REPO_ROOT, env: { DATABASE_URL: t.url }, timeoutMs: 30_000 });
    expect(r).toEqual({ code: 64, stdout: '', stderr: "cronq dead list: --limit must be a whole number from 1 to 1000 (got '1000000')\n" });
  });
});

describe('bulk filters', () => {
  it('refuses a misspelt field or one present but undefined instead of cancelling every job', async () => {
    const cronq = createCronq({ databaseUrl: t.url, logger: false, tasks: [report, keep] });
    try {
      await cronq.enqueueMany([
        { kind: 'keep-me', key: 'keep:1' },
        { kind: 'keep-me', key: 'keep:2' },
        { kind: 'report', key: 'report:1' },
      ]);
      const typo = await refusalOf(cronq.admin.cancelMatching({ kidn: 'report' } as never, { reason: 'cancel the bad reports' }));
      expect(typo).toBeInstanceOf(UsageError);
      expect(typo.message).toBe("cancelMatching: unknown option 'kidn' (did you mean 'kind'?)");
      const options: { kind?: string } = {};
      const unset = await refusalOf(cronq.admin.cancelMatching({ kind: options.kind }, { reason: 'x' }));
      expect(unset.message).toBe('cancelMatching: kind is undefined; leave the field out to match every kind, or give one');
      expect((await refusalOf(cronq.admin.cancelMatching({ kind: 7 } as never, { reason: 'x' }))).message).toBe('cancelMatching: kind must be a non-empty string (got 7)');
      expect(await count("status = 'ready'")).toBe(3);
      // The same filter, spelt right, cancels the one report.
      expect(await cronq.admin.cancelMatching({ kind: 'report' }, { reason: 'x' })).toEqual({ ready: 1, running: 0, skippedHeld: 0 });
    } finally {
      await cronq.stop();
    }
  });

  it('prune refuses a call without its options, or with one it does not know, in one line', async () => {
    const cronq = createCronq({ databaseUrl: t.url, logger: false });
    try {
      expect((await refusalOf(cronq.admin.prune(undefined as never))).message).toBe('prune: give { olderThanMs } (and dryRun if you like)');
      expect((await refusalOf(cronq.admin.prune({ olderThanMs: 86_400_000, dryrun: true } as never))).message).toBe("prune: unknown option 'dryrun' (did you mean 'dryRun'?)");
    } finally {
      await cronq.stop();
    }
  });

  it('refuses the same in the dead-letter bulk calls and listings', async () => {
    const cronq = createCronq({ databaseUrl: t.url, logger: false });
    try {
      const dead = cronq.admin.deadLetters;
      expect((await refusalOf(dead.requeueMatching({ knd: 'report' } as never, 'fixed'))).message).toBe("deadLetters.requeueMatching: unknown option 'knd' (did you mean 'kind'?)");
      expect((await refusalOf(dead.discardMatching({ queue: undefined }, 'noise'))).message).toMatch(/^deadLetters\.discardMatching: queue is undefined/);
      expect((await refusalOf(dead.discardMatching({ since: 'yesterday' } as never, 'noise'))).message).toMatch(/^deadLetters\.discardMatching: since must be a valid Date$/);
      expect((await refusalOf(dead.list({ includeReviewd: true } as never))).message).toMatch(/did you mean 'includeReviewed'\?/);
      // An undefined limit or includeReviewed narrows nothing away: taken as not given.
      const opts: { limit?: number; includeReviewed?: boolean } = {};
      expect(await dead.list({ kind: 'x', limit: opts.limit, includeReviewed: opts.includeReviewed })).toEqual({ letters: [], more: false });
    } finally {
      await cronq.stop();
    }
  });
});
