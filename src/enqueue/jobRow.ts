/**
 * A job as callers write it, checked once at the edge and turned into the row the
 * store inserts.
 */
import { MAX_KEY_LENGTH } from '../store/index.ts';
import { isInstance, UsageError } from '../errors.ts';
import type { NewJobRow } from '../store/index.ts';
import { charLength, longerThanChars } from '../runtime/chars.ts';
import { errorLine } from '../runtime/errorText.ts';
import { shownText } from '../shownText.ts';
import { refuseUnknownOptions, shownName, TASK_DEFAULTS, validateMaxAttempts, validateName, validateQueue } from '../tasks/define.ts';
import type { TaskRegistry } from '../tasks/registry.ts';

/** A job to enqueue, as callers write it. */
export interface EnqueueJob {
  /**
   * The task or schedule whose handler runs it: refused (UsageError) when no task could be
   * named so (1-64 letters, digits, '.', '_' or '-', starting with a letter or digit), and,
   * unless allowUnknownKind, when no task of this instance has it.
   */
  kind: string;
  /** Unique across all jobs: the same key always means the same job. */
  key: string;
  /** Stored as JSON.stringify writes it (`{}` when left out): a UsageError when JSON cannot write it, EnqueueRefusedError when the database will not take it. */
  payload?: unknown;
  /** Defaults to the task's queue, else 'default'. */
  queue?: string;
  /** Not before this instant. */
  runAt?: Date;
  /** Defaults to the task's maxAttempts, else 5. */
  maxAttempts?: number;
}

/**
 * Fields of a job row that only the scheduler writes: a job enqueued by hand that carried
 * them would count as its schedule's job for that period (the overlap check, schedule
 * health, `cronq schedules`). Refused when a caller sets them (EnqueueJob has none).
 */
const SCHEDULER_FIELDS = ['scheduleName', 'periodKey', 'scheduledAt'] as const;

/** Every field of EnqueueJob: any other is refused (toJobRow). */
const JOB_FIELDS = Object.keys({ kind: true, key: true, payload: true, queue: true, runAt: true, maxAttempts: true } satisfies Record<keyof EnqueueJob, true>);

/** A job's key and payload as the store takes them, or why it cannot take them. */
export type JobContent = { payloadJson: string } | { problem: string; field: 'key' | 'payload' };

/**
 * The one check of what every job row holds, for the API (toJobRow) and for fan-outs
 * (schedule/fanout.ts): the key fits the column, and the payload (undefined: `{}`) can be
 * written as JSON. `problem` is one line of at most about 300 characters, without the
 * payload.
 */
export function checkJobContent(key: string, payload: unknown): JobContent {
  if (longerThanChars(key, MAX_KEY_LENGTH)) return { field: 'key', problem: `job key is ${charLength(key)} characters long; at most ${MAX_KEY_LENGTH} are allowed` };
  const cut = loneSurrogateProblem(key, 'job key');
  if (cut) return { field: 'key', problem: cut };
  let payloadJson: string | undefined;
  try {
    payloadJson = JSON.stringify(payload === undefined ? {} : payload);
  } catch (error) {
    // JSON.stringify recurses: a payload nested some thousands deep overflows the stack.
    // Guarded: a toJSON may throw anything, a revoked Proxy whose type cannot be asked included.
    if (isInstance(error, RangeError) && /call stack/i.test(error.message)) {
      return { field: 'payload', problem: 'payload is JSON nested too deeply to write (thousands of levels), deeper than the database accepts (MariaDB takes 32, MySQL 100)' };
    }
    return { field: 'payload', problem: `payload cannot be stored as JSON: ${errorLine(error, 200)}` };
  }
  return payloadJson === undefined ? { field: 'payload', problem: 'payload cannot be stored as JSON' } : { payloadJson };
}

/** A lone high surrogate, or a low one with no high half before it. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Why `text` cannot be a key or kind, or null: a lone UTF-16 surrogate. The driver
 * would write it as U+FFFD, making it the job of every other key cut the same way
 * (keys compare byte for byte), so it is refused instead.
 */
function loneSurrogateProblem(text: string, what: string): string | null {
  const at = LONE_SURROGATE.exec(text)?.index;
  return at === undefined ? null : `${what} holds a lone UTF-16 surrogate (half of a character, such as a cut emoji) at character ${at}, which is not valid Unicode`;
}


/**
 * Validates a job at the edge and fills in its task's defaults. Throws UsageError
 * naming the bad field; nothing reaches the database unless this passes.
 */
export function toJobRow(job: EnqueueJob, tasks: TaskRegistry): NewJobRow {
  if (typeof job !== 'object' || job === null) throw new UsageError('a job must be an object');
  if (typeof job.kind !== 'string' || job.kind.length === 0) {
    throw new UsageError(`job kind must be a task's name, a non-empty string (got ${typeof job.kind === 'string' ? 'an empty string' : typeof job.kind})`);
  }
  const task = tasks.get(job.kind);
  // A kind no task can be named (task names are validateName's) is run by no daemon, even
  // with allowUnknownKind: it would wait out the unknown-kind grace and go dead.
  if (!task) validateName(job.kind, "job kind (a task's name)");
  if (typeof job.key !== 'string' || job.key.length === 0) {
    throw new UsageError(job.key === undefined || job.key === '' ? 'job key is missing' : `job key must be a string (got ${typeof job.key})`);
  }
  const content = checkJobContent(job.key, job.payload);
  if ('problem' in content) throw new UsageError(content.field === 'key' ? content.problem : `job ${JSON.stringify(job.key)}: ${content.problem}`);
  const { payloadJson } = content;
  if (job.runAt !== undefined && (!(job.runAt instanceof Date) || Number.isNaN(job.runAt.getTime()))) throw new UsageError(`runAt of ${job.key} is not a valid date`);
  const schedulerField = SCHEDULER_FIELDS.find((field) => (job as unknown as Record<string, unknown>)[field] !== undefined);
  if (schedulerField) {
    throw new UsageError(`job ${JSON.stringify(job.key)}: ${schedulerField} is written only by the scheduler; a job enqueued by hand cannot stand for a schedule's period`);
  }
  // A misspelt field (`runat`, `maxAttempt`) would otherwise be dropped: due now, default attempts.
  // (Named only once one is found: this runs for every row of an enqueueMany.)
  if (Object.keys(job).some((field) => !JOB_FIELDS.includes(field))) refuseUnknownOptions(job, JOB_FIELDS, `job ${JSON.stringify(shownText(job.key))}`, '', 'field');
  if (task && task.concurrency !== null && job.queue !== undefined && job.queue !== task.queue) {
    // Its limit holds per queue: in another queue the kind's jobs would run unlimited.
    throw new UsageError(`job ${JSON.stringify(job.key)}: kind '${task.name}' has a concurrency limit and runs only in its own queue '${task.queue}' (got queue ${shownName(job.queue)})`);
  }
  return {
    queue: job.queue === undefined ? (task?.queue ?? TASK_DEFAULTS.queue) : validateQueue(job.queue),
    kind: job.kind,
    key: job.key,
    payloadJson,
    maxAttempts: job.maxAttempts === undefined ? (task?.maxAttempts ?? TASK_DEFAULTS.maxAttempts) : validateMaxAttempts(job.maxAttempts),
    runAt: job.runAt ?? null,
    scheduleName: null,
    periodKey: null,
    scheduledAt: null,
  };
}
