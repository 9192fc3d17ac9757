/**
 * Pause and resume (`cronq.admin.pauses`): an operator stops a schedule's ticks or a
 * queue's claims on every daemon, without a deploy, and starts them again. The state is
 * a row of `cronq_pauses`, so it holds on every host and across restarts; each daemon
 * obeys at its next read (see store/pauses.ts).
 */
import { defaultOperator } from '../runtime/operator.ts';
import { charLength, longerThanChars } from '../runtime/chars.ts';
import { UsageError } from '../errors.ts';
import { isName, refuseUnknownOptions, validateQueue } from '../tasks/define.ts';
import type { PauseTarget } from '../db/schema.ts';
import type { Schedule } from '../schedule/define.ts';
import { latestFireAtOrBefore, periodKeyOfFire } from '../schedule/period.ts';
import { tickSourceOf } from '../schedule/tickSource.ts';
import { isLateTick, pausedNote } from '../schedule/plan.ts';
import type { Pause, PauseWriteOutcome, ResumeWriteOutcome, Store } from '../store/index.ts';

export type { Pause, PauseTarget };
/** "paused by alice@web1 since 2026-11-30T18:00:00.000Z: deploy freeze": a pause in one line (also the ledger note of its skipped ticks). */
export { pausedNote as describePause };

/**
 * The width of a pause's name column. A name is refused unless it is one a job or a
 * schedule can have (1–64 of letters, digits, '.', '_', '-': nameable), so it stays under.
 */
export const PAUSE_NAME_MAX = 128;
/** Longest pause reason and "who" (the columns' widths). */
export const PAUSE_TEXT_MAX = 255;

/** What `pause` did: paused now, already paused (the pause in force, nothing changed), or no such schedule. */
export type PauseOutcome =
  | PauseWriteOutcome
  | {
      /** No loaded schedule has that name: nothing was written. */
      status: 'no_schedule';
      /** The name asked for. */
      name: string;
    };

/** What `resume` did: the pause it ended, not paused (nothing changed), or no such schedule. */
export type ResumeOutcome =
  | ResumeWriteOutcome
  | {
      /** No loaded schedule has that name: nothing was changed. */
      status: 'no_schedule';
      /** The name asked for. */
      name: string;
    };

/** Who did it and why; `by` defaults to `user@host` of this process (defaultOperator). */
export interface PauseOptions {
  /** Why, shown by `cronq stats` and the console (1–255 characters; default none). */
  reason?: string;
  /** Who (1–255 characters; default `user@host` of this process). */
  by?: string;
}

/**
 * Pausing and resuming schedules and queues. A schedule must be one of the loaded
 * schedules ('no_schedule' otherwise, and at once for a name no schedule can have); a
 * queue may be any queue name, used or not yet, so a queue can be paused before its first
 * job arrives. Bad text (a name that is not a valid queue name, an empty `by` or reason,
 * one longer than its column, an option or argument the call does not take) is a
 * UsageError, refused before the database is touched.
 */
export interface PauseAdmin {
  /**
   * Pauses a schedule (each later tick is recorded as 'skipped' with a note naming who
   * paused it, since when and why, and nothing is enqueued) or a queue (no daemon claims
   * from it; its jobs wait, running ones finish). Daemons obey within one poll (a
   * scheduler at its next pass). Pausing what is paused changes nothing: 'already_paused'.
   */
  pause(target: PauseTarget, name: string, options?: PauseOptions): Promise<PauseOutcome>;
  /**
   * Ends a pause. A resumed schedule does not catch up the ticks that fell while it was
   * paused: they are in the ledger as skipped, and its latest fire time at or before now
   * is recorded as skipped too (when no daemon was there to record it), so catch-up
   * starts after it. 'not_paused' when there was no pause (nothing changed). The name ''
   * (which pause refuses, but a row written from SQL can hold) ends such a pause, and so
   * does the target '' a row of no known target (Pause.target '': it pauses nothing),
   * whatever its name.
   */
  resume(target: PauseTarget | '', name: string): Promise<ResumeOutcome>;
  /** Every pause in force, schedules first, by name. */
  list(): Promise<Pause[]>;
}

function checkedText(value: string, what: string, max: number): string {
  if (typeof value !== 'string' || value.trim() === '') throw new UsageError(`${what} must not be empty`);
  if (longerThanChars(value, max)) throw new UsageError(`${what} is longer than ${max} characters (${charLength(value)})`);
  return value;
}

