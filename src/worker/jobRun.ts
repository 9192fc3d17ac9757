import type { Db } from '../db/client.ts';
import { isConnectionError } from '../db/client.ts';
import { errorText } from '../runtime/errorText.ts';
import type { Logger } from '../logger.ts';
import type { Observer } from '../observe.ts';
import { retryDelayMs } from '../runtime/backoff.ts';
import type { ClaimedJob } from '../store/claims.ts';
import { isLockConflict } from '../store/sql.ts';
import { completeIfLeased, failIfLeased, releaseIfLeased, renewIfLeased, type Lease } from '../store/fenced.ts';
import type { Task } from '../tasks/define.ts';
import type { Effect, Job } from '../tasks/job.ts';
import type { Completer, CompletionReceiver } from './completer.ts';
import type { DbHealth } from '../runtime/dbHealth.ts';
import { isPermanent } from './failure.ts';
import { runAsJob } from './runningJob.ts';
import type { UnknownKinds } from './unknownKinds.ts';
import { sleep } from '../runtime/wakeup.ts';
import { LeaseLostError, ShutdownAbortError } from '../errors.ts';

export interface JobRunDeps {
  db: Db;
  log: Logger;
  completer: Completer;
  health: DbHealth;
  /** Told about this run's result, lease loss or shutdown release. */
  observer: Observer;
  /** What to do with a job of a kind this daemon has no task for. */
  unknownKinds: UnknownKinds;
  /** Called once per run, when its worker slot is free again (see JobRun.execute). */
  onSlotFree(run: JobRun): void;
  /** Called once per run, when it has settled: its final write done, failed or given up. */
  onSettled(run: JobRun): void;
}

type Outcome = { ok: true } | { ok: false; error: unknown };
const SUCCEEDED: Outcome = { ok: true };

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function';
}

/**
 * One delivery of one claimed job: run the handler with no locks held, renew the
 * lease every third of its length, then finish through a fenced write.
 *
 * Only the handler's own errors (and its effects') consume an attempt. A database
 * error while renewing or finishing is infrastructure trouble: finishing is retried
 * until the lease would have expired, after which recovery returns the job.
 */
export class JobRun implements CompletionReceiver {
  /** Made when the handler first reads ctx.signal, or when it must be aborted. */
  private abortController: AbortController | null = null;
  private readonly lease: Lease;
  private childLog: Logger | null = null;
  private leaseLost = false;
  /** True while the handler itself runs (not its final write). */
  inHandler = false;
  private shutdownAborted = false;
  private finished = false;
  /** Local estimate of when our lease ends; only used to stop retrying a finish. */
  private leaseDeadline: number;
  private slotFree = false;
  /** Set by execute: when the run started (performance.now()), and when its batched completion was handed in. */
  startedAt = 0;
  private completionSentAt = 0;

  /**
   * `leaseMs` is this job's lease, running since `claimedAt` (Date.now() when the claim
   * committed). Runs share one `deps` per pool.
   */
  constructor(
    private readonly job: ClaimedJob,
    private readonly task: Task | undefined,
    private readonly deps: JobRunDeps,
    private readonly leaseMs: number,
    claimedAt: number = Date.now(),
  ) {
    this.lease = { id: job.id, token: job.leaseToken };
    this.leaseDeadline = claimedAt + leaseMs;
  }

  /**
   * Frees the worker slot, once: when the handler returned a plain success (its batched
   * completion may still be in flight), otherwise when the run has settled, final write
   * included.
   */
  private freeSlot(): void {
    if (this.slotFree) return;
    this.slotFree = true;
    this.deps.onSlotFree(this);
  }

  private get abort(): AbortController {
    this.abortController ??= new AbortController();
    return this.abortController;
  }

  /** A child logger carrying job_id and kind, made on first use (most jobs log once). */
  private get log(): Logger {
    this.childLog ??= this.deps.log.child({ job_id: this.job.id, kind: this.job.kind });
    return this.childLog;
  }

