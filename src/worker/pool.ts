import type { Pool } from 'mysql2/promise';
import { CLAIM_CONNECTIONS, type Db } from '../db/client.ts';
import type { Logger } from '../logger.ts';
import { noopObserver, type Observer } from '../observe.ts';
import { ClaimUpdateError, claimReady, readyQueues, type ClaimCursor, type ClaimedJob, type LeaseLengths } from '../store/claims.ts';
import { releaseIfLeased } from '../store/fenced.ts';
import { databaseNow } from '../store/health.ts';
import type { TaskRegistry } from '../tasks/registry.ts';
import { TASK_DEFAULTS } from '../tasks/define.ts';
import { Completer } from './completer.ts';
import { DbHealth } from '../runtime/dbHealth.ts';
import { DB_ERROR_TEXT_MAX, errorText } from '../runtime/errorText.ts';
import { ClaimBuffer } from './claimBuffer.ts';
import { JobRun, type JobRunDeps } from './jobRun.ts';
import { QueueList } from './queueList.ts';
import { Prefetch } from './prefetch.ts';
import { UNKNOWN_KIND_DEFAULTS, UnknownKinds } from './unknownKinds.ts';
import { sleep, Wakeup } from '../runtime/wakeup.ts';

const CURSOR_MAX_AGE_MS = 1_000;
const MAX_UNCLAIMABLE = 1_000;
/** Batched completions waiting to be written beyond which buffered jobs wait to start. */
const COMPLETER_BACKLOG_MAX = 1_000;
/** Claims a busy pool keeps in flight at once (see claimLoop). */
const CLAIM_LANES = CLAIM_CONNECTIONS;

export interface WorkerPoolOptions {
  db: Db;
  /** Database.claims: the multi-statement pool the claims run on (one connection per lane). */
  claims: Pool;
  tasks: TaskRegistry;
  log: Logger;
  /** Handlers running at once in this process. */
  concurrency: number;
  /**
   * Most jobs held claimed but not started, beyond the free slots, while handlers
   * finish faster than a claim round trip (see Prefetch). 0 claims only for free slots.
   */
  prefetch?: number;
  /** Queues to claim from; empty means every queue that has ready jobs (re-read each idle poll and each second). */
  queues: string[];
  /** `host:pid`, written to locked_by. */
  lockedBy: string;
  /** How often an idle claim loop looks for work enqueued by other processes. */
  pollMs: number;
  /** Test hook: pause right after a claim commits (CRONQ_FAULT_POST_CLAIM_PAUSE_MS). */
  postClaimPauseMs?: number;
  health?: DbHealth;
  /** Told about claims, results and shutdown releases (default: nobody). */
  observer?: Observer;
  /** Jobs of kinds not in `tasks` (default: UnknownKinds with its default grace). */
  unknownKinds?: UnknownKinds;
}

/** What `stop` reports. */
export interface StopResult {
  released: number;
  abandoned: number;
}

/**
 * Claim loops feeding up to `concurrency` handlers.
 *
 * A claim is one short transaction (store/claims.ts claimReady); handlers start only after
 * it commits. A claim asks for the free slots plus a read-ahead (Prefetch: none for slow
 * handlers) and its jobs wait in a ClaimBuffer until a slot frees; one that waits a
 * third of its lease is released, attempt restored. Lane 0 always claims; a second lane
 * claims alongside it while the queues are busy. An idle pool sleeps `pollMs` or until
 * `wake()` (a local enqueue, a freed slot). Database errors never end a loop: the pool
 * logs `db_unavailable` once, backs off with jitter, and carries on; meanwhile
 * finishing jobs wait for the database and lane 0 probes it.
 *
 * `stop({ graceMs })`: no further claims; jobs claimed but not yet started (in flight or
 * buffered) are released at once with their attempt restored; running handlers get
 * `graceMs` to finish, then their signal aborts and, if they still hold the job, it is
 * released the same way. Calling stop twice returns the same promise.
 */
