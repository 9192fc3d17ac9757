import { parseDuration, type Duration } from '../duration.ts';
import { UsageError } from '../errors.ts';
import { parseBackoff, type Backoff } from '../runtime/backoff.ts';
import { shownText, shownValue } from '../shownText.ts';
import type { Handler } from './job.ts';
import { withTimeout } from './timeout.ts';

/** Brands a value as a cronq task across module copies (a schedule file may load its own copy of cronq). */
export const TASK_BRAND = Symbol.for('cronq.task');
/** Brands a task as a schedule across module copies (defineSchedule sets it; here so defineTask can tell a spread schedule). */
export const SCHEDULE_BRAND = Symbol.for('cronq.schedule');

export const TASK_DEFAULTS = {
  queue: 'default',
  maxAttempts: 5,
  leaseMs: 60_000,
} as const;

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const QUEUE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
export const MAX_ATTEMPTS_LIMIT = 1000;
const LEASE_MIN_MS = 1_000;
const LEASE_MAX_MS = 24 * 3_600_000;
/** Past this a timer would overflow (setTimeout's 2^31-1 ms); a week is plenty for one attempt. */
const TIMEOUT_MAX_MS = 7 * 86_400_000;
/** Most jobs of one limited kind running at once across the cluster. */
export const CONCURRENCY_LIMIT_MAX = 10_000;

/** defineTask's options: how jobs of one kind are handled (`P`: the payload's type). */
export interface TaskOptions<P = any> {
  /** The job kind this task handles: letters, digits, `.`, `_`, `-`; up to 64. */
  name: string;
  /** Runs one attempt of a job of this kind: returning is success, throwing a failure (PermanentError: no retry). See Handler. */
  handle: Handler<P>;
  /** The queue its jobs go to (1-64 of letters, digits, `.`, `_`, `-`; default 'default', or with `concurrency` the task's name). */
  queue?: string;
  /** Attempts before a job goes dead (1–1000, default 5). */
  maxAttempts?: number;
  /**
   * Delay before retry n: base·2^(n−1), capped at max, jittered to ½–1 of that (default
   * { base: '1s', max: '1h' }; each at most 365d).
   */
  backoff?: {
    /** The first retry's delay before jitter (at least 1ms; default 1s). */
    base?: Duration;
    /** The longest delay before jitter, at least `base` (default 1h, or `base` when that is longer). */
    max?: Duration;
  };
  /** How long a claim holds the job before recovery may take it back (1s–24h, default 60s); renewed every third of it while the handler runs. */
  lease?: Duration;
  /**
   * Fail an attempt that runs longer than this (retryable): `ctx.signal` aborts with a
   * JobTimeoutError and the slot is freed, whether or not the handler stops (at most 7d).
   * Also bounds the attempt's effects, counted from when its completion is sent. Default: none.
   */
  timeout?: Duration;
  /**
   * Never more than this many jobs of this kind running at once across every daemon on
   * every host (1–10000; default: no limit). A limited kind runs in a queue of its own:
   * `queue` defaults to the kind's name, and loading refuses another kind in that queue.
   * A job counts from its claim until it finishes or its lease expires.
   */
  concurrency?: number;
  /**
   * Checks and converts the stored payload before the handler sees it (a schema's
   * `parse`, say). If it throws, the payload is unparseable: the job goes dead at once.
   */
  parse?: (payload: unknown) => P;
}

/**
 * A validated task: what the worker runs for jobs of kind `name`, and the handle an app
 * passes to `cronq.enqueue(task, { key, payload })` so kind and payload type-check (`P`).
 */
