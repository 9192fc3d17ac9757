import { formatDuration } from '../duration.ts';
import { EffectTimeoutError, isInstance, PermanentError, ShutdownAbortError } from '../errors.ts';
import type { Logger } from '../logger.ts';
import type { Observer } from '../observe.ts';
import { isDatabaseTrouble, isOutage, type DbHealth } from '../runtime/dbHealth.ts';
import { errorText } from '../runtime/errorText.ts';
import { sleep } from '../runtime/wakeup.ts';
import { EffectNotStartedError, type ClaimedJob, type EffectBound } from '../store/index.ts';
import type { Effect } from '../tasks/job.ts';
import type { JobRun } from './jobRun.ts';
import { failureOf } from './retryPolicy.ts';
import type { RunSlots } from './slots.ts';
import type { UnknownKinds } from './unknownKinds.ts';
import type { WorkerStore } from './workerStore.ts';

/** Most completions written by one statement. */
const MAX_BATCH = 500;

/** How often a write waiting out an outage looks again whether it was cut off meanwhile (untilDatabase). */
const OUTAGE_WAIT_MS = 60_000;

/** The writes of their own a Finisher counts while under way (unwritten). */
type OwnWrite = 'completion' | 'failure' | 'release';

/** What a handler came to. */
export type HandlerOutcome = { ok: true } | { ok: false; error: unknown };

export interface FinisherDeps {
  store: WorkerStore;
  health: DbHealth;
  /** The pool's logger (a run logs through its own child). */
  log: Logger;
  observer: Observer;
  slots: RunSlots;
  /** What to do with a job of a kind this daemon has no task for. */
  unknownKinds: UnknownKinds;
  /** A run cut by the shutdown's grace counts one stop of its process; at this many the job goes dead (releaseInterrupted). */
  maxLeaseExpiries: number;
  /** Aborts when the pool stops: unstarted releases waiting out an outage give up (default: only cutOff ends them). */
  stopping?: AbortSignal;
}

/** Per reason a claimed job goes back unstarted (releaseUnstarted): its `last_error`, and the log line's message. */
const UNSTARTED_RELEASES = {
  shutdown: { reason: 'released during shutdown before processing', logged: 'claimed job released on shutdown' },
  stale: { reason: 'claimed ahead but not started in time; released for another worker', logged: 'claimed job waited too long; released' },
  handoff: { reason: 'claimed but the worker failed to take it; released for another claim', logged: 'claimed job the worker failed to take; released' },
} as const;

/** Buffered jobs one release transaction hands back (releaseUnstartedAll). */
const UNSTARTED_RELEASE_BATCH = 500;

/** How many kinds' first move to their limited queue is logged at warn (the rest at debug). */
const MOVED_KINDS_LOGGED = 1_000;

/**
 * The one owner of every run's end: it writes the outcome, retries database trouble,
 * frees the run's slot and settles it (RunSlots), each exactly once per run.
 *
 * - A plain success (no effects) frees its slot at once and joins the next batch: every
 *   success handed in while a batch is in flight is written by the next one, so N
 *   handlers finishing together cost one fenced UPDATE (completeManyIfLeased) and one
 *   commit, and a lone success is written on the next turn of the event loop (no timer).
 *   A batch that meets database trouble is retried here as a batch.
 * - A failure, an effect, a kind this daemon does not run, a shutdown interruption: a
 *   fenced write of its own, keeping the slot until written, so such writes never queue
 *   up beyond the concurrency (in an outage, say).
 *
 * Retrying: in an outage the writes wait for the database to be back (someone else
 * probes), however long it is away: a result is kept until it can be written, since a
 * handler that succeeded must not be taken for one that never finished. Once the database
 * answers, each waiting run first takes its lease back (renewIfUnrecovered: its deadline
 * may have passed meanwhile, and the job is still its own unless recovery returned it),
 * then writes. A statement the server refused (a lock wait, say) is backed off from and
 * sent again while the lease lasts, and given up (`job_finish_abandoned`, nothing
 * written) once the lease would have run out first: recovery then returns the job. A
 * write that finds the lease gone marks the run's lease lost and records nothing.
 *
 * `cutOff()` (a shutdown out of time) ends every wait and retry at once, nothing more
 * written; `unwritten()` says what was still waiting then.
 */
/** reclaimLate's answer for a batch that completed whole. */
const NONE_RETRIED: ReadonlySet<JobRun> = new Set();

