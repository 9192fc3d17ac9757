import { setImmediate } from 'node:timers/promises';
import type { Logger } from '../logger.ts';
import type { Observer } from '../observe.ts';
import { retryDelayMs, type Backoff } from '../runtime/backoff.ts';
import { sleep } from '../runtime/wakeup.ts';
import { isDatabaseTrouble, isOutage, type DbHealth } from '../runtime/dbHealth.ts';
import type { RefusedJob } from '../enqueue/write.ts';
import { DB_ERROR_TEXT_MAX, errorLine, errorText } from '../runtime/errorText.ts';
import type { Clock } from './clock.ts';
import type { Schedule } from './define.ts';
import { enqueueTick, FanoutTooLargeError, finishedTickNote, keysTakenNote } from './fanout.ts';
import { FanoutAbandonedError, FanoutLease, TickTakenOverError } from './fanoutLease.ts';
import { isInstance } from '../errors.ts';
import { fireTimesBetween, latestFireAtOrBefore, nextFireAfter, periodKeyOfFire } from './period.ts';
import { OverlapGuard } from './overlapGuard.ts';
import { DEFAULT_LATE_TOLERANCE_MS, DueTickPlanner, isLateTick, pausedNote } from './plan.ts';
import type { SchedulerStore } from './schedulerStore.ts';
import { changeNote, isFireOf, sharedFires, sourceChange, sourceChangeIn, tickSourceOf, type TickSource } from './tickSource.ts';
import type { TickRow } from '../store/index.ts';

export interface TickerDeps {
  store: SchedulerStore;
  clock: Clock;
  log: Logger;
  /** Unique per scheduler instance (host:pid:random): the fence on tick fan-outs. */
  claimedBy: string;
  toleranceMs?: number;
  /**
   * Fan-out lease (default FANOUT_LEASE_MS): renewed as the fan-out makes progress; a
   * fan-out that makes none for this long is abandoned (FanoutLease).
   */
  fanoutLeaseMs?: number;
  /** Called after a tick enqueued new jobs (wakes this process's workers). */
  onEnqueued?: () => void;
  /** Told about every tick fanned out (default: nobody). */
  observer?: Observer;
  /** How often a failing fan-out is tried before its tick is recorded as failed (default FANOUT_RETRY). */
  fanoutRetry?: FanoutRetry;
  /** Whole seconds an overlap:'skip' tick waits for the schedule's overlap lock (default OVERLAP_LOCK_WAIT_S; 0: no wait). */
  overlapLockWaitS?: number;
  /**
   * Takes the overlap locks, listing them as this daemon's and freeing one a stalled
   * daemon holds; one per daemon, shared by its tickers (default: this ticker's own,
   * listing nothing).
   */
  overlapGuard?: OverlapGuard;
  /** Most entities one tick's jobs() may yield (default MAX_TICK_ENTITIES): past it the tick is failed, not retried. */
  maxTickEntities?: number;
  /** Where a pass that lost the connection reports the outage, instead of logging schedule_error (SchedulerOptions.dbHealth). */
  dbHealth?: DbHealth;
}

/** A tick whose fan-out this daemon owns (claimTickFanout returned its ledger row id). */
interface OwnedTick {
  id: number;
  /** performance.now() when the claim returned: the fan-out's lease runs from no earlier. */
  claimedAt: number;
  scheduledAt: Date;
  periodKey: string;
  late: boolean;
  note: string | null;
}

/** Attempts at one tick's fan-out, and the backoff (jittered) between them. */
export interface FanoutRetry {
  attempts: number;
  backoff: Backoff;
}

/**
 * Five attempts, 2 s·2^n apart with equal jitter: about 15–30 s of retries in all, then
 * the tick is recorded as failed and later ticks go on. Connection errors do not count:
 * an outage is waited out by the pass loop and the tick resumed after.
 */
export const FANOUT_RETRY: FanoutRetry = { attempts: 5, backoff: { baseMs: 2_000, maxMs: 30_000 } };

/** Backoff (jittered) between failed schedule passes: 1 s after the first, doubling to a minute. */
const PASS_RETRY: Backoff = { baseMs: 1_000, maxMs: 60_000 };

