import { boundedText, errorText, STACK_TEXT_MAX } from '../runtime/errorText.ts';
import type { Logger } from '../logger.ts';
import { currentJob, trackRunningJobs } from './runningJob.ts';

/**
 * Installs process handlers so that an `unhandledRejection` or `uncaughtException`
 * (a handler's floating promise, a throw in its timer) is logged as one JSON event,
 * `unhandled_rejection` or `uncaught_exception`, naming the job whose handler it came
 * from when known (job_id, kind, key), and the process keeps running instead of dying
 * with a plain stack on stderr. The job itself is unaffected: its handler's own outcome
 * decides it. Returns a function that removes the handlers (and the job tracking).
 *
 * For `cronq start`, and for applications that opt in (CronqOptions.catchUncaught):
 * replacing Node's default (exit) is the process owner's decision.
 */
export function catchUncaught(log: Logger): () => void {
  const report = (event: string, message: string) => (error: unknown) => {
    try {
      const job = currentJob();
      const stack = log.isLevelEnabled('debug') ? stackOf(error) : undefined;
      log.error({ event, ...job, error: errorText(error), ...(stack ? { stack } : {}) }, message);
    } catch {
      // Logging must not throw from here: that would be the crash this prevents.
    }
  };
  const onRejection = report('unhandled_rejection', 'unhandled promise rejection; the daemon keeps running');
  const onException = report('uncaught_exception', 'uncaught exception; the daemon keeps running');
  trackRunningJobs(true);
  process.on('unhandledRejection', onRejection);
  process.on('uncaughtException', onException);
  return () => {
    process.off('unhandledRejection', onRejection);
    process.off('uncaughtException', onException);
    trackRunningJobs(false);
  };
}

function stackOf(error: unknown): string | undefined {
  try {
    const stack = (error as { stack?: unknown })?.stack;
    return typeof stack === 'string' ? boundedText(stack, STACK_TEXT_MAX) : undefined;
  } catch {
    return undefined;
  }
}