export interface Task<P = any> {
  /** Marks what defineTask (or defineSchedule) returned, whichever copy of cronq made it; `{ ...task }` carries it. */
  readonly [TASK_BRAND]: true;
  /** The job kind it runs: jobs whose kind is this name go to its handler. */
  readonly name: string;
  /**
   * What the worker calls per attempt: the handler as written, or, with a `timeout`, that
   * handler behind the timeout (a new function; for a command schedule, the command's
   * runner). For cronq to call: called directly it runs outside any claim, lease or retry.
   */
  readonly handle: Handler<P>;
  /** Payload check run before the handler; a throw is a permanent failure. */
  readonly parse: ((payload: unknown) => P) | null;
  /** The queue its jobs go to unless an enqueue names another. */
  readonly queue: string;
  /** Attempts a job gets unless its enqueue says otherwise (1–1000): the last failure sends it dead. */
  readonly maxAttempts: number;
  /** The retry delays after a failed attempt, in ms. */
  readonly backoff: Readonly<Backoff>;
  /** How long a claim holds one of its jobs (ms), renewed every third of it while the handler runs. */
  readonly leaseMs: number;
  /** Attempts longer than this fail with JobTimeoutError (null: no limit). */
  readonly timeoutMs: number | null;
  /** Cluster-wide most running at once (null: no limit); see TaskOptions.concurrency. */
  readonly concurrency: number | null;
}

/**
 * The options of a variant of a defined task, `defineTask({ ...sendEmail, name:
 * 'send-email-urgent', queue: 'urgent' })`: the spread brings the task's fields (its
 * parsed `backoff`, its `parse` or null...), the options written after it override them.
 * Each may be written as `undefined` (exactOptionalPropertyTypes too): back to its default.
 */
export type TaskVariantOptions<P = any> = {
  /** What the spread brings: the options come from a defined task (see Task). */
  readonly [TASK_BRAND]: true;
} & {
  [K in keyof TaskOptions<P>]?: TaskOptions<P>[K] | (K extends keyof Task<P> ? Task<P>[K] : never) | undefined;
};

/**
 * Under this key (enumerable, so `{ ...task }` copies it) a task keeps the options it was
 * defined with and itself: what tells a spread field from one written after the spread.
 */
const TASK_DEFINITION = Symbol.for('cronq.taskDefinition');

interface TaskDefinition {
  options: TaskOptions;
  task: Task;
}

/** Every option defineTask takes (the compiler keeps this in step with TaskOptions); defineSchedule takes them too. */
export const TASK_OPTIONS = {
  name: true,
  handle: true,
  queue: true,
  maxAttempts: true,
  backoff: true,
  lease: true,
  timeout: true,
  concurrency: true,
  parse: true,
} as const satisfies Record<keyof TaskOptions, true>;
const TASK_OPTION_KEYS = Object.keys(TASK_OPTIONS);

/**
 * The options defineSchedule takes beyond a task's (schedule/define.ts builds its option
 * list from these and TASK_OPTIONS, and the compiler checks the two against ScheduleOptions).
 */
export const SCHEDULE_ONLY_OPTIONS = {
  cron: true,
  timezone: true,
  period: true,
  catchUp: true,
  overlap: true,
  jobs: true,
  command: true,
  env: true,
  stdin: true,
  cwd: true,
  expect: true,
} as const;
const SCHEDULE_ONLY_KEYS = Object.keys(SCHEDULE_ONLY_OPTIONS);

/**
 * Refuses (UsageError, one line) options a schedule takes and a task does not (`cron`,
 * `timezone`...), naming those given, before they could be taken for typos. A spread
 * defined schedule (`{ ...nightly }`, which also brings fields such as `leaseMs` that are
 * no option at all) is named as such, with what to write instead.
 */
function refuseScheduleOptions(given: object, options: object, what: string): void {
  const found = Object.keys(options).filter((key) => SCHEDULE_ONLY_KEYS.includes(key));
  if (isSpreadSchedule(given)) {
    throw new UsageError(
      `${what}: defineTask was given a spread schedule, whose ${listed(found.length > 0 ? found : ['cron'])} a task does not take: ` +
        'define the task with defineTask, then spread it into defineSchedule({ ...task, cron })',
    );
  }
  if (found.length === 0) return;
  const are = found.length === 1 ? 'is an option' : 'are options';
  throw new UsageError(`${what}: ${listed(found)} ${are} of a schedule, which a task does not take (use defineSchedule for a task that runs on a cron)`);
}