/** `job_refused` lines logged per tick; the rest are only counted (in `jobs_refused` and the ledger note). */
const REFUSED_LOGGED_PER_TICK = 10;

/**
 * Due ticks listed and planned per page of a catch-up (DueTickPlanner): each page holds
 * the event loop for its listing, planning, period keys and statement (some 20-35 ms for
 * 1,000 instants here), and its skips are written in one statement (recordSkippedTicks
 * writes 1,000 rows a statement) before the next page.
 */
const SKIP_PAGE = 1_000;
/** A tick's fan-out lease: how long a fan-out may go without progress before other daemons may take it over. */
export const FANOUT_LEASE_MS = 60_000;
/**
 * How long (whole seconds) an overlap:'skip' tick waits for another daemon's fan-out of
 * its schedule to release the overlap lock before it is skipped: a fan-out holds it for a
 * check and its inserts, so long waits mean a run is starting anyway.
 */
export const OVERLAP_LOCK_WAIT_S = 5;
const RESUME_CHECK_MS = 5_000;

/** The ledger note of a tick skipped by `overlap: 'skip'`. */
export const OVERLAP_NOTE = 'previous run still in progress';

export { FanoutAbandonedError, TickTakenOverError };

/**
 * Drives one schedule against the tick ledger. Every pass is driven by the ledger and
 * the clock, not by in-memory state, so a restart, a second daemon or a failed pass
 * simply resumes: ticks due since the latest ledger row are planned (DueTickPlanner),
 * skipped ones recorded, the others claimed and fanned out — by exactly one daemon.
 * A latest row written under another cron or time zone (an edit: tickSource.ts) is
 * caught up from only for the ticks after this ticker's first pass and the ones before it
 * that the old version has too (editSince).
 */
export class ScheduleTicker {
  private readonly log: Logger;
  private readonly toleranceMs: number;
  private readonly overlapGuard: OverlapGuard;
  /** performance.now() of the last look for abandoned fan-outs; a failed pass resets it. */
  private resumeCheckedAt = Number.NEGATIVE_INFINITY;
  /** Ledger row id → how often this daemon abandoned its fan-out (FanoutAbandonedError); at fanoutRetry.attempts the tick is failed. */
  private readonly abandoned = new Map<number, number>();
  /** The cron and time zone this version's ledger rows record (tickSource.ts). */
  private readonly source: TickSource;
  /**
   * `now` of this ticker's first pass: since then this version of the schedule has been
   * running here, so its ticks missed after it are real ones, caught up even when another
   * version wrote the ledger's latest row meanwhile (a rolling deploy).
   */
  private seenSince: Date | null = null;

  constructor(
    readonly schedule: Schedule,
    private readonly deps: TickerDeps,
  ) {
    this.log = deps.log.child({ schedule: schedule.name });
    this.toleranceMs = deps.toleranceMs ?? DEFAULT_LATE_TOLERANCE_MS;
    this.overlapGuard = deps.overlapGuard ?? new OverlapGuard({ store: deps.store, log: deps.log, daemon: null });
    this.source = tickSourceOf(schedule);
  }

  /**
   * Loops until `signal` aborts: book the next fire time, then catch up everything due
   * so far, then sleep until the booked time. An error in a pass is logged and retried
   * with backoff; it never ends the loop or loses the booked time.
   */
  async run(signal: AbortSignal): Promise<void> {
    const { clock } = this.deps;
    let failures = 0;
    while (!signal.aborted) {
      const now = clock.now();
      const sentAt = Date.now();
      let next: Date | null;
      try {
        // In the try: a clock gone wrong (an invalid Date) is a failed pass, retried with backoff, not the loop's end.
        next = nextFireAfter(this.schedule.cron, this.schedule.timezone, now);
        await this.catchUp(now, signal);
        if (failures > 0) this.deps.dbHealth?.ok(sentAt);
        failures = 0;
      } catch (error) {
        if (signal.aborted) return;
        failures += 1;
        this.resumeCheckedAt = Number.NEGATIVE_INFINITY; // our own unfinished tick is resumable
        const retryMs = retryDelayMs(PASS_RETRY, failures);
        // Losing the database is the daemon's outage, logged once (db_unavailable) by its health.
        if (this.deps.dbHealth && isOutage(error)) this.deps.dbHealth.backoffAfter(error, 'scheduler', sentAt);
        else this.log.error({ event: 'schedule_error', error: errorText(error, DB_ERROR_TEXT_MAX), retry_in_ms: retryMs }, 'schedule pass failed; retrying');
        const resumeAt = clock.now().getTime() + retryMs;
        // A clock gone wrong (no valid time) cannot time its own backoff: a timer does.
        if (Number.isFinite(resumeAt)) await clock.sleepUntil(new Date(resumeAt), signal);
        else await sleep(retryMs, signal);
        continue;
      }
      if (next === null) {
        this.log.warn({ event: 'schedule_exhausted' }, 'the cron expression never fires again');
        return;
      }
      await clock.sleepUntil(next, signal);
    }
  }

