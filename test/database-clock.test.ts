import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { defineSchedule, type ScheduleOptions } from '../src/index.ts';
import { DatabaseClock } from '../src/schedule/databaseClock.ts';
import { ScheduleTicker } from '../src/schedule/ticker.ts';
import { Scheduler } from '../src/schedule/scheduler.ts';
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
    const clock = new DatabaseClock({ readNow: () => store.now(), log: silent, wallNow: () => Date.now() + HOUR });
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
    const clock = new DatabaseClock({ readNow: () => store.now(), log: silent, wallNow: () => Date.now() + HOUR });
    await clock.sync();
    const started = Date.now();
    // 300 ms ahead by the database clock: an hour in the past by the host's.
    await clock.sleepUntil(new Date(clock.now().getTime() + 300), new AbortController().signal);
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
  });

  it('a host clock stepped forward or back after the reading moves nothing: the time is carried by a monotonic clock', async () => {
    const store = new Store(t.database);
    let step = 0;
    const clock = new DatabaseClock({ readNow: () => store.now(), log: silent, wallNow: () => Date.now() + step });
    await clock.sync();
    for (step of [5 * 60_000, -20 * 60_000]) {
      const [{ ahead }] = await t.sql('SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), ?) / 1000 AS ahead', [clock.now().toISOString().replace('T', ' ').replace('Z', '')]);
      expect(Math.abs(Number(ahead))).toBeLessThan(1_000);
    }
  });

  it('logs clock_skew once for a skew that lasts, none for jitter around the threshold, and clock_skew_cleared once the clocks agree', async () => {
    const store = new Store(t.database);
    const log = new EventLog();
    let skew = 2_300;
    const clock = new DatabaseClock({ readNow: () => store.now(), log: log.logger, wallNow: () => Date.now() + skew });
    await clock.sync();
    await clock.sync();
    expect(log.named('clock_skew')).toHaveLength(1);
    expect(log.named('clock_skew')[0].offset_ms).toBeLessThan(-2_000);
    expect(log.named('clock_skew')[0].msg).toMatch(/^this host's clock is \d+s ahead of the database's/);
    // Jitter around the threshold: neither cleared nor warned again.
    for (skew of [1_900, 2_200, 1_800, 2_300]) await clock.sync();
    expect(log.named('clock_skew')).toHaveLength(1);
    expect(log.named('clock_skew_cleared')).toHaveLength(0);
    // Growing by another threshold's worth: said again.
    skew = 5_000;
    await clock.sync();
    expect(log.named('clock_skew')).toHaveLength(2);
    skew = 0;
    await clock.sync();
    expect(log.named('clock_skew_cleared')).toHaveLength(1);
    expect(log.named('clock_skew')).toHaveLength(2);
  });

  it('keeps a precise reading over a slower one, and a slow first reading only until a quicker one', async () => {
    let delayMs = 0;
    let dbAhead = 0;
    let monotonic = 0;
    const clock = new DatabaseClock({
      // A database answering after delayMs of the monotonic clock, its clock read on arrival.
      readNow: async () => {
        monotonic += delayMs;
        return new Date(1_800_000_000_000 + monotonic + dbAhead);
      },
      log: silent,
      wallNow: () => 1_800_000_000_000 + monotonic,
      monotonicNow: () => monotonic,
    });
    delayMs = 4_000; // a slow first reading is used: nothing better yet
    expect(await clock.sync()).toBe(true);
    expect(clock.roundTripMs).toBe(4_000);
    delayMs = 10;
    expect(await clock.sync()).toBe(true);
    expect(clock.roundTripMs).toBe(10);
    delayMs = 3_000;
    dbAhead = 60_000;
    expect(await clock.sync()).toBe(false); // slower than the precise one in use
    expect(clock.offsetMs).toBe(0);
  });

  it('a reading that moves the clock back mid-sleep never wakes the sleeper before its time', async () => {
    let behindMs = 0;
    const clock = new DatabaseClock({ readNow: async () => new Date(Date.now() - behindMs), log: silent });
    await clock.sync();
    const at = new Date(clock.now().getTime() + 300);
    const woke = clock.sleepUntil(at, new AbortController().signal).then(() => clock.now().getTime());
    await new Promise((resolve) => setTimeout(resolve, 50));
    behindMs = 200;
    await clock.sync();
    expect(await woke).toBeGreaterThanOrEqual(at.getTime());
  });

  it('a reading that moves the clock forward mid-sleep wakes the sleeper at its time, not at the old timer', async () => {
    let aheadMs = 0;
    const clock = new DatabaseClock({ readNow: async () => new Date(Date.now() + aheadMs), log: silent });
    await clock.sync();
    const at = new Date(clock.now().getTime() + 3_000);
    const started = Date.now();
    const woke = clock.sleepUntil(at, new AbortController().signal);
    await new Promise((resolve) => setTimeout(resolve, 50));
    aheadMs = 2_900; // the database's clock was 2.9 s further on than the last reading said
    await clock.sync();
    await woke;
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(clock.now().getTime()).toBeGreaterThanOrEqual(at.getTime());
  });

  it('refuses a reading that is no valid time, keeping the one in use, and a sleep on it never spins', async () => {
    let reading: Date = new Date(Date.now() + HOUR);
    const clock = new DatabaseClock({ readNow: async () => reading, log: silent });
    await clock.sync();
    reading = new Date('garbage');
    await expect(clock.sync()).rejects.toThrow(/no valid time/);
    expect(Math.abs(clock.now().getTime() - (Date.now() + HOUR))).toBeLessThan(1_000);
    // An invalid instant has nothing to wait for: resolved at once, not a timer re-armed every millisecond.
    await clock.sleepUntil(new Date(Number.NaN), new AbortController().signal);
  });

  it('a precise reading gives way to a slow one once it is ten minutes old', async () => {
    let monotonic = 0;
    let delayMs = 10;
    const clock = new DatabaseClock({
      readNow: async () => {
        monotonic += delayMs;
        return new Date(1_800_000_000_000 + monotonic);
      },
      log: silent,
      wallNow: () => 1_800_000_000_000 + monotonic,
      monotonicNow: () => monotonic,
    });
    await clock.sync();
    delayMs = 1_500;
    expect(await clock.sync()).toBe(false);
    monotonic += 10 * 60_000;
    expect(await clock.sync()).toBe(true);
  });

  it('never runs ahead of the database, however slow the reading: a reading stands for the moment it arrived', async () => {
    let monotonic = 0;
    const truth = () => 1_800_000_000_000 + monotonic;
    const clock = new DatabaseClock({
      // The wait is in the pool, before the query runs: the server reads its clock at the end.
      readNow: async () => {
        monotonic += 240_000;
        return new Date(truth());
      },
      log: silent,
      monotonicNow: () => monotonic,
    });
    await clock.sync();
    expect(clock.now().getTime()).toBeLessThanOrEqual(truth());
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

  it('a schedule on a clock that reads no valid time backs off on a timer, never spinning the event loop', async () => {
    const store = new Store(t.database);
    const log = new EventLog();
    const broken = { now: () => new Date(Number.NaN), sleepUntil: (at: Date, signal: AbortSignal) => new DatabaseClock({ readNow: () => store.now(), log: silent }).sleepUntil(at, signal) };
    const stop = new AbortController();
    const loop = new ScheduleTicker(minutely(), { store, clock: broken, log: log.logger, claimedBy: 'test:1' }).run(stop.signal);
    // A timer of this process still fires: the loop yields to it.
    await new Promise((resolve) => setTimeout(resolve, 300));
    stop.abort();
    await loop;
    expect(log.named('schedule_error').length).toBeGreaterThanOrEqual(1);
    expect(log.named('schedule_error').length).toBeLessThanOrEqual(2);
    expect(log.named('schedule_error')[0].error).toMatch(/invalid Date/);
  });

  it('twenty schedules on one scheduler print no MaxListenersExceededWarning', async () => {
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    const schedules = Array.from({ length: 20 }, (_, i) =>
      defineSchedule({ name: `s${i}`, cron: '0 2 * * *', timezone: 'UTC', period: 'day', handle: () => undefined } as ScheduleOptions),
    );
    const scheduler = new Scheduler({ store: new Store(t.database), clock: new DatabaseClock({ readNow: async () => new Date(), log: silent }), log: silent, schedules });
    try {
      scheduler.start();
      // Each ticker sleeps (listening on the signal) once its first pass is done.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    } finally {
      await scheduler.stop();
      process.off('warning', onWarning);
    }
    expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
  });
});
