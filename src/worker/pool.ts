import type { Logger } from '../logger.ts';
import { LEASE_EXPIRIES } from '../defaults.ts';
import { noopObserver, type Observer } from '../observe.ts';
import { retryDelayMs, type Backoff } from '../runtime/backoff.ts';
import { DbHealth } from '../runtime/dbHealth.ts';
import { errorText } from '../runtime/errorText.ts';
import { sleep, Wakeup } from '../runtime/wakeup.ts';
import { ClaimUpdateError, UnreadableRowsError, type ClaimedJob, type LeaseLengths } from '../store/index.ts';
import { TASK_DEFAULTS } from '../tasks/define.ts';
import type { TaskRegistry } from '../tasks/registry.ts';
import { ClaimBuffer } from './claimBuffer.ts';
import { ClaimCursors } from './claimCursors.ts';
import { drainRuns } from './drain.ts';
import { Finisher } from './finisher.ts';
import { JobRun, type JobRunDeps } from './jobRun.ts';
import { LimitedQueues } from './limitedQueues.ts';
import { PoisonRows } from './poisonRows.ts';
import { Prefetch } from './prefetch.ts';
import { QueueList } from './queueList.ts';
import { RunSlots } from './slots.ts';
import { SLOTS_HELD_WARN_MS, SlotsHeldWatch } from './slotsHeld.ts';
import { UNKNOWN_KIND_DEFAULTS, UnknownKinds } from './unknownKinds.ts';
import type { WorkerStore } from './workerStore.ts';

/** Local enqueues remembered for a claim by id; past this many, the next claim reads by range. */
const MAX_ANNOUNCED_IDS = 64;

/**
 * Claims in a row whose reservation may lose a lock race and simply be tried again; one
 * more lost race is taken as a refusal of those rows (PoisonRows narrows them down), so a
 * row whose every reservation fails with a lock error is still found and skipped.
 */
const CLAIM_RACES_RETRIED = 3;
/** The wait before trying a claim again after a lost lock race: 5–10 ms, doubling each time. */
const CLAIM_RACE_BACKOFF: Backoff = { baseMs: 10, maxMs: 200 };

/** Batched completions waiting to be written beyond which buffered jobs wait to start. */
const FINISHER_BACKLOG_MAX = 1_000;

/**
 * A job that waited this long in the read-ahead buffer has its lease renewed before its
 * handler starts (startAfterRecheck), so a cancel that came meanwhile keeps it from
 * starting. In a fast drain jobs wait a few milliseconds and start at once; those that
 * wait longer sit behind slow handlers, where one more round trip costs nothing.
 */
const RECHECK_BUFFERED_MS = 100;

export interface WorkerPoolOptions {
  /** Claims and every write about what was claimed (Store satisfies it). */
  store: WorkerStore;
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
  /** @internal Test hook: pause right after a claim commits (CRONQ_FAULT_POST_CLAIM_PAUSE_MS). */
  postClaimPauseMs?: number;
  health?: DbHealth;
  /** Told about claims, results and shutdown releases (default: nobody). */
  observer?: Observer;
  /** Jobs of kinds not in `tasks` (default: UnknownKinds with its default grace). */
  unknownKinds?: UnknownKinds;
  /** Stops of the process running a job after which it goes dead: a run cut by the shutdown's grace counts one (default LEASE_EXPIRIES.default). */
  maxLeaseExpiries?: number;
  /** Every slot held by the same runs this long logs `worker_slots_held` (SlotsHeldWatch; default SLOTS_HELD_WARN_MS). */
  slotsHeldWarnMs?: number;
}