  /** One pass: resume abandoned fan-outs, then plan and process every tick due up to `now`. */
  async catchUp(now: Date, signal?: AbortSignal): Promise<void> {
    const { store, claimedBy } = this.deps;
    this.seenSince ??= now;
    // Abandoned fan-outs only appear when a lease (a minute, by default) runs out: looking
    // every few seconds of real time is enough, and keeps a pass to the statements it needs.
    if (performance.now() - this.resumeCheckedAt >= RESUME_CHECK_MS) {
      for (const tick of await store.resumableTicks(this.schedule.name, claimedBy)) {
        if (signal?.aborted) return;
        // In the period key it was claimed with: the schedule's period may have changed since.
        await this.fanOut(tick.scheduledAt, tick.caughtUp, tick.note, now, signal, { resumed: true, periodKey: tick.periodKey });
      }
      this.resumeCheckedAt = performance.now();
    }
    const latest = await store.latestTick(this.schedule.name);
    if (latest === null) {
      await this.startFresh(now, signal);
      return;
    }
    // A row of unknown source (an older daemon's) is read as this version's, as before;
    // recording so makes an edit made after it tell from it, without waiting for a tick.
    // Only a tick of this version: in a rolling deploy beside an older daemon of another
    // cron, a row at an instant this cron does not have is plainly not this version's.
    if ((latest.cron === null || latest.timezone === null) && isFireOf(this.source, latest.scheduledAt)) {
      await store.adoptTickSourceIfUnknown(latest.id, this.source);
    }
    let from = latest.scheduledAt;
    const edit = await this.editSince(latest, now, signal);
    if (edit !== null) from = edit.listFrom;
    // Every tick due since the latest ledger row, a page at a time however long the
    // outage: each page's skips are recorded (and the event loop is free) before the next
    // page is listed; only the ticks still to enqueue are held (DueTickPlanner).
    const planner = new DueTickPlanner(now, this.schedule.catchUp, this.toleranceMs);
    for (;;) {
      const page = fireTimesBetween(this.schedule.cron, this.schedule.timezone, from, now, SKIP_PAGE);
      if (page.length === 0) break;
      await this.recordSkipped(planner.add(edit === null ? page : edit.due(page)), now, edit);
      // A page with nothing to skip (all within the window and the cap) awaits no
      // statement: without this the pages would run back to back in microtasks.
      await setImmediate();
      from = page[page.length - 1];
      if (signal?.aborted) return;
    }
    const enqueue = planner.finish().filter((tick) => edit === null || !edit.written(tick.at));
    // One read per pass: a pause made after it applies from the next pass (the next tick).
    const paused = enqueue.length > 0 ? await this.pausedNote() : null;
    if (paused !== null) {
      // Up to catchUp.max ticks (100,000): their period keys and rows a page at a time,
      // as above, so the event loop is free between pages.
      for (let i = 0; i < enqueue.length; i += SKIP_PAGE) {
        await this.recordSkipped(
          enqueue.slice(i, i + SKIP_PAGE).map((tick) => ({ at: tick.at, note: paused })),
          now,
          edit,
        );
        if (signal?.aborted) return;
      }
      return;
    }
    for (const tick of enqueue) {
      if (signal?.aborted) return;
      const note = withNote(tick.late ? 'caught up' : null, edit?.noteAt(tick.at) ?? null);
      await this.fanOut(tick.at, tick.late, note, now, signal, { source: edit?.sourceOf(tick.at) });
    }
  }

