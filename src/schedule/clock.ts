/**
 * The scheduler's view of time, injectable so a test can drive a whole simulated year
 * event to event instead of waiting for it.
 */
export interface Clock {
  now(): Date;
  /**
   * Resolves at `at` or soon after, or at once when `signal` aborts (never rejects).
   * A stalled process resolves late; the scheduler treats the ticks it missed as catch-up.
   */
  sleepUntil(at: Date, signal: AbortSignal): Promise<void>;
}

/** setTimeout caps delays at 2^31-1 ms (~24.8 days); longer sleeps go round in steps. */
const MAX_TIMER_MS = 2_147_483_647;

/** The host's clock. */
export const systemClock: Clock = {
  now: () => new Date(),
  sleepUntil: (at, signal) => sleepUntilBy(Date.now, at, signal),
};

/**
 * Resolves once `now()` (epoch ms) reaches `at`, or at once when `signal` aborts (never
 * rejects). The wait is measured against `now` when armed and again on waking (a timer
 * that woke early, before `now()` reached `at`, is armed again), so a clock whose reading
 * moves meanwhile (a database clock read again) never wakes the caller early; `watch`,
 * when given, registers a callback the clock calls when its reading moves, so the wait
 * is measured again at once and a clock moved forward wakes the caller on time. An
 * `at` or a clock that is not a number resolves at once.
 */
export function sleepUntilBy(now: () => number, at: Date, signal: AbortSignal, watch?: (rearm: () => void) => () => void): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    let timer: NodeJS.Timeout;
    let unwatch: (() => void) | undefined;
    const done = () => {
      clearTimeout(timer);
      unwatch?.();
      signal.removeEventListener('abort', done);
      resolve();
    };
    const arm = () => {
      clearTimeout(timer);
      const wait = at.getTime() - now();
      // Not a number (an invalid `at`, a clock gone wrong): nothing to wait for, rather than a timer re-armed every millisecond.
      if (!(wait > 0)) return done();
      timer = setTimeout(arm, Math.min(wait, MAX_TIMER_MS));
    };
    signal.addEventListener('abort', done, { once: true });
    unwatch = watch?.(arm);
    arm();
  });
}