/** True for `{ ...schedule }`: a defined schedule's fields, spread (its brand comes with them). */
export function isSpreadSchedule(given: object): boolean {
  return (given as Record<symbol, unknown>)[SCHEDULE_BRAND] === true;
}

/** `a`, `a and b`, `a, b and c`. */
function listed(names: string[]): string {
  return names.length === 1 ? names[0] : `${names.slice(0, -1).join(', ')} and ${names[names.length - 1]}`;
}

const BACKOFF_KEYS = Object.keys({ base: true, max: true } satisfies Record<keyof NonNullable<TaskOptions['backoff']>, true>);

/**
 * Refuses (UsageError) an own key of `options` not in `known`: a typo (`maxAttempt`,
 * `timout`) would otherwise do nothing at all. Names the key (a `noun`: option, field),
 * prefixed by `path` (for a nested option), and the known key it most likely meant, else
 * every known key.
 */
export function refuseUnknownOptions(options: object, known: readonly string[], what: string, path = '', noun = 'option'): void {
  for (const key of Object.keys(options)) {
    if (known.includes(key)) continue;
    const meant = closestKey(key, known);
    const hint = meant !== null ? `did you mean '${path}${meant}'?` : `known: ${known.join(', ')}`;
    throw new UsageError(`${what}: unknown ${noun} '${path}${shownText(key)}' (${hint})`);
  }
}