  /**
   * When the latest row was written under another cron or time zone (an edit), what this
   * pass lists of the ticks before this ticker's first pass, or null when it lists them all.
   * Of the new version's ticks from that row up to its first pass (the edit range), only
   * the ones the old version has too (isFireOf) were ticks of the schedule: they are
   * planned as usual, within the catch-up's reach. The latest of the range is the anchor;
   * not shared, it is written first, here (enqueued if on time, else skipped with the
   * edit's note), and only counted by the plan. A shared one is written as planned, last
   * of the range (skips come oldest first, then enqueues), and records this version's
   * source while the earlier shared ones record the old one: until the anchor is written,
   * every row is the old version's, so a pass cut short finds the edit again instead of
   * catching up from a shared row the ticks that were never the schedule's. That shared
   * anchor, the first row of this version, adds what changed (sourceChange) to its note.
   */
  private async editSince(latest: TickRow, now: Date, signal?: AbortSignal): Promise<EditRange | null> {
    const change = sourceChange(latest, this.source);
    if (change === null) return null;
    const changed = changeNote(change);
    const anchor = latestFireAtOrBefore(this.schedule.cron, this.schedule.timezone, this.seenSince!);
    if (anchor === null || anchor.getTime() <= latest.scheduledAt.getTime()) return null;
    const old: TickSource = { cron: latest.cron!, timezone: latest.timezone! };
    const anchorShared = isFireOf(old, anchor);
    if (!anchorShared) await this.anchor(anchor, now, changed, changed, signal);
    // Older than any catch-up reaches: skipped by any plan, and not recorded, as the ticks that were not shared.
    const { mode, windowMs } = this.schedule.catchUp;
    const reachMs = mode === 'off' ? this.toleranceMs : Math.max(windowMs, this.toleranceMs);
    const earliest = Math.min(anchor.getTime() - 1, now.getTime() - reachMs - 1);
    const anchorMs = anchor.getTime();
    return {
      listFrom: new Date(Math.max(latest.scheduledAt.getTime(), earliest)),
      due: (page) => {
        const shared = sharedFires(old, page.filter((at) => at.getTime() < anchorMs));
        return page.filter((at) => at.getTime() >= anchorMs || shared.has(at.getTime()));
      },
      written: (at) => !anchorShared && at.getTime() === anchorMs,
      sourceOf: (at) => (at.getTime() < anchorMs ? old : this.source),
      noteAt: (at) => (anchorShared && at.getTime() === anchorMs ? change : null),
    };
  }

  /**
   * No ledger row yet: the schedule starts fresh instead of backfilling its history.
   * Its latest past fire time is processed if it is on time, else recorded as skipped,
   * so the ledger has an anchor from which later outages are caught up.
   */
  private async startFresh(now: Date, signal?: AbortSignal): Promise<void> {
    const anchor = latestFireAtOrBefore(this.schedule.cron, this.schedule.timezone, now);
    if (anchor === null) return;
    await this.anchor(anchor, now, null, 'before the schedule was first started', signal);
  }

  /**
   * Writes the ledger row catch-up resumes from: the tick at `at` is recorded as skipped
   * when the schedule is paused (its pause's note) or when it is late (`lateNote`), else
   * enqueued on time with `onTimeNote`.
   */
  private async anchor(at: Date, now: Date, onTimeNote: string | null, lateNote: string, signal?: AbortSignal): Promise<void> {
    const paused = await this.pausedNote();
    if (paused !== null) {
      await this.recordSkipped([{ at, note: paused }], now);
    } else if (now.getTime() - at.getTime() <= this.toleranceMs) {
      await this.fanOut(at, false, onTimeNote, now, signal);
    } else {
      await this.recordSkipped([{ at, note: lateNote }], now);
    }
  }

  /** The ledger note for ticks skipped because this schedule is paused now, or null when it is not. */
  private async pausedNote(): Promise<string | null> {
    const pause = await this.deps.store.pauseOf('schedule', this.schedule.name);
    return pause && pausedNote(pause);
  }