export class Finisher {
  private pending: JobRun[] = [];
  /** Limited kinds whose jobs were found in another queue and moved (logged at warn the first time). */
  private readonly movedKinds = new Set<string>();
  private inFlight = 0;
  private flushing: Promise<void> | null = null;
  /** Aborted by cutOff: waits and retries end, nothing more is written. */
  private readonly cut = new AbortController();
  /** Writes of their own (not batched) under way, by what they write (see unwritten). */
  private readonly writing = new Map<OwnWrite, number>();

  constructor(private readonly deps: FinisherDeps) {}

  /** Plain successes handed in and not yet written. */
  get backlog(): number {
    return this.pending.length + this.inFlight;
  }

  /**
   * What is still to be written, for a shutdown that ran out of time: counts of
   * completions (batched or with effects), failures and releases, each a phrase such as
   * `3 completions`; empty when nothing is.
   */
  unwritten(): string[] {
    const counts: Record<OwnWrite, number> = { completion: this.backlog, failure: 0, release: 0 };
    for (const [what, n] of this.writing) counts[what] += n;
    return (Object.keys(counts) as OwnWrite[]).filter((what) => counts[what] > 0).map((what) => `${counts[what]} ${what}${counts[what] === 1 ? '' : 's'}`);
  }

  /**
   * Ends every wait for the database and every retry at once (a shutdown out of time): the
   * runs waiting to write are settled with nothing written, their jobs left to lease
   * recovery (the fence keeps a write still in flight from landing after recovery).
   */
  cutOff(): void {
    this.cut.abort();
  }

  /** Runs one write of its own, counted as `what` while it is under way (unwritten). */
  private async counted<T>(what: OwnWrite, work: () => Promise<T>): Promise<T> {
    this.writing.set(what, (this.writing.get(what) ?? 0) + 1);
    try {
      return await work();
    } finally {
      this.writing.set(what, this.writing.get(what)! - 1);
    }
  }

  /** Waits until the database answers again (DbHealth) or `signal` aborts (default: the finisher is cut off). */
  private async untilDatabase(signal = this.cut.signal): Promise<void> {
    while (!this.deps.health.healthy && !signal.aborted) await this.deps.health.untilHealthy(OUTAGE_WAIT_MS, signal);
  }

  /**
   * Takes over `run` once its handler has an outcome (`ran`, a promise while an async
   * handler runs), with the effects it registered. Synchronous for an outcome already
   * known; never throws.
   */
  finish(run: JobRun, ran: HandlerOutcome | Promise<HandlerOutcome>, effects: Effect[]): void {
    if (!(ran instanceof Promise)) {
      this.write(run, ran, effects);
      return;
    }
    ran.then(
      (outcome) => this.write(run, outcome, effects),
      (error: unknown) => this.gaveUp(run, error),
    );
  }

  /**
   * A kind this daemon has no task for (another version's, in a rolling deploy): hands the
   * job back, attempt restored and not claimable for a little while, for a daemon that
   * runs it; dead only once no daemon has served the kind for the grace (UnknownKinds).
   */
  handBackUnknownKind(run: JobRun): void {
    this.settleAfter(run, this.counted('release', () => this.releaseOrBury(run)));
  }

  /** `run` failed before its handler had an outcome, unexpectedly: logged, nothing written (its lease expires). */
  gaveUp(run: JobRun, error: unknown): void {
    run.log.error({ event: 'job_run_error', error: errorText(error) }, 'unexpected error finishing job');
    this.settle(run);
  }

  /**
   * Hands back `run`'s job (attempt restored, the stop counted in lease_expiries) if the
   * run still holds its lease: for a handler interrupted by shutdown. At maxLeaseExpiries
   * stops the job goes dead instead (releaseInterruptedIfLeased). True when released.
   * Database errors are reported, not retried (the lease expires and recovery returns the job).
   */
  async releaseInterrupted(run: JobRun): Promise<boolean> {
    const { store, observer, maxLeaseExpiries } = this.deps;
    const sentAt = Date.now();
    try {
      const outcome = await this.counted('release', () =>
        store.releaseInterrupted(run.lease, "the shutdown's grace ran out while its handler ran; released for another worker", maxLeaseExpiries),
      );
      if (outcome === 'released') {
        run.log.info({ event: 'job_released_on_shutdown' }, 'running job interrupted by shutdown and released');
        observer.shutdownReleased(1);
      } else if (outcome === 'dead') {
        run.log.error(
          { event: 'job_dead', attempt: run.job.attempt, stops: run.job.leaseExpiries + 1 },
          `job is dead: its runs were cut short ${run.job.leaseExpiries + 1} times (this time by the shutdown's grace); see cronq_dead_letters`,
        );
        observer.jobDead(run.job.kind);
      }
      return outcome === 'released';
    } catch (error) {
      this.deps.health.backoffAfter(error, 'release', sentAt);
      return false;
    }
  }

