import { describe, expect, it } from 'vitest';
import { LeaseLostError, PermanentError } from '../src/errors.ts';
import { noopObserver } from '../src/observe.ts';
import { DbHealth } from '../src/runtime/dbHealth.ts';
import type { ClaimedJob, Failure, FailOutcome, Lease } from '../src/store/index.ts';
import { defineTask, type TaskOptions } from '../src/tasks/define.ts';
import { Finisher } from '../src/worker/finisher.ts';
import { JobRun, PAYLOAD_DECODED } from '../src/worker/jobRun.ts';
import { Prefetch } from '../src/worker/prefetch.ts';
import { RunSlots } from '../src/worker/slots.ts';
import { UnknownKinds } from '../src/worker/unknownKinds.ts';
import type { WorkerStore } from '../src/worker/workerStore.ts';
import { EventLog } from './support/events.ts';

/** A promise with its resolve in hand: lets a test hold a store write open. */
function deferred<T>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** One turn of the event loop: long enough for the finisher's next batch to go out. */
const turn = () => new Promise((resolve) => setImmediate(resolve));

/**
 * A store that records every write and answers from its `answers`; no database. Anything
 * the run should never ask for throws.
 */
function fakeStore(answers: {
  completeMany?: (leases: Lease[]) => Promise<Set<number>>;
  fail?: (lease: Lease, failure: Failure) => Promise<FailOutcome>;
  renew?: () => Promise<boolean>;
  renewUnrecovered?: () => Promise<boolean>;
} = {}) {
  const writes: Array<{ op: string; lease: Lease; failure?: Failure }> = [];
  const tx = { effects: [] as string[] };
  const store: WorkerStore = {
    claimConnections: 2,
    claim: () => Promise.reject(new Error('a run never claims')),
    readyQueues: () => Promise.reject(new Error('a run never reads queues')),
    pausedQueues: () => Promise.reject(new Error('a run never reads pauses')),
    now: () => Promise.resolve(new Date()),
    servingOf: () => Promise.reject(new Error('no unknown kinds here')),
    moveToQueue: () => Promise.reject(new Error('a run never moves its job')),
    cancellationOf: () => Promise.resolve(null),
    completeMany: (leases) => {
      for (const lease of leases) writes.push({ op: 'completeMany', lease });
      return answers.completeMany ? answers.completeMany(leases) : Promise.resolve(new Set(leases.map((l) => l.id)));
    },
    complete: async (lease, effect) => {
      writes.push({ op: 'complete', lease });
      await effect?.(tx as never);
      return true;
    },
    fail: (lease, failure) => {
      writes.push({ op: 'fail', lease, failure });
      return answers.fail ? answers.fail(lease, failure) : Promise.resolve({ status: 'retry', retryInMs: failure.retryInMs });
    },
    renew: (lease) => {
      writes.push({ op: 'renew', lease });
      return answers.renew ? answers.renew() : Promise.resolve(true);
    },
    renewUnrecovered: (lease) => {
      writes.push({ op: 'renewUnrecovered', lease });
      return answers.renewUnrecovered ? answers.renewUnrecovered() : Promise.resolve(true);
    },
    release: (lease) => {
      writes.push({ op: 'release', lease });
      return Promise.resolve(true);
    },
    releaseInterrupted: (lease) => {
      writes.push({ op: 'releaseInterrupted', lease });
      return Promise.resolve('released' as const);
    },
    releaseUnstarted: () => Promise.reject(new Error('a run never releases a job it did not start')),
    releaseUnstartedMany: () => Promise.reject(new Error('a run never releases jobs it did not start')),
  };
  return { store, writes, tx };
}

const claimed = (overrides: Partial<ClaimedJob> = {}): ClaimedJob => ({
  id: 7,
  queue: 'default',
  kind: 'k',
  key: 'k:7',
  payloadText: '{"n":1}',
  attempt: 1,
  maxAttempts: 3,
  periodKey: null,
  scheduledAt: null,
  lease: { id: 7, token: 'a'.repeat(32) },
  leaseMs: 60_000,
  leaseExpiries: 0,
  ...overrides,
});