  /**
   * Records `ticks` as skipped, handled at `now` (caught up when late, as an enqueued
   * tick); with `edit`, each with the source it records (EditRange.sourceOf) and the
   * edit's note after its own (EditRange.noteAt), the anchor it wrote left out.
   */
  private async recordSkipped(given: Array<{ at: Date; note: string }>, now: Date, edit: EditRange | null = null): Promise<void> {
    const ticks = edit === null ? given : given.filter((t) => !edit.written(t.at));
    if (ticks.length === 0) return;
    let recorded = 0;
    // Ascending, so the old source's rows (before the anchor) are written first.
    for (const part of splitBySource(ticks, (at) => edit?.sourceOf(at) ?? this.source)) {
      const rows = part.ticks.map((t) => ({
        scheduledAt: t.at,
        periodKey: periodKeyOfFire(this.schedule.period, this.schedule.cron, this.schedule.timezone, t.at),
        caughtUp: isLateTick(t.at, now, this.toleranceMs),
        note: withNote(t.note, edit?.noteAt(t.at) ?? null),
      }));
      recorded += await this.deps.store.recordSkippedTicks(this.schedule.name, part.source, rows);
    }
    if (recorded > 0) {
      this.log.warn(
        {
          event: 'schedule_ticks_skipped',
          count: recorded,
          first: ticks[0].at.toISOString(),
          last: ticks[ticks.length - 1].at.toISOString(),
          note: ticks[ticks.length - 1].note,
        },
        'ticks recorded as skipped',
      );
    }
  }

  /**
   * Claims the tick's fan-out (or learns another daemon has it) and, if ours, enqueues it
   * (fanOutOwned). For a schedule whose overlap is 'skip', the decision and the writes are
   * made holding the schedule's overlap lock (store/overlap.ts): the tick is recorded as
   * skipped (OVERLAP_NOTE) when a job of any other tick, earlier or later, is still in
   * flight, or when another daemon's fan-out of this schedule kept the lock for
   * `overlapLockWaitS` (a holder that is a stalled daemon's session is ended first and the
   * lock asked for again: OverlapGuard); otherwise its jobs are committed before the lock is released, so
   * the next tick's owner, whoever it is, sees them. A resumed fan-out (taken over, or
   * our own after a failed pass) is decided afresh only if the tick has no job yet;
   * otherwise, or when the lock stays taken, it is finished unchecked. Overlap 'allow'
   * never takes the lock.
   *
   * The lock is released only once fanOutOwned has returned or thrown, and so after every
   * write of the fan-out has settled: also when its lease was lost or ran out (a jobs()
   * that hangs), which fanOutOwned stops on at once. Released here and only here, once, on
   * the connection it was taken on, before this returns: a later tick's lock, taken by a
   * later call, is never the one released.
   */
  private async fanOut(
    scheduledAt: Date,
    late: boolean,
    note: string | null,
    now: Date,
    signal?: AbortSignal,
    { resumed = false, periodKey: claimedKey, source = this.source }: { resumed?: boolean; periodKey?: string; source?: TickSource } = {},
  ): Promise<void> {
    const { store, claimedBy } = this.deps;
    const leaseMs = this.deps.fanoutLeaseMs ?? FANOUT_LEASE_MS;
    // Once per tick: the ledger row and every job key of the fan-out share it. A resumed
    // tick keeps its row's, so its jobs stay in one period key whatever the schedule's
    // period became since it was claimed (an edit between deploys).
    const periodKey = claimedKey ?? periodKeyOfFire(this.schedule.period, this.schedule.cron, this.schedule.timezone, scheduledAt);
    const id = await store.claimTickFanout({
      scheduleName: this.schedule.name,
      scheduledAt,
      periodKey,
      caughtUp: late,
      note,
      claimedBy,
      leaseMs,
      source,
    });
    if (id === null) return; // another daemon owns this tick
    const tick: OwnedTick = { id, claimedAt: performance.now(), scheduledAt, periodKey, late, note };
    if (this.schedule.overlap !== 'skip') {
      await this.fanOutOwned(tick, now, signal);
      return;
    }
    const lock = await this.overlapGuard.hold(this.schedule.name, this.deps.overlapLockWaitS ?? OVERLAP_LOCK_WAIT_S);
    try {
      if (resumed && (lock === null || (await store.tickHasJobs(this.schedule.name, periodKey, scheduledAt)))) {
        // Decided when it began (it wrote jobs), or the lock's holder may be the stalled
        // daemon this tick was taken from: finish it as the first owner would have.
        await this.fanOutOwned(tick, now, signal);
      } else if (lock === null) {
        await this.skipOverlapping(tick, 'another fan-out of this schedule holds its overlap lock');
      } else if (await store.otherTickInFlight(this.schedule.name, this.schedule.queue, scheduledAt)) {
        await this.skipOverlapping(tick, 'a job of another tick is ready or running');
      } else {
        await this.fanOutOwned(tick, now, signal);
      }
    } finally {
      await lock?.release();
    }
  }

