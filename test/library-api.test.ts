import { createServer, type AddressInfo } from 'node:net';
import { setTimeout as sleepFor } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { createCronq, defineSchedule, defineTask, MigrationNotBegunError, SchemaBehindError, UsageError, type Completions, type LoadedTasks, type DaemonSeen, type EnqueueJob, type JobRecord, type CatchUpMode, type Clock, type ConsoleSignOutAdmin, type Handler, type JobTarget, type QueuesMostBehind, type ResolvedCatchUp, type UnknownStatusStats } from '../src/index.ts';
import { REPO_ROOT, runProcess } from './support/cli.ts';
import { useTestDatabase } from './support/db.ts';
import { EventLog } from './support/events.ts';
import { createLogger, libraryLogger } from '../src/logger.ts';

/** createCronq as an app meets it: its logger option and enqueue by task handle or by kind. */
const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs'] });

interface Invoice {
  invoiceId: number;
}
const sendInvoice = defineTask<Invoice>({ name: 'send-invoice', queue: 'billing', maxAttempts: 9, handle: () => undefined });

describe('createCronq logger', () => {
  it('refuses a logger that is not pino-compatible at once, naming what it lacks', () => {
    expect(() => createCronq({ logger: console as never })).toThrow(UsageError);
    expect(() => createCronq({ logger: console as never })).toThrow(/logger must be pino-compatible .*lacks child, isLevelEnabled/);
  });

  /**
   * Runs a job that completes and one that goes dead under each of `loggers`, the engine
   * still serving; returns what reached `unhandledRejection` and Node's CRONQ_LOGGER_ERROR warnings.
   */
  async function drainUnder(loggers: Array<[string, unknown]>): Promise<{ unhandled: unknown[]; said: string[] }> {
    const unhandled: unknown[] = [];
    const warnings: Error[] = [];
    const onRejection = (reason: unknown) => void unhandled.push(reason);
    const onWarning = (warning: Error) => void warnings.push(warning);
    process.on('unhandledRejection', onRejection);
    process.on('warning', onWarning);
    try {
      for (const [name, logger] of loggers) {
        await t.sql('DELETE FROM cronq_jobs');
        const fine = defineTask({ name: 'fine', handle: () => undefined });
        const broken = defineTask({ name: 'broken', maxAttempts: 1, handle: () => Promise.reject(new Error('broken on purpose')) });
        const cronq = createCronq({ databaseUrl: t.url, logger: logger as never, tasks: [fine, broken], pollInterval: '20ms' });
        try {
          await cronq.start();
          await cronq.enqueue(fine, { key: 'fine:1', payload: {} });
          await cronq.enqueue(broken, { key: 'broken:1', payload: {} });
          await expect.poll(async () => t.sql('SELECT job_key, status FROM cronq_jobs ORDER BY job_key'), { timeout: 10_000 }).toEqual([
            { job_key: 'broken:1', status: 'dead' },
            { job_key: 'fine:1', status: 'done' },
          ]);
          expect(cronq.health().workers, name).toBe(true);
        } finally {
          await cronq.stop();
        }
      }
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('unhandledRejection', onRejection);
      process.off('warning', onWarning);
    }
    const said = warnings.filter((w) => (w as Error & { code?: string }).code === 'CRONQ_LOGGER_ERROR').map((w) => w.message);
    return { unhandled, said };
  }

  it('goes on when the logger given throws (in every method, child too): jobs run and go dead, start and stop resolve, and Node is warned once per method', async () => {
    // A job_dead line's throw escaped the finisher as an unhandled rejection, ending the process; start() rejected with it.
    const boom = () => {
      throw new Error('logger broke');
    };
    const logger = { child: boom, trace: boom, debug: boom, info: boom, warn: boom, error: boom, fatal: boom, isLevelEnabled: boom };
    const { unhandled, said } = await drainUnder([['throwing', logger]]);
    expect(unhandled).toEqual([]);
    expect(said).toContain("cronq: the logger's error() threw (Error: logger broke); cronq goes on without that line");
    expect(new Set(said).size).toBe(said.length);
  });

  it('goes on when the logger given fails otherwise: a method that returns a rejected promise (an async one), a child() that is no logger', async () => {
    // An async error() typechecks as a logger method; its rejection was unhandled, ending the process.
    const rejects = async () => {
      throw new Error('logger broke later');
    };
    const asyncLogger: Record<string, unknown> = { trace: rejects, debug: rejects, info: rejects, warn: rejects, error: rejects, fatal: rejects, isLevelEnabled: () => true };
    asyncLogger.child = () => asyncLogger;
    const ok = () => undefined;
    // Its children lack the methods cronq calls on a job's logger (warn, error): a TypeError inside the finisher.
    const childless = { trace: ok, debug: ok, info: ok, warn: ok, error: ok, fatal: ok, isLevelEnabled: () => true, child: () => ({}) };
    const { unhandled, said } = await drainUnder([
      ['async', asyncLogger],
      ['childless', childless],
    ]);
    expect(unhandled).toEqual([]);
    expect(said).toContain("cronq: the logger's error() threw (Error: logger broke later); cronq goes on without that line");
    expect(said.some((m) => m.startsWith("cronq: the logger's child() threw (TypeError: child() returned no logger"))).toBe(true);
  });

  it("uses cronq's own logger (the daemon's and the CLI's) as it is, with no guard on its hot path: only an app's logger is wrapped", () => {
    // The guard costs every call (isLevelEnabled per job, a level that is off included); cronq's own pino does not throw.
    const own = createLogger('warn', 2);
    expect(libraryLogger(own)).toBe(own);
    const app = { child: () => app, trace() {}, debug() {}, info() {}, warn() {}, error() {}, fatal() {}, isLevelEnabled: () => false };
    expect(libraryLogger(app as never)).not.toBe(app);
  });

  it('takes false for no logging at all, workers running', async () => {
    const cronq = createCronq({ databaseUrl: t.url, logger: false, tasks: [sendInvoice] });
    await cronq.start();
    expect(cronq.health().workers).toBe(true);
    await cronq.stop();
  });
});

