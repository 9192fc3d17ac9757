import { describe, expect, it } from 'vitest';
import { defineSchedule, type ScheduleOptions } from '../src/index.ts';
import { DbHealth } from '../src/runtime/dbHealth.ts';
import { systemClock } from '../src/schedule/clock.ts';
import { Scheduler } from '../src/schedule/scheduler.ts';
import type { SchedulerStore } from '../src/schedule/schedulerStore.ts';
import { EventLog } from './support/events.ts';

/** A store whose every statement fails as an unreachable server's does. */
function unreachableStore(): SchedulerStore {
  return new Proxy({} as SchedulerStore, {
    get: () => async () => {
      throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:3306'), { code: 'ECONNREFUSED', fatal: true });
    },
  });
}

describe('the scheduler during a database outage', () => {
  it('reports the outage once through the daemon\'s database health, not a schedule_error per schedule per retry', async () => {
    const log = new EventLog('info');
    const health = new DbHealth(log.logger);
    const schedules = ['a', 'b'].map((name) =>
      defineSchedule({ name, cron: '* * * * * *', timezone: 'UTC', handle: () => undefined } as ScheduleOptions),
    );
    const scheduler = new Scheduler({ store: unreachableStore(), clock: systemClock, log: log.logger, schedules, dbHealth: health });
    scheduler.start();
    try {
      // Long enough for each ticker's backoff to retry its pass a few times.
      await new Promise((resolve) => setTimeout(resolve, 3_000));
    } finally {
      await scheduler.stop();
    }
    expect(health.healthy).toBe(false);
    expect(log.named('db_unavailable')).toHaveLength(1);
    expect(log.named('schedule_error')).toEqual([]);
    expect(log.events.filter((e) => e.level >= 50)).toEqual([]);
  });
});