  /**
   * Records an owned tick as skipped by `overlap: 'skip'`: OVERLAP_NOTE, then what its own
   * note said of a cron edit (sourceChangeIn: the first tick of an edited cron).
   */
  private async skipOverlapping(tick: OwnedTick, why: string): Promise<void> {
    const at = tick.scheduledAt.toISOString();
    if (!(await this.deps.store.skipTickIfOwned(tick.id, this.deps.claimedBy, withNote(OVERLAP_NOTE, sourceChangeIn(tick.note))))) {
      throw new TickTakenOverError(`tick ${at} was taken over by another daemon`);
    }
    this.log.info({ event: 'schedule_tick_skipped', scheduled_at: at, reason: OVERLAP_NOTE, why }, 'tick skipped: previous run still in progress');
  }

  /**
   * Enqueues the jobs of a tick this daemon owns and records the outcome.
   * A fan-out that fails for any reason but a lost connection is tried again
   * (`fanoutRetry`), then recorded as 'failed' with the error in its note, so the
   * schedule moves on. Once `signal` aborts, it stops at once (enqueueTick) and hands
   * the unfinished tick back (lease ended) for the next scheduler to resume.
   *
   * The tick is held by a FanoutLease, renewed as jobs() yields entities and as batches
   * are written. When the lease is lost (another daemon took the tick over) or runs out
   * (no progress for a whole lease: a jobs() that hangs), the fan-out stops the same way
   * at once, without waiting for jobs(): no entity is read after that, the rows gathered
   * and the writes in flight settle, the tick is handed back if still ours, and this
   * throws (TickTakenOverError, FanoutAbandonedError), failing the pass; the caller then
   * releases the overlap lock. Those last rows can land after another daemon took the
   * tick over: they are rows of this same tick, whose keys that daemon's fan-out writes
   * too (one job per key whoever writes first), and they are committed before the lock is
   * released, so any later tick's check sees them. What jobs() yields once it wakes up is
   * dropped, and it is asked to return.
   */
  private async fanOutOwned(tick: OwnedTick, now: Date, signal?: AbortSignal): Promise<void> {
    const { store, claimedBy, clock } = this.deps;
    const { id, scheduledAt, periodKey, late, note } = tick;
    const leaseMs = this.deps.fanoutLeaseMs ?? FANOUT_LEASE_MS;
    const retry = this.deps.fanoutRetry ?? FANOUT_RETRY;
    const at = scheduledAt.toISOString();
    const startedAt = performance.now();
    const lease = new FanoutLease({ store, id, claimedBy, leaseMs, at }, tick.claimedAt);
    // Stops the fan-out on shutdown and on the lease's loss alike. Not AbortSignal.any: on
    // Node 20 that leaves a dependant on the scheduler's signal, which lives for good, per fan-out.
    const stopping = new AbortController();
    const stop = stopping.signal;
    const onShutdown = () => stopping.abort(signal?.reason);
    lease.signal.addEventListener('abort', () => stopping.abort(lease.signal.reason), { once: true });
    if (signal?.aborted) onShutdown();
    else signal?.addEventListener('abort', onShutdown, { once: true });
    let insertedSoFar = 0;
    let refusedLogged = 0;
    const onRefused = (job: RefusedJob) => {
      if (refusedLogged >= REFUSED_LOGGED_PER_TICK) return;
      refusedLogged += 1;
      this.log.warn({ event: 'job_refused', scheduled_at: at, job_key: job.key, reason: job.reason }, 'entity refused; the others are enqueued');
    };
    const afterBatch = async (batch: { inserted: number }) => {
      insertedSoFar += batch.inserted;
      await lease.renewIfDue();
    };
    const onEntity = () => lease.renewIfDue();
    try {
      for (let attempt = 1; ; attempt++) {
        let result: Awaited<ReturnType<typeof enqueueTick>>;
        try {
          result = await enqueueTick(store, this.schedule, { scheduledAt, periodKey }, { afterBatch, onEntity, onRefused, signal: stop, maxEntities: this.deps.maxTickEntities });
        } catch (error) {
          if (stop.aborted) break; // shutdown, or the lease lost or run out: handed back below
          // The database's trouble (a lost connection, a lock wait timed out or a deadlock
          // behind someone else's transaction) is not the fan-out's failure: the pass
          // fails and the tick, still unfinished, is resumed by a later pass.
          // Guarded: jobs() may throw anything, a revoked Proxy whose type cannot be asked included.
          if (isInstance(error, TickTakenOverError) || isDatabaseTrouble(error)) throw error;
          const reason = errorLine(error, 200);
          // Too many entities: another attempt would read them all again, and as many.
          if (attempt >= retry.attempts || isInstance(error, FanoutTooLargeError)) {
            this.abandoned.delete(id);
            await this.recordFailed(id, at, attempt, reason, insertedSoFar, note);
            return;
          }
          const retryInMs = retryDelayMs(retry.backoff, attempt);
          this.log.warn({ event: 'schedule_tick_retry', scheduled_at: at, attempt, retry_in_ms: retryInMs, error: reason }, 'fan-out failed; retrying');
          const retryAt = clock.now().getTime() + retryInMs;
          // A clock gone wrong (no valid time) cannot time the backoff: a timer does, as in run().
          if (Number.isFinite(retryAt)) await clock.sleepUntil(new Date(retryAt), stop);
          else await sleep(retryInMs, stop);
          if (stop.aborted) break;
          await lease.renewIfDue(); // waiting to retry is no progress, but it is not a hang either
          continue;
        }
        if (result.stopped) break;
        const takenNote = result.conflicting === 0 ? null : keysTakenNote(result.conflicting, result.firstConflict);
        if (takenNote) {
          const first = result.firstConflict;
          this.log.warn(
            {
              event: 'job_key_taken',
              scheduled_at: at,
              period_key: periodKey,
              count: result.conflicting,
              job_key: first?.key ?? null,
              held_by_kind: first?.kind ?? null,
              held_by_job: first?.jobId ?? null,
            },
            `${takenNote}: their schedule jobs were not enqueued (a schedule's keys are written by its ticks alone)`,
          );
        }
        const refusedNote = result.refusedCount === 0 ? null : refusedSummary(result.refusedCount, result.refused[0]);
        if (refusedNote) {
          this.log.warn({ event: 'jobs_refused', scheduled_at: at, count: result.refusedCount, logged: refusedLogged }, refusedNote);
        }
        // Written only when the fan-out adds a part: the claim wrote the tick's own note already.
        const finished = await store.finishTickIfOwned(id, claimedBy, {
          inserted: result.inserted,
          existing: result.existing,
          note: takenNote === null && refusedNote === null ? null : finishedTickNote(note, takenNote, refusedNote),
        });
        this.abandoned.delete(id);
        if (!finished) throw new TickTakenOverError(`tick ${at} was taken over by another daemon`);
        this.log.info(
          {
            event: 'schedule_tick',
            scheduled_at: at,
            period_key: periodKey,
            enqueued: result.inserted,
            existing: result.existing,
            conflicting: result.conflicting,
            refused: result.refusedCount,
            caught_up: late,
            lateness_ms: now.getTime() - scheduledAt.getTime(),
            fanout_ms: Math.round(performance.now() - startedAt),
          },
          'schedule tick enqueued',
        );
        this.deps.observer?.tick(this.schedule.name, now.getTime() - scheduledAt.getTime(), result.inserted);
        if (result.inserted > 0) this.deps.onEnqueued?.();
        return;
      }
    } finally {
      lease.end();
      signal?.removeEventListener('abort', onShutdown);
    }
    // Abandoned (no progress for a whole lease) counts as a failed attempt: a jobs() that
    // hangs every time it is asked would otherwise be resumed, and end the pass, for ever,
    // and the schedule's later ticks would never be reached. Counted by this daemon.
    if (lease.lost instanceof FanoutAbandonedError) {
      const abandoned = (this.abandoned.get(id) ?? 0) + 1;
      if (abandoned >= retry.attempts) {
        this.abandoned.delete(id);
        await this.recordFailed(id, at, abandoned, `the fan-out made no progress for ${leaseMs} ms (its lease), each time`, insertedSoFar, note);
        return;
      }
      this.abandoned.set(id, abandoned);
    }
    // Stopped: the rest of this tick is the next scheduler's, with no lease to wait out
    // (a no-op when another daemon has it already).
    await store.releaseTickIfOwned(id, claimedBy);
    if (insertedSoFar > 0) this.deps.onEnqueued?.();
    if (lease.lost) throw lease.lost;
    this.log.info({ event: 'schedule_tick_interrupted', scheduled_at: at, enqueued: insertedSoFar }, 'fan-out stopped for shutdown; the next scheduler resumes it');
  }

