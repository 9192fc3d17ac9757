import type { Handler, JobContext } from '../tasks/job.ts';

/** The attempt ran longer than its schedule's `timeout`. Retryable, like any handler error. */
export class TimeoutError extends Error {
  override name = 'TimeoutError';
}

/**
 * Wraps a handler so an attempt longer than `timeoutMs` has its signal aborted and
 * fails with TimeoutError, whether or not the handler honours the signal. The inner
 * signal also follows the outer one (lease lost, shutdown).
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
        const error = new TimeoutError(`timed out after ${timeoutMs} ms`);
        abort.abort(error);
        reject(error);
      }, timeoutMs);
    });
    try {
      const innerCtx: JobContext = { ...ctx, signal: abort.signal };
      return await Promise.race([Promise.resolve(inner(job, innerCtx)), timedOut]);
    } finally {
      clearTimeout(timer);
      ctx.signal.removeEventListener('abort', forward);
    }
  };
}