export class WorkerPool {
  /** Runs whose handler holds a worker slot. */
  private readonly running = new Set<JobRun>();
  /** Jobs claimed and committed but not started yet, oldest first. */
  private readonly buffered = new ClaimBuffer();
  private readonly prefetch: Prefetch;
  private readonly leases: LeaseLengths;
  /** Every run not yet settled: handlers running plus final writes in flight. */
  private readonly unsettled = new Set<JobRun>();
  /** Resolved (and cleared) each time `unsettled` becomes empty. */
  private whenAllSettled: Array<() => void> = [];
  /** What every run shares (JobRun takes its job, task and lease on its own). */
  private readonly runDeps: JobRunDeps;
  /** startBuffered is on the stack: a slot freed meanwhile is picked up by its loop. */
  private starting = false;
  private readonly wakeup = new Wakeup();
  private readonly completer: Completer;
  private readonly health: DbHealth;
  private readonly observer: Observer;
  private readonly stopping = new AbortController();
  private loop: Promise<void> | null = null;
  private stopped: Promise<StopResult> | null = null;
  private rotation = 0;
  /** Rows the database refused to reserve (ClaimUpdateError), never claimed again here. */
  private readonly unclaimable = new Set<number>();
  /** Claims left to make one row at a time while narrowing down a refused row. */
  private isolating = 0;
  /** Claim cursors (see ClaimRequest.cursors), dropped on every short claim and at least each second. */
  private readonly cursors = new Map<string, ClaimCursor>();
  private cursorsSetAt = 0;
  /** With no queue list given: the queues last seen with ready jobs, and when. */
  private readonly queueList: QueueList;
  private released = 0;
  /** Rows asked for by claims in flight. */
  private claiming = 0;
  /** The last claim came back full: there is more to claim. */
  private busy = false;
  /** Last time the claim loop went round, for health checks. */
  lastLoopAt = Date.now();

  constructor(private readonly options: WorkerPoolOptions) {
    this.completer = new Completer(options.db, () => this.startBuffered());
    this.health = options.health ?? new DbHealth(options.log);
    this.observer = options.observer ?? noopObserver;
    this.runDeps = {
      db: options.db,
      log: options.log,
      completer: this.completer,
      health: this.health,
      observer: this.observer,
      unknownKinds:
        options.unknownKinds ??
        new UnknownKinds({ graceMs: UNKNOWN_KIND_DEFAULTS.graceMs, aliveMs: 3 * UNKNOWN_KIND_DEFAULTS.heartbeatMs, log: options.log }),
      onSlotFree: (run) => this.slotFreed(run),
      onSettled: (run) => this.runSettled(run),
    };
    this.prefetch = new Prefetch(options.prefetch ?? 0);
    this.queueList = new QueueList(options.queues, () => readyQueues(options.claims));
    this.leases = {
      byKind: new Map(options.tasks.list().map((task) => [task.name, task.leaseMs])),
      defaultMs: TASK_DEFAULTS.leaseMs,
    };
  }

  start(): void {
    if (this.loop) return;
    this.options.log.info(
      { event: 'worker_started', concurrency: this.options.concurrency, queues: this.options.queues, locked_by: this.options.lockedBy },
      'worker started',
    );
    this.loop = Promise.all(Array.from({ length: CLAIM_LANES }, (_, lane) => this.claimLoop(lane))).then(() => undefined);
  }

  /**
   * Ends an idle wait at once: call after enqueueing work this pool should pick up.
   * `queue` names the queue it went to (so a pool serving every queue claims from it
   * without first re-reading its queue list); without it, the list is re-read.
   */
  wake(queue?: string): void {
    if (queue === undefined) this.queueList.stale();
    else this.queueList.enqueuedInto(queue);
    this.wakeup.notify();
  }

  get activeJobs(): number {
    return this.running.size;
  }

  /**
   * How long the oldest run holding a worker slot has been running, in ms (0 when none).
   * `running` keeps start order, so that is its first run. A run timed out or finished
   * has left it, even if an abandoned handler still runs in the background.
   */
  get oldestRunningAgeMs(): number {
    for (const run of this.running) return run.startedAt > 0 ? performance.now() - run.startedAt : 0;
    return 0;
  }

  get isStopping(): boolean {
    return this.stopping.signal.aborted;
  }

  stop({ graceMs }: { graceMs: number }): Promise<StopResult> {
    this.stopped ??= this.shutdown(graceMs);
    return this.stopped;
  }

