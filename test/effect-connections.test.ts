/**
 * Effects that hang hold their connections for up to their bound; the daemon's own writes
 * (renewals, completions, enqueues) must still get a connection meanwhile. At concurrency
 * 60 the general pool has 48 connections (cronq.ts), fewer than the effects that can hang.
 */
import { sql } from 'drizzle-orm';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { connect, type Database } from '../src/db/client.ts';
import { createCronq, defineTask, type Cronq, type Task } from '../src/index.ts';
import { completeIfLeased, EffectNotStartedError, renewIfLeased, type EffectBound } from '../src/store/fenced.ts';
import { insertJobsIfAbsent } from '../src/store/jobs.ts';
import { useTestDatabase } from './support/db.ts';
import { EventLog } from './support/events.ts';
import { claimJobs, jobRow } from './support/jobs.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_dead_letters'] });
let cronq: Cronq | null = null;
let small: Database | null = null;
let log: EventLog;

beforeEach(() => {
  log = new EventLog('info');
});
afterEach(async () => {
  await cronq?.stop({ graceMs: 200 });
  cronq = null;
  await small?.close();
  small = null;
});

const CONCURRENCY = 60;
/** More effects than the general pool has connections (48 at this concurrency). */
const HANGING = 52;
/** How long each hanging effect holds its connection: the test's every wait is well inside it. */
const EFFECT_TIMEOUT = '12s';

const never = () => new Promise<void>(() => undefined);