/** What `stop` reports. */
export interface StopResult {
  /** Jobs handed back to the queue, attempt restored: claimed but never started, or cut off by the grace. */
  released: number;
  /** Of those, the jobs whose handlers were still running when the grace ran out. */
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
 * `wake()` (a local enqueue); the claim a wake prompts continues from the claim cursors,
 * a poll looks from the front of each queue (ClaimCursors). A job enqueued here is
 * claimed by its id while the pool is idle (takeAnnouncedIds), but never for more than a
 * poll interval without a claim by range. A queue of a kind with a cluster-wide limit is claimed
 * within it (claimReady); one found at its limit is left out like an empty queue until
 * the next poll or until a run of its kind here settles (LimitedQueues). Runs start from the claim loop and from the start loop,
 * which wakes when a slot frees (RunSlots.room): never on the stack of another run.
 * Every run's end (writes, retries, its slot) belongs to the Finisher. Database errors
 * never end a loop: the pool logs `db_unavailable` once, backs off with jitter, and
 * carries on; meanwhile finishing jobs wait for the database and lane 0 probes it. Jobs a
 * claim reserved that the loop then fails to take are released at once (handOffFailed).
 *
 * `stop({ graceMs })`: no further claims; jobs claimed but not yet started (in flight or
 * buffered) are released at once with their attempt restored; running handlers get
 * `graceMs` to finish, then their signal aborts and, if they still hold the job, it is
 * released the same way. Calling stop twice returns the same promise.
 */
export class WorkerPool {
  private readonly slots: RunSlots;
  /** Says when every slot has been held by the same runs for long (a handler that never settles, say). */
  private readonly slotsHeld: SlotsHeldWatch;
  /** Jobs claimed and committed but not started yet, oldest first. */
  private readonly buffered = new ClaimBuffer();
  private readonly prefetch: Prefetch;
  private readonly leases: LeaseLengths;
  /** What every run shares. */
  private readonly runDeps: JobRunDeps;
  private readonly wakeup = new Wakeup();
  private readonly finisher: Finisher;
  private readonly health: DbHealth;
  private readonly observer: Observer;
  private readonly unknownKinds: UnknownKinds;
  private readonly stopping = new AbortController();
  private loop: Promise<void> | null = null;
  private stopped: Promise<StopResult> | null = null;
  private rotation = 0;
  private readonly poison: PoisonRows;
  private readonly cursors = new ClaimCursors();
  /** With no queue list given: the queues last seen with ready jobs, and when. */
  private readonly queueList: QueueList;
  /** Queues of kinds with a cluster-wide limit, and which are at it. */
  private readonly limited: LimitedQueues;
  private released = 0;
  /** Of `released`, the jobs whose handlers the grace cut off (StopResult.abandoned). */
  private abandoned = 0;
  /** Rows asked for by claims in flight. */
  private claiming = 0;
  /** Claims in a row whose reservation lost a lock race (ClaimUpdateError.lostLockRace). */
  private lostClaimRaces = 0;
  /** The last claim came back full: there is more to claim. */
  private lastClaimFull = false;
  /**
   * Jobs enqueued by this process since the last claim (wake's `id`): while nothing else
   * is owed, the next claim looks them up by key instead of reading the queue ranges.
   */
  private readonly announcedIds = new Set<number>();
  /** Since the last claim by range, a wake came that a claim by id cannot answer. */
  private rangeOwed = true;
  /** When the last claim by range started (performance.now()). */
  private lastRangeClaimAt = Number.NEGATIVE_INFINITY;
  /**
   * Buffered jobs whose lease is being renewed before their handler starts
   * (startAfterRecheck): a stop waits for them, since one that answers after the stop
   * began is released then, and that release must be counted and written before the stop
   * returns (a grace shorter than the renewal's round trip returned without it).
   */
  private readonly rechecking = new Set<Promise<void>>();
  /** A lane waits because it found no room for a claim: wake it once there is (startBuffered). */
  private waitingForRoom = false;
  /** Claims a busy pool keeps in flight at once (see claimLoop): one per claim connection. */
  private readonly lanes: number;
  /** Last time the claim loop went round, for health checks. */
  lastLoopAt = Date.now();