  /**
   * Hands back a job claimed but never started, attempt restored: on shutdown, when it
   * waited too long behind slow handlers ('stale'), or when the pool failed to take it
   * from its claim ('handoff'). Fenced by its token alone (releaseUnstarted): a job whose
   * lease ran out while the release was held up (an outage) but that nobody recovered
   * goes back with no lease expiry counted, since it never ran. True when released; a
   * job recovered or cancelled meanwhile is left alone. A 'stale' release that meets
   * database trouble waits for the database as results do and is sent again, until the
   * pool stops (`deps.stopping`) or the finisher is cut off; the others are sent once.
   * One given up is logged, and its lease expires (recovery then counts it).
   */
  async releaseUnstarted(job: ClaimedJob, why: 'shutdown' | 'stale' | 'handoff'): Promise<boolean> {
    const { log, observer } = this.deps;
    const onShutdown = why === 'shutdown';
    const released = await this.counted('release', () => this.sendUnstartedRelease(job, why));
    if (released === null) {
      log.warn({ event: 'claim_release_failed', job_id: job.id }, 'could not release; its lease will expire');
      return false;
    }
    if (released && onShutdown) observer.shutdownReleased(1);
    const event = !released ? 'claim_release_lost' : onShutdown ? 'claim_released_on_shutdown' : 'claim_released_unstarted';
    log.info({ event, job_id: job.id, kind: job.kind }, !released ? 'claimed job was no longer ours to release' : UNSTARTED_RELEASES[why].logged);
    return released;
  }

  /**
   * releaseUnstarted(job, why) for many jobs at once, UNSTARTED_RELEASE_BATCH per
   * transaction (releaseUnstartedMany) instead of a statement each: at shutdown the whole
   * read-ahead buffer, a thousand jobs in a few round trips; and every buffered job that
   * went stale together (sent a statement each, a few hundred queued up on the pool's
   * connections until the last landed after their leases had run out and another daemon's
   * recovery had counted an expiry against jobs that never ran). A 'shutdown' batch is sent
   * once (one the database refuses is logged, `claim_release_failed`, and its leases
   * expire); a 'stale' one that meets database trouble is sent again, as a single stale
   * release is. Never throws; returns how many were released.
   */
  async releaseUnstartedAll(jobs: readonly ClaimedJob[], why: 'shutdown' | 'stale'): Promise<number> {
    if (jobs.length <= 1) return jobs.length === 1 && (await this.releaseUnstarted(jobs[0], why)) ? 1 : 0;
    return this.releaseUnstartedInBatches(jobs, why);
  }

  /** Releases `jobs` (claimed, never started) UNSTARTED_RELEASE_BATCH per transaction, logged each; 'stale' batches are retried as sendUnstartedRelease does. */
  private async releaseUnstartedInBatches(jobs: readonly ClaimedJob[], why: 'shutdown' | 'stale'): Promise<number> {
    const { store, log, observer } = this.deps;
    const { reason, logged } = UNSTARTED_RELEASES[why];
    const onShutdown = why === 'shutdown';
    let count = 0;
    for (let i = 0; i < jobs.length; i += UNSTARTED_RELEASE_BATCH) {
      const batch = jobs.slice(i, i + UNSTARTED_RELEASE_BATCH);
      const released = await this.counted('release', () =>
        this.sendReleaseRetried(why, () => store.releaseUnstartedMany(batch.map((job) => job.lease), reason)),
      );
      if (released === null) {
        log.warn({ event: 'claim_release_failed', jobs: batch.length, job_ids: batch.slice(0, 20).map((job) => job.id) }, 'could not release; their leases will expire');
        continue;
      }
      count += released.size;
      if (onShutdown && released.size > 0) observer.shutdownReleased(released.size);
      if (!log.isLevelEnabled('info')) continue;
      const ours = onShutdown ? 'claim_released_on_shutdown' : 'claim_released_unstarted';
      for (const job of batch) {
        const held = released.has(job.id);
        log.info({ event: held ? ours : 'claim_release_lost', job_id: job.id, kind: job.kind }, held ? logged : 'claimed job was no longer ours to release');
      }
    }
    return count;
  }

