import type { Logger } from '../logger.ts';
import { sleep } from '../runtime/wakeup.ts';
import type { Clock } from './clock.ts';
import type { Schedule } from './define.ts';
import { assessHealth } from './health.ts';
import type { SchedulerStore } from './schedulerStore.ts';

/** How often a running scheduler re-checks the health of schedules with `expect`. */
export const HEALTH_CHECK_EVERY_MS = 60_000;

/**
 * Watches the schedules that have `expect: { within }` and logs one `schedule_overdue`
 * (warn) when one becomes overdue and one `schedule_recovered` (info) when a later tick
 * completes, per incident and per daemon: every daemon running a scheduler logs its own.
 * A failed read is logged at debug and retried at the next check; state survives it.
 */
export class HealthWatch {
  private readonly overdue = new Map<string, boolean>();

  constructor(
    private readonly schedules: Schedule[],
    private readonly options: { store: SchedulerStore; clock: Clock; log: Logger; everyMs?: number },
  ) {}

  /** Checks every watched schedule once at the clock's now, logging what changed (nothing, while the clock reads no valid time). */
  async checkOnce(): Promise<void> {
    const now = this.options.clock.now();
    // A clock gone wrong (guardClock's invalid Date): a NaN instant is past no deadline, so every overdue schedule would read as recovered.
    if (!Number.isFinite(now.getTime())) return;
    for (const schedule of this.schedules) {
      if (!schedule.expect) continue;
      let health;
      try {
        health = await assessHealth(schedule, this.options.store, now);
      } catch (error) {
        this.options.log.debug({ event: 'schedule_health_failed', schedule: schedule.name, err: error }, 'could not read schedule health');
        continue;
      }
      const was = this.overdue.get(schedule.name) ?? false;
      this.overdue.set(schedule.name, health.overdue);
      if (health.overdue && !was) {
        this.options.log.warn(
          {
            event: 'schedule_overdue',
            schedule: schedule.name,
            expect_within_ms: health.expectWithinMs,
            last_success_at: health.lastSuccessAt?.toISOString() ?? null,
            overdue_since: health.overdueSince!.toISOString(),
          },
          `schedule ${schedule.name}: a tick's jobs have not all completed within its expect.within`,
        );
      } else if (!health.overdue && was) {
        this.options.log.info(
          { event: 'schedule_recovered', schedule: schedule.name, last_success_at: health.lastSuccessAt?.toISOString() ?? null },
          `schedule ${schedule.name}: a later tick completed; no longer overdue`,
        );
      }
    }
  }

  /** Checks now and then every `everyMs` (default 60 s) until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    if (!this.schedules.some((s) => s.expect)) return;
    const every = this.options.everyMs ?? HEALTH_CHECK_EVERY_MS;
    while (!signal.aborted) {
      await this.checkOnce();
      const wakeAt = this.options.clock.now().getTime() + every;
      // A clock gone wrong (no valid time) cannot time the wait: a timer does.
      if (Number.isFinite(wakeAt)) await this.options.clock.sleepUntil(new Date(wakeAt), signal);
      else await sleep(every, signal);
    }
  }
}