  /**
   * Records an owned tick as failed: the failure (its reason at most 200 characters, so
   * the note's cut at the column's end keeps the words), then what the tick's own note
   * `own` said of a cron edit (sourceChangeIn).
   */
  private async recordFailed(id: number, at: string, attempts: number, reason: string, inserted: number, own: string | null): Promise<void> {
    const note = withNote(`failed after ${attempts} ${attempts === 1 ? 'attempt' : 'attempts'}: ${reason}`, sourceChangeIn(own));
    if (!(await this.deps.store.failTickIfOwned(id, this.deps.claimedBy, { inserted, existing: 0, note }))) {
      throw new TickTakenOverError(`tick ${at} was taken over by another daemon`);
    }
    this.log.error({ event: 'tick_failed', scheduled_at: at, attempts, enqueued: inserted, error: reason }, 'tick recorded as failed; the schedule moves on');
    this.deps.observer?.tickFailed(this.schedule.name);
    if (inserted > 0) this.deps.onEnqueued?.();
  }
}

/**
 * What a pass lists of an edited schedule's ticks before its first pass (ScheduleTicker.editSince):
 * listing starts at `listFrom`, keeps of each page what `due` returns, leaves out of its writes the
 * anchor already `written`, and records each row's `sourceOf` and, after its plan's note, `noteAt`.
 */
