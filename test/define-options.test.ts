import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { defineSchedule, defineTask, UsageError } from '../src/index.ts';
import { loadSchedulesDir } from '../src/schedule/loader.ts';
import { TaskRegistry } from '../src/tasks/registry.ts';
import { REPO_ROOT } from './support/cli.ts';

const handle = () => undefined;

function refusal(define: () => unknown): string {
  try {
    define();
  } catch (error) {
    expect(error).toBeInstanceOf(UsageError);
    return (error as Error).message;
  }
  throw new Error('expected a UsageError');
}

describe('options defineTask and defineSchedule do not know', () => {
  it('defineTask refuses a misspelt option naming it and the option meant', () => {
    expect(refusal(() => defineTask({ name: 'a', handle, maxAttempt: 3 } as never))).toBe("task 'a': unknown option 'maxAttempt' (did you mean 'maxAttempts'?)");
    expect(refusal(() => defineTask({ name: 'a', handle, timout: '1s' } as never))).toBe("task 'a': unknown option 'timout' (did you mean 'timeout'?)");
    expect(refusal(() => defineTask({ name: 'a', handle, retries: 3 } as never))).toBe(
      "task 'a': unknown option 'retries' (known: name, handle, queue, maxAttempts, backoff, lease, timeout, concurrency, parse)",
    );
  });

  it('quotes a refused maxAttempts or concurrency as written: Infinity and NaN, not the null JSON makes of them', () => {
    expect(refusal(() => defineTask({ name: 'a', handle, maxAttempts: Infinity }))).toBe("task 'a': maxAttempts must be a whole number from 1 to 1000 (got Infinity)");
    expect(refusal(() => defineTask({ name: 'a', handle, concurrency: Number.NaN }))).toBe("task 'a': concurrency must be a whole number from 1 to 10000 (got NaN)");
    expect(refusal(() => defineTask({ name: 'a', handle, maxAttempts: '3' as never }))).toBe(`task 'a': maxAttempts must be a whole number from 1 to 1000 (got "3")`);
  });

  it('says a name or queue of the allowed characters must start with a letter or digit when it starts with . _ or -', () => {
    const handle = () => undefined;
    expect(() => defineTask({ name: '-nightly', handle })).toThrow(`name must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit (got "-nightly")`);
    expect(() => defineTask({ name: 'x', queue: '_bulk', handle })).toThrow(`queue must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit (got "_bulk")`);
    // Other refusals read as before: the hint is for the rule the list of characters leaves out.
    expect(() => defineTask({ name: 'has space', handle })).toThrow(`name must be 1-64 letters, digits, '.', '_' or '-' (got "has space")`);
  });

  it('quotes a refused value in a bounded line, in time bounded by the line: a huge bigint, a function, a long symbol', () => {
    // String() wrote all of each: 2n ** 10_000_000n took seconds of decimal digits, a function its whole source.
    const startedAt = performance.now();
    expect(refusal(() => defineTask({ name: 'a', handle, maxAttempts: (2n ** 10_000_000n) as never }))).toBe("task 'a': maxAttempts must be a whole number from 1 to 1000 (got a bigint)");
    expect(performance.now() - startedAt).toBeLessThan(500);
    expect(refusal(() => defineTask({ name: 'a', handle, maxAttempts: 3n as never }))).toBe("task 'a': maxAttempts must be a whole number from 1 to 1000 (got a bigint)");
    const source = function three() {
      // a comment
      return 3;
    };
    expect(refusal(() => defineTask({ name: 'a', handle, concurrency: source as never }))).toBe("task 'a': concurrency must be a whole number from 1 to 10000 (got function)");
    expect(refusal(() => defineTask({ name: 'a', handle, concurrency: Symbol('s'.repeat(1_000)) as never }))).toBe(`task 'a': concurrency must be a whole number from 1 to 10000 (got Symbol(${'s'.repeat(57)}…)`);
  });

  it('refuses a backoff whose max is below its base in one plain sentence, in the units written', () => {
    const base = { name: 'o', cron: '0 2 * * *', handle };
    expect(refusal(() => defineSchedule({ ...base, backoff: { base: '1h', max: '1m' } }))).toBe("schedule 'o': backoff.max (1m) is below its base (1h)");
  });

  it('defineSchedule refuses a misspelt option, also inside catchUp, backoff and expect', () => {
    const base = { name: 's', cron: '0 2 * * *', handle };
    expect(refusal(() => defineSchedule({ ...base, timeZone: 'Europe/Paris' } as never))).toBe("schedule 's': unknown option 'timeZone' (did you mean 'timezone'?)");
    expect(refusal(() => defineSchedule({ ...base, catchup: false } as never))).toBe("schedule 's': unknown option 'catchup' (did you mean 'catchUp'?)");
    expect(refusal(() => defineSchedule({ ...base, catchUp: { windw: '1h' } } as never))).toBe("schedule 's': unknown option 'catchUp.windw' (did you mean 'catchUp.window'?)");
    expect(refusal(() => defineSchedule({ ...base, backoff: { bas: '1s' } } as never))).toBe("schedule 's': unknown option 'backoff.bas' (did you mean 'backoff.base'?)");
    expect(refusal(() => defineSchedule({ ...base, expect: { within: '2h', every: '1h' } } as never))).toBe(
      "schedule 's': unknown option 'expect.every' (known: within)",
    );
  });

  it('accepts every documented option', () => {
    expect(() =>
      defineTask({ name: 't', handle, queue: 'q', maxAttempts: 2, backoff: { base: '1s', max: '1m' }, lease: '30s', timeout: '10s', concurrency: 2, parse: (p) => p }),
    ).not.toThrow();
    expect(() =>
      defineSchedule({
        name: 's',
        cron: '0 2 * * *',
        timezone: 'UTC',
        period: 'day',
        catchUp: { window: '1d', mode: 'all', max: 10 },
        overlap: 'skip',
        jobs: function* () {},
        command: 'true',
        env: { A: 'b' },
        stdin: '',
        cwd: '/',
        expect: { within: '2h' },
        queue: 'q',
        maxAttempts: 2,
        backoff: { base: '1s' },
        lease: '30s',
        timeout: '10s',
        concurrency: 1,
        parse: (p) => p,
      }),
    ).not.toThrow();
  });

  it('the example schedules and the test fixtures still load', async () => {
    for (const dir of ['schedules', ...readdirSync(join(REPO_ROOT, 'test/fixtures')).filter((d) => d.startsWith('schedules')).map((d) => `test/fixtures/${d}`)]) {
      const files = readdirSync(join(REPO_ROOT, dir));
      if (!files.some((f) => /\.(ts|js|mjs|mts)$/.test(f))) continue;
      // Fixtures meant to be refused say so in their folder's name.
      if (/bad|broken|refus|invalid/.test(dir)) continue;
      const registry = new TaskRegistry();
      await loadSchedulesDir(join(REPO_ROOT, dir), registry);
      expect(registry.size, dir).toBeGreaterThan(0);
    }
  });
});

