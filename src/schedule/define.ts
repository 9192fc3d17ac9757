import { parseDuration, type Duration } from '../duration.ts';
import { UsageError } from '../errors.ts';
import {
  refuseUnknownOptions,
  SCHEDULE_BRAND,
  SCHEDULE_ONLY_OPTIONS,
  isSpreadSchedule,
  spreadTaskOf,
  TASK_BRAND,
  TASK_OPTIONS,
  validateJobOptions,
  validateName,
  validateParse,
  writtenOptions,
  frozenTask,
  type Task,
  type TaskOptions,
  type TaskVariantOptions,
} from '../tasks/define.ts';
import type { Handler } from '../tasks/job.ts';
import { commandHandler, type CommandSpec } from '../shell/handler.ts';
import { isPeriod, PERIODS, validateCron, type Period } from './period.ts';
import { withTimeout } from '../tasks/timeout.ts';
import { shownValue } from '../shownText.ts';

/** Brands a value as a schedule across module copies. */
export { SCHEDULE_BRAND };

/** What a fan-out yields: one entity of the period, with the payload its job gets (`P`: the schedule's payload type). */
export interface FanOutItem<P = unknown> {
  /** The entity's key, e.g. `user:42`; the job key becomes `<schedule>:<key>:<period key>`. */
  key: string;
  /** The job's payload, written as JSON (`{}` when left out); refused alone, naming the entity, when JSON cannot hold it. */
  payload?: P;
}

/** The tick a fan-out (`jobs`) runs for. */
export interface TickInfo {
  /** The tick's instant (UTC). */
  scheduledAt: Date;
  /** The period the tick belongs to, in the schedule's time zone. */
  periodKey: string;
}

/** A schedule's fan-out: the entities of one tick, each becoming one job of the period (`P`: their payloads' type). */
export type FanOut<P = unknown> = (tick: TickInfo) => AsyncIterable<FanOutItem<P>> | Iterable<FanOutItem<P>>;

/** Which missed ticks a catch-up enqueues: 'all' within the window (up to `max`), or only the 'latest'. */
export type CatchUpMode = 'all' | 'latest';

/** A schedule's missed-tick policy (ScheduleOptions.catchUp). */
export interface CatchUpOptions {
  /** How far back missed ticks are still enqueued (default 1d). Older ones are recorded as skipped. */
  window?: Duration;
  /** 'all': every missed tick in the window, up to `max`; 'latest': only the most recent. */
  mode?: CatchUpMode;
  /** With mode 'all', at most this many missed ticks (the most recent) per catch-up (1–100000, default 1000). */
  max?: number;
}

/** defineSchedule's options: a task's, plus when (`cron`, `timezone`) and how (`period`, `catchUp`, `overlap`, `jobs`, `command`) to enqueue it. */
export interface ScheduleOptions<P = any> extends Omit<TaskOptions<P>, 'handle'> {
  /** Unique; the first part of every job key. */
  name: string;
  /**
   * A crontab line's time fields, read as Vixie cron reads them (README, "Cron dialect"): 5
   * fields (minute first), 6 (seconds first), or @hourly, @daily (@midnight), @weekly,
   * @monthly, @yearly (@annually).
   */
  cron: string;
  /** IANA time zone the cron and the period keys are read in (default UTC). */
  timezone?: string;
  /** What one job per key means (default 'tick': every fire is its own period). */
  period?: Period;
  /** Missed-tick policy (default { mode: 'all', window: '1d', max: 1000 }); false: missed ticks are skipped. */
  catchUp?: CatchUpOptions | false;
  /**
   * What a tick does while a job of any other tick of this schedule, earlier or later, is
   * still ready or reserved (any job of it, with a fan-out): 'allow' enqueues anyway
   * (default), 'skip' records the tick as skipped ("previous run still in progress") and
   * enqueues nothing, deciding under a lock shared by every daemon (README, "Overlap").
   */
  overlap?: Overlap;
  /** Optional fan-out: one job per yielded entity, per period. Streamed, never held in memory at once. */
  jobs?: FanOut<P>;
  /** The handler (exactly one of handle and command). */
  handle?: Handler<P>;
  /** A shell command run through /bin/sh -c (exactly one of handle and command). */
  command?: string;
  /** Extra environment for `command`. */
  env?: Record<string, string>;
  /** Text fed to `command`'s standard input (cron's `%` lines). */
  stdin?: string;
  /** Working directory for `command` (default: the daemon's). */
  cwd?: string;
  /**
   * A dead-man's switch: every tick's jobs must all be done within `within` of the tick
   * (at least 1m), else the schedule is overdue until a later tick completes (README,
   * "Schedule health"). Default: no expectation.
   */
  expect?: {
    /** From each tick's instant until all its jobs are done (at least 1m). */
    within: Duration;
  };
}