  constructor(private readonly options: WorkerPoolOptions) {
    const { store, log } = options;
    this.health = options.health ?? new DbHealth(log);
    this.observer = options.observer ?? noopObserver;
    this.unknownKinds =
      options.unknownKinds ?? new UnknownKinds({ graceMs: UNKNOWN_KIND_DEFAULTS.graceMs, aliveMs: 3 * UNKNOWN_KIND_DEFAULTS.heartbeatMs, log });
    this.lanes = store.claimConnections;
    this.prefetch = new Prefetch(options.prefetch ?? 0, { concurrency: options.concurrency });
    this.limited = new LimitedQueues(options.tasks.list(), options.pollMs);
    this.slots = new RunSlots(options.concurrency, this.prefetch, new Set(this.limited.byQueue.keys()));
    this.slotsHeld = new SlotsHeldWatch(this.slots, log, options.slotsHeldWarnMs ?? SLOTS_HELD_WARN_MS);
    this.finisher = new Finisher({
      store,
      health: this.health,
      log,
      observer: this.observer,
      slots: this.slots,
      unknownKinds: this.unknownKinds,
      maxLeaseExpiries: options.maxLeaseExpiries ?? LEASE_EXPIRIES.default,
      stopping: this.stopping.signal,
    });
    this.runDeps = { store, log, health: this.health, observer: this.observer, finisher: this.finisher };
    this.poison = new PoisonRows(log);
    this.queueList = new QueueList(options.queues, () => store.readyQueues(), { read: () => store.pausedQueues(), maxAgeMs: options.pollMs, log });
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
    const lanes = Array.from({ length: this.lanes }, (_, lane) => this.claimLoop(lane));
    this.loop = Promise.all([...lanes, this.startLoop()]).then(() => undefined);
  }

  /**
   * Ends an idle wait at once: call after enqueueing work this pool should pick up.
   * `queue` names the queue it went to (so a pool serving every queue claims from it
   * without first re-reading its queue list, and from its claim cursor); without it, the
   * list is re-read and every queue is read from the front. `pastRunAt`: the job was
   * given a run time, already past, so it may sit behind the queue's claim cursor; the
   * claim reads that queue from the front. `id`: the one job enqueued, due now; while an
   * idle pool owes no other claim (see takeAnnouncedIds), it claims that row by key
   * (ClaimRequest.ids), never reading the queue's range: an enqueue right after a drain
   * is picked up as fast as any other.
   */
  wake(queue?: string, { pastRunAt = false, id }: { pastRunAt?: boolean; id?: number } = {}): void {
    if (queue === undefined) {
      this.queueList.stale();
      this.cursors.lookFromFront();
    } else {
      this.queueList.enqueuedInto(queue);
      if (pastRunAt) this.cursors.lookFromFront(queue);
    }
    if (queue !== undefined && id !== undefined && !this.limited.byQueue.has(queue) && this.announcedIds.size < MAX_ANNOUNCED_IDS) {
      this.announcedIds.add(id);
    } else {
      this.rangeOwed = true;
    }
    this.wakeup.notify();
  }

  /**
   * The ids the next claim asks for by key, or undefined for a claim by range: by key only
   * when the pool is idle (its last claim came back short), every wake since the last
   * claim by range named its job, and no refused row is being narrowed down. When the
   * last claim by range started a poll interval ago or more, one follows right after this
   * claim by id, so local enqueues arriving faster than that never keep the pool from
   * rows enqueued elsewhere longer than an idle poll would. A claim by range takes the
   * place of the ids it drops: those rows are ready in its queues.
   */
  private takeAnnouncedIds(want: number): number[] | undefined {
    const now = performance.now();
    if (this.announcedIds.size > 0 && !this.rangeOwed && !this.lastClaimFull && !this.poison.narrowing) {
      const ids = [...this.announcedIds].slice(0, want);
      for (const id of ids) this.announcedIds.delete(id);
      if (now - this.lastRangeClaimAt >= this.options.pollMs) {
        this.rangeOwed = true;
        this.wakeup.notify(); // the lane claims again as soon as this claim is in
      }
      return ids;
    }
    this.announcedIds.clear();
    this.rangeOwed = false;
    this.lastRangeClaimAt = now;
    return undefined;
  }