/** Resolves once `count` effects have started (each holds its connection and its job's row lock from then on). */
function countingEffects() {
  let started = 0;
  let wake: () => void = () => undefined;
  return {
    started: () => started,
    onStart() {
      started += 1;
      wake();
    },
    async atLeast(count: number, timeoutMs = 10_000): Promise<void> {
      const deadline = Date.now() + timeoutMs;
      while (started < count) {
        if (Date.now() > deadline) throw new Error(`only ${started} of ${count} effects started`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 100);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
    },
  };
}

function start(tasks: Task[]): Promise<Cronq> {
  cronq = createCronq({ databaseUrl: t.url, tasks, logger: log.logger, concurrency: CONCURRENCY, pollInterval: '50ms' });
  return cronq.start().then(() => cronq!);
}

describe('effects that hang, more of them than the pool has connections', () => {
  it('leave connections for the daemon: a running job keeps renewing its lease and completes, a plain job completes at once', async () => {
    const effects = countingEffects();
    let releaseLong: () => void = () => undefined;
    const longMayEnd = new Promise<void>((resolve) => (releaseLong = resolve));
    let longStarted: () => void = () => undefined;
    const longRunning = new Promise<void>((resolve) => (longStarted = resolve));
    const c = await start([
      defineTask({
        name: 'hang',
        timeout: EFFECT_TIMEOUT,
        maxAttempts: 1,
        handle: (_job, ctx) => {
          ctx.effect(async () => {
            effects.onStart();
            await never();
          });
        },
      }),
      // Outlives its 2 s lease twice over: it completes only if its renewals land (a renewal every 667 ms).
      defineTask({
        name: 'long',
        lease: '2s',
        handle: () => {
          longStarted();
          return longMayEnd;
        },
      }),
      defineTask({ name: 'quick', handle: () => undefined }),
    ]);
    await insertJobsIfAbsent(t.database.db, [jobRow('long:1', { kind: 'long' })]);
    await longRunning;
    await insertJobsIfAbsent(t.database.db, Array.from({ length: HANGING }, (_, i) => jobRow(`hang:${i}`, { kind: 'hang' })));
    // As many as may hold a connection at once (all but the pool's reserve).
    await effects.atLeast(46);

    const quickAt = Date.now();
    await insertJobsIfAbsent(t.database.db, [jobRow('quick:1', { kind: 'quick' })]);
    await log.waitFor('job_completed', 1, 3_000, (e) => e.job_id !== undefined && e.kind === 'quick');
    expect(Date.now() - quickAt).toBeLessThan(3_000);

    // Two leases' worth while the effects still hang: only renewals keep it.
    await new Promise((resolve) => setTimeout(resolve, 4_000));
    releaseLong();
    await log.waitFor('job_completed', 1, 3_000, (e) => e.kind === 'long');
    expect(log.named('job_lease_lost')).toEqual([]);
    expect(effects.started()).toBe(46); // the share: the rest waited for one of its connections
    expect(await t.sql("SELECT status FROM cronq_jobs WHERE job_key IN ('long:1', 'quick:1')")).toEqual([{ status: 'done' }, { status: 'done' }]);
    void c;
  });
});

/** A promise and the function that resolves it. */
function gate() {
  let open: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

/** A bound of `limitMs` whose timeout is an Error naming it. */
const boundOf = (limitMs: number, signal?: AbortSignal): EffectBound => ({ limitMs, timedOut: () => new Error(`bound of ${limitMs}ms ended`), signal });

describe("a completion with an effect, when the effects' share of the pool is taken", () => {
  /** A pool of 4 connections of which effects may hold one; two claimed jobs. */
  async function twoJobs() {
    small = connect(t.url, { poolSize: 4, dedicatedConnections: 1 });
    await insertJobsIfAbsent(small.db, [jobRow('first'), jobRow('second')]);
    const [first, second] = await claimJobs(small, 2);
    return { database: small, first, second };
  }

  it('waits for it: its effect starts only once the running one is done, and both commit', async () => {
    const { database, first, second } = await twoJobs();
    const firstRunning = gate();
    const firstMayEnd = gate();
    const began: string[] = [];
    const firstDone = completeIfLeased(database, first.lease, async () => {
      began.push('first');
      firstRunning.open();
      await firstMayEnd.opened;
    });
    await firstRunning.opened;
    const secondDone = completeIfLeased(database, second.lease, async (tx) => {
      began.push('second');
      await tx.execute(sql`SELECT 1`);
    });
    // Bookkeeping still has the pool meanwhile: a renewal lands at once.
    expect(await renewIfLeased(database.db, second.lease, 30_000)).toBe(true);
    expect(began).toEqual(['first']);
    firstMayEnd.open();
    expect(await Promise.all([firstDone, secondDone])).toEqual([true, true]);
    expect(began).toEqual(['first', 'second']);
    expect(await t.sql("SELECT job_key, status FROM cronq_jobs ORDER BY job_key")).toEqual([
      { job_key: 'first', status: 'done' },
      { job_key: 'second', status: 'done' },
    ]);
  });

  it('whose bound ends while it waits fails saying its effects never started (EffectNotStartedError), having run nothing', async () => {
    const { database, first, second } = await twoJobs();
    const firstRunning = gate();
    const firstMayEnd = gate();
    const firstDone = completeIfLeased(database, first.lease, async () => {
      firstRunning.open();
      await firstMayEnd.opened;
    });
    await firstRunning.opened;
    let secondRan = false;
    const secondDone = completeIfLeased(database, second.lease, async () => {
      secondRan = true;
    }, boundOf(200));
    await expect(secondDone).rejects.toThrow(new EffectNotStartedError('effects did not start within 200ms: still waiting for a database connection; nothing was written'));
    firstMayEnd.open();
    expect(await firstDone).toBe(true);
    expect(secondRan).toBe(false);
    expect(await t.sql("SELECT status FROM cronq_jobs WHERE job_key = 'second'")).toEqual([{ status: 'reserved' }]);
  });

  it("whose signal aborts while it waits fails with the signal's reason, having run nothing, and leaves no connection taken", async () => {
    const { database, first, second } = await twoJobs();
    const firstRunning = gate();
    const firstMayEnd = gate();
    const firstDone = completeIfLeased(database, first.lease, async () => {
      firstRunning.open();
      await firstMayEnd.opened;
    });
    await firstRunning.opened;
    const abort = new AbortController();
    let secondRan = false;
    const secondDone = completeIfLeased(database, second.lease, async () => {
      secondRan = true;
    }, boundOf(10_000, abort.signal));
    const reason = new Error('shutdown grace ended');
    abort.abort(reason);
    await expect(secondDone).rejects.toBe(reason);
    firstMayEnd.open();
    expect(await firstDone).toBe(true);
    expect(secondRan).toBe(false);
    // The share is whole again: the job whose wait was abandoned completes with its effect.
    expect(await completeIfLeased(database, second.lease, async () => undefined, boundOf(5_000))).toBe(true);
  });
});

/** A task whose effect sets its job's payload to {"wrote":true}. */
const writesItsPayload = (options: { name: string; lease?: string; timeout?: string }) =>
  defineTask({
    ...options,
    handle: (job, ctx) => {
      ctx.effect(async (tx) => {
        await tx.execute(sql`UPDATE cronq_jobs SET payload = '{"wrote":true}' WHERE job_key = ${job.key}`);
      });
    },
  });

describe('a completion with an effect whose bound runs out before its effect begins', () => {
  it("while another transaction holds the job's row: fails with EffectNotStartedError naming the row lock, having run nothing", async () => {
    small = connect(t.url, { poolSize: 4 });
    await insertJobsIfAbsent(small.db, [jobRow('locked')]);
    const [job] = await claimJobs(small, 1);
    const holder = await small.pool.getConnection();
    try {
      await holder.query('BEGIN');
      await holder.query("SELECT id FROM cronq_jobs WHERE job_key = 'locked' FOR UPDATE");
      let ran = false;
      const done = completeIfLeased(small, job.lease, async () => {
        ran = true;
      }, boundOf(300));
      await expect(done).rejects.toThrow(new EffectNotStartedError("effects did not start within 300ms: still waiting for the job's row lock; nothing was written"));
      expect(ran).toBe(false);
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
    expect(await t.sql("SELECT status FROM cronq_jobs WHERE job_key = 'locked'")).toEqual([{ status: 'reserved' }]);
  });

  it('in a daemon, waiting for a connection of the effects\' share: is tried again under its renewed lease and completes once one frees, not counted as a failure', async () => {
    const effects = countingEffects();
    const hangMayEnd = gate();
    await start([
      // Each holds one connection of the effects' share (46 of the 48 at concurrency 60) until the gate opens.
      defineTask({
        name: 'hold',
        timeout: EFFECT_TIMEOUT,
        handle: (_job, ctx) => {
          ctx.effect(async () => {
            effects.onStart();
            await hangMayEnd.opened;
          });
        },
      }),
      // Its effects' bound is what is left of a 2 s lease less a third of it: it runs out while waiting.
      writesItsPayload({ name: 'waiter', lease: '2s' }),
      // Its bound is its 300 ms timeout, its lease the default: it runs out with room left in the lease.
      writesItsPayload({ name: 'timed', timeout: '300ms' }),
    ]);
    await insertJobsIfAbsent(t.database.db, Array.from({ length: 46 }, (_, i) => jobRow(`hold:${i}`, { kind: 'hold' })));
    await effects.atLeast(46);
    await insertJobsIfAbsent(t.database.db, [jobRow('waiter:1', { kind: 'waiter' }), jobRow('timed:1', { kind: 'timed' })]);
    // Each one's bound ran out while it waited for a connection: the database's slowness, not theirs.
    for (const kind of ['waiter', 'timed']) {
      const [slow] = await log.waitFor('job_effects_delayed', 1, 10_000, (e) => e.kind === kind);
      expect(slow.error).toMatch(/^EffectNotStartedError: effects did not start within \d+ms: still waiting for a database connection; nothing was written$/);
    }
    // Waited past its bound again and again (3 × 300 ms), and past what was left of its 2 s lease (kept by renewals).
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    hangMayEnd.open();
    await log.waitFor('job_completed', 2, 10_000, (e) => e.kind === 'waiter' || e.kind === 'timed');
    expect(log.named('job_failed')).toEqual([]);
    expect(log.named('job_finish_abandoned')).toEqual([]);
    expect(log.named('job_lease_lost')).toEqual([]);
    expect(await t.sql("SELECT job_key, status, attempts, payload FROM cronq_jobs WHERE job_key IN ('timed:1', 'waiter:1') ORDER BY job_key")).toEqual([
      { job_key: 'timed:1', status: 'done', attempts: 1, payload: { wrote: true } },
      { job_key: 'waiter:1', status: 'done', attempts: 1, payload: { wrote: true } },
    ]);
  });
});