describe('enqueue from code', () => {
  it('takes a task handle: the kind, queue and attempts are the task’s, though this instance does not define it', async () => {
    const cronq = createCronq({ databaseUrl: t.url, logger: false });
    try {
      const { created } = await cronq.enqueue(sendInvoice, { key: 'invoice:1', payload: { invoiceId: 1 } });
      expect(created).toBe(true);
      expect(await cronq.enqueueMany(sendInvoice, [{ key: 'invoice:2', payload: { invoiceId: 2 } }, { key: 'invoice:3', payload: { invoiceId: 3 }, queue: 'other' }])).toEqual({
        inserted: 2,
        existing: 0,
      });
      // @ts-expect-error the payload must be the task's type
      await cronq.enqueue(sendInvoice, { key: 'invoice:4', payload: { invoice: 4 } }).catch(() => undefined);
      expect(await t.sql("SELECT kind, queue, max_attempts, payload FROM cronq_jobs WHERE job_key IN ('invoice:1', 'invoice:3') ORDER BY id")).toEqual([
        { kind: 'send-invoice', queue: 'billing', max_attempts: 9, payload: { invoiceId: 1 } },
        { kind: 'send-invoice', queue: 'other', max_attempts: 9, payload: { invoiceId: 3 } },
      ]);
    } finally {
      await cronq.stop();
    }
  });

  it('refuses a kind no task of this instance defines, as the CLI does, writing nothing, unless allowUnknownKind', async () => {
    const cronq = createCronq({ databaseUrl: t.url, logger: false, tasks: [sendInvoice] });
    const everywhere = createCronq({ databaseUrl: t.url, logger: false, allowUnknownKind: true });
    try {
      await expect(cronq.enqueue({ kind: 'send-invoce', key: 'typo:1' })).rejects.toThrow(/unknown kind 'send-invoce'.*allowUnknownKind/);
      await expect(cronq.enqueueMany([{ kind: 'send-invoice', key: 'ok:1' }, { kind: 'nope', key: 'typo:2' }])).rejects.toThrow(UsageError);
      expect(await t.sql("SELECT job_key FROM cronq_jobs WHERE job_key LIKE 'typo:%'")).toEqual([]);
      expect((await cronq.enqueue({ kind: 'send-invoice', key: 'known:1' })).created).toBe(true);
      expect((await cronq.enqueue({ kind: 'elsewhere', key: 'allowed:1' }, { allowUnknownKind: true })).created).toBe(true);
      expect((await everywhere.enqueue({ kind: 'elsewhere', key: 'allowed:2' })).created).toBe(true);
    } finally {
      await cronq.stop();
      await everywhere.stop();
    }
  });

  it('refuses, even with allowUnknownKind, a kind no task can be named (no daemon would ever run it), writing nothing', async () => {
    const cronq = createCronq({ databaseUrl: t.url, logger: false, allowUnknownKind: true });
    try {
      for (const kind of ['send-invoice ', ' send-invoice', 'send invoice', '.hidden', 'x'.repeat(65), 'rapport-été']) {
        await expect(cronq.enqueue({ kind, key: `odd:${kind}` }), JSON.stringify(kind)).rejects.toThrow(/^job kind \(a task's name\) must be 1-64 letters, digits, '\.', '_' or '-'/);
      }
      await expect(cronq.enqueueMany([{ kind: 'ok', key: 'odd:ok' }, { kind: 'hello ', key: 'odd:space' }])).rejects.toThrow(/job kind \(a task's name\) must be/);
      expect(await t.sql("SELECT job_key FROM cronq_jobs WHERE job_key LIKE 'odd:%'")).toEqual([]);
      expect((await cronq.enqueue({ kind: 'Send.Invoice_2-b', key: 'odd:valid' })).created).toBe(true);
    } finally {
      await cronq.stop();
    }
  });
});

describe('a task or schedule defined without a payload type', () => {
  it('hands its handler the payload as unknown, not any: a field is read only after a check', async () => {
    const log = new EventLog();
    const seen: unknown[] = [];
    const untyped = defineTask({
      name: 'untyped',
      handle(job) {
        // @ts-expect-error an untyped task's payload is unknown (npm run typecheck): it was any, so a typo compiled
        void job.payload.invoiceID;
        const payload = job.payload;
        if (typeof payload === 'object' && payload !== null && 'invoiceId' in payload) seen.push(payload.invoiceId);
      },
    });
    // @ts-expect-error likewise a schedule's (npm run typecheck)
    const nightly = defineSchedule({ name: 'untyped-nightly', cron: '0 3 * * *', handle: (job) => void job.payload.invoiceId });
    // @ts-expect-error and a handler typed by the exported Handler without its P (npm run typecheck)
    const handler: Handler = (job) => void job.payload.invoiceId;
    void handler;
    const cronq = createCronq({ databaseUrl: t.url, logger: log.logger, tasks: [untyped, nightly], scheduler: false, pollInterval: '50ms' });
    try {
      await cronq.enqueue(untyped, { key: 'untyped:1', payload: { invoiceId: 1 } });
      await cronq.start();
      await log.waitFor('job_completed');
      expect(seen).toEqual([1]);
    } finally {
      await cronq.stop();
    }
  });
});

describe('enqueue input', () => {
  it("refuses a runAt that is not a valid Date, and the scheduler's own fields (scheduleName, periodKey, scheduledAt), with a UsageError naming the field", async () => {
    const cronq = createCronq({ databaseUrl: t.url, logger: false, tasks: [sendInvoice] });
    try {
      const scheduler = (field: string) => new RegExp(`^job "field:1": ${field} is written only by the scheduler`);
      // A JavaScript caller (or one casting) can still pass what EnqueueJob does not have.
      const bad: Array<[Partial<EnqueueJob> & Record<string, unknown>, RegExp]> = [
        [{ runAt: '2026-11-30' as never }, /^runAt of field:1 is not a valid date$/],
        [{ runAt: new Date(Number.NaN) }, /^runAt of field:1 is not a valid date$/],
        [{ scheduleName: 'renewal' }, scheduler('scheduleName')],
        [{ periodKey: '2026-11' }, scheduler('periodKey')],
        [{ scheduledAt: new Date('2026-11-01T00:00:00Z') }, scheduler('scheduledAt')],
      ];
      for (const [fields, message] of bad) {
        await expect(cronq.enqueue({ kind: 'send-invoice', key: 'field:1', ...fields }), JSON.stringify(fields)).rejects.toThrow(message);
        await expect(cronq.enqueueMany([{ kind: 'send-invoice', key: 'field:1', ...fields }])).rejects.toThrow(UsageError);
      }
      expect(await t.sql("SELECT id FROM cronq_jobs WHERE job_key = 'field:1'")).toEqual([]);
    } finally {
      await cronq.stop();
    }
  });
});

describe("enqueue of a schedule's key", () => {
  it("refuses a key under a loaded schedule's prefix, naming the key and the schedule and writing nothing; an instance that loaded no schedule cannot tell", async () => {
    const daily = defineSchedule({ name: 'daily', cron: '0 2 * * *', timezone: 'UTC', period: 'day', handle: () => undefined });
    const cronq = createCronq({ databaseUrl: t.url, logger: false, tasks: [sendInvoice, daily] });
    const blind = createCronq({ databaseUrl: t.url, logger: false, tasks: [sendInvoice] });
    const refused = (key: string) =>
      new RegExp(`job key "${key}" is a key of schedule 'daily' \\(its name, then a day period key\\): a schedule's keys are written by its ticks; .*To run a period now: \`cronq tick daily --at ISO\``);
    try {
      await expect(cronq.enqueue({ kind: 'daily', key: 'daily:2026-12-04' })).rejects.toThrow(UsageError);
      await expect(cronq.enqueue({ kind: 'daily', key: 'daily:2026-12-04' })).rejects.toThrow(refused('daily:2026-12-04'));
      await expect(cronq.enqueue({ kind: 'send-invoice', key: 'daily:2026-12-04', payload: { invoiceId: 1 } })).rejects.toThrow(refused('daily:2026-12-04'));
      await expect(cronq.enqueue(daily, { key: 'daily:2026-12-04', payload: {} })).rejects.toThrow(refused('daily:2026-12-04'));
      await expect(cronq.enqueueMany([{ kind: 'send-invoice', key: 'invoice:9' }, { kind: 'send-invoice', key: 'daily:2026-12-06' }])).rejects.toThrow(
        /^enqueueMany: jobs\[1\]: job key "daily:2026-12-06" is a key of schedule 'daily' .*; nothing was written$/,
      );
      // The schedule's own handle says it is one, loaded here or not.
      await expect(blind.enqueue(daily, { key: 'daily:2026-12-05', payload: {} })).rejects.toThrow(refused('daily:2026-12-05'));
      expect(await t.sql("SELECT job_key FROM cronq_jobs WHERE job_key LIKE 'daily:%' OR job_key = 'invoice:9'")).toEqual([]);
      // Other keys, a schedule's kind among them; keys compare byte for byte.
      // A follow-up under the schedule's name, and a key of another period's shape, are no keys its tick could write.
      for (const key of ['by-hand:daily:1', 'dailyx:1', 'Daily:1', 'daily', 'daily:2026-12-04:mail', 'daily:x:2026-12', 'daily:x:2026-12-04']) expect((await cronq.enqueue({ kind: 'daily', key })).created, key).toBe(true);
      // No schedule loaded, a kind by name: nothing to check against (the tick notes the taken key).
      expect((await blind.enqueue({ kind: 'send-invoice', key: 'daily:2026-12-04', payload: { invoiceId: 2 } })).created).toBe(true);
    } finally {
      await cronq.stop();
      await blind.stop();
    }
  });
});

describe('start and stop in any order', () => {
  it('start() called twice at once starts one engine, which stop() stops whole', async () => {
    const log = new EventLog('info');
    const cronq = createCronq({ databaseUrl: t.url, logger: log.logger, tasks: [sendInvoice], pollInterval: '50ms' });
    await Promise.all([cronq.start(), cronq.start()]);
    await cronq.start();
    expect(log.named('worker_started')).toHaveLength(1);
    expect(log.named('daemon_registered')).toHaveLength(1);
    await cronq.stop();
    expect(log.named('worker_stopped')).toHaveLength(1);
  });

  it('stop() while start() runs waits for it and stops what it started; start() after stop() is a UsageError', async () => {
    const log = new EventLog('info');
    const cronq = createCronq({ databaseUrl: t.url, logger: log.logger, tasks: [sendInvoice], pollInterval: '50ms' });
    const starting = cronq.start();
    const stopping = cronq.stop();
    await starting;
    await stopping;
    expect(log.named('worker_started')).toHaveLength(1);
    expect(log.named('worker_stopped')).toHaveLength(1);
    expect(cronq.health().workers).toBe(false);
    await expect(cronq.start()).rejects.toThrow(UsageError);
    await expect(cronq.start()).rejects.toThrow(/^start\(\) after stop\(\): a stopped cronq cannot be used again \(its database pool is closed\); create another with createCronq$/);
    expect(log.named('worker_started')).toHaveLength(1);
  });

  it('migrate() after stop() is a UsageError and creates no database', async () => {
    const never = `${t.name}_after_stop`;
    const cronq = createCronq({ databaseUrl: t.url.replace(/[^/]+$/, never), logger: false, workers: false, scheduler: false });
    await cronq.stop();
    await expect(cronq.migrate()).rejects.toThrow(/^migrate\(\) after stop\(\): a stopped cronq cannot be used again \(its database pool is closed\); create another with createCronq$/);
    expect(await t.sql('SELECT schema_name FROM information_schema.schemata WHERE schema_name = ?', [never])).toEqual([]);
  });
});

describe('stop() on a database that never answers', () => {
  it('resolves, though a connection it was still opening times out as the pool closes', async () => {
    const server = createServer(() => undefined); // accepts connections and never says a word
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const connected = new Promise<void>((resolve) => server.once('connection', () => resolve()));
    try {
      const cronq = createCronq({ databaseUrl: `mysql://root@127.0.0.1:${(server.address() as AddressInfo).port}/cronq_silent`, logger: false });
      const ping = cronq.admin.ping().catch((error: Error) => error);
      await connected;
      await expect(cronq.stop({ graceMs: 10_000 })).resolves.toEqual({ released: 0, abandoned: 0 });
      await ping;
    } finally {
      server.close();
    }
  });

  it('ends a migrate() still connecting at once, nothing changed, instead of waiting for the migration to finish', async () => {
    const server = createServer(() => undefined);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const connected = new Promise<void>((resolve) => server.once('connection', () => resolve()));
    try {
      const cronq = createCronq({ databaseUrl: `mysql://root@127.0.0.1:${(server.address() as AddressInfo).port}/cronq_silent`, logger: false });
      const migrate = cronq.migrate().catch((error: unknown) => error);
      await connected;
      const stopping = performance.now();
      await expect(cronq.stop({ graceMs: 10_000 })).resolves.toEqual({ released: 0, abandoned: 0 });
      expect(performance.now() - stopping).toBeLessThan(3_000); // the connect timeout is 5 s
      const error = await migrate;
      expect(error).toBeInstanceOf(MigrationNotBegunError);
      expect((error as Error).message).toBe('stopped before migrating: no migration was applied');
    } finally {
      server.close();
    }
  });

  it('cut short, fails the calls still waiting on it instead of leaving them pending for ever', async () => {
    const server = createServer(() => undefined);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const connected = new Promise<void>((resolve) => server.once('connection', () => resolve()));
    try {
      const cronq = createCronq({ databaseUrl: `mysql://root@127.0.0.1:${(server.address() as AddressInfo).port}/cronq_silent`, logger: false, allowUnknownKind: true });
      const enqueue = cronq.enqueue({ kind: 'report', key: 'report:1' }).then(
        () => 'enqueued',
        (error: Error) => error.message,
      );
      const ping = cronq.admin.ping().then(
        () => 'answered',
        (error: Error) => error.message,
      );
      await connected;
      await expect(cronq.stop({ graceMs: 0 })).resolves.toEqual({ released: 0, abandoned: 0 });
      expect(await enqueue).toMatch(/^enqueueing job "report:1" .*failed: Pool is closed\.$/);
      expect(await ping).toMatch(/^cannot reach the database .*: Pool is closed\.$/);
    } finally {
      server.close();
    }
  });
});

describe('after stop()', () => {
  it('every public call that would use the database rejects with the same one-line UsageError naming it', async () => {
    const cronq = createCronq({ databaseUrl: t.url, logger: false, tasks: [sendInvoice], workers: false, scheduler: false });
    await cronq.enqueue(sendInvoice, { key: 'before-stop', payload: { invoiceId: 1 } });
    await cronq.stop();
    const calls: Array<[string, () => Promise<unknown>]> = [
      ['enqueue', () => cronq.enqueue(sendInvoice, { key: 'after-stop', payload: { invoiceId: 2 } })],
      ['enqueue', () => cronq.enqueue({ kind: 'send-invoice', key: 'after-stop', payload: { invoiceId: 2 } })],
      ['enqueueMany', () => cronq.enqueueMany(sendInvoice, [{ key: 'after-stop', payload: { invoiceId: 2 } }])],
      ['enqueueMany', () => cronq.enqueueMany([{ kind: 'send-invoice', key: 'after-stop' }])],
      ['start', () => cronq.start()],
      ['migrate', () => cronq.migrate()],
      ['cronq.admin.stats', () => cronq.admin.stats()],
    ];
    for (const [what, call] of calls) {
      const error = await call().then(() => null, (e: unknown) => e);
      expect(error, what).toBeInstanceOf(UsageError);
      expect((error as Error).message, what).toBe(`${what}() after stop(): a stopped cronq cannot be used again (its database pool is closed); create another with createCronq`);
    }
    expect(await t.sql("SELECT job_key FROM cronq_jobs WHERE job_key LIKE '%-stop'")).toEqual([{ job_key: 'before-stop' }]);
  });
});

describe('stop() while enqueues are under way', () => {
  /** Rows of `send-invoice` jobs keyed `${prefix}:i`, handed out `gapMs` apart; `handedOut` counts them. */
  function slowRows(prefix: string, count: number, gapMs: number) {
    const state = { handedOut: 0 };
    async function* rows() {
      for (let i = 0; i < count; i++) {
        await new Promise((resolve) => setTimeout(resolve, gapMs));
        state.handedOut += 1;
        yield { kind: 'send-invoice', key: `${prefix}:${i}`, payload: { invoiceId: i } };
      }
    }
    return { rows: rows(), state };
  }

  it('lets an enqueueMany already under way finish within the grace before the pool closes: every row written, no "Pool is closed"', async () => {
    const cronq = createCronq({ databaseUrl: t.url, logger: false, tasks: [sendInvoice], workers: false, scheduler: false });
    await cronq.migrate();
    const { rows, state } = slowRows('racing-stop', 30, 5);
    const enqueuing = cronq.enqueueMany(rows);
    while (state.handedOut < 3) await new Promise((resolve) => setTimeout(resolve, 2));
    const stopping = cronq.stop({ graceMs: 10_000 });
    await expect(enqueuing).resolves.toEqual({ inserted: 30, existing: 0 });
    await stopping;
    expect(await t.sql("SELECT COUNT(*) AS n FROM cronq_jobs WHERE job_key LIKE 'racing-stop:%'")).toEqual([{ n: 30 }]);
  });

  it('closes the pool once the grace runs out, whatever an enqueue still reads from its rows', async () => {
    const cronq = createCronq({ databaseUrl: t.url, logger: false, tasks: [sendInvoice], workers: false, scheduler: false });
    await cronq.migrate();
    const { rows, state } = slowRows('endless', 1_000_000, 20);
    const enqueuing = cronq.enqueueMany(rows).then(() => null, (e: unknown) => e);
    while (state.handedOut < 1) await new Promise((resolve) => setTimeout(resolve, 2));
    const started = Date.now();
    await cronq.stop({ graceMs: 300 });
    expect(Date.now() - started).toBeLessThan(3_000);
    const error = await enqueuing;
    expect(error).toBeInstanceOf(UsageError);
    expect((error as Error).message).toMatch(/^enqueueMany\(\) cut off by stop\(\) after its grace: (\d+) new and 0 existing jobs written, the rows after them not read$/);
    const written = Number(/: (\d+) new/.exec((error as Error).message)![1]);
    expect(await t.sql("SELECT COUNT(*) AS n FROM cronq_jobs WHERE job_key LIKE 'endless:%'")).toEqual([{ n: written }]);
    expect(state.handedOut).toBeLessThan(1_000); // it stopped reading
  });
});

describe('a start that fails partway', () => {
  it('tried again, leaves one daemon heartbeat, which stop() ends: none beats on after the stop', async () => {
    const limited = defineTask({ name: 'limited-retry', concurrency: 1, handle: () => undefined });
    const log = new EventLog('debug');
    const cronq = createCronq({ databaseUrl: t.url, logger: log.logger, tasks: [limited], heartbeatInterval: '20ms', scheduler: false });
    // The daemon registers, then its kind limits cannot be written: start() fails after the heartbeat began.
    await t.sql('RENAME TABLE cronq_kind_limits TO cronq_kind_limits_away');
    try {
      await expect(cronq.start()).rejects.toThrow();
    } finally {
      await t.sql('RENAME TABLE cronq_kind_limits_away TO cronq_kind_limits');
    }
    await cronq.start();
    expect(cronq.health().workers).toBe(true);
    await cronq.stop();
    // A heartbeat left from the failed start would beat on a closed pool every 20 ms, for ever.
    await expect(log.waitFor('db_unavailable', 1, 1_000, (e) => e.where === 'heartbeat')).rejects.toThrow(/timed out/);
  });
});

describe('createCronq options', () => {
  it('refuses a bad option at once with a UsageError naming it, before anything runs', () => {
    const bad: Array<[Partial<Parameters<typeof createCronq>[0]>, RegExp]> = [
      [{ pollInterval: 'soon' }, /^pollInterval: 'soon' is not a duration/],
      [{ pollInterval: 0 }, /^pollInterval must be a duration from 10ms to 1m \(got 0\)$/],
      [{ pollInterval: 1e9 }, /^pollInterval must be a duration from 10ms to 1m/],
      [{ recoveryInterval: 0 }, /^recoveryInterval must be a duration from 10ms to 1w \(got 0\)$/],
      [{ heartbeatInterval: 1e12 }, /^heartbeatInterval must be a duration from 10ms to 1w/],
      [{ pruneDoneOlderThan: '30d', pruneEvery: -5 }, /^pruneEvery: -5 is not a valid duration/],
      [{ importTimeoutMs: Number.NaN }, /^importTimeoutMs must be a whole number from 100 to 86400000 \(got NaN\)$/],
      [{ postClaimPauseMs: -1 }, /^postClaimPauseMs must be a whole number from 0 to 10000/],
      [{ lockedBy: 'x'.repeat(256) }, /^lockedBy must be a string of 1 to 255 characters/],
      [{ lockedBy: '' }, /^lockedBy must be a string of 1 to 255 characters/],
      [{ lockedBy: 'host-a:1 ' }, /^lockedBy must not end with a space$/],
      [{ queues: 'default' as never }, /^queues must be an array of queue names/],
      [{ queues: [''] }, /^queues entry must be 1-64 letters/],
      [{ queues: ['a', 'b', 'a'] }, /^queues names queue 'a' more than once; name each queue once$/],
      [{ pollInterval: '200ms ' }, /^pollInterval: '200ms ' is not a duration/],
      [{ pruneDoneOlderThan: ' 30d' }, /^pruneDoneOlderThan: ' 30d' is not a duration/],
      // It said DATABASE_URL, an environment variable the app may not have set at all.
      [{ databaseUrl: 'http://db:3306/x' }, /^databaseUrl must start with mysql:\/\/ \(got http:\/\/\)$/],
      [{ unknownKindGraceMs: '5' as never }, /^unknownKindGraceMs must be a duration in milliseconds, 0 or more \(got the string "5"\)$/],
      [{ tasks: [{ name: 'x' }] as never }, /^tasks must hold what defineTask or defineSchedule returned \(entry 0\)$/],
      // Refused at start() only, after createCronq had said yes.
      [{ tasks: [sendInvoice, defineSchedule({ name: 'send-invoice', cron: '@daily', handle: () => undefined })] }, /^duplicate name 'send-invoice': defined twice in createCronq\(\{ tasks \}\)$/],
      [
        { tasks: [defineTask({ name: 'limited', concurrency: 1, queue: 'billing', handle: () => undefined }), sendInvoice] },
        /^'send-invoice' \(createCronq\(\{ tasks \}\)\) and 'limited' \(createCronq\(\{ tasks \}\)\) share queue 'billing', but 'limited' has a concurrency limit/,
      ],
    ];
    for (const [options, message] of bad) {
      let thrown: unknown;
      try {
        createCronq({ databaseUrl: t.url, logger: false, ...options });
      } catch (error) {
        thrown = error;
      }
      expect(thrown, JSON.stringify(options)).toBeInstanceOf(UsageError);
      expect((thrown as Error).message, JSON.stringify(options)).toMatch(message);
    }
  });

  it("with no logger given, logs at info when LOG_LEVEL holds a level it does not know (the app's own logger may use it), saying so once", async () => {
    // An app process: createCronq with its default logger, which writes JSON lines to stdout.
    const app = `import { createCronq } from './src/index.ts';
      const cronq = createCronq({ databaseUrl: ${JSON.stringify(t.url)} });
      await cronq.stop();
      console.log('app ran');`;
    const run = await runProcess(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', app], {
      cwd: REPO_ROOT,
      env: { LOG_LEVEL: `verbose${'x'.repeat(1_000)}` },
      timeoutMs: 30_000,
    });
    expect(run.code).toBe(0);
    const lines = run.stdout.trim().split('\n');
    expect(lines.at(-1)).toBe('app ran');
    const warned = lines.filter((l) => l.includes('log_level_unknown')).map((l) => JSON.parse(l));
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ level: 'warn', event: 'log_level_unknown' });
    expect(warned[0].log_level.length).toBeLessThanOrEqual(65);
    expect(warned[0].log_level).toMatch(/^verbosex+/);
    expect(() => createCronq({ databaseUrl: t.url, logger: false })).not.toThrow();
  });

  it('quotes a long duration option it refuses in at most 64 characters, as parseDuration does', () => {
    const long = `${'0'.repeat(100_000)}5ms`;
    expect(() => createCronq({ databaseUrl: t.url, logger: false, pollInterval: long })).toThrow(/^pollInterval must be a duration from 10ms to 1m \(got '0{64}…'\)$/);
  });

  it('takes the bounds themselves', async () => {
    const cronq = createCronq({
      databaseUrl: t.url,
      logger: false,
      tasks: [sendInvoice],
      pollInterval: '10ms',
      recoveryInterval: '7d',
      heartbeatInterval: 10,
      importTimeoutMs: 100,
      lockedBy: 'l'.repeat(255),
      queues: ['billing'],
    });
    await cronq.start();
    expect(cronq.health().workers).toBe(true);
    await cronq.stop();
  });
});

describe('what the admin API names, the package exports', () => {
  it('checkSchema on a database never migrated rejects with SchemaBehindError, exported from cronq; the rows admin returns have exported types', async () => {
    const name = `${t.name}_bare`;
    await t.sql(`CREATE DATABASE \`${name}\``);
    const cronq = createCronq({ databaseUrl: t.url.replace(/[^/]+$/, name), logger: false });
    try {
      await expect(cronq.admin.checkSchema()).rejects.toBeInstanceOf(SchemaBehindError);
      await expect(cronq.admin.checkSchema()).rejects.toThrow(/migrations? pending\): run 'cronq migrate'/);
    } finally {
      await cronq.stop();
      await t.sql(`DROP DATABASE \`${name}\``);
    }
    // Compile-time (npm run typecheck): each admin result can be named by an app.
    const typed: [JobRecord | null, DaemonSeen[], Completions] | null = null;
    expect(typed).toBeNull();
    // And what its calls take and return beyond rows: job()'s target, queuesMostBehind()'s result, stats()' unknownStatus, consoleSignOuts.
    const named: [JobTarget, QueuesMostBehind, UnknownStatusStats, ConsoleSignOutAdmin] | null = null;
    expect(named).toBeNull();
    // So can every field of a defined schedule (its catchUp was a type cronq did not export).
    const nightly = defineSchedule({ name: 'nightly', cron: '0 3 * * *', catchUp: { mode: 'latest' }, handle: () => undefined });
    const catchUp: ResolvedCatchUp = nightly.catchUp;
    const mode: CatchUpMode | 'off' = catchUp.mode;
    expect(mode).toBe('latest');
  });
});