  /**
   * How long the oldest run holding a worker slot has been running, in ms (0 when none).
   * A run timed out or finished has given its slot back, even if an abandoned handler
   * still runs in the background.
   */
  get oldestRunningAgeMs(): number {
    const startedAt = this.slots.oldestStartedAt();
    return startedAt !== undefined && startedAt > 0 ? performance.now() - startedAt : 0;
  }

  get isStopping(): boolean {
    return this.stopping.signal.aborted;
  }

  stop({ graceMs }: { graceMs: number }): Promise<StopResult> {
    this.stopped ??= this.shutdown(graceMs);
    return this.stopped;
  }

  /**
   * What a stop still waits for, for a shutdown that ran out of time: writes not done
   * (`2 completions`, `1 release`: Finisher.unwritten), handlers still running past their
   * aborted signal, a claim in flight. Empty when nothing.
   */
  unfinished(): string[] {
    const waiting = this.finisher.unwritten();
    const handlers = this.slots.inHandler().length;
    if (handlers > 0) waiting.push(`${handlers} handler${handlers === 1 ? '' : 's'} still running`);
    if (this.claiming > 0) waiting.push('a claim');
    if (this.rechecking.size > 0) waiting.push(`${this.rechecking.size} lease renewal${this.rechecking.size === 1 ? '' : 's'} of jobs about to start`);
    return waiting;
  }