/**
 * The options of a schedule of a defined task, `defineSchedule({ ...sendEmail, name:
 * 'digest', cron: '0 8 * * *' })`: the task's as a variant's (TaskVariantOptions), and
 * the schedule's own, `cron` required.
 */
export type ScheduleFromTaskOptions<P = any> = TaskVariantOptions<P> & Omit<ScheduleOptions<P>, keyof TaskOptions<P>>;

/** A schedule's overlap policy (ScheduleOptions.overlap). */
export type Overlap = 'allow' | 'skip';

/** A defined schedule's catch-up policy, defaults applied: 'off' for `catchUp: false`, the window in ms. */
export interface ResolvedCatchUp {
  /** Which missed ticks are enqueued (CatchUpMode); 'off': none, each recorded as skipped. */
  mode: CatchUpMode | 'off';
  /** How far back (ms) a missed tick is still enqueued; 0 when off. */
  windowMs: number;
  /** With mode 'all', most missed ticks (the most recent) one catch-up enqueues; 0 when off. */
  max: number;
}

/** A validated schedule: a task (kind = name) plus when and how to enqueue it (`P`: its jobs' payload type, as Task's). */
export interface Schedule<P = any> extends Task<P> {
  /** Marks what defineSchedule returned, whichever copy of cronq made it (a spread schedule is refused by this mark). */
  readonly [SCHEDULE_BRAND]: true;
  /** The cron as written (validated; read as Vixie cron reads it). */
  readonly cron: string;
  /** The IANA zone its cron and period keys are read in ('UTC' by default). */
  readonly timezone: string;
  /** What one job per key means: each of its jobs' keys ends with this period's key. */
  readonly period: Period;
  /** Its missed-tick policy, defaults applied. */
  readonly catchUp: Readonly<ResolvedCatchUp>;
  /** Its overlap policy ('allow' by default). */
  readonly overlap: Overlap;
  /** Its fan-out, called for each tick enqueued (again for a tick resumed after an interruption; null: one job per tick, keyed `<name>:<period key>`). */
  readonly jobs: FanOut<P> | null;
  /** The shell command it runs (null for a handler schedule); `handle` runs it. */
  readonly command: string | null;
  /** How soon after its tick each tick's jobs must all be done (null: no expectation). */
  readonly expect: {
    /** `expect.within`, in ms (at least 60000). */
    readonly withinMs: number;
  } | null;
}

// Frozen: every schedule without a catchUp of its own shares it.
export const CATCH_UP_DEFAULTS: Readonly<ResolvedCatchUp> = Object.freeze({ mode: 'all', windowMs: 86_400_000, max: 1000 });
const CATCH_UP_MAX_LIMIT = 100_000;

/** Every option defineSchedule takes: a task's, and its own (the compiler keeps this in step with ScheduleOptions). */
const SCHEDULE_OPTION_KEYS = Object.keys({ ...TASK_OPTIONS, ...SCHEDULE_ONLY_OPTIONS } satisfies Record<keyof ScheduleOptions, true>);
// And no option beyond ScheduleOptions' (the spread above escapes the excess-property check).
SCHEDULE_ONLY_OPTIONS satisfies Record<Exclude<keyof ScheduleOptions, keyof TaskOptions>, true> & Record<Exclude<keyof typeof SCHEDULE_ONLY_OPTIONS, keyof ScheduleOptions>, never>;
const CATCH_UP_KEYS = Object.keys({ window: true, mode: true, max: true } satisfies Record<keyof CatchUpOptions, true>);
const EXPECT_KEYS = ['within'];

