import type { Db } from '../db/client.ts';
import type { Logger } from '../logger.ts';
import { noopObserver, type Observer } from '../observe.ts';
import { ClaimUpdateError, claimReady, releaseIfLeased, type ClaimCursor, type ClaimedJob } from '../queue/store.ts';
import type { TaskRegistry } from '../tasks/registry.ts';
import { TASK_DEFAULTS } from '../tasks/define.ts';
import { Completer } from './completer.ts';
import { DbHealth, describeDbError } from './dbHealth.ts';
import { JobRun } from './jobRun.ts';
import { sleep, Wakeup } from './wakeup.ts';

const CURSOR_MAX_AGE_MS = 1_000;
const MAX_UNCLAIMABLE = 1_000;

export interface WorkerPoolOptions {
  db: Db;
  tasks: TaskRegistry;
  log: Logger;
  /** Handlers running at once in this process. */
  concurrency: number;
  /** Queues to claim from; empty means all. */
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
}

/** What `stop` reports. */
export interface StopResult {
  released: number;
  abandoned: number;
}

/**
 * One claim loop feeding up to `concurrency` handlers.
 *
 * The loop claims a batch sized to the free slots in one short transaction and starts
 * the handlers only after it commits; an idle loop sleeps `pollMs` or until `wake()`
 * (a local enqueue, a freed slot). Database errors never end the loop: it logs
 * `db_unavailable` once, backs off with jitter, and carries on.
 *
 * `stop({ graceMs })`: no further claims; a job claimed but not yet started is released
 * at once with its attempt restored; running handlers get `graceMs` to finish, then
 * their signal aborts and, if they still hold the job, it is released the same way.
 * Calling stop twice returns the same promise.
 */
export class WorkerPool {
  /** Runs whose handler holds a worker slot. */
  private readonly running = new Set<JobRun>();
  /** Every run not yet settled: handlers running plus final writes in flight. */
  private readonly unsettled = new Set<JobRun>();
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
  private released = 0;
  /** Last time the claim loop went round, for health checks. */
  lastLoopAt = Date.now();

  constructor(private readonly options: WorkerPoolOptions) {
    this.completer = new Completer(options.db);
    this.health = options.health ?? new DbHealth(options.log);
    this.observer = options.observer ?? noopObserver;
  }

  start(): void {
    if (this.loop) return;
    this.options.log.info(
      { event: 'worker_started', concurrency: this.options.concurrency, queues: this.options.queues, locked_by: this.options.lockedBy },
      'worker started',
    );
    this.loop = this.claimLoop();
  }

  /** Ends an idle wait at once: call after enqueueing work this pool should pick up. */
  wake(): void {
    this.wakeup.notify();
  }

  get activeJobs(): number {
    return this.running.size;
  }

  get isStopping(): boolean {
    return this.stopping.signal.aborted;
  }

  stop({ graceMs }: { graceMs: number }): Promise<StopResult> {
    this.stopped ??= this.shutdown(graceMs);
    return this.stopped;
  }

  private async claimLoop(): Promise<void> {
    const { concurrency, log } = this.options;
    while (!this.isStopping) {
      this.lastLoopAt = Date.now();
      const free = concurrency - this.running.size;
      if (free <= 0) {
        await this.wakeup.wait(this.options.pollMs);
        continue;
      }
      let claimed: ClaimedJob[];
      if (Date.now() - this.cursorsSetAt > CURSOR_MAX_AGE_MS) {
        this.cursors.clear();
        this.cursorsSetAt = Date.now();
      }
      try {
        claimed = await claimReady(
          this.options.db,
          {
            queues: this.options.queues,
            limit: this.isolating > 0 ? 1 : free,
            leaseMsFor: (kind) => this.leaseMsFor(kind),
            lockedBy: this.options.lockedBy,
            cursors: this.cursors,
            excludeIds: this.unclaimable,
          },
          this.rotation++,
        );
        this.health.ok();
        if (this.isolating > 0) this.isolating -= 1;
      } catch (error) {
        if (error instanceof ClaimUpdateError) {
          this.narrowDown(error);
          continue;
        }
        await sleep(this.health.trouble(error, 'claim'), this.stopping.signal);
        continue;
      }
      if (claimed.length > 0 && this.options.postClaimPauseMs) {
        await sleep(this.options.postClaimPauseMs);
      }
      // THIS MUST COME FIRST after a claim: a stop that arrived while claiming
      // means these handlers never start.
      if (this.isStopping) {
        await Promise.all(claimed.map((job) => this.releaseUnstarted(job)));
        break;
      }
      for (const job of claimed) {
        log.info({ event: 'job_claimed', job_id: job.id, kind: job.kind, attempt: job.attempt }, 'job claimed');
        this.startRun(job);
      }
      if (claimed.length > 0) this.observer.jobClaimed(claimed.length);
      if (claimed.length < free) {
        // The queue looked drained from the cursors on: look from the front next time.
        this.cursors.clear();
        await this.wakeup.wait(this.options.pollMs);
      }
    }
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
        { event: 'job_unclaimable', job_id: id, error: describeDbError(error.cause) },
        'the database refuses to reserve this job; it is skipped until repaired (and this daemon restarted)',
      );
      this.isolating = 0;
      return;
    }
    this.isolating = error.ids.length;
  }

  private startRun(job: ClaimedJob): void {
    const task = this.options.tasks.get(job.kind);
    const run = new JobRun(job, task, {
      db: this.options.db,
      log: this.options.log,
      completer: this.completer,
      health: this.health,
      observer: this.observer,
      leaseMs: this.leaseMsFor(job.kind),
    });
    this.running.add(run);
    this.unsettled.add(run);
    // The slot frees when the handler returns, so the next claim overlaps this
    // run's fenced completion instead of waiting for its commit.
    void run.handlerDone.then(() => {
      this.running.delete(run);
      this.wakeup.notify();
    });
    void run.execute().finally(() => this.unsettled.delete(run));
  }

  private leaseMsFor(kind: string): number {
    return this.options.tasks.get(kind)?.leaseMs ?? TASK_DEFAULTS.leaseMs;
  }

  private async releaseUnstarted(job: ClaimedJob): Promise<void> {
    const lease = { id: job.id, token: job.leaseToken };
    try {
      const released = await releaseIfLeased(this.options.db, lease, 'released during shutdown before processing');
      if (released) {
        this.released += 1;
        this.observer.shutdownReleased(1);
      }
      this.options.log.info(
        { event: released ? 'claim_released_on_shutdown' : 'claim_release_lost', job_id: job.id, kind: job.kind },
        released ? 'claimed job released on shutdown' : 'claimed job was no longer ours to release',
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
    const abandoned = await this.drainRunning(graceMs);
    await this.completer.idle();
    log.info({ event: 'worker_stopped', released: this.released, abandoned }, 'worker stopped');
    return { released: this.released, abandoned };
  }

  /** Waits up to graceMs for running handlers, then aborts and releases the stragglers. */
  private async drainRunning(graceMs: number): Promise<number> {
    const all = () => Promise.allSettled([...this.unsettled].map((r) => r.settled));
    const timedOut = await Promise.race([all().then(() => false), sleep(graceMs).then(() => true)]);
    if (!timedOut || this.running.size === 0) {
      await all();
      return 0;
    }
    const stragglers = [...this.running];
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
