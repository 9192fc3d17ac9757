import { retryDelayMs } from '../runtime/backoff.ts';
import { errorText } from '../runtime/errorText.ts';
import type { Failure } from '../store/index.ts';
import type { Task } from '../tasks/define.ts';

/**
 * What a handler's error means for its job, as `failIfLeased` records it: the error's
 * text (bounded, secrets masked), whether retrying cannot help, and the delay before
 * the next attempt by the task's backoff (0 without a task: such a job only goes dead).
 */
export function failureOf(error: unknown, task: Task | undefined, attempt: number): Failure {
  return {
    error: errorText(error),
    permanent: isPermanent(error),
    retryInMs: task ? retryDelayMs(task.backoff, attempt) : 0,
  };
}

/**
 * True for errors that mean "retrying cannot help": cronq's PermanentError from any
 * copy of the package (checked by name, since a schedule file may load its own copy).
 * Never throws, whatever was thrown (a Proxy, a throwing getter).
 */
export function isPermanent(error: unknown): boolean {
  try {
    return (error as { name?: string })?.name === 'PermanentError';
  } catch {
    return false;
  }
}
