import { formatDuration } from '../duration.ts';
import { JobTimeoutError } from '../errors.ts';
import { WORK_DONE, type Handler, type JobContext, type WorkDoneMark } from './job.ts';

/**
 * Wraps a handler so an attempt longer than `timeoutMs` has its signal aborted with a
 * JobTimeoutError and fails with it, whether or not the handler honours the signal: the
 * worker slot is freed then. A handler that ignores the signal keeps running in the
 * background; whatever it returns or registers later is discarded. The inner signal also
 * follows the outer one (lease lost, shutdown), and the inner ctx passes on ctx[WORK_DONE].
 */
export function withTimeout(inner: Handler, timeoutMs: number): Handler {
  return async (job, ctx) => {
    const abort = new AbortController();
    const forward = () => abort.abort(ctx.signal.reason);
    if (ctx.signal.aborted) forward();
    ctx.signal.addEventListener('abort', forward, { once: true });
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const error = new JobTimeoutError(`timed out after ${formatDuration(timeoutMs)}`);
        abort.abort(error);
        reject(error);
      }, timeoutMs);
    });
    try {
      const innerCtx: JobContext = { signal: abort.signal, log: ctx.log, effect: ctx.effect };
      // Passed on, not enumerable as on the outer ctx: this wrapper does nothing more once inner returns.
      const workDone = (ctx as JobContext & WorkDoneMark)[WORK_DONE];
      if (workDone) Object.defineProperty(innerCtx, WORK_DONE, { value: () => workDone.call(ctx) });
      return await Promise.race([Promise.resolve(inner(job, innerCtx)), timedOut]);
    } finally {
      clearTimeout(timer);
      ctx.signal.removeEventListener('abort', forward);
    }
  };
}