  /**
   * Runs the job to a final write, reporting `onSlotFree` and then `onSettled` (once
   * each). Never throws.
   *
   * Synchronous up to the handler's return. A plain success of a synchronous handler
   * (the bulk of a fast queue) goes straight to the completer's next batch, with no
   * promise or async frame of its own (this run is the batch's receiver); anything
   * else, or a batch that failed, takes the general path in `finish`.
   */
  execute(): void {
    const startedAt = performance.now();
    this.startedAt = startedAt;
    if (this.job.leaseExpiries > 0) {
      this.log.warn(
        { event: 'job_reclaimed_after_lease_expiry', key: this.job.key, attempt: this.job.attempt, lease_expiries: this.job.leaseExpiries },
        'a process running this job before stopped or stalled without finishing it; if that repeats, its handler may be crashing the process',
      );
    }
    const effects: Effect[] = [];
    let ran: Outcome | Promise<Outcome>;
    if (!this.task) {
      void this.settle(this.releaseOrBuryUnknownKind(startedAt));
      return;
    }
    try {
      const payload = this.payload();
      if (payload instanceof PermanentFailure) {
        void this.settle(this.fail(payload, startedAt));
        return;
      }
      ran = this.runHandler(payload, effects);
    } catch (error) {
      void this.settle(Promise.reject(error));
      return;
    }
    if (ran === SUCCEEDED && effects.length === 0 && this.deps.health.healthy && !this.leaseLost) {
      this.freeSlot();
      this.completionSentAt = Date.now();
      this.deps.completer.submit(this.lease, this);
      return;
    }
    void this.settle(this.finish(ran, effects, startedAt));
  }

  /** CompletionReceiver: the batch holding this run's completion was written. */
  completionWritten(done: boolean): void {
    try {
      this.deps.health.ok(this.completionSentAt);
      this.recordCompleted(done, this.startedAt);
    } catch (error) {
      this.log.error({ event: 'job_run_error', error: errorText(error) }, 'unexpected error finishing job');
    } finally {
      this.settled();
    }
  }

  /** CompletionReceiver: that batch failed; the general path tries again, with its retries. */
  completionFailed(): void {
    void this.settle(this.complete([], this.startedAt));
  }

  /** The payload to hand the handler, or why the job must go dead at once. */
  private payload(): unknown {
    let payload: unknown;
    try {
      payload = JSON.parse(this.job.payloadText);
    } catch {
      return new PermanentFailure('payload is not valid JSON');
    }
    if (!this.task!.parse) return payload;
    try {
      return this.task!.parse(payload);
    } catch (error) {
      return new PermanentFailure(`payload rejected by parse: ${errorText(error)}`);
    }
  }

  /**
   * A kind this daemon has no task for (another version's, in a rolling deploy): hand the
   * job back, attempt restored and not claimable for a little while, for a daemon that
   * runs it; dead only once no daemon has served the kind for the grace (UnknownKinds).
   */
  private async releaseOrBuryUnknownKind(startedAt: number): Promise<void> {
    const judged = await this.finishWithRetry('unknown_kind', () => this.deps.unknownKinds.judge(this.deps.db, this.job));
    if (judged === undefined) return;
    if (judged.ok === false) throw judged.error;
    const verdict = judged.value;
    if (verdict.dead) {
      await this.fail(new PermanentFailure(verdict.reason), startedAt);
      return;
    }
    const released = await this.finishWithRetry('release', () => releaseIfLeased(this.deps.db, this.lease, verdict.reason, verdict.retryInMs));
    if (released === undefined) return;
    if (released.ok === false) throw released.error;
    if (!released.value) this.markLeaseLost('release');
  }

  /** After the handler: the final write for its outcome. */
  private async finish(ran: Outcome | Promise<Outcome>, effects: Effect[], startedAt: number): Promise<void> {
    const outcome = ran instanceof Promise ? await ran : ran;
    // A plain success is written by the completer's batches, so its slot frees now and
    // the next claim overlaps the write. A failure or an effect is a transaction of its
    // own: it keeps the slot until written, so such writes never queue up beyond the
    // concurrency (in an outage, say).
    if (outcome.ok && effects.length === 0) this.freeSlot();
    if (this.leaseLost) return; // result discarded; job_lease_lost already logged
    if (this.shutdownAborted && !outcome.ok) {
      await this.releaseIfStillHeld();
      return;
    }
    if (outcome.ok) await this.complete(effects, startedAt);
    else await this.fail(outcome.error, startedAt);
  }

  /** Waits for `work`, logs anything it threw (never rethrows), then marks the run settled. */
  private async settle(work: Promise<void>): Promise<void> {
    try {
      await work;
    } catch (error) {
      this.log.error({ event: 'job_run_error', error: errorText(error) }, 'unexpected error finishing job');
    } finally {
      this.settled();
    }
  }