  /**
   * One claim lane. Lane 0 always claims; the others claim only while the queues are
   * busy (the last claim came back full), so a busy pool keeps several claims in
   * flight on separate connections (each a round trip and a durable commit, which the
   * database then overlaps) while an idle pool polls with one.
   */
  private async claimLoop(lane: number): Promise<void> {
    const { concurrency, log } = this.options;
    while (!this.isStopping) {
      this.lastLoopAt = Date.now();
      if (lane === 0) {
        // In an outage, running and finishing jobs wait for the database instead of
        // probing it; when this loop will not claim either, it probes for them.
        const wouldClaim = this.buffered.length === 0 && this.running.size < concurrency;
        if (!this.health.healthy && !wouldClaim && !(await this.probeDatabase())) continue;
        this.startBuffered();
      }
      if (lane > 0 && (!this.busy || this.isolating > 0)) {
        await this.wakeup.wait(this.options.pollMs);
        continue;
      }
      // Each lane claims up to its share of the target, so the lanes' claims overlap.
      // Claim at once for a slot that would otherwise sit idle; beyond that, only once
      // half a share is free, so claims stay large.
      const inHand = this.running.size + this.buffered.length + this.claiming;
      const target = concurrency + this.prefetch.size();
      const share = Math.ceil(target / CLAIM_LANES);
      const want = this.isolating > 0 ? (inHand < concurrency ? 1 : 0) : Math.min(share, target - inHand);
      if (want <= 0 || (inHand >= concurrency && want < share / 2)) {
        await this.wakeup.wait(this.options.pollMs);
        continue;
      }
      let claimed: ClaimedJob[];
      if (Date.now() - this.cursorsSetAt > CURSOR_MAX_AGE_MS) {
        this.cursors.clear();
        this.cursorsSetAt = Date.now();
      }
      const claimStarted = performance.now();
      const sentAt = Date.now();
      this.claiming += want;
      try {
        claimed = await claimReady(
          this.options.claims,
          {
            queues: await this.queueList.current(),
            limit: want,
            leases: this.leases,
            lockedBy: this.options.lockedBy,
            cursors: this.cursors,
            excludeIds: this.excludedFromClaims(),
          },
          this.rotation++,
        );
        this.health.ok(sentAt);
        this.prefetch.claimTook(performance.now() - claimStarted);
        if (this.isolating > 0) this.isolating -= 1;
      } catch (error) {
        // The claim moved cursors past rows it then failed to reserve: look from the front.
        this.cursors.clear();
        this.busy = false;
        if (error instanceof ClaimUpdateError) {
          this.narrowDown(error);
          continue;
        }
        this.queueList.stale();
        await sleep(this.health.trouble(error, 'claim'), this.stopping.signal);
        continue;
      } finally {
        this.claiming -= want;
      }
      if (claimed.length > 0 && this.options.postClaimPauseMs) {
        await sleep(this.options.postClaimPauseMs);
      }
      // THIS MUST COME FIRST after a claim: a stop that arrived while claiming
      // means these handlers never start.
      if (this.isStopping) {
        await Promise.all(claimed.map((job) => this.releaseUnstarted(job, 'shutdown')));
        break;
      }
      if (log.isLevelEnabled('info')) {
        for (const job of claimed) log.info({ event: 'job_claimed', job_id: job.id, kind: job.kind, attempt: job.attempt }, 'job claimed');
      }
      this.buffered.add(claimed, Date.now(), (kind) => this.leaseMsFor(kind));
      if (claimed.length > 0) this.observer.jobClaimed(claimed.length);
      this.startBuffered();
      this.busy = claimed.length === want;
      if (!this.busy) {
        // The queues looked drained from the cursors on: look from the front next time,
        // and see which queues have work now.
        this.cursors.clear();
        this.queueList.stale();
        await this.wakeup.wait(this.options.pollMs);
      } else if (lane === 0) {
        this.wakeup.notify(); // let the other lanes see the queues are busy
      }
    }
  }

  /**
   * Asks the database whether it is back (it was reported down and this loop is not
   * claiming, so nothing else here would notice). Backs off on failure.
   */
  private async probeDatabase(): Promise<boolean> {
    const sentAt = Date.now();
    try {
      await databaseNow(this.options.db);
      this.health.ok(sentAt);
      return true;
    } catch (error) {
      await sleep(this.health.trouble(error, 'probe'), this.stopping.signal);
      return false;
    }
  }

  /**
   * Starts buffered jobs, oldest first, while slots are free. Not while the database is
   * unreachable: they could not record a result, and each would retry on its own; they
   * wait for it (or, past a third of their lease, are released or recovered).
   */
  private startBuffered(): void {
    // Completions waiting to be written are the other bound: past it, new runs wait.
    if (!this.health.healthy || this.completer.backlog >= COMPLETER_BACKLOG_MAX) return;
    if (this.starting) return;
    this.starting = true;
    try {
      this.releaseStale();
      while (!this.isStopping && this.running.size < this.options.concurrency) {
        const next = this.buffered.next();
        if (!next) break;
        this.startRun(next.job, next.claimedAt);
      }
    } finally {
      this.starting = false;
    }
  }

  /**
   * Releases, attempt restored, every buffered job that has waited a third of its lease
   * (handlers turned slow after a read-ahead): started now, its lease could run out
   * before its first renewal. Runs on every claim-loop turn (at least each poll) and
   * before buffered jobs start.
   */
  private releaseStale(): void {
    if (this.buffered.length === 0 || !this.health.healthy) return;
    for (const job of this.buffered.takeStale(Date.now())) void this.releaseUnstarted(job, 'stale');
  }


