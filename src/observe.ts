/**
 * The engine's outward-facing hook: what happened, as numbers, for metrics. The engine
 * calls an Observer at the same points where it logs the matching event, and knows
 * nothing about what listens (Prometheus, StatsD, a test).
 */

/**
 * Receives engine events. Calls are synchronous and made on the engine's hot paths:
 * an implementation must return quickly and should not throw (createCronq guards it: an
 * exception is logged as `observer_error`, once per method, never fatal).
 */
export interface Observer {
  /** `count` jobs were claimed in one claim (each also logs `job_claimed`). */
  jobClaimed(count: number): void;
  /** A job of `kind` was marked done; `seconds` from the run's start to its final write (`job_completed`). */
  jobCompleted(kind: string, seconds: number): void;
  /** A handler failure of `kind` was recorded; `willRetry` false when it went dead (`job_failed`). */
  jobFailed(kind: string, willRetry: boolean): void;
  /** A job of `kind` went dead through a recorded failure (`job_dead`; lease-expiry deaths come through leasesRecovered). */
  jobDead(kind: string): void;
  /** A running job of `kind` lost its lease and its result was discarded (`job_lease_lost`). */
  leaseLost(kind: string): void;
  /** One recovery pass returned `returned` expired leases to ready and moved `dead` to dead (`leases_recovered`). */
  leasesRecovered(returned: number, dead: number): void;
  /** `count` jobs were handed back on shutdown (`claim_released_on_shutdown`, `job_released_on_shutdown`). */
  shutdownReleased(count: number): void;
  /** A tick of `schedule` was fanned out `latenessMs` after its instant, enqueuing `enqueued` new jobs (`schedule_tick`). */
  tick(schedule: string, latenessMs: number, enqueued: number): void;
  /** A tick of `schedule` kept failing and was recorded as failed (`tick_failed`). */
  tickFailed(schedule: string): void;
}

/** An Observer that does nothing: the default when none is given. */
export const noopObserver: Observer = Object.freeze({
  jobClaimed() {},
  jobCompleted() {},
  jobFailed() {},
  jobDead() {},
  leaseLost() {},
  leasesRecovered() {},
  shutdownReleased() {},
  tick() {},
  tickFailed() {},
});

/**
 * Wraps `observer` so that an exception from any of its methods is passed to `onError`
 * (once per method name) instead of reaching the engine. Returns noopObserver for undefined.
 */
export function guardObserver(observer: Partial<Observer> | undefined, onError: (method: string, error: unknown) => void): Observer {
  if (!observer || observer === noopObserver) return noopObserver;
  const reported = new Set<string>();
  const guarded = {} as Record<keyof Observer, (...args: never[]) => void>;
  for (const method of Object.keys(noopObserver) as Array<keyof Observer>) {
    // A method the observer leaves out is not told (an observer of completions alone).
    if (typeof observer[method] !== 'function') {
      guarded[method] = noopObserver[method] as (...args: never[]) => void;
      continue;
    }
    guarded[method] = (...args: never[]) => {
      try {
        (observer[method] as (...a: never[]) => void).apply(observer, args);
      } catch (error) {
        if (!reported.has(method)) {
          reported.add(method);
          onError(method, error);
        }
      }
    };
  }
  return guarded as unknown as Observer;
}