  /**
   * Gives up on a stop that ran out of time: every write still waiting or retrying ends
   * at once, nothing more written (Finisher.cutOff); those jobs return through lease
   * recovery. Returns what the stop had done by then.
   */
  cutOff(): StopResult {
    this.finisher.cutOff();
    return { released: this.released, abandoned: this.abandoned };
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
      // A notify (a local enqueue, a freed slot) while this lane claims must not be lost:
      // its waits below end at once if one came after this read.
      const seen = this.wakeup.seen;
      if (lane === 0) {
        // In an outage, running and finishing jobs wait for the database instead of
        // probing it; when this loop will not claim either, it probes for them.
        const wouldClaim = this.buffered.length === 0 && !this.slots.full;
        if (!this.health.healthy && !wouldClaim && !(await this.probeDatabase())) continue;
        this.startBuffered();
        this.slotsHeld.check(); // at least every poll while the slots are full (the wait for room below)
      }
      if (lane > 0 && (!this.lastClaimFull || this.poison.narrowing)) {
        await this.wakeup.wait(this.options.pollMs, seen);
        continue;
      }
      const want = this.claimSize();
      if (want === 0) {
        // No room now: the runs that make room notify (startBuffered), so a lane never
        // sleeps a poll interval while the jobs in hand run out.
        this.waitingForRoom = true;
        await this.wakeup.wait(this.options.pollMs, seen);
        continue;
      }
      const ids = this.takeAnnouncedIds(want);
      let claimed: ClaimedJob[];
      const claimStarted = performance.now();
      const sentAt = Date.now();
      this.claiming += want;
      const atLimit = new Set<string>();
      try {
        claimed = await this.options.store.claim(
          {
            queues: this.limited.claimable(await this.queueList.current()),
            limit: want,
            leases: this.leases,
            lockedBy: this.options.lockedBy,
            cursors: this.cursors.current(),
            excludeIds: this.poison.excluding(this.unknownKinds.passedOverIds()),
            limits: this.limited.byQueue,
            atLimit,
            ...(ids ? { ids } : {}),
          },
          this.rotation++,
        );
      } catch (error) {
        // The claim moved cursors past rows it then failed to reserve: look from the front.
        this.cursors.clear();
        this.lastClaimFull = false;
        this.rangeOwed = true;
        if (error instanceof UnreadableRowsError) {
          // Rows too large to read whose dead letters were refused: the claim named them,
          // and the others it locked are ready again. Skip those, claim the rest at once
          // (after a poll interval should there be too many to remember).
          if (!this.poison.unreadable(error)) await sleep(this.options.pollMs, this.stopping.signal);
          continue;
        }
        if (error instanceof ClaimUpdateError) {
          if (error.lostLockRace && this.lostClaimRaces < CLAIM_RACES_RETRIED) {
            // A lost lock race says nothing about the rows: the same claim again, shortly.
            this.lostClaimRaces += 1;
            this.options.log.debug({ event: 'claim_lock_race_lost', jobs: error.ids.length }, 'claim lost a lock race; claiming again');
            await sleep(retryDelayMs(CLAIM_RACE_BACKOFF, this.lostClaimRaces), this.stopping.signal);
            continue;
          }
          this.lostClaimRaces = 0;
          this.poison.refused(error);
          continue;
        }
        this.queueList.stale();
        // The database's trouble: the pace measured before it says nothing about what can
        // start once it is back (the runs it held up finish at once then).
        this.prefetch.startOver();
        await sleep(this.health.backoffAfter(error, 'claim', sentAt), this.stopping.signal);
        continue;
      } finally {
        this.claiming -= want;
      }
      // The reservation has committed: from here until they are in the buffer (or handed
      // to the finisher), these jobs are this loop's alone. Should anything throw before
      // then, they are released by their tokens at once (handOffFailed), not left reserved
      // until their leases expire.
      let untaken = claimed;
      let claimedAll: number;
      try {
        this.limited.reachedLimit(atLimit);
        this.health.ok(sentAt);
        this.prefetch.claimTook(performance.now() - claimStarted);
        this.prefetch.claimedPayload(claimed.length, payloadCharsOf(claimed));
        this.poison.claimed();
        this.lostClaimRaces = 0;
        if (claimed.length > 0 && this.options.postClaimPauseMs) {
          await sleep(this.options.postClaimPauseMs);
        }
        // THIS MUST COME FIRST after a claim: a stop that arrived while claiming
        // means these handlers never start.
        if (this.isStopping) {
          untaken = [];
          this.released += await this.finisher.releaseUnstartedAll(claimed, 'shutdown');
          break;
        }
        if (log.isLevelEnabled('info')) {
          for (const job of claimed) log.info({ event: 'job_claimed', job_id: job.id, kind: job.kind, attempt: job.attempt }, 'job claimed');
        }
        // Full or not by what the claim took, whatever keepPlaced hands back.
        claimedAll = claimed.length;
        // The jobs it leaves out are the finisher's (moveToLimitedQueue).
        claimed = untaken = this.keepPlaced(claimed);
        this.buffered.add(claimed, Date.now());
        untaken = [];
        if (claimed.length > 0) this.observer.jobClaimed(claimed.length);
      } catch (error) {
        await this.handOffFailed(untaken, error);
        continue;
      }
      this.startBuffered();
      // A claim by id says nothing about how busy the queues are.
      this.lastClaimFull = !ids && claimedAll >= want;
      if (!this.lastClaimFull) {
        // The queues looked drained: see which queues have work now. The cursors stay, so
        // the claim a local enqueue prompts starts after what the last claims left behind
        // (right after a drain, thousands of index entries not yet purged)...
        this.queueList.stale();
        // Jobs enqueued here still owed a claim (a claim by id took only what there was room
        // for, or more came meanwhile): claim at once or as soon as there is room
        // (claimSize), not a poll interval later.
        if (this.announcedIds.size > 0) continue;
        await this.wakeup.wait(this.options.pollMs, seen);
        // ...but a poll (nothing notified meanwhile) looks from the front: a row enqueued
        // elsewhere can sit behind a cursor (a late commit, a past run time).
        if (this.wakeup.seen === seen) this.cursors.lookFromFront();
      } else if (lane === 0) {
        this.wakeup.notify(); // let the other lanes see the queues are busy
      }
    }
  }