describe('a variant of a defined task: defineTask({ ...task, name, ...overrides })', () => {
  const sendEmail = defineTask({ name: 'send-email', handle, maxAttempts: 3, backoff: { base: '2s', max: '1m' }, lease: '5m', timeout: '30s' });

  it('takes the task as it was defined, with the options written after the spread', () => {
    const urgent = defineTask({ ...sendEmail, name: 'send-email-urgent', queue: 'urgent' });
    expect(urgent).toMatchObject({ name: 'send-email-urgent', queue: 'urgent', maxAttempts: 3, leaseMs: 300_000, timeoutMs: 30_000, concurrency: null, parse: null });
    expect(urgent.backoff).toEqual(sendEmail.backoff);
  });

  it('a new timeout replaces the task’s, it does not stack on it', async () => {
    const quick = defineTask({ name: 'quick', timeout: '20ms', handle: () => new Promise((resolve) => setTimeout(() => resolve('done'), 60)) });
    const patient = defineTask({ ...quick, name: 'patient', timeout: '5s' });
    const ctx = { signal: new AbortController().signal } as never;
    await expect(patient.handle({} as never, ctx)).resolves.toBe('done');
  });

  it('defaults follow the new options as if they had been written out: a limited variant runs in a queue named after itself', () => {
    const limited = defineTask({ name: 'report', handle, concurrency: 2 });
    expect(defineTask({ ...limited, name: 'report-eu' }).queue).toBe('report-eu');
  });

  it('an option written as undefined after the spread is not given: it goes back to its default, not to the task’s', () => {
    const limited = defineTask({ ...sendEmail, name: 'limited', queue: 'mail', concurrency: 2, parse: (p) => p });
    const plain = defineTask({
      ...limited,
      name: 'plain',
      queue: undefined,
      maxAttempts: undefined,
      backoff: undefined,
      lease: undefined,
      timeout: undefined,
      concurrency: undefined,
      parse: undefined,
    });
    expect(plain).toMatchObject({ queue: 'default', maxAttempts: 5, leaseMs: 60_000, timeoutMs: null, concurrency: null, parse: null });
    expect(plain.backoff).toEqual(defineTask({ name: 'y', handle }).backoff);
    // Not wrapped in the task's timeout.
    expect(plain.handle).toBe(handle);
  });

  it("refuses a task's own field set to something else, naming the option to use", () => {
    expect(refusal(() => defineTask({ ...sendEmail, name: 'x', leaseMs: 1_000 } as never))).toBe("task 'x': unknown option 'leaseMs' (did you mean 'lease'?)");
  });
});

