import { AsyncLocalStorage } from 'node:async_hooks';

/** The job a piece of code runs for, as logged with an error that escaped its handler. */
export interface RunningJob {
  job_id: number;
  kind: string;
  key: string;
}

/**
 * Which job's handler started the code now running, carried through its timers,
 * promises and callbacks (AsyncLocalStorage), so an unhandled rejection or uncaught
 * exception can name the job it came from.
 *
 * Off until `trackRunningJobs()` (the crash guard turns it on): tracking makes every
 * promise a little dearer, which a process without the guard has no use for.
 */
const storage = new AsyncLocalStorage<RunningJob>();
let tracking = false;

export function trackRunningJobs(on = true): void {
  tracking = on;
}

/** Calls `task.handle(job, ctx)` as code of `job` when tracking is on; else just calls it, allocating nothing. */
export function runAsJob<J extends { id: number; kind: string; key: string }, C>(
  job: J,
  task: { handle: (job: J, ctx: C) => unknown },
  ctx: C,
): unknown {
  return tracking ? storage.run({ job_id: job.id, kind: job.kind, key: job.key }, () => task.handle(job, ctx)) : task.handle(job, ctx);
}

/** The job whose handler started the code now running, if tracking is on and there is one. */
export function currentJob(): RunningJob | undefined {
  return storage.getStore();
}