  private settled(): void {
    if (this.finished) return;
    this.finished = true;
    this.freeSlot();
    this.deps.onSettled(this);
  }

  /** Shutdown grace ran out: abort the handler's signal. */
  abortForShutdown(): void {
    this.shutdownAborted = true;
    this.abort.abort(new ShutdownAbortError('shutdown grace period ran out'));
  }

  /**
   * Hands the job back (attempt restored) if this run still holds its lease and has
   * not finished. Used for handlers interrupted by shutdown. Runs once; later calls
   * return the first call's answer.
   */
  releaseIfStillHeld(): Promise<boolean> {
    this.release ??= this.releaseOnce();
    return this.release;
  }

  private release: Promise<boolean> | null = null;

  private async releaseOnce(): Promise<boolean> {
    if (this.finished && !this.shutdownAborted) return false;
    try {
      const released = await releaseIfLeased(this.deps.db, this.lease, 'interrupted by shutdown; released for another worker');
      if (released) {
        this.log.info({ event: 'job_released_on_shutdown' }, 'running job interrupted by shutdown and released');
        this.deps.observer.shutdownReleased(1);
      }
      return released;
    } catch (error) {
      this.deps.health.trouble(error, 'release');
      return false;
    }
  }

  /**
   * Calls the handler. A handler that returns a promise has its lease renewed until the
   * promise settles; one that returns synchronously needs no renewal (no timer could
   * fire while it ran), and its outcome comes back without a promise.
   */
  private runHandler(payload: unknown, effects: Effect[]): Outcome | Promise<Outcome> {
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
    const run = this;
    const ctx = {
      get signal() {
        return run.abort.signal;
      },
      get log() {
        return run.log;
      },
      effect: (fn: Effect) => {
        if (typeof fn !== 'function') throw new TypeError('ctx.effect needs a function (tx) => Promise');
        effects.push(fn);
      },
    };
    this.inHandler = true;
    let result: unknown;
    try {
      const task = this.task!;
      result = runAsJob(job, () => task.handle(job, ctx));
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
    const renewal = this.startRenewal();
    return Promise.resolve(result).then(
      () => SUCCEEDED,
      (error: unknown): Outcome => ({ ok: false, error }),
    ).finally(() => {
      clearInterval(renewal);
      this.inHandler = false;
    });
  }

  private startRenewal(): NodeJS.Timeout {
    const every = Math.max(250, Math.floor(this.leaseMs / 3));
    const timer = setInterval(() => void this.renew(), every);
    timer.unref();
    return timer;
  }

  private async renew(): Promise<void> {
    // In an outage the renewal cannot land; the claim loop probes for the database's return.
    if (this.leaseLost || this.finished || !this.deps.health.healthy) return;
    const requestedAt = Date.now();
    try {
      const held = await renewIfLeased(this.deps.db, this.lease, this.leaseMs);
      this.deps.health.ok(requestedAt);
      if (held) {
        this.leaseDeadline = requestedAt + this.leaseMs;
        return;
      }
      this.markLeaseLost('renew');
    } catch (error) {
      // The lease keeps running out meanwhile; the next renewal may still make it.
      this.deps.health.trouble(error, 'renew');
    }
  }

  private markLeaseLost(where: string): void {
    if (this.leaseLost) return;
    this.leaseLost = true;
    this.log.warn({ event: 'job_lease_lost', where }, 'lease lost; result discarded');
    this.deps.observer.leaseLost(this.job.kind);
    this.abort.abort(new LeaseLostError('lease lost: another worker or recovery owns this job now'));
  }

  private async complete(effects: Effect[], startedAt: number): Promise<void> {
    const done = await this.finishWithRetry('complete', () =>
      effects.length === 0
        ? this.deps.completer.complete(this.lease)
        : completeIfLeased(this.deps.db, this.lease, async (tx) => {
            for (const effect of effects) await effect(tx);
          }),
    );
    if (done === undefined) return;
    if (done.ok === false) {
      // An effect threw (not the database going away): a handler failure like any other.
      await this.fail(done.error, startedAt);
      return;
    }
    this.recordCompleted(done.value, startedAt);
  }

  /** The completion was written (`done`), or found the lease gone. */
  private recordCompleted(done: boolean, startedAt: number): void {
    if (!done) {
      this.markLeaseLost('complete');
      return;
    }
    // The busiest line: no child logger made for it, nothing built when info is off.
    const { log } = this.deps;
    if (log.isLevelEnabled('info')) {
      log.info({ job_id: this.job.id, kind: this.job.kind, event: 'job_completed', attempt: this.job.attempt, elapsed_ms: elapsed(startedAt) }, 'job completed');
    }
    this.deps.observer.jobCompleted(this.job.kind, (performance.now() - startedAt) / 1000);
  }

  private async fail(error: unknown, startedAt: number): Promise<void> {
    const permanent = isPermanent(error);
    const retryInMs = this.task ? retryDelayMs(this.task.backoff, this.job.attempt) : 0;
    const message = errorText(error);
    const result = await this.finishWithRetry('fail', () =>
      failIfLeased(this.deps.db, this.lease, { error: message, permanent, retryInMs }),
    );
    if (result === undefined) return;
    if (result.ok === false) throw result.error;
    const outcome = result.value;
    if (outcome.status === 'lease_lost') {
      this.markLeaseLost('fail');
    } else if (outcome.status === 'retry') {
      this.log.warn(
        { event: 'job_failed', attempt: this.job.attempt, retry_in_ms: outcome.retryInMs, error: message, elapsed_ms: elapsed(startedAt) },
        'job failed; will retry',
      );
      this.deps.observer.jobFailed(this.job.kind, true);
    } else {
      this.log.warn(
        { event: 'job_failed', attempt: this.job.attempt, retry_in_ms: null, error: message, elapsed_ms: elapsed(startedAt) },
        'job failed',
      );
      this.log.error(
        { event: 'job_dead', attempt: this.job.attempt, permanent, error: message },
        'job is dead; see cronq_dead_letters',
      );
      this.deps.observer.jobFailed(this.job.kind, false);
      this.deps.observer.jobDead(this.job.kind);
    }
  }

  /**
   * Runs a fenced finishing write, retrying database outages (with backoff) while our
   * lease may still be valid. Returns undefined when it gave up (recovery will return
   * the job), `{ ok: false }` when the write failed for a non-database reason.
   */
  private async finishWithRetry<T>(where: string, write: () => Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: unknown } | undefined> {
    let renewal: NodeJS.Timeout | null = null;
    try {
      for (;;) {
        if (!this.deps.health.healthy) {
          // An outage: wait for the claim loop (or recovery) to find the database back,
          // rather than every finishing job probing it on its own.
          await this.deps.health.untilHealthy(this.leaseDeadline - Date.now());
          if (!this.deps.health.healthy || this.leaseLost) {
            this.log.warn({ event: 'job_finish_abandoned', where }, 'could not record the result; the lease will expire and recovery returns the job');
            return undefined;
          }
        }
        const sentAt = Date.now();
        try {
          const value = await write();
          this.deps.health.ok(sentAt);
          return { ok: true, value };
        } catch (error) {
          if (!isDatabaseTrouble(error)) return { ok: false, error };
          renewal ??= this.startRenewal(); // keep the lease alive while the trouble lasts
          // An outage already reported (say, by another job of the same failed batch) is
          // not reported again: the loop's top waits for the database to come back.
          if (!this.deps.health.healthy && isConnectionError(error)) continue;
          const wait = this.deps.health.trouble(error, where);
          if (Date.now() + wait >= this.leaseDeadline || this.leaseLost) {
            this.log.warn({ event: 'job_finish_abandoned', where }, 'could not record the result; the lease will expire and recovery returns the job');
            return undefined;
          }
          if (this.deps.health.healthy) await sleep(wait); // a refused statement: back off, retry
        }
      }
    } finally {
      if (renewal) clearInterval(renewal);
    }
  }
}

/** Thrown internally for failures that must not retry (unknown kind, bad payload). */
class PermanentFailure extends Error {
  override name = 'PermanentError';
}

function elapsed(startedAt: number): number {
  return Math.round(performance.now() - startedAt);
}

/** Connection loss and lock-wait/deadlock errors: the database's trouble, not the handler's. */
function isDatabaseTrouble(error: unknown): boolean {
  return isConnectionError(error) || isLockConflict(error);
}
