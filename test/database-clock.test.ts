import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { defineSchedule, type ScheduleOptions } from '../src/index.ts';
import { DatabaseClock } from '../src/schedule/databaseClock.ts';
import { ScheduleTicker } from '../src/schedule/ticker.ts';
import { Store } from '../src/store/index.ts';
import { useTestDatabase } from './support/db.ts';
import { EventLog } from './support/events.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_schedule_ticks'] });
const silent = pino({ level: 'silent' });
const HOUR = 3_600_000;

const minutely = () =>
  defineSchedule({ name: 'sweep', cron: '* * * * *', timezone: 'UTC', period: 'minute', catchUp: { mode: 'all', window: '2h' }, handle: () => undefined } as ScheduleOptions);

/** The latest ledger row's scheduled_at minus the database's clock, ms. */
async function latestTickAheadOfDatabaseMs(): Promise<number> {
  const [row] = await t.sql(
    "SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), MAX(scheduled_at)) / 1000 AS ahead FROM cronq_schedule_ticks WHERE schedule_name = 'sweep'",
  );
  return Number(row.ahead);
}

describe('the database clock', () => {
  it('a host whose clock runs an hour ahead ticks by the database: no tick still to come is enqueued or recorded', async () => {
    const store = new Store(t.database);
    // The schedule last ticked two minutes ago by the database's clock.
    await t.sql(
      "INSERT INTO cronq_schedule_ticks (schedule_name, scheduled_at, period_key, outcome, started_at, finished_at) VALUES ('sweep', UTC_TIMESTAMP() - INTERVAL 2 MINUTE, 'seed', 'enqueued', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
    );
    const clock = new DatabaseClock({ readNow: () => store.now(), log: silent, hostNow: () => Date.now() + HOUR });
    await clock.sync();
    expect(Math.abs(clock.offsetMs + HOUR)).toBeLessThan(1_000);
    await new ScheduleTicker(minutely(), { store, clock, log: silent, claimedBy: 'test:1' }).catchUp(clock.now());
    expect(await latestTickAheadOfDatabaseMs()).toBeLessThanOrEqual(1_000);
    // The minutes due since are enqueued, one job each; none of the next hour's.
    const [{ jobs }] = await t.sql("SELECT COUNT(*) AS jobs FROM cronq_jobs WHERE schedule_name = 'sweep'");
    expect(Number(jobs)).toBeGreaterThanOrEqual(1);
    expect(Number(jobs)).toBeLessThanOrEqual(3);
  });

  it('sleeps until a time by the database clock, not by the host clock', async () => {
    const store = new Store(t.database);
    const clock = new DatabaseClock({ readNow: () => store.now(), log: silent, hostNow: () => Date.now() + HOUR });
    await clock.sync();
    const started = Date.now();
    // 300 ms ahead by the database clock: an hour in the past by the host's.
    await clock.sleepUntil(new Date(clock.now().getTime() + 300), new AbortController().signal);
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
  });

  it('logs clock_skew once for a skew that lasts, and clock_skew_cleared when the clocks agree again', async () => {
    const store = new Store(t.database);
    const log = new EventLog();
    let skew = 5_000;
    const clock = new DatabaseClock({ readNow: () => store.now(), log: log.logger, hostNow: () => Date.now() + skew });
    await clock.sync();
    await clock.sync();
    expect(log.named('clock_skew')).toHaveLength(1);
    expect(log.named('clock_skew')[0].offset_ms).toBeLessThan(-4_000);
    expect(log.named('clock_skew')[0].msg).toMatch(/ahead of the database's/);
    skew = 0;
    await clock.sync();
    expect(log.named('clock_skew_cleared')).toHaveLength(1);
    expect(log.named('clock_skew')).toHaveLength(1);
  });

  it('keeps its offset through a failed reading', async () => {
    let fail = false;
    const clock = new DatabaseClock({
      readNow: async () => {
        if (fail) throw new Error('connection lost');
        return new Date(Date.now() - HOUR);
      },
      log: silent,
      everyMs: 10,
    });
    await clock.sync();
    fail = true;
    const stop = new AbortController();
    const loop = clock.run(stop.signal);
    await new Promise((resolve) => setTimeout(resolve, 50));
    stop.abort();
    await loop;
    expect(Math.abs(clock.offsetMs + HOUR)).toBeLessThan(100);
  });
});
