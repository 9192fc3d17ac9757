import { PermanentError } from '../errors.ts';
import { errorText } from '../runtime/errorText.ts';
import type { ClaimedJob } from '../store/index.ts';
import type { Task } from '../tasks/define.ts';

/**
 * The payload to hand the handler: the stored JSON, parsed, then through the task's
 * `parse` if it has one. A payload that is not JSON, or that `parse` rejects, can never
 * succeed: that comes back as a PermanentError (the job goes dead at once). Never throws.
 */
export function decodePayload(job: ClaimedJob, task: Task): { ok: true; value: unknown } | { ok: false; error: PermanentError } {
  let payload: unknown;
  try {
    payload = JSON.parse(job.payloadText);
  } catch {
    return { ok: false, error: new PermanentError('payload is not valid JSON') };
  }
  if (!task.parse) return { ok: true, value: payload };
  try {
    return { ok: true, value: task.parse(payload) };
  } catch (error) {
    return { ok: false, error: new PermanentError(`payload rejected by parse: ${errorText(error)}`) };
  }
}