/** The key of `known` within two edits of `key` (case ignored), nearest first; null when none is. */
function closestKey(key: string, known: readonly string[]): string | null {
  let best: string | null = null;
  let bestDistance = 3;
  for (const candidate of known) {
    const distance = editDistance(key.toLowerCase(), candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

/** Levenshtein distance (option names are short). */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length];
}

/**
 * Declares how jobs of one kind are handled. Validates at once and throws a
 * UsageError naming the bad option (an unknown one too), so a bad task file is refused at start.
 *
 * Given a defined task spread into new options (TaskVariantOptions), it is as if the
 * task's own options had been written out with the new ones after them: `timeout`
 * replaces the task's (it does not stack), and defaults follow the new options (a limited
 * variant's queue is its own name). An option written as `undefined` is not given, as in
 * any options object, so it takes its default, not the task's value (`timeout:
 * undefined`: no timeout). A spread field (`leaseMs`) set to another value is refused
 * like any unknown option. A schedule's options (`cron`...) and a spread defined schedule
 * are refused naming them: a task runs only when enqueued.
 *
 * The payload's type is `P`, given (`defineTask<Invoice>`) or read from `parse`; without
 * either it is `unknown`, so a handler checks a field before it reads it.
 */
export function defineTask<P = unknown>(given: TaskOptions<P> | TaskVariantOptions<P>): Task<P> {
  if (typeof given !== 'object' || given === null) throw new UsageError('defineTask needs an options object');
  const options = writtenOptions(given) as TaskOptions<P>;
  const what = typeof options.name === 'string' ? `task '${options.name}'` : 'defineTask';
  refuseScheduleOptions(given, options, what);
  refuseUnknownOptions(options, TASK_OPTION_KEYS, what);
  const name = validateName(options.name, 'name');
  if (typeof options.handle !== 'function') throw new UsageError(`task '${name}': handle must be a function`);
  const base = validateJobOptions(options, `task '${name}'`, name);
  const task: Task<P> = {
    [TASK_BRAND]: true,
    name,
    handle: base.timeoutMs === null ? (options.handle as Handler) : withTimeout(options.handle as Handler, base.timeoutMs),
    parse: validateParse(options.parse, `task '${name}'`) as ((payload: unknown) => P) | null,
    ...base,
  };
  // Its own copy of the options (backoff's too), so a later change to the object it was given cannot reach a variant.
  const written = typeof options.backoff === 'object' && options.backoff !== null ? { ...options, backoff: Object.freeze({ ...options.backoff }) } : { ...options };
  const definition: TaskDefinition = Object.freeze({ options: Object.freeze(written), task });
  return frozenTask(Object.defineProperty(task, TASK_DEFINITION, { value: definition, enumerable: true }));
}

/**
 * `task` frozen, its backoff too: a defined task (or schedule) cannot change afterwards, so
 * an assignment throws a TypeError in strict code (every ES module) rather than half
 * applying (read live by some parts, such as enqueue's queue, and once at start by others,
 * such as the registry's name and limited-queue checks).
 */
export function frozenTask<T extends Task>(task: T): T {
  Object.freeze(task.backoff);
  return Object.freeze(task);
}

/** The task `given` was spread from (`{ ...task, ... }` carries its TaskDefinition), or null. */
export function spreadTaskOf(given: object): Task | null {
  return (given as { [TASK_DEFINITION]?: TaskDefinition })[TASK_DEFINITION]?.task ?? null;
}

/**
 * The options as written (defineTask's and defineSchedule's): `given` itself, or for a
 * spread task the task's own options with every field of `given` that did not come
 * from the spread laid over them. A field came from the spread if the task has it, with
 * the same value; any other (`timeout`, which the task does not have, even when
 * `undefined`) was written after it.
 */
export function writtenOptions(given: object): object {
  const definition = (given as { [TASK_DEFINITION]?: TaskDefinition })[TASK_DEFINITION];
  if (definition === undefined) return given;
  const task = definition.task as unknown as Record<string, unknown>;
  const written: Record<string, unknown> = { ...definition.options };
  for (const [key, value] of Object.entries(given)) {
    if (!Object.hasOwn(task, key) || value !== task[key]) written[key] = value;
  }
  return written;
}

/** Validates the optional payload parser. */
export function validateParse(parse: unknown, what: string): ((payload: unknown) => unknown) | null {
  if (parse === undefined) return null;
  if (typeof parse !== 'function') throw new UsageError(`${what}: parse must be a function (payload) => payload`);
  return parse as (payload: unknown) => unknown;
}

/**
 * A refused name or queue as a message quotes it: text cut as shownText cuts it, in
 * double quotes (JSON, so control characters show as escapes);
 * anything else by its value (a symbol cut too; a bigint past SHOWN_TEXT_MAX digits by its
 * size) or, for an object or a function, its type: at most about SHOWN_TEXT_MAX characters.
 */
export function shownName(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(shownText(value));
  // A bigint by its type alone: its decimal digits take time super-linear in its size (and 5n is no 5).
  if (typeof value === 'bigint') return 'a bigint';
  // A function's String() is its whole source; a symbol's, its whole description.
  if (typeof value === 'symbol') return shownText(String(value));
  return (typeof value === 'object' && value !== null) || typeof value === 'function' ? typeof value : String(value);
}

/** True when `name` is one a task or schedule can have (validateName takes it). */
export function isName(name: unknown): name is string {
  return typeof name === 'string' && NAME.test(name);
}

/**
 * What a refusal adds when the value is made of the allowed characters but starts with
 * '.', '_' or '-' (`-nightly`): the rule a reader of the character list would miss.
 */
function startHint(value: unknown): string {
  return typeof value === 'string' && /^[._-][A-Za-z0-9._-]{0,63}$/.test(value) ? ', starting with a letter or digit' : '';
}

/** Validates a task or schedule name. */
export function validateName(name: unknown, what: string): string {
  if (typeof name !== 'string' || !NAME.test(name)) {
    throw new UsageError(`${what} must be 1-64 letters, digits, '.', '_' or '-'${startHint(name)} (got ${shownName(name)})`);
  }
  return name;
}

/** Validates a queue name (CLI, enqueue and task options share it). */
export function validateQueue(queue: unknown, what = 'queue'): string {
  if (typeof queue !== 'string' || !QUEUE.test(queue)) {
    throw new UsageError(`${what} must be 1-64 letters, digits, '.', '_' or '-'${startHint(queue)} (got ${shownName(queue)})`);
  }
  return queue;
}

/**
 * Validates a list of queue names (`what` names the list): each as validateQueue takes
 * it (`what entry`), and none named twice, a UsageError naming the first repeat.
 */
export function validateQueueList(queues: readonly unknown[], what: string): string[] {
  const seen = new Set<string>();
  for (const queue of queues) {
    const name = validateQueue(queue, `${what} entry`);
    if (seen.has(name)) throw new UsageError(`${what} names queue '${name}' more than once; name each queue once`);
    seen.add(name);
  }
  return [...seen];
}

/** Validates maxAttempts: a whole number from 1 to 1000. */
export function validateMaxAttempts(value: unknown, what = 'maxAttempts'): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > MAX_ATTEMPTS_LIMIT) {
    throw new UsageError(`${what} must be a whole number from 1 to ${MAX_ATTEMPTS_LIMIT} (got ${shownName(value)})`);
  }
  return value;
}

