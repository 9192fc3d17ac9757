import type { Logger } from '../logger.ts';
import type { Observer } from '../observe.ts';
import type { DbHealth } from '../runtime/dbHealth.ts';
import type { Cancellation, ClaimedJob, Lease } from '../store/index.ts';
import type { Task } from '../tasks/define.ts';
import { WORK_DONE, type Effect, type Job, type JobContext } from '../tasks/job.ts';
import type { Finisher, HandlerOutcome } from './finisher.ts';
import { decodePayload } from './payload.ts';
import { keepLeaseAlive, reclaimOnce, renewOnce, type RenewableRun } from './renewal.ts';
import { runAsJob } from './runningJob.ts';
import type { WorkerStore } from './workerStore.ts';
import { JobCancelledError, LeaseLostError, ShutdownAbortError } from '../errors.ts';

/** What every run of a pool shares. */
export interface JobRunDeps {
  /** For renewing the lease (every final write goes through the finisher). */
  store: Pick<WorkerStore, 'renew' | 'renewUnrecovered' | 'cancellationOf'>;
  log: Logger;
  health: DbHealth;
  /** Told about this run's lease loss. */
  observer: Observer;
  /** Takes the run over once its handler has an outcome. */
  finisher: Finisher;
}

const SUCCEEDED: HandlerOutcome = { ok: true };

/** What a run leaves in `job.payloadText` once it has decoded it (JobRun.execute). */
export const PAYLOAD_DECODED = '';

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function';
}

/**
 * One delivery of one claimed job, up to its handler's outcome: decode the payload, run
 * the handler with no locks held, renewing the lease every third of its length while it
 * runs, then hand the outcome to the Finisher, which owns every write from there on
 * (and the run's slot). A job of a kind with no task, or with a payload that can never
 * be decoded, goes to the finisher without a handler.
 *
 * The run decodes the payload text once, then drops it from its job (PAYLOAD_DECODED):
 * from the handler's start on, only the handler's own `job.payload` holds the payload,
 * and a run waiting for its write (a batch, a retry in an outage) holds none.
 *
 * Only the handler's own errors (and its effects') consume an attempt. The run's lease
 * state (deadline by the local clock, lost or not) is read by the finisher and the
 * renewal; a lease found lost aborts the handler's signal and discards its result.
 */
export class JobRun implements RenewableRun {
  /** Made when the handler first reads ctx.signal, or when it must be aborted. */
  private abortController: AbortController | null = null;
  private childLog: Logger | null = null;
  readonly lease: Lease;
  readonly leaseMs: number;
  /** Local estimate of when our lease ends (Date.now()): when effects must end, and when a write refused by the server stops being retried. */
  leaseDeadline: number;
  leaseLost = false;
  /** True while the handler itself runs (not its final write). */
  inHandler = false;
  /** Set while the run's effects run in their transaction: aborting it abandons them (rolled back). */
  effectsAbort: AbortController | null = null;
  /** The shutdown grace ran out while the handler ran: its signal was aborted. */
  shutdownAborted = false;
  /** The handler said its work was done, only tidying left (ctx[WORK_DONE]): a success after shutdownAborted still counts. */
  workDone = false;
  /** The final write is done, failed or given up (set by the Finisher). */
  settled = false;
  /** When execute started the run (performance.now()). */
  startedAt = 0;
  private interruptRelease: Promise<boolean> | null = null;
  /** Ends the running async handler's run now (set while one runs): a lost lease or a cancel does not wait for a handler that ignores its signal. */
  private endRun: ((outcome: HandlerOutcome) => void) | null = null;

  /** `claimedAt`: Date.now() when the claim committed; the job's lease runs from then. Runs share one `deps` per pool. */
  constructor(
    readonly job: ClaimedJob,
    readonly task: Task | undefined,
    private readonly deps: JobRunDeps,
    claimedAt: number = Date.now(),
  ) {
    this.lease = job.lease;
    this.leaseMs = job.leaseMs;
    this.leaseDeadline = claimedAt + job.leaseMs;
  }

  private get abort(): AbortController {
    this.abortController ??= new AbortController();
    return this.abortController;
  }

  /** A child logger carrying job_id and kind, made on first use (most jobs log once). */
  get log(): Logger {
    this.childLog ??= this.deps.log.child({ job_id: this.job.id, kind: this.job.kind });
    return this.childLog;
  }