  /** releaseUnstarted's statement, sent again as it says; null when given up on a database error. */
  private sendUnstartedRelease(job: ClaimedJob, why: 'shutdown' | 'stale' | 'handoff'): Promise<boolean | null> {
    return this.sendReleaseRetried(why, () => this.deps.store.releaseUnstarted(job.lease, UNSTARTED_RELEASES[why].reason));
  }

  /**
   * Sends an unstarted release: once, or for 'stale' again after database trouble (waiting
   * for the database in an outage, backing off otherwise) until the pool stops or the
   * finisher is cut off. Null when given up on a database error.
   */
  private async sendReleaseRetried<T>(why: 'shutdown' | 'stale' | 'handoff', send: () => Promise<T>): Promise<T | null> {
    const { health } = this.deps;
    const stopping = this.deps.stopping ?? this.cut.signal;
    for (;;) {
      const sentAt = Date.now();
      try {
        return await send();
      } catch (error) {
        const wait = health.backoffAfter(error, 'release', sentAt);
        if (why !== 'stale' || !isDatabaseTrouble(error) || stopping.aborted || this.cut.signal.aborted) return null;
        if (isOutage(error)) await this.untilDatabase(stopping);
        else await sleep(wait, stopping);
        if (stopping.aborted || this.cut.signal.aborted) return null;
      }
    }
  }

  /**
   * Hands a claimed, unstarted job of a limited kind back into its kind's queue (`queue`),
   * attempt restored: it was claimed from another queue, where its limit would not hold
   * (moveToQueue). Logged at warn once per kind, then at debug; a job whose lease was
   * already lost is left alone, and a database error is logged (its lease expires, and
   * the next claim that finds it moves it again).
   */
  async moveToLimitedQueue(job: ClaimedJob, queue: string): Promise<void> {
    const { store, log, health } = this.deps;
    const sentAt = Date.now();
    try {
      const moved = await this.counted('release', () =>
        store.moveToQueue(job.lease, queue, `a job of limited kind '${job.kind}' was in queue '${job.queue}', where its limit does not hold; moved to queue '${queue}'`),
      );
      // Warned once per kind; past MOVED_KINDS_LOGGED kinds, at debug only.
      const warn = moved && !this.movedKinds.has(job.kind) && this.movedKinds.size < MOVED_KINDS_LOGGED;
      if (warn) this.movedKinds.add(job.kind);
      log[warn ? 'warn' : 'debug'](
        { event: moved ? 'job_moved_to_limited_queue' : 'claim_release_lost', job_id: job.id, kind: job.kind, from_queue: job.queue, queue },
        moved
          ? 'job of a limited kind found in another queue (enqueued by a process that does not know its task?): moved to its own queue, where its limit holds'
          : 'claimed job was no longer ours to move',
      );
    } catch (error) {
      health.backoffAfter(error, 'release', sentAt);
      log.warn({ event: 'claim_release_failed', job_id: job.id }, 'could not move the job to its limited queue; its lease will expire');
    }
  }