describe('ready()', () => {
  it('resolves with a read-only view of the tasks and schedules loaded, by name, that cannot register more', async () => {
    const nightly = defineSchedule({ name: 'nightly', cron: '0 3 * * *', handle: () => undefined });
    const cronq = createCronq({ databaseUrl: t.url, logger: false, tasks: [sendInvoice, nightly] });
    try {
      const loaded: LoadedTasks = await cronq.ready();
      expect(loaded.get('send-invoice')).toBe(sendInvoice);
      expect(loaded.get('nightly')).toBe(nightly);
      expect(loaded.get('nope')).toBeUndefined();
      expect(loaded.list().map((task) => task.name)).toEqual(['send-invoice', 'nightly']);
      expect(loaded.schedules().map((schedule) => schedule.name)).toEqual(['nightly']);
      expect(loaded.size).toBe(2);
      expect('add' in loaded).toBe(false);
      expect(Object.isFrozen(loaded)).toBe(true);
      loaded.list().pop();
      expect(loaded.size).toBe(2);
      expect(await cronq.ready()).toBe(loaded);
    } finally {
      await cronq.stop();
    }
  });
});

describe('stop options', () => {
  it('stop() refuses an option it does not know (grace: 0 left the 10 s default in force) and options that are not an object, in one line, stopping nothing; null is no options', async () => {
    const cronq = createCronq({ databaseUrl: t.url, logger: false, tasks: [sendInvoice] });
    await cronq.start();
    await expect(cronq.stop({ grace: 0 } as never)).rejects.toThrow(new UsageError("stop: unknown option 'grace' (did you mean 'graceMs'?)"));
    await expect(cronq.stop('now' as never)).rejects.toThrow(new UsageError('stop: options must be an object ({ graceMs }; got string)'));
    expect(cronq.health().workers).toBe(true);
    // stop(null) threw a TypeError itself, not even a rejected promise.
    expect(await cronq.stop(null as never)).toEqual({ released: 0, abandoned: 0 });
    expect(cronq.health().workers).toBe(false);
  });

  it('stop() refuses a graceMs that is not a whole number of ms from 0 to a day (NaN or an overflowing timer aborted every handler at once), then stops with a valid one', async () => {
    const log = new EventLog('info');
    let release!: () => void;
    const slow = defineTask({ name: 'slow', handle: () => new Promise<void>((resolve) => (release = resolve)) });
    const cronq = createCronq({ databaseUrl: t.url, logger: log.logger, tasks: [slow], pollInterval: '50ms' });
    await cronq.start();
    await cronq.enqueue(slow, { key: 'slow:1', payload: {} });
    await log.waitFor('job_claimed');
    for (const graceMs of [Number.NaN, -1, 1.5, 30 * 86_400_000]) {
      await expect(cronq.stop({ graceMs }), String(graceMs)).rejects.toThrow(/^graceMs must be a whole number from 0 to 86400000 \(got /);
    }
    expect(cronq.health().workers).toBe(true);
    const stopping = cronq.stop({ graceMs: 60_000 });
    release();
    expect(await stopping).toEqual({ released: 0, abandoned: 0 });
    expect(log.named('job_completed')).toHaveLength(1);
  });
});

describe('a clock option gone wrong', () => {
  it('fails scheduler passes, saying so once per method (clock_error), when now() throws or returns no valid Date or sleepUntil() rejects, instead of ending the process with an unhandled rejection', async () => {
    const unhandled: unknown[] = [];
    const listener = (reason: unknown) => void unhandled.push(reason);
    process.on('unhandledRejection', listener);
    const clocks: Array<[string, Clock, 'now' | 'sleepUntil']> = [
      ['throws', { now: () => { throw new Error('clock broke'); }, sleepUntil: () => new Promise((resolve) => setTimeout(resolve, 50)) }, 'now'],
      ['a number', { now: () => Date.now() as never, sleepUntil: () => new Promise((resolve) => setTimeout(resolve, 50)) }, 'now'],
      ['NaN', { now: () => new Date(Number.NaN), sleepUntil: () => new Promise((resolve) => setTimeout(resolve, 50)) }, 'now'],
      ['rejects', { now: () => new Date(), sleepUntil: () => Promise.reject(new Error('sleep broke')) }, 'sleepUntil'],
    ];
    try {
      for (const [name, clock, method] of clocks) {
        const log = new EventLog('info');
        // With expect: the health watch reads the clock too.
        const watched = defineSchedule({ name: 'watched', cron: '* * * * *', expect: { within: '1m' }, handle: () => undefined });
        const cronq = createCronq({ databaseUrl: t.url, logger: log.logger, tasks: [watched], workers: false, clock });
        try {
          await cronq.start();
          const [said] = await log.waitFor('clock_error', 1, 10_000);
          expect(said, name).toMatchObject({ level: 50, method });
          if (method === 'now') await log.waitFor('schedule_error', 1, 10_000);
          expect(cronq.health().scheduler, name).toBe(true);
        } finally {
          await cronq.stop();
        }
        expect(log.named('clock_error').filter((e) => e.method === method), name).toHaveLength(1);
      }
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', listener);
    }
  });

  it('says nothing of a clock whose sleepUntil() rejects when stop() aborts it (as timers/promises does): that is the stop, not a clock gone wrong', async () => {
    const clock: Clock = { now: () => new Date(), sleepUntil: (at, signal) => sleepFor(Math.max(0, at.getTime() - Date.now()), undefined, { signal }) };
    const log = new EventLog('info');
    const watched = defineSchedule({ name: 'watched', cron: '0 0 1 1 *', expect: { within: '1m' }, handle: () => undefined });
    const cronq = createCronq({ databaseUrl: t.url, logger: log.logger, tasks: [watched], workers: false, clock });
    await cronq.start();
    await log.waitFor('scheduler_started', 1, 10_000);
    await cronq.stop();
    expect(log.named('clock_error')).toEqual([]);
  });
});