interface EditRange {
  listFrom: Date;
  /** The instants of a page (ascending) the plan gets. */
  due(page: Date[]): Date[];
  written(at: Date): boolean;
  sourceOf(at: Date): TickSource;
  /** What the row at `at` notes of the edit after its own note (the shared anchor: what changed), or null. */
  noteAt(at: Date): string | null;
}

/** `note` with `extra` after it ('; '), either alone when the other is null. */
function withNote<T extends string | null>(note: T, extra: string | null): T | string {
  if (extra === null) return note;
  return note === null ? extra : `${note}; ${extra}`;
}

/** `ticks` (ascending) cut into runs of one source each, in order. */
function splitBySource<T extends { at: Date }>(ticks: T[], sourceOf: (at: Date) => TickSource): Array<{ source: TickSource; ticks: T[] }> {
  const parts: Array<{ source: TickSource; ticks: T[] }> = [];
  for (const tick of ticks) {
    const source = sourceOf(tick.at);
    const last = parts.at(-1);
    if (last && last.source === source) last.ticks.push(tick);
    else parts.push({ source, ticks: [tick] });
  }
  return parts;
}

/** The ledger note for refused entities: how many, and the first with its reason. */
function refusedSummary(count: number, first: RefusedJob | undefined): string {
  const noun = count === 1 ? 'entity' : 'entities';
  return `${count} ${noun} refused${first ? `, first: ${first.key}: ${first.reason}` : ''}`;
}
