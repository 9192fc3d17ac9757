/**
 * A fan-out whose jobs() hangs every time it is asked (an API that never answers): its
 * tick is abandoned at each lease's end and resumed by the next pass. Each abandonment
 * counts as a failed attempt, so the tick is recorded as failed after a bounded number of
 * them and the schedule's later ticks run, instead of every pass dying on the same tick.
 * And one whose jobs() never ends (it yields for ever): its lease is renewed by every
 * entity, so it is stopped by a bound on a tick's entities instead.
 */
import { describe, expect, it } from 'vitest';
import { defineSchedule } from '../src/index.ts';
import { systemClock } from '../src/schedule/clock.ts';
import { ScheduleTicker } from '../src/schedule/ticker.ts';
import { Store } from '../src/store/index.ts';
import { useTestDatabase } from './support/db.ts';
import { EventLog } from './support/events.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_schedule_ticks'] });

const T1 = new Date('2030-01-01T10:01:00.100Z');
const T2 = new Date('2030-01-01T10:02:00.100Z');

describe('a fan-out whose jobs() hangs every time', () => {
  it('is abandoned a bounded number of times, then its tick is recorded as failed and the next tick runs', async () => {
    let calls = 0;
    const schedule = defineSchedule({
      name: 'stuck',
      cron: '* * * * *',
      timezone: 'UTC',
      handle() {},
      async *jobs({ periodKey }) {
        calls += 1;
        if (periodKey === '2030-01-01T10:01:00Z') await new Promise(() => undefined); // never settles
        yield { key: 'e' };
      },
    });
    await t.sql(
      "INSERT INTO cronq_schedule_ticks (schedule_name, scheduled_at, period_key, outcome, started_at, finished_at) VALUES ('stuck', '2030-01-01 10:00:00', 'seed', 'enqueued', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
    );
    const log = new EventLog('info');
    const store = new Store(t.database);
    const retry = { attempts: 3, backoff: { baseMs: 1, maxMs: 1 } };
    const ticker = new ScheduleTicker(schedule, { store, clock: systemClock, log: log.logger, claimedBy: 'a:1', fanoutLeaseMs: 300, fanoutRetry: retry });

    const errors: string[] = [];
    for (let pass = 0; pass < 6; pass++) {
      ticker['resumeCheckedAt'] = Number.NEGATIVE_INFINITY; // as run() does after a failed pass
      try {
        await ticker.catchUp(T2);
        break;
      } catch (error) {
        errors.push((error as Error).name);
      }
    }
    expect(errors).toEqual(['FanoutAbandonedError', 'FanoutAbandonedError']);
    const ticks = await t.sql("SELECT DATE_FORMAT(scheduled_at, '%H:%i') AS at, outcome, note FROM cronq_schedule_ticks WHERE schedule_name = 'stuck' ORDER BY scheduled_at");
    expect(ticks.map((r) => [r.at, r.outcome])).toEqual([
      ['10:00', 'enqueued'],
      ['10:01', 'failed'],
      ['10:02', 'enqueued'],
    ]);
    expect(ticks[1].note).toMatch(/^failed after 3 attempts: the fan-out made no progress for 300 ms/);
    expect(log.named('tick_failed')).toHaveLength(1);
    expect((await t.sql("SELECT job_key FROM cronq_jobs WHERE schedule_name = 'stuck'")).map((r) => r.job_key)).toEqual(['stuck:e:2030-01-01T10:02:00Z']);
    expect(calls).toBe(4);
  }, 30_000);
});

describe('a fan-out whose jobs() never ends', () => {
  it('is stopped at the most entities a tick takes: the tick is failed at once, not retried, with what it wrote, and the next tick runs', async () => {
    let calls = 0;
    const schedule = defineSchedule({
      name: 'endless',
      cron: '* * * * *',
      timezone: 'UTC',
      handle() {},
      async *jobs({ periodKey }) {
        calls += 1;
        if (periodKey !== '2030-01-01T10:01:00Z') {
          yield { key: 'e' };
          return;
        }
        for (let i = 0; ; i++) yield { key: `k${i}` }; // a cursor that never runs out
      },
    });
    await t.sql(
      "INSERT INTO cronq_schedule_ticks (schedule_name, scheduled_at, period_key, outcome, started_at, finished_at) VALUES ('endless', '2030-01-01 10:00:00', 'seed', 'enqueued', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
    );
    const log = new EventLog('info');
    const ticker = new ScheduleTicker(schedule, { store: new Store(t.database), clock: systemClock, log: log.logger, claimedBy: 'a:1', maxTickEntities: 2_500 });

    await ticker.catchUp(T2);
    const ticks = await t.sql(
      "SELECT DATE_FORMAT(scheduled_at, '%H:%i') AS at, outcome, jobs_enqueued, note FROM cronq_schedule_ticks WHERE schedule_name = 'endless' ORDER BY scheduled_at",
    );
    expect(ticks.map((r) => [r.at, r.outcome, Number(r.jobs_enqueued)])).toEqual([
      ['10:00', 'enqueued', 0],
      ['10:01', 'failed', 2_500],
      ['10:02', 'enqueued', 1],
    ]);
    expect(ticks[1].note).toBe('failed after 1 attempt: FanoutTooLargeError: jobs() yielded more than 2,500 entities; the fan-out was stopped there');
    expect(log.named('schedule_tick_retry')).toEqual([]);
    expect(log.named('tick_failed')).toHaveLength(1);
    expect(calls).toBe(2);
    const [count] = await t.sql("SELECT COUNT(*) AS n FROM cronq_jobs WHERE schedule_name = 'endless' AND period_key = '2030-01-01T10:01:00Z'");
    expect(Number(count.n)).toBe(2_500);
  }, 30_000);
});