describe('a schedule of a defined task: defineSchedule({ ...task, cron, ...options })', () => {
  const sendEmail = defineTask({ name: 'send-email', handle, maxAttempts: 3, backoff: { base: '2s', max: '1m' }, lease: '5m', timeout: '30s' });

  it('takes the task as it was defined, with the schedule’s options written after the spread', () => {
    const digest = defineSchedule({ ...sendEmail, name: 'digest', cron: '0 8 * * *', period: 'day', maxAttempts: 2 });
    expect(digest).toMatchObject({ name: 'digest', cron: '0 8 * * *', period: 'day', queue: 'default', maxAttempts: 2, leaseMs: 300_000, timeoutMs: 30_000, parse: null });
    expect(digest.backoff).toEqual(sendEmail.backoff);
  });

  it('keeps the task’s name unless given one, so it cannot be registered beside the task', () => {
    const daily = defineSchedule({ ...sendEmail, cron: '@daily' });
    expect(daily.name).toBe('send-email');
    expect(refusal(() => new TaskRegistry([sendEmail, daily]))).toMatch(/^duplicate name 'send-email'/);
  });

  it('a new timeout replaces the task’s, it does not stack on it; undefined leaves none', async () => {
    const quick = defineTask({ name: 'quick', timeout: '20ms', handle: () => new Promise((resolve) => setTimeout(() => resolve('done'), 60)) });
    const ctx = { signal: new AbortController().signal } as never;
    await expect(defineSchedule({ ...quick, name: 'patient', cron: '@daily', timeout: '5s' }).handle({} as never, ctx)).resolves.toBe('done');
    expect(defineSchedule({ ...quick, name: 'unbounded', cron: '@daily', timeout: undefined }).timeoutMs).toBe(null);
  });

  it('defaults follow the schedule’s options: a schedule of a limited task runs in a queue named after itself', () => {
    const limited = defineTask({ name: 'report', handle, concurrency: 2 });
    expect(defineSchedule({ ...limited, name: 'report-nightly', cron: '@daily' }).queue).toBe('report-nightly');
  });

  it("refuses a command schedule's bad command spec naming the schedule, as for its other options", () => {
    expect(refusal(() => defineSchedule({ name: 'huge', cron: '@daily', command: `true # ${'x'.repeat(200_000)}` }))).toBe(
      "schedule 'huge': command is 200007 bytes long; exec takes at most 131071 (put a longer script in a file and run that)",
    );
    expect(refusal(() => defineSchedule({ name: 'nowhere', cron: '@daily', command: 'true', cwd: '' }))).toBe("schedule 'nowhere': command cwd must be a non-empty string");
  });

  it('refuses a command beside the handle the spread brought, saying how to drop it', () => {
    expect(refusal(() => defineSchedule({ ...sendEmail, name: 'x', cron: '@daily', command: 'true' }))).toBe(
      "schedule 'x': give exactly one of handle and command (the spread task 'send-email' brings its handle: write handle: undefined to run only the command)",
    );
    expect(defineSchedule({ ...sendEmail, name: 'x', cron: '@daily', command: 'true', handle: undefined })).toMatchObject({ command: 'true', maxAttempts: 3, leaseMs: 300_000 });
  });

  it("refuses a task's own field set to something else, naming the option to use", () => {
    expect(refusal(() => defineSchedule({ ...sendEmail, name: 'x', cron: '@daily', leaseMs: 1_000 } as never))).toBe(
      "schedule 'x': unknown option 'leaseMs' (did you mean 'lease'?)",
    );
  });
});

describe('a schedule, or its options, given to defineTask', () => {
  const nightly = defineSchedule({ name: 'nightly', cron: '0 3 * * *', timezone: 'UTC', handle });
  const nightlyOptions = { name: 'nightly', cron: '0 3 * * *', timezone: 'Europe/Berlin', overlap: 'skip' as const, handle };
  const spreadSchedule =
    "defineTask was given a spread schedule, whose cron, timezone, period, catchUp, overlap, jobs, command and expect a task does not take: define the task with defineTask, then spread it into defineSchedule({ ...task, cron })";

  it('refuses a spread defined schedule in one line saying so, not as an unknown leaseMs', () => {
    expect(refusal(() => defineTask({ ...nightly } as never))).toBe(`task 'nightly': ${spreadSchedule}`);
    expect(refusal(() => defineTask({ ...nightly, name: 'by-hand' } as never))).toBe(`task 'by-hand': ${spreadSchedule}`);
    // Also a schedule that was itself made of a spread task.
    const digest = defineSchedule({ ...defineTask({ name: 'send', handle, timeout: '5s' }), name: 'digest', cron: '0 8 * * *' });
    expect(refusal(() => defineTask({ ...digest } as never))).toBe(`task 'digest': ${spreadSchedule}`);
  });

  it("refuses a schedule's options naming those given that a task does not take", () => {
    expect(refusal(() => defineTask({ ...nightlyOptions } as never))).toBe(
      "task 'nightly': cron, timezone and overlap are options of a schedule, which a task does not take (use defineSchedule for a task that runs on a cron)",
    );
    expect(refusal(() => defineTask({ ...defineTask({ name: 'send', handle }), cron: '@daily' } as never))).toBe(
      "task 'send': cron is an option of a schedule, which a task does not take (use defineSchedule for a task that runs on a cron)",
    );
  });

  it('refuses a spread defined schedule in defineSchedule too, saying to spread its task', () => {
    expect(refusal(() => defineSchedule({ ...nightly, name: 'nightly-2' } as never))).toBe(
      "schedule 'nightly-2': a defined schedule cannot be spread into defineSchedule (its fields, such as leaseMs, are not its options): define the task with defineTask and spread it into each schedule, defineSchedule({ ...task, cron })",
    );
  });
});