/**
 * The queue/attempt/backoff/lease/limit options shared by tasks and schedules, validated
 * with defaults. A limited kind's queue defaults to `name`, its own.
 */
export function validateJobOptions(
  options: Pick<TaskOptions, 'queue' | 'maxAttempts' | 'backoff' | 'lease' | 'timeout' | 'concurrency'>,
  what: string,
  name: string,
): Pick<Task, 'queue' | 'maxAttempts' | 'backoff' | 'leaseMs' | 'timeoutMs' | 'concurrency'> {
  const concurrency = options.concurrency === undefined ? null : validateConcurrency(options.concurrency, `${what}: concurrency`);
  const queue =
    options.queue !== undefined ? validateQueue(options.queue, `${what}: queue`) : concurrency !== null ? validateQueue(name) : TASK_DEFAULTS.queue;
  const maxAttempts =
    options.maxAttempts === undefined ? TASK_DEFAULTS.maxAttempts : validateMaxAttempts(options.maxAttempts, `${what}: maxAttempts`);
  if (typeof options.backoff === 'object' && options.backoff !== null) refuseUnknownOptions(options.backoff, BACKOFF_KEYS, what, 'backoff.');
  const backoff = parseBackoff(options.backoff, `${what}: backoff`);
  const leaseMs = options.lease === undefined ? TASK_DEFAULTS.leaseMs : parseDuration(options.lease, `${what}: lease`);
  if (leaseMs < LEASE_MIN_MS || leaseMs > LEASE_MAX_MS) {
    throw new UsageError(`${what}: lease must be between 1s and 24h (got ${leaseMs}ms)`);
  }
  const timeoutMs = options.timeout === undefined ? null : parseDuration(options.timeout, `${what}: timeout`);
  if (timeoutMs !== null && (timeoutMs < 1 || timeoutMs > TIMEOUT_MAX_MS)) {
    throw new UsageError(`${what}: timeout must be between 1ms and 7d (got ${shownValue(options.timeout)})`);
  }
  return { queue, maxAttempts, backoff, leaseMs, timeoutMs, concurrency };
}

/** Validates a cluster-wide concurrency limit: a whole number from 1 to 10000. */
function validateConcurrency(value: unknown, what: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > CONCURRENCY_LIMIT_MAX) {
    throw new UsageError(`${what} must be a whole number from 1 to ${CONCURRENCY_LIMIT_MAX} (got ${shownName(value)})`);
  }
  return value;
}

/** True for anything defineTask returned, whichever copy of cronq made it. */
export function isTask(value: unknown): value is Task {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[TASK_BRAND] === true;
}