/**
 * Declares a recurring job. Validates everything at once and throws a UsageError naming
 * the schedule and the bad option (an unknown one too), so the loader refuses the file at start.
 *
 * Given a defined task spread into its options (ScheduleFromTaskOptions), it is as if the
 * task's options had been written out with the schedule's after them, as defineTask does
 * for a variant: `timeout` replaces the task's, `undefined` sets an option back to its
 * default, and the schedule keeps the task's name unless given one (a schedule is a task
 * of its kind, so a registry refuses the two side by side). Every task option applies to
 * a schedule; the task's handle comes with the spread, so a `command` is refused beside
 * it, as handle and command always are, unless `handle: undefined` is written too. A
 * spread defined schedule is refused in one line saying to spread its task instead.
 * The payload's type is `P`, given (`defineSchedule<Invoice>`), or read from the handler,
 * `parse`, the fan-out's yielded payloads or a spread task; without any it is `unknown`.
 * The schedule returned is a Schedule<P>: its fan-out must yield `P`, and
 * `cronq.enqueue(schedule, job)` takes a `P`.
 */
export function defineSchedule<P = unknown>(given: ScheduleOptions<P> | ScheduleFromTaskOptions<P>): Schedule<P> {
  if (typeof given !== 'object' || given === null) throw new UsageError('defineSchedule needs an options object');
  const options = writtenOptions(given) as ScheduleOptions<P>;
  const named = typeof options.name === 'string' ? `schedule '${options.name}'` : 'defineSchedule';
  if (isSpreadSchedule(given)) {
    // Its resolved fields (leaseMs, a parsed catchUp...) are no options: refused as unknown, they said nothing useful.
    throw new UsageError(
      `${named}: a defined schedule cannot be spread into defineSchedule (its fields, such as leaseMs, are not its options): ` +
        'define the task with defineTask and spread it into each schedule, defineSchedule({ ...task, cron })',
    );
  }
  refuseUnknownOptions(options, SCHEDULE_OPTION_KEYS, named);
  const name = validateName(options.name, 'schedule name');
  const what = `schedule '${name}'`;
  const timezone = options.timezone ?? 'UTC';
  if (typeof options.cron !== 'string') throw new UsageError(`${what}: cron must be a string`);
  if (typeof timezone !== 'string') throw new UsageError(`${what}: timezone must be an IANA zone name`);
  const cronProblem = validateCron(options.cron, timezone);
  if (cronProblem) throw new UsageError(`${what}: ${cronProblem}`);
  const period = options.period ?? 'tick';
  if (!isPeriod(period)) throw new UsageError(`${what}: period must be one of ${PERIODS.join(', ')} (got ${shownValue(period)})`);
  const hasHandle = options.handle !== undefined;
  const hasCommand = options.command !== undefined;
  if (hasHandle === hasCommand) throw new UsageError(`${what}: give exactly one of handle and command${spreadHandleHint(given, hasCommand)}`);
  if (hasHandle && typeof options.handle !== 'function') throw new UsageError(`${what}: handle must be a function`);
  if (hasCommand && (typeof options.command !== 'string' || options.command.trim() === '')) {
    throw new UsageError(`${what}: command must be a non-empty string`);
  }
  if (!hasCommand && (options.env !== undefined || options.stdin !== undefined || options.cwd !== undefined)) {
    throw new UsageError(`${what}: env, stdin and cwd apply only to command schedules`);
  }
  if (options.env !== undefined && !isStringRecord(options.env)) throw new UsageError(`${what}: env must map names to strings`);
  if (options.stdin !== undefined && typeof options.stdin !== 'string') throw new UsageError(`${what}: stdin must be a string`);
  if (options.jobs !== undefined && typeof options.jobs !== 'function') {
    throw new UsageError(`${what}: jobs must be a function (an async generator yielding { key, payload })`);
  }
  const overlap = options.overlap ?? 'allow';
  if (overlap !== 'allow' && overlap !== 'skip') throw new UsageError(`${what}: overlap must be 'allow' or 'skip' (got ${shownValue(overlap)})`);
  const base = validateJobOptions(options, what, name);
  const { timeoutMs } = base;
  // A command enforces its own timeout: it kills the process group before failing.
  const handle: Handler<P> = hasCommand
    ? scheduleCommand(what, { command: options.command!, env: options.env, stdin: options.stdin, cwd: options.cwd, timeoutMs: timeoutMs ?? undefined })
    : timeoutMs === null
      ? (options.handle as Handler<P>)
      : (withTimeout(options.handle as Handler, timeoutMs) as Handler<P>);
  return frozenTask({
    [TASK_BRAND]: true,
    [SCHEDULE_BRAND]: true,
    name,
    handle,
    parse: validateParse(options.parse, what) as ((payload: unknown) => P) | null,
    ...base,
    cron: options.cron,
    timezone,
    period,
    catchUp: resolveCatchUp(options.catchUp, what),
    overlap,
    jobs: options.jobs ?? null,
    command: hasCommand ? options.command! : null,
    expect: resolveExpect(options.expect, what),
  });
}