function checkedTarget<T extends PauseTarget | ''>(target: T): T {
  if (target !== 'schedule' && target !== 'queue') throw new UsageError(`a pause target is 'schedule' or 'queue' (got ${String(target)})`);
  return target;
}

/**
 * Whether `name` can name what `target` pauses, by the rule that defines those names: a
 * queue's as enqueue and tasks take it (validateQueue: UsageError otherwise), a
 * schedule's as defineSchedule takes it (false otherwise: no loaded schedule has it, so
 * the call answers 'no_schedule' without touching the database). Anything else could name
 * nothing that runs, or, under the column's PAD SPACE collation, match a real name
 * ('default ' is 'default' there: resuming 'report ' would end the pause of 'report').
 */
function nameable(target: PauseTarget, name: string): boolean {
  if (target === 'queue') return validateQueue(name, 'the queue name') === name;
  if (typeof name !== 'string') throw new UsageError(`the schedule name must be a string (got ${typeof name})`);
  return isName(name);
}

/** Builds `cronq.admin.pauses` over a store and the loaded schedules. */
export function createPauseAdmin(store: Store, schedules: () => Promise<Schedule[]>): PauseAdmin {
  const loaded = async (name: string) => (await schedules()).find((s) => s.name === name);
  return {
    async pause(target, name, options = {}) {
      // A misspelt `{ reasn }` would pause with no reason, a `{ byy }` as this process's user.
      if (typeof options !== 'object' || options === null || Array.isArray(options)) throw new UsageError('pauses.pause: options must be an object ({ reason?, by? })');
      refuseUnknownOptions(options, ['reason', 'by'], 'pauses.pause');
      const { reason, by = defaultOperator() } = options;
      checkedTarget(target);
      const named = nameable(target, name);
      checkedText(by, 'by', PAUSE_TEXT_MAX);
      const why = reason === undefined ? null : checkedText(reason, 'the reason', PAUSE_TEXT_MAX);
      if (target === 'schedule' && (!named || !(await loaded(name)))) return { status: 'no_schedule', name };
      return store.pause({ target, name, reason: why, pausedBy: by });
    },
    async resume(target, name, ...extra: unknown[]) {
      // Resuming records nothing: an options object (`{ reason }`) would be dropped unread.
      if (extra.length > 0) throw new UsageError('pauses.resume takes (target, name) only: it has no options, and records no reason');
      // A row of no known target, or named '', can only have been written from SQL: it pauses nothing, but it is listed, so it can be ended.
      if (target === '') {
        if (typeof name !== 'string' || longerThanChars(name, PAUSE_NAME_MAX)) throw new UsageError(`the pause name must be a string of at most ${PAUSE_NAME_MAX} characters`);
        return store.resume('', name);
      }
      checkedTarget(target);
      if (name !== '' && !nameable(target, name)) return { status: 'no_schedule', name };
      const schedule = target === 'schedule' ? await loaded(name) : undefined;
      const outcome = await store.resume(target, name);
      // A pause of a schedule since removed from the folder can still be ended.
      if (outcome.status === 'not_paused' && target === 'schedule' && !schedule) return { status: 'no_schedule', name };
      if (outcome.status === 'resumed' && schedule) await anchorAfterPause(store, schedule, outcome.pause);
      return outcome;
    },
    async list(...extra: unknown[]) {
      if (extra.length > 0) throw new UsageError('pauses.list takes no arguments: it lists every pause');
      return store.listPauses();
    },
  };
}

/**
 * Records the schedule's latest fire time at or before now as skipped (unless the
 * ledger has it): catch-up starts from the ledger's latest row, so ticks that fell
 * while it was paused and no scheduler ran are not enqueued after the resume.
 */
async function anchorAfterPause(store: Store, schedule: Schedule, pause: Pause): Promise<void> {
  const now = await store.now();
  const at = latestFireAtOrBefore(schedule.cron, schedule.timezone, now);
  if (at === null || at.getTime() < pause.pausedAt.getTime()) return;
  const periodKey = periodKeyOfFire(schedule.period, schedule.cron, schedule.timezone, at);
  await store.recordSkippedTicks(schedule.name, tickSourceOf(schedule), [{ scheduledAt: at, periodKey, caughtUp: isLateTick(at, now), note: pausedNote(pause) }]);
}