  /** Resolves once every success handed in so far has been written (or given up). */
  async idle(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  private write(run: JobRun, outcome: HandlerOutcome, effects: Effect[]): void {
    if (run.leaseLost) {
      this.settle(run); // result discarded; job_lease_lost already logged
      return;
    }
    // Cut by the shutdown's grace, whatever the handler came to: a throw, or a return once it
    // saw its signal aborted (`if (ctx.signal.aborted) return`), which did not finish the job
    // either. Handed back (attempt restored, the stop counted): at worst it runs again. But a
    // success whose work was done before the abort (ctx[WORK_DONE]: a command that exited 0,
    // its output still draining) is done: run again, the command would run twice.
    if (run.shutdownAborted && !(outcome.ok && run.workDone)) {
      this.settleAfter(run, run.releaseIfStillHeld());
      return;
    }
    if (outcome.ok && effects.length === 0) {
      this.deps.slots.free(run);
      this.pending.push(run);
      this.flushing ??= this.flush();
      return;
    }
    this.settleAfter(
      run,
      outcome.ok ? this.counted('completion', () => this.completeWithEffects(run, effects)) : this.counted('failure', () => this.recordFailure(run, outcome.error)),
    );
  }

  /** A run that never started its handler (its lease lost or released before): settled, nothing written. */
  dropUnstarted(run: JobRun): void {
    this.settle(run);
  }

  /** Settles `run` once `work` is over, logging anything it threw. */
  private settleAfter(run: JobRun, work: Promise<unknown>): void {
    work.then(
      () => this.settle(run),
      (error: unknown) => this.gaveUp(run, error),
    );
  }

  private settle(run: JobRun): void {
    run.settled = true;
    this.deps.slots.settle(run);
  }

  private async flush(): Promise<void> {
    // Let handlers that finish in this same turn join the first batch.
    await new Promise((resolve) => setImmediate(resolve));
    while (this.pending.length > 0) {
      const batch = this.pending.splice(0, MAX_BATCH);
      this.inFlight = batch.length;
      try {
        await this.writeBatch(batch);
      } catch (error) {
        for (const run of batch) if (!run.settled) this.gaveUp(run, error);
      }
      this.inFlight = 0;
      this.deps.slots.room.notify(); // the backlog shrank: runs held back by it may start
    }
    this.flushing = null;
  }

  /** Writes one batch of plain successes, retrying database trouble while their leases may hold; settles each run. */
  private async writeBatch(batch: JobRun[]): Promise<void> {
    const { store, health } = this.deps;
    let runs = batch;
    let renewals: Array<() => void> | null = null;
    try {
      for (;;) {
        if (this.cut.signal.aborted) {
          for (const run of runs) this.settle(run); // nothing written: recovery returns the jobs
          return;
        }
        if (!health.healthy) {
          // An outage: wait for the claim loop to find the database back, however long it
          // takes, then take back the leases that may have run out meanwhile.
          await this.untilDatabase();
          if (this.cut.signal.aborted) continue;
          await Promise.all(runs.map((run) => run.reclaimLease()));
          runs = this.settleLost(runs);
          if (runs.length === 0) return;
          if (!health.healthy) continue;
        }
        const sentAt = Date.now();
        let done: Set<number>;
        try {
          done = await store.completeMany(runs.map((run) => run.lease));
        } catch (error) {
          if (!isDatabaseTrouble(error)) {
            // Not the database's trouble: recorded as a failure, as an effect's error would be.
            for (const run of runs) this.settleAfter(run, this.recordFailure(run, error));
            return;
          }
          renewals ??= runs.map((run) => run.keepLeaseAlive()); // keep the leases while the trouble lasts
          // An outage already reported is not reported again: the loop's top waits it out.
          if (!health.healthy && isOutage(error)) continue;
          const wait = health.backoffAfter(error, 'complete', sentAt);
          if (isOutage(error)) continue; // waited out at the loop's top, however long
          runs = this.abandonExpiring(runs, 'complete', Date.now() + wait);
          if (runs.length === 0) return;
          if (health.healthy) await sleep(wait, this.cut.signal); // a refused statement: back off, retry
          continue;
        }
        health.ok(sentAt);
        // Most batches complete whole: only runs the fence refused are looked at again.
        const retried = done.size === runs.length ? NONE_RETRIED : await this.reclaimLate(runs.filter((run) => !done.has(run.job.id)));
        for (const run of runs) {
          if (retried.has(run)) continue;
          this.recordCompleted(run, done.has(run.job.id));
          this.settle(run);
        }
        if (retried.size === 0) return;
        runs = [...retried];
      }
    } finally {
      for (const stop of renewals ?? []) stop();
    }
  }

  /**
   * Of the runs a completion found not leased, those whose deadline passed while it was in
   * flight (a server that froze with it in its socket ran it, thawed, past the deadline):
   * the fence saw the time, not the job gone. Each takes its lease back while the job is
   * still reserved under its token (reclaimLease); returns those that did (or that wait
   * out an outage the reclaim met), to be written again. The others are left as they were.
   */
  private async reclaimLate(notDone: JobRun[]): Promise<Set<JobRun>> {
    const late = notDone.filter((run) => !run.leaseLost && run.leaseDeadline <= Date.now());
    await Promise.all(late.map((run) => run.reclaimLease()));
    return new Set(late.filter((run) => !run.leaseLost && (run.leaseDeadline > Date.now() || !this.deps.health.healthy)));
  }

  /** Settles the runs whose lease was found lost (already logged); returns the others. */
  private settleLost(runs: JobRun[]): JobRun[] {
    const held: JobRun[] = [];
    for (const run of runs) {
      if (run.leaseLost) this.settle(run);
      else held.push(run);
    }
    return held;
  }

  /** Gives up (and settles) the runs whose lease is lost or ends by `by`; returns the others. */
  private abandonExpiring(runs: JobRun[], where: string, by: number): JobRun[] {
    const hopeful: JobRun[] = [];
    for (const run of runs) {
      if (run.leaseLost || run.leaseDeadline <= by) {
        this.logAbandoned(run, where);
        this.settle(run);
      } else hopeful.push(run);
    }
    return hopeful;
  }

  private logAbandoned(run: JobRun, where: string): void {
    run.log.warn({ event: 'job_finish_abandoned', where }, 'could not record the result; the lease will expire and recovery returns the job');
  }

  private async completeWithEffects(run: JobRun, effects: Effect[]): Promise<void> {
    run.effectsAbort = new AbortController();
    let done;
    try {
      done = await this.writeWithRetry(run, 'complete', () =>
        this.deps.store.complete(
          run.lease,
          async (tx) => {
            for (const effect of effects) await effect(tx);
          },
          effectBound(run),
        ),
      );
    } finally {
      run.effectsAbort = null;
    }
    if (done === undefined) return;
    if (done.ok === false) {
      // Shutdown's grace ran out during the effects: rolled back; the drain hands the job back.
      if (isInstance(done.error, ShutdownAbortError)) return;
      // An effect threw or timed out once running (not the database going away or too slow
      // to let it start): a handler failure like any other.
      await this.recordFailure(run, done.error);
      return;
    }
    this.recordCompleted(run, done.value);
  }

  /** The completion was written (`done`), or found the lease gone. */
  private recordCompleted(run: JobRun, done: boolean): void {
    if (!done) {
      run.markLeaseLost('complete');
      return;
    }
    // The busiest line: no child logger made for it, nothing built when info is off.
    const { log, observer } = this.deps;
    const { job } = run;
    if (log.isLevelEnabled('info')) {
      log.info({ job_id: job.id, kind: job.kind, event: 'job_completed', attempt: job.attempt, elapsed_ms: elapsed(run.startedAt) }, 'job completed');
    }
    observer.jobCompleted(job.kind, (performance.now() - run.startedAt) / 1000);
  }

  private async recordFailure(run: JobRun, error: unknown): Promise<void> {
    const { job } = run;
    const failure = failureOf(error, run.task, job.attempt);
    const result = await this.writeWithRetry(run, 'fail', () => this.deps.store.fail(run.lease, failure));
    if (result === undefined) return;
    if (result.ok === false) throw result.error;
    const outcome = result.value;
    const { observer } = this.deps;
    if (outcome.status === 'lease_lost') {
      run.markLeaseLost('fail');
    } else if (outcome.status === 'retry') {
      run.log.warn(
        { event: 'job_failed', attempt: job.attempt, retry_in_ms: outcome.retryInMs, error: failure.error, elapsed_ms: elapsed(run.startedAt) },
        'job failed; will retry',
      );
      observer.jobFailed(job.kind, true);
    } else {
      run.log.warn(
        { event: 'job_failed', attempt: job.attempt, retry_in_ms: null, error: failure.error, elapsed_ms: elapsed(run.startedAt) },
        'job failed',
      );
      run.log.error({ event: 'job_dead', attempt: job.attempt, permanent: failure.permanent, error: failure.error }, 'job is dead; see cronq_dead_letters');
      observer.jobFailed(job.kind, false);
      observer.jobDead(job.kind);
    }
  }

  private async releaseOrBury(run: JobRun): Promise<void> {
    const judged = await this.writeWithRetry(run, 'unknown_kind', () => this.deps.unknownKinds.judge(this.deps.store, run.job));
    if (judged === undefined) return;
    if (judged.ok === false) throw judged.error;
    const verdict = judged.value;
    if (verdict.dead) {
      await this.recordFailure(run, new PermanentError(verdict.reason));
      return;
    }
    const released = await this.writeWithRetry(run, 'release', () => this.deps.store.release(run.lease, verdict.reason, verdict.retryInMs));
    if (released === undefined) return;
    if (released.ok === false) throw released.error;
    if (!released.value) run.markLeaseLost('release');
  }

  /**
   * Runs one fenced write for `run`, waiting out an outage however long it lasts (then
   * taking the lease back, see the class comment), retrying a statement the server
   * refused (with backoff) while its lease may still be valid, and effects that never
   * began (EffectNotStartedError). Undefined when it gave up, found the lease gone or was
   * cut off (recovery will return the job), `{ ok: false }` when the write failed for a
   * reason not the database's.
   */
  private async writeWithRetry<T>(run: JobRun, where: string, write: () => Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: unknown } | undefined> {
    const { health } = this.deps;
    let stopRenewal: (() => void) | null = null;
    let delayedLogged = false;
    try {
      for (;;) {
        if (this.cut.signal.aborted) return undefined; // nothing written: recovery returns the job
        if (!health.healthy) {
          // An outage: wait for the claim loop to find the database back, rather than every
          // finishing job probing it on its own, however long it takes; then take the lease
          // back, as it may have run out meanwhile.
          await this.untilDatabase();
          if (this.cut.signal.aborted) continue;
          await run.reclaimLease();
          if (run.leaseLost) return undefined; // recovered, or cancelled, meanwhile (logged)
          if (!health.healthy) continue;
        }
        const sentAt = Date.now();
        try {
          const value = await write();
          health.ok(sentAt);
          return { ok: true, value };
        } catch (error) {
          // Effects whose bound ran out before they began (no connection, or no row lock, in
          // time): the database's slowness, not theirs; nothing ran, so they are tried again.
          const notStarted = isInstance(error, EffectNotStartedError); // guarded: an effect may throw a revoked Proxy
          if (!notStarted && !isDatabaseTrouble(error)) return { ok: false, error };
          stopRenewal ??= run.keepLeaseAlive(); // keep the lease alive while the trouble lasts
          if (notStarted) {
            if (!delayedLogged) run.log.info({ event: 'job_effects_delayed', error: errorText(error) }, 'effects could not start in time; trying again under the lease');
            delayedLogged = true;
            // The task's timeout ended it, with room left in the lease: try again (the wait
            // is for a connection, sending nothing; the lease is renewed meanwhile).
            if (leaseRoomMs(run) > 0) continue;
            // The lease's own limit ended it: renew the lease now, and the next try gets a
            // bound of its own. A renewal that did not land backs off below.
            const before = run.leaseDeadline;
            await run.renewLeaseNow();
            if (run.leaseLost) return undefined; // marked lost (or cancelled) and logged
            if (run.leaseDeadline > before) continue;
          }
          // An outage already reported (say, by another job's write) is not reported
          // again: the loop's top waits for the database to come back.
          if (!notStarted && !health.healthy && isOutage(error)) continue;
          const wait = health.backoffAfter(error, where);
          if (!notStarted && isOutage(error)) continue; // waited out at the loop's top, however long
          if (Date.now() + wait >= run.leaseDeadline || run.leaseLost) {
            this.logAbandoned(run, where);
            return undefined;
          }
          if (health.healthy) await sleep(wait, this.cut.signal); // a refused statement: back off, retry
        }
      }
    } finally {
      stopRenewal?.();
    }
  }
}

/**
 * How long `run`'s effects may hold their transaction (the row lock and a connection):
 * the task's `timeout` if it has one, and in any case no later than a third of a lease
 * before the lease ends, so that their failure can still be recorded under the lease.
 * Computed as the write is sent (a retry after database trouble gets what is left); a
 * wait for a connection of the effects' share (Database.dedicated) counts against it.
 */
function effectBound(run: JobRun): EffectBound {
  const byTimeout = run.task?.timeoutMs ?? Infinity;
  const byLease = leaseRoomMs(run);
  const limitMs = Math.max(0, Math.min(byTimeout, byLease));
  const why = byTimeout <= byLease ? "the task's timeout" : 'ended early enough to record the failure within the lease';
  return {
    limitMs,
    timedOut: () => new EffectTimeoutError(`effect timed out after ${formatDuration(limitMs)} (${why}); its transaction was rolled back`),
    signal: run.effectsAbort?.signal,
  };
}

/** How long `run`'s effects may still run before a third of a lease before its lease ends (≤ 0: no room). */
function leaseRoomMs(run: JobRun): number {
  return run.leaseDeadline - Math.ceil(run.leaseMs / 3) - Date.now();
}

function elapsed(startedAt: number): number {
  return Math.round(performance.now() - startedAt);
}