  /**
   * How many jobs this lane's next claim asks for (0: none now). While the queues are busy
   * (the last claim came back full), each lane claims up to its share of the target (the
   * slots plus the read-ahead), so the lanes' claims overlap; otherwise lane 0 claims
   * alone and asks for the whole target, so a burst arriving at an idle pool fills every
   * free slot in one claim, not one lane's share of them.
   * It claims at once for a slot that would otherwise sit idle; beyond that, only once
   * half a share is free, so claims stay large. While a refused row is narrowed down,
   * one row at a time, and only for an idle slot.
   */
  private claimSize(): number {
    const { concurrency } = this.options;
    const inHand = this.slots.used + this.buffered.length + this.claiming;
    if (this.poison.narrowing) return inHand < concurrency ? 1 : 0;
    const target = concurrency + this.prefetch.resize();
    const share = this.lastClaimFull ? Math.ceil(target / this.lanes) : target;
    const want = Math.min(share, target - inHand);
    return want <= 0 || (inHand >= concurrency && want < share / 2) ? 0 : want;
  }

  /**
   * Starts buffered jobs as slots free (RunSlots.room), on its own turn of the event loop;
   * each poll too, so jobs held back by an outage or the finisher's backlog start, and
   * stale ones are released, without waiting for a claim.
   */
  private async startLoop(): Promise<void> {
    while (!this.isStopping) {
      await this.slots.room.wait(this.options.pollMs);
      // A run of a limited kind settled here: its queue, held back at its limit, has room.
      let limitFreed = false;
      for (const queue of this.slots.takeSettledQueues()) limitFreed = this.limited.runEnded(queue) || limitFreed;
      if (limitFreed) this.wakeup.notify();
      this.startBuffered();
    }
  }

  /**
   * Asks the database whether it is back (it was reported down and this loop is not
   * claiming, so nothing else here would notice). Backs off on failure.
   */
  private async probeDatabase(): Promise<boolean> {
    const sentAt = Date.now();
    try {
      await this.options.store.now();
      this.health.ok(sentAt);
      return true;
    } catch (error) {
      this.prefetch.startOver();
      await sleep(this.health.backoffAfter(error, 'probe', sentAt), this.stopping.signal);
      return false;
    }
  }

  /**
   * Starts buffered jobs, oldest first, while slots are free. Not while the database is
   * unreachable: they could not record a result, and each would retry on its own; they
   * wait for it (or, past a third of their lease, are released or recovered). Called
   * from the claim and start loops only, never from inside a run.
   */
  private startBuffered(): void {
    // Completions waiting to be written are the other bound: past it, new runs wait.
    if (!this.health.healthy || this.finisher.backlog >= FINISHER_BACKLOG_MAX) return;
    this.releaseStale();
    while (!this.isStopping && !this.slots.full) {
      const next = this.buffered.next();
      if (!next) break;
      const run = new JobRun(next.job, this.options.tasks.get(next.job.kind), this.runDeps, next.claimedAt);
      this.slots.take(run);
      if (Date.now() - next.claimedAt >= RECHECK_BUFFERED_MS) this.startAfterRecheck(run);
      else run.execute();
    }
    if (this.waitingForRoom && this.claimSize() > 0) {
      this.waitingForRoom = false;
      this.wakeup.notify();
    }
  }