/** Why a command schedule has a handle it was not written with: a spread task brought it. */
/** The schedule's command handler; a spec it refuses is refused naming the schedule, as every other option is. */
function scheduleCommand(what: string, spec: CommandSpec): Handler {
  try {
    return commandHandler(spec);
  } catch (error) {
    if (error instanceof UsageError) throw new UsageError(`${what}: ${error.message}`);
    throw error;
  }
}

function spreadHandleHint(given: object, hasCommand: boolean): string {
  const task = spreadTaskOf(given);
  if (!hasCommand || task === null || (given as { handle?: unknown }).handle !== task.handle) return '';
  return ` (the spread task '${task.name}' brings its handle: write handle: undefined to run only the command)`;
}

/** Shortest `expect.within`: anything shorter would page on the scheduler's own lateness. */
const EXPECT_WITHIN_MIN_MS = 60_000;

function resolveExpect(value: { within: Duration } | undefined, what: string): { readonly withinMs: number } | null {
  if (value === undefined) return null;
  if (typeof value !== 'object' || value === null || value.within === undefined) {
    throw new UsageError(`${what}: expect must be an object such as { within: '2h' }`);
  }
  refuseUnknownOptions(value, EXPECT_KEYS, what, 'expect.');
  const withinMs = parseDuration(value.within, `${what}: expect.within`);
  if (withinMs < EXPECT_WITHIN_MIN_MS) throw new UsageError(`${what}: expect.within must be at least 1m (got ${shownValue(value.within)})`);
  return Object.freeze({ withinMs });
}

function resolveCatchUp(value: CatchUpOptions | false | undefined, what: string): Readonly<ResolvedCatchUp> {
  if (value === false) return Object.freeze({ mode: 'off', windowMs: 0, max: 0 });
  if (value === undefined) return CATCH_UP_DEFAULTS;
  if (typeof value !== 'object' || value === null) throw new UsageError(`${what}: catchUp must be an object or false`);
  refuseUnknownOptions(value, CATCH_UP_KEYS, what, 'catchUp.');
  const mode = value.mode ?? CATCH_UP_DEFAULTS.mode;
  if (mode !== 'all' && mode !== 'latest') throw new UsageError(`${what}: catchUp.mode must be 'all' or 'latest' (got ${shownValue(mode)})`);
  const windowMs = value.window === undefined ? CATCH_UP_DEFAULTS.windowMs : parseDuration(value.window, `${what}: catchUp.window`);
  const max = value.max ?? CATCH_UP_DEFAULTS.max;
  if (!Number.isInteger(max) || max < 1 || max > CATCH_UP_MAX_LIMIT) {
    throw new UsageError(`${what}: catchUp.max must be a whole number from 1 to ${CATCH_UP_MAX_LIMIT} (got ${shownValue(max)})`);
  }
  return Object.freeze({ mode, windowMs, max });
}

function isStringRecord(value: unknown): value is Record<string, string> {
  return typeof value === 'object' && value !== null && Object.values(value).every((v) => typeof v === 'string');
}

/** True for anything defineSchedule returned, whichever copy of cronq made it. */
export function isSchedule(value: unknown): value is Schedule {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[SCHEDULE_BRAND] === true;
}

/** The schedules among a registry's tasks, in registration order. */
export function schedulesOf(tasks: { list(): Task[] }): Schedule[] {
  return tasks.list().filter(isSchedule);
}