  /**
   * Runs the handler and hands its outcome to the finisher. Never throws.
   *
   * Synchronous up to the handler's return: a synchronous handler's plain success (the
   * bulk of a fast queue) reaches the finisher's next batch with no promise or async
   * frame of its own.
   */
  execute(): void {
    this.startedAt = performance.now();
    if (this.job.leaseExpiries > 0) {
      this.log.warn(
        { event: 'job_reclaimed_after_lease_expiry', key: this.job.key, attempt: this.job.attempt, lease_expiries: this.job.leaseExpiries },
        'a process running this job before stopped or stalled without finishing it; if that repeats, its handler may be crashing the process',
      );
    }
    const { finisher } = this.deps;
    if (!this.task) {
      finisher.handBackUnknownKind(this);
      return;
    }
    try {
      const payload = decodePayload(this.job, this.task);
      // The text is not read again: a run waiting for its batched completion (or a
      // retried write) must not hold the payload, only the job's identity.
      this.job.payloadText = PAYLOAD_DECODED;
      if (!payload.ok) {
        finisher.finish(this, payload, []);
        return;
      }
      const effects: Effect[] = [];
      finisher.finish(this, this.runHandler(payload.value, effects), effects);
    } catch (error) {
      finisher.gaveUp(this, error);
    }
  }

  /** Shutdown grace ran out: abort the handler's signal, or abandon its effects' transaction if they are running. */
  abortForShutdown(): void {
    this.shutdownAborted = true;
    const reason = new ShutdownAbortError('shutdown grace period ran out');
    if (this.inHandler) this.abort.abort(reason);
    this.effectsAbort?.abort(reason);
  }

  /**
   * Hands the job back (attempt restored, the stop counted; dead at maxLeaseExpiries stops) if this run still holds its lease (the fence
   * decides): for handlers interrupted by shutdown. Runs once; later calls return the
   * first call's answer.
   */
  releaseIfStillHeld(): Promise<boolean> {
    this.interruptRelease ??= this.deps.finisher.releaseInterrupted(this);
    return this.interruptRelease;
  }

  /** Renews the lease every third of its length until the returned function is called (renewal.ts). */
  keepLeaseAlive(): () => void {
    return keepLeaseAlive(this, this.deps.store, this.deps.health);
  }

  /** Renews the lease once, now (renewal.ts renewOnce): the lease is then renewed, marked lost, or as it was after a database error. */
  renewLeaseNow(): Promise<void> {
    return renewOnce(this, this.deps.store, this.deps.health);
  }

  /**
   * After an outage: takes the lease back even if its deadline passed meanwhile, as long as
   * nobody recovered the job (renewal.ts reclaimOnce): renewed, marked lost or cancelled,
   * or as it was after a database error.
   */
  reclaimLease(): Promise<void> {
    return reclaimOnce(this, this.deps.store, this.deps.health);
  }

  leaseRenewed(requestedAt: number): void {
    this.leaseDeadline = requestedAt + this.leaseMs;
  }

  /** The lease is gone (recovered, or another worker holds the job): abort the handler, discard its result. Once. */
  markLeaseLost(where: string): void {
    if (this.leaseLost) return;
    this.leaseLost = true;
    this.log.warn({ event: 'job_lease_lost', where }, this.startedAt === 0 ? 'lease lost before its handler started; not run' : 'lease lost; result discarded');
    this.deps.observer.leaseLost(this.job.kind);
    this.endNow(new LeaseLostError('lease lost: another worker or recovery owns this job now'));
  }

  /**
   * An operator cancelled the job (`cronq cancel`): like a lost lease — abort the handler
   * with JobCancelledError, discard its result — but logged as `job_cancelled` with who
   * and why. Once, and not after the lease was already marked lost.
   */
  markCancelled({ by, reason }: Cancellation): void {
    if (this.leaseLost) return;
    this.leaseLost = true;
    this.log.warn(
      { event: 'job_cancelled', key: this.job.key, cancelled_by: by, cancel_reason: reason },
      this.startedAt === 0 ? 'job cancelled by an operator before its handler started; not run' : 'job cancelled by an operator; result discarded',
    );
    this.endNow(new JobCancelledError(`job cancelled by ${by ?? 'an operator'}: ${reason ?? 'no reason given'}`));
  }

  /**
   * Aborts the handler's signal with `reason` and, if an async handler is running, ends
   * its run at once: its slot is given back even if it ignores the signal (it runs on in
   * the background, abandoned, its result and effects discarded, as after a timeout).
   */
  private endNow(reason: Error): void {
    this.abort.abort(reason);
    this.endRun?.({ ok: false, error: reason });
  }