  /**
   * `claimed` without the jobs of limited kinds claimed from another queue (enqueued by a
   * process that did not know their task): those go back into their kind's queue, attempt
   * restored, to be claimed within the limit there (Finisher.moveToLimitedQueue).
   */
  private keepPlaced(claimed: ClaimedJob[]): ClaimedJob[] {
    if (this.limited.byQueue.size === 0) return claimed;
    return claimed.filter((job) => {
      const queue = this.limited.misplaced(job);
      if (queue === undefined) return true;
      void this.finisher.moveToLimitedQueue(job, queue);
      return false;
    });
  }

  /**
   * Starts `run`, a job that waited in the read-ahead buffer RECHECK_BUFFERED_MS or more,
   * once a renewal of its lease has answered: one an operator cancelled meanwhile (or that
   * recovery took) never starts its handler, and the handler gets a full lease from now.
   * Should the pool be stopping by then, the job is released unstarted instead. A renewal
   * that fails on a database error says nothing about the lease: the run starts.
   */
  private startAfterRecheck(run: JobRun): void {
    const recheck = run.renewLeaseNow().then(async () => {
      if (!run.leaseLost && !this.isStopping) return run.execute();
      if (!run.leaseLost && (await this.finisher.releaseUnstarted(run.job, 'shutdown'))) this.released += 1;
      this.finisher.dropUnstarted(run);
    });
    this.rechecking.add(recheck);
    void recheck.finally(() => this.rechecking.delete(recheck));
  }

  /**
   * Releases, attempt restored, every buffered job that has waited a third of its lease
   * (handlers turned slow after a read-ahead): started now, its lease could run out
   * before its first renewal. A few hundred per transaction (Finisher.releaseUnstartedAll).
   */
  private releaseStale(): void {
    if (this.buffered.length === 0) return;
    void this.finisher.releaseUnstartedAll(this.buffered.takeStale(Date.now()), 'stale');
  }

  /**
   * Jobs a claim reserved that this pool failed to take (something threw between the
   * claim's commit and the buffer): logged once (`claim_handoff_failed`), each released by
   * its lease token at once, attempt restored, for the next claim (here or elsewhere),
   * instead of held reserved until its lease expires. The released rows may lie behind the
   * claim cursors, so the next claim reads from the front; it waits a poll interval first,
   * so a fault that recurs on every claim costs a claim and a release a poll, not a loop.
   */
  private async handOffFailed(jobs: ClaimedJob[], error: unknown): Promise<void> {
    this.options.log.error(
      { event: 'claim_handoff_failed', jobs: jobs.length, job_ids: jobs.slice(0, 20).map((job) => job.id), error: errorText(error) },
      'claimed jobs could not be taken to run; releasing them',
    );
    this.cursors.clear();
    this.lastClaimFull = false;
    this.rangeOwed = true;
    await Promise.all(jobs.map((job) => this.finisher.releaseUnstarted(job, 'handoff')));
    await sleep(this.options.pollMs, this.stopping.signal);
  }

  private async shutdown(graceMs: number): Promise<StopResult> {
    const { log } = this.options;
    this.stopping.abort();
    this.wakeup.notify();
    this.slots.room.notify();
    // Not waited for first: a claim the database holds up (a black hole, a frozen server)
    // must not hold up the grace. Nothing joins the buffer or starts from here on (a claim
    // answered now releases what it took), so the buffer and the runs are final.
    const loops = this.loop;
    this.released += await this.finisher.releaseUnstartedAll(this.buffered.takeAll(), 'shutdown');
    this.abandoned = await drainRuns(this.slots, graceMs);
    this.released += this.abandoned;
    await Promise.all(this.rechecking);
    await loops;
    await this.finisher.idle();
    log.info({ event: 'worker_stopped', released: this.released, abandoned: this.abandoned }, 'worker stopped');
    return { released: this.released, abandoned: this.abandoned };
  }
}

/** The payload texts' length in all (what the read-ahead's budget counts). */
function payloadCharsOf(jobs: ClaimedJob[]): number {
  let chars = 0;
  for (const job of jobs) chars += job.payloadText.length;
  return chars;
}