  /**
   * A claim whose rows could not be reserved: claim one row at a time until the row that
   * fails is alone, then never claim it again in this process (it stays 'ready' for a
   * person to repair: see the log line). The other rows go on being claimed meanwhile.
   */
  private narrowDown(error: ClaimUpdateError): void {
    if (error.ids.length === 1) {
      const [id] = error.ids;
      if (this.unclaimable.size < MAX_UNCLAIMABLE) this.unclaimable.add(id);
      this.options.log.error(
        { event: 'job_unclaimable', job_id: id, error: errorText(error.cause, DB_ERROR_TEXT_MAX) },
        'the database refuses to reserve this job; it is skipped until repaired (and this daemon restarted)',
      );
      this.isolating = 0;
      return;
    }
    this.isolating = error.ids.length;
  }

  /** Rows the database refused to reserve, plus jobs just handed to the daemons that run their kind. */
  private excludedFromClaims(): ReadonlySet<number> {
    const passedOver = this.runDeps.unknownKinds.passedOverIds();
    return passedOver.length === 0 ? this.unclaimable : new Set([...this.unclaimable, ...passedOver]);
  }

  private startRun(job: ClaimedJob, claimedAt: number): void {
    const run = new JobRun(job, this.options.tasks.get(job.kind), this.runDeps, this.leaseMsFor(job.kind), claimedAt);
    this.running.add(run);
    this.unsettled.add(run);
    run.execute();
  }

  /**
   * A run's slot is free (JobRun.freeSlot): a plain success as its handler returns, so
   * the next claim overlaps the batched completion instead of waiting for its commit.
   * Called synchronously from inside a run; startBuffered's loop does not recurse.
   */
  private slotFreed(run: JobRun): void {
    this.running.delete(run);
    this.prefetch.slotFreed();
    this.startBuffered();
    this.wakeup.notify();
  }

  private runSettled(run: JobRun): void {
    this.unsettled.delete(run);
    if (this.unsettled.size > 0) return;
    for (const resolve of this.whenAllSettled.splice(0)) resolve();
  }

  /** Resolves once no run is unsettled (at once when none is). */
  private allSettled(): Promise<void> {
    if (this.unsettled.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.whenAllSettled.push(resolve));
  }

  private leaseMsFor(kind: string): number {
    return this.leases.byKind.get(kind) ?? this.leases.defaultMs;
  }

  /**
   * Hands back a job claimed but never started, attempt restored: on shutdown, or when
   * it waited too long behind slow handlers ('stale'). Fenced like every write: a job
   * whose lease was already lost is left alone.
   */
  private async releaseUnstarted(job: ClaimedJob, why: 'shutdown' | 'stale'): Promise<void> {
    const lease = { id: job.id, token: job.leaseToken };
    const onShutdown = why === 'shutdown';
    try {
      const released = await releaseIfLeased(
        this.options.db,
        lease,
        onShutdown ? 'released during shutdown before processing' : 'claimed ahead but not started in time; released for another worker',
      );
      if (released && onShutdown) {
        this.released += 1;
        this.observer.shutdownReleased(1);
      }
      const event = !released ? 'claim_release_lost' : onShutdown ? 'claim_released_on_shutdown' : 'claim_released_unstarted';
      this.options.log.info(
        { event, job_id: job.id, kind: job.kind },
        !released ? 'claimed job was no longer ours to release' : onShutdown ? 'claimed job released on shutdown' : 'claimed job waited too long; released',
      );
    } catch (error) {
      this.health.trouble(error, 'release');
      this.options.log.warn({ event: 'claim_release_failed', job_id: job.id }, 'could not release; its lease will expire');
    }
  }

  private async shutdown(graceMs: number): Promise<StopResult> {
    const { log } = this.options;
    this.stopping.abort();
    this.wakeup.notify();
    await this.loop;
    await Promise.all(this.buffered.takeAll().map((job) => this.releaseUnstarted(job, 'shutdown')));
    const abandoned = await this.drainRunning(graceMs);
    await this.completer.idle();
    log.info({ event: 'worker_stopped', released: this.released, abandoned }, 'worker stopped');
    return { released: this.released, abandoned };
  }

  /** Waits up to graceMs for running handlers, then aborts and releases the stragglers. */
  private async drainRunning(graceMs: number): Promise<number> {
    const all = () => this.allSettled();
    const timedOut = await Promise.race([all().then(() => false), sleep(graceMs).then(() => true)]);
    if (!timedOut || this.running.size === 0) {
      await all();
      return 0;
    }
    // Only handlers still running: a run writing its result finishes or fails on its own.
    const stragglers = [...this.running].filter((run) => run.inHandler);
    for (const run of stragglers) run.abortForShutdown();
    // A handler that honours its signal settles promptly; one that ignores it is
    // released anyway, and the fence stops it from finishing later.
    await Promise.race([all(), sleep(Math.min(2_000, Math.max(100, graceMs)))]);
    let abandoned = 0;
    for (const run of stragglers) {
      if (await run.releaseIfStillHeld()) {
        this.released += 1;
        abandoned += 1;
      }
    }
    return abandoned;
  }
}