  /**
   * Calls the handler. A handler that returns a promise has its lease renewed until the
   * promise settles; one that returns synchronously needs no renewal (no timer could
   * fire while it ran), and its outcome comes back without a promise.
   */
  private runHandler(payload: unknown, effects: Effect[]): HandlerOutcome | Promise<HandlerOutcome> {
    const job: Job = {
      id: this.job.id,
      kind: this.job.kind,
      key: this.job.key,
      queue: this.job.queue,
      payload,
      attempt: this.job.attempt,
      maxAttempts: this.job.maxAttempts,
      periodKey: this.job.periodKey,
      scheduledAt: this.job.scheduledAt,
    };
    const ctx = runContext(this, effects);
    this.inHandler = true;
    let result: unknown;
    try {
      result = runAsJob(job, this.task!, ctx);
    } catch (error) {
      this.inHandler = false;
      return { ok: false, error };
    }
    let thenable: boolean;
    try {
      thenable = isThenable(result);
    } catch (error) {
      // A returned value whose `then` getter throws: that throw is the handler's failure.
      this.inHandler = false;
      return { ok: false, error };
    }
    if (!thenable) {
      this.inHandler = false;
      return SUCCEEDED;
    }
    const stopRenewal = this.keepLeaseAlive();
    return new Promise<HandlerOutcome>((resolve) => {
      // Whichever comes first: the handler's outcome, or the lease found lost or the job
      // cancelled (endNow). The other is ignored.
      const end = (outcome: HandlerOutcome) => {
        if (this.endRun !== end) return;
        this.endRun = null;
        stopRenewal();
        this.inHandler = false;
        resolve(outcome);
      };
      this.endRun = end;
      Promise.resolve(result).then(
        () => end(SUCCEEDED),
        (error: unknown) => end({ ok: false, error }),
      );
    });
  }

  /** The abort signal the handler sees (ctx.signal), made on first read. */
  get signal(): AbortSignal {
    return this.abort.signal;
  }
}

/** Where a RunContext keeps its run and effects (a symbol: not a property a handler sees or spreads). */
const CONTEXT = Symbol('cronq.runContext');

/**
 * The accessors every RunContext has as its own enumerable properties, so `{ ...ctx }`
 * copies signal, log and effect as a plain object literal's getters would be copied;
 * shared, so a context costs one small object, and its signal and logger are made only
 * when the handler reads them.
 */
const CONTEXT_PROPERTIES: PropertyDescriptorMap = {
  signal: {
    enumerable: true,
    get(this: RunContext): AbortSignal {
      return this[CONTEXT].run.signal;
    },
  },
  log: {
    enumerable: true,
    get(this: RunContext): Logger {
      return this[CONTEXT].run.log;
    },
  },
  effect: {
    enumerable: true,
    get(this: RunContext): (fn: Effect) => void {
      const { run, effects } = this[CONTEXT];
      return (fn: Effect) => {
        if (typeof fn !== 'function') throw new TypeError('ctx.effect needs a function (tx) => Promise');
        // Once the handler's outcome is in (and its effects are not running), the outcome is
        // being written without this one: say so rather than drop it silently.
        if (!run.inHandler && run.effectsAbort === null) {
          run.log.warn({ event: 'job_effect_ignored' }, 'ctx.effect called after its handler returned: not run (await the work that registers it)');
          return;
        }
        effects.push(fn);
      };
    },
  },
};

/**
 * A handler's `ctx`: one small object per run, whose signal and logger are made only when
 * the handler reads them. `effect` works detached too (`const { effect } = ctx`), and a
 * spread (`{ ...ctx, log: child }`) copies all three.
 */
interface RunContext extends JobContext {
  readonly [CONTEXT]: { run: JobRun; effects: Effect[] };
}

/**
 * What every RunContext inherits: cronq's own hooks (ctx[WORK_DONE]), on a shared prototype
 * rather than on each context, so a run costs no more for them and a spread leaves them out.
 */
const CONTEXT_PROTOTYPE: object = Object.create(Object.prototype, {
  [WORK_DONE]: {
    value(this: RunContext): void {
      this[CONTEXT].run.workDone = true;
    },
  },
});

function runContext(run: JobRun, effects: Effect[]): RunContext {
  const ctx = Object.defineProperty(Object.create(CONTEXT_PROTOTYPE), CONTEXT, { value: { run, effects } });
  return Object.defineProperties(ctx, CONTEXT_PROPERTIES) as RunContext;
}