/** One JobRun wired as the pool wires it (a Finisher, one slot), on a fake store. */
function runOf(task: Omit<TaskOptions, 'name'>, fake = fakeStore(), job = claimed({ leaseMs: (task.lease as number | undefined) ?? 60_000 })) {
  const events = new EventLog();
  const log = events.logger;
  const health = new DbHealth(log);
  const slots = new RunSlots(1, new Prefetch(0, { concurrency: 1 }));
  const unknownKinds = new UnknownKinds({ graceMs: 60_000, aliveMs: 30_000, log });
  const finisher = new Finisher({ store: fake.store, health, log, observer: noopObserver, slots, unknownKinds, maxLeaseExpiries: 3 });
  const run = new JobRun(job, defineTask({ ...task, name: 'k' }), { store: fake.store, log, health, observer: noopObserver, finisher });
  slots.take(run);
  run.execute();
  return { run, slots, health, events, writes: fake.writes, tx: fake.tx, settled: () => slots.allSettled() };
}

describe('a job run on a fake store', () => {
  it('completes a plain success through the batch, its slot free before the batch is written', async () => {
    const batch = deferred<Set<number>>();
    const r = runOf({ handle: () => undefined }, fakeStore({ completeMany: () => batch.promise }));
    expect(r.slots.used).toBe(0);
    await turn();
    expect(r.writes).toEqual([{ op: 'completeMany', lease: claimed().lease }]);
    expect(r.slots.isSettled(r.run)).toBe(false);
    batch.resolve(new Set([7]));
    await r.settled();
    expect(r.events.named('job_completed')).toHaveLength(1);
  });

  it('holds no payload text once started: a run waiting for its batch keeps only the job\'s identity', async () => {
    const batch = deferred<Set<number>>();
    let seen: unknown;
    const big = JSON.stringify({ blob: 'x'.repeat(100_000) });
    const r = runOf({ handle: async (job) => void (seen = job.payload) }, fakeStore({ completeMany: () => batch.promise }), claimed({ payloadText: big }));
    while (r.writes.length === 0) await turn();
    expect(seen).toEqual({ blob: 'x'.repeat(100_000) }); // the handler had it
    expect(r.slots.isSettled(r.run)).toBe(false); // waiting for its batch...
    expect(r.run.job.payloadText).toBe(PAYLOAD_DECODED); // ...without the 100 kB text
    expect(r.run.job).toMatchObject({ id: 7, kind: 'k', key: 'k:7', attempt: 1 });
    batch.resolve(new Set([7]));
    await r.settled();
  });

  it('records a failure with the retry delay of its backoff, keeping its slot until written', async () => {
    const write = deferred<FailOutcome>();
    const r = runOf({ handle: () => Promise.reject(new Error('flaky')), backoff: { base: '2s', max: '2s' } }, fakeStore({ fail: () => write.promise }));
    while (r.writes.length === 0) await turn();
    expect(r.slots.used).toBe(1);
    const [{ op, failure }] = r.writes;
    expect(op).toBe('fail');
    expect(failure).toMatchObject({ error: 'Error: flaky', permanent: false });
    expect(failure!.retryInMs).toBeGreaterThan(0);
    write.resolve({ status: 'retry', retryInMs: failure!.retryInMs });
    await r.settled();
    expect(r.slots.used).toBe(0);
    expect(r.events.named('job_failed')).toMatchObject([{ attempt: 1, retry_in_ms: failure!.retryInMs, error: 'Error: flaky' }]);
  });

  it('records a PermanentError, and a payload that is not JSON, as permanent failures', async () => {
    const thrown = runOf({ handle: () => { throw new PermanentError('never'); } }, fakeStore({ fail: async () => ({ status: 'dead' }) }));
    const unparsable = runOf({ handle: () => undefined }, fakeStore({ fail: async () => ({ status: 'dead' }) }), claimed({ payloadText: '{nope' }));
    await Promise.all([thrown.settled(), unparsable.settled()]);
    expect(thrown.writes.map((w) => [w.op, w.failure?.permanent, w.failure?.error])).toEqual([['fail', true, 'PermanentError: never']]);
    expect(unparsable.writes.map((w) => [w.op, w.failure?.permanent])).toEqual([['fail', true]]);
    expect(unparsable.writes[0].failure!.error).toContain('payload is not valid JSON');
    expect(thrown.events.named('job_dead')).toHaveLength(1);
  });

  it('aborts the handler with LeaseLostError and writes nothing when a renewal finds the lease gone', async () => {
    let reason: unknown;
    const r = runOf(
      {
        lease: 1_000, // renewed every 333 ms
        handle: (_job, ctx) =>
          new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject((reason = ctx.signal.reason)))),
      },
      fakeStore({ renew: async () => false }),
    );
    await r.settled();
    expect(reason).toBeInstanceOf(LeaseLostError);
    expect(r.writes.map((w) => w.op)).toEqual(['renew']);
    expect(r.events.named('job_lease_lost')).toMatchObject([{ where: 'renew' }]);
  });

  it('runs registered effects inside the fenced single-job completion, not the batch', async () => {
    const r = runOf({
      handle: (_job, ctx) => {
        ctx.effect(async (tx) => void (tx as unknown as { effects: string[] }).effects.push('sent'));
      },
    });
    await r.settled();
    expect(r.writes.map((w) => w.op)).toEqual(['complete']);
    expect(r.tx.effects).toEqual(['sent']);
    expect(r.events.named('job_completed')).toHaveLength(1);
  });

  it("hands the handler a ctx whose effect works detached, whose signal is the run's and whose log names the job", async () => {
    let seen: { aborted: boolean; logs: boolean; keys: string[] } | undefined;
    const r = runOf({
      handle: async (_job, ctx) => {
        const { effect, signal, log } = ctx;
        effect(async (tx) => void (tx as unknown as { effects: string[] }).effects.push('detached'));
        seen = { aborted: signal.aborted, logs: typeof log.info === 'function', keys: Object.keys(log.bindings()) };
        expect(ctx.signal).toBe(signal); // one signal per run
        // A spread copies all three, as it would from a plain object: helper(job, { ...ctx, log: child }).
        const copy = { ...ctx, log: 'replaced' };
        expect(Object.keys(ctx)).toEqual(['signal', 'log', 'effect']);
        expect([copy.signal, copy.log, typeof copy.effect]).toEqual([signal, 'replaced', 'function']);
        expect(() => effect('not a function' as never)).toThrow(/ctx.effect needs a function/);
      },
    });
    await r.settled();
    expect(seen).toEqual({ aborted: false, logs: true, keys: expect.arrayContaining(['job_id', 'kind']) });
    expect(r.tx.effects).toEqual(['detached']);
    expect(r.writes.map((w) => w.op)).toEqual(['complete']);
  });

  it('ignores, with a warning naming the job, an effect registered after its handler returned, rather than dropping it silently', async () => {
    let late!: () => void;
    const registered = new Promise<void>((resolve) => (late = resolve));
    const r = runOf({
      handle: (_job, ctx) => {
        setTimeout(() => {
          ctx.effect(async (tx) => void (tx as unknown as { effects: string[] }).effects.push('late'));
          late();
        }, 20);
      },
    });
    await r.settled();
    await registered;
    expect(r.writes.map((w) => w.op)).toEqual(['completeMany']);
    expect(r.tx.effects).toEqual([]);
    const [ignored] = r.events.named('job_effect_ignored');
    expect(ignored).toMatchObject({ level: 40, job_id: 7, kind: 'k' });
    expect(ignored.msg).toMatch(/after its handler returned/);
  });

  it('still runs an effect one of its effects registers while they run', async () => {
    const r = runOf({
      handle: (_job, ctx) => {
        ctx.effect(async (tx) => {
          (tx as unknown as { effects: string[] }).effects.push('first');
          ctx.effect(async (inner) => void (inner as unknown as { effects: string[] }).effects.push('second'));
        });
      },
    });
    await r.settled();
    expect(r.tx.effects).toEqual(['first', 'second']);
    expect(r.events.named('job_effect_ignored')).toEqual([]);
  });

  it('fails an attempt that outruns its timeout with the timeout as its error', async () => {
    const r = runOf({ timeout: '30ms', handle: () => new Promise(() => undefined) });
    await r.settled();
    expect(r.writes.map((w) => [w.op, w.failure?.permanent])).toEqual([['fail', false]]);
    expect(r.writes[0].failure!.error).toContain('timed out after');
  });

  it('retries a batch the database dropped until it is back, taking its lease back first, completing the job once and failing nothing', async () => {
    let calls = 0;
    const fake = fakeStore({
      completeMany: async (leases) => {
        calls += 1;
        if (calls === 1) throw Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
        return new Set(leases.map((l) => l.id));
      },
    });
    const r = runOf({ handle: () => undefined }, fake);
    await r.events.waitFor('db_unavailable');
    expect(r.slots.isSettled(r.run)).toBe(false);
    r.health.ok(); // someone else's statement got through: the database is back
    await r.settled();
    expect(r.writes.map((w) => w.op)).toEqual(['completeMany', 'renewUnrecovered', 'completeMany']);
    expect(r.events.named('job_completed')).toHaveLength(1);
    expect(r.events.named('job_finish_abandoned')).toHaveLength(0);
  });
});
