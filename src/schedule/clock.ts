/**
 * The scheduler's view of time, injectable so a test can drive a whole simulated year
 * event to event instead of waiting for it.
 */
export interface Clock {
  /**
   * The current instant. Called on every scheduler pass: it must return a valid Date
   * promptly; one that throws or returns anything else fails that pass (retried with
   * backoff, logged once as `clock_error`), never the process.
   */
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

/**
 * Wraps an app's clock (createCronq's `clock`) so that nothing it does wrong reaches the
 * scheduler's loops as an exception, which nothing there catches (the process ended on an
 * unhandled rejection): a now() that throws, or returns anything but a valid Date, reads
 * as an invalid Date (a failed pass, its backoff timed by a timer: ScheduleTicker.run),
 * and a sleepUntil() that throws or rejects waits for `at` on the host's clock instead
 * (or resolves, once `signal` has aborted: that rejection is no failure).
 * `onError` hears of each method's first such failure.
 */
export function guardClock(clock: Clock, onError: (method: 'now' | 'sleepUntil', error: unknown) => void): Clock {
  const reported = new Set<string>();
  const report = (method: 'now' | 'sleepUntil', error: unknown) => {
    if (reported.has(method)) return;
    reported.add(method);
    onError(method, error);
  };
  return {
    now() {
      let now: unknown;
      try {
        now = clock.now();
      } catch (error) {
        report('now', error);
        return new Date(Number.NaN);
      }
      if (now instanceof Date && Number.isFinite(now.getTime())) return now;
      const given = now instanceof Date ? 'an invalid Date' : now === null ? 'null' : typeof now;
      report('now', new TypeError(`clock.now() returned ${given}, not a valid Date`));
      return new Date(Number.NaN);
    },
    async sleepUntil(at, signal) {
      try {
        await clock.sleepUntil(at, signal);
      } catch (error) {
        // Rejecting once `signal` aborts (as timers/promises does) is the stop, not the clock gone wrong.
        if (signal.aborted) return;
        report('sleepUntil', error);
        await sleepUntilBy(Date.now, at, signal);
      }
    },
  };
}
