import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createCronq, defineSchedule, UsageError, type Cronq, type ScheduleOptions } from '../src/index.ts';
import { systemClock } from '../src/schedule/clock.ts';
import { ScheduleTicker } from '../src/schedule/ticker.ts';
import { Store } from '../src/store/index.ts';
import { useTestDatabase } from './support/db.ts';
import { EventLog } from './support/events.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_schedule_ticks'] });
const silent = pino({ level: 'silent' });
let daemons: Cronq[] = [];

afterEach(async () => {
  await Promise.all(daemons.map((d) => d.stop({ graceMs: 2_000 })));
  daemons = [];
});

async function ledger(name: string) {
  const rows = await t.sql(
    "SELECT DATE_FORMAT(scheduled_at, '%Y-%m-%dT%H:%i:%sZ') AS at, outcome, note, jobs_enqueued FROM cronq_schedule_ticks WHERE schedule_name = ? AND period_key <> 'seed' ORDER BY scheduled_at",
    [name],
  );
  return rows.map((r: any) => ({ at: r.at, outcome: r.outcome, note: r.note, jobs: Number(r.jobs_enqueued) }));
}

describe("overlap: 'skip'", () => {
  it('three daemons never run a schedule slower than its cron interval twice at once, and record the ticks they skip', async () => {
    const log = new EventLog('info');
    const runs: Array<{ start: number; end: number }> = [];
    const slow = defineSchedule({
      name: 'slow',
      cron: '* * * * * *', // every second
      overlap: 'skip',
      async handle(_job, ctx) {
        const start = performance.now();
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 1_500);
          ctx.signal.addEventListener('abort', () => (clearTimeout(timer), resolve()));
        });
        runs.push({ start, end: performance.now() });
      },
    });
    for (let i = 0; i < 3; i++) {
      daemons.push(createCronq({ databaseUrl: t.url, tasks: [slow], logger: log.logger, pollInterval: '50ms', lockedBy: `host${i}:1`, concurrency: 2 }));
    }
    await Promise.all(daemons.map((d) => d.start()));
    await log.waitFor('job_completed', 2, 20_000);
    await log.waitFor('schedule_tick_skipped', 2, 20_000);
    await Promise.all(daemons.map((d) => d.stop({ graceMs: 2_000 })));
    daemons = [];

    runs.sort((a, b) => a.start - b.start);
    for (let i = 1; i < runs.length; i++) expect(runs[i].start).toBeGreaterThanOrEqual(runs[i - 1].end);
    const ticks = await ledger('slow');
    const skipped = ticks.filter((tick) => tick.outcome === 'skipped');
    expect(skipped.length).toBeGreaterThanOrEqual(2);
    for (const tick of skipped) expect(tick).toMatchObject({ note: 'previous run still in progress', jobs: 0 });
    // Every tick is in the ledger once, enqueued or skipped: none silently missed.
    expect(ticks.filter((tick) => tick.outcome === 'enqueued').length).toBeGreaterThanOrEqual(2);
    expect(new Set(ticks.map((tick) => tick.at)).size).toBe(ticks.length);
  });

  it('counts any job of an earlier fan-out tick, and a retry waiting as ready, as still in progress', async () => {
    const fan = (overlap: 'allow' | 'skip') =>
      defineSchedule({
        name: `fan-${overlap}`,
        cron: '0 2 * * *',
        timezone: 'UTC',
        period: 'day',
        overlap,
        *jobs() {
          yield { key: 'a' };
          yield { key: 'b' };
        },
        handle() {},
      } as ScheduleOptions);
    for (const overlap of ['allow', 'skip'] as const) {
      const s = fan(overlap);
      const ticker = new ScheduleTicker(s, { store: new Store(t.database), clock: systemClock, log: silent, claimedBy: 'test:1' });
      await t.sql(
        "INSERT INTO cronq_schedule_ticks (schedule_name, scheduled_at, period_key, outcome, started_at, finished_at) VALUES (?, '2020-11-01 02:00:00', 'seed', 'enqueued', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
        [s.name],
      );
      await ticker.catchUp(new Date('2020-11-02T02:00:00.100Z'));
      // One entity of that tick done, the other failed once and waits for its retry.
      await t.sql("UPDATE cronq_jobs SET status = 'done' WHERE job_key = ?", [`${s.name}:a:2020-11-02`]);
      await t.sql("UPDATE cronq_jobs SET attempts = 1, available_at = UTC_TIMESTAMP(6) + INTERVAL 1 HOUR WHERE job_key = ?", [`${s.name}:b:2020-11-02`]);
      await ticker.catchUp(new Date('2020-11-03T02:00:00.100Z'));
      await t.sql("UPDATE cronq_jobs SET status = 'done' WHERE schedule_name = ?", [s.name]);
      await ticker.catchUp(new Date('2020-11-04T02:00:00.100Z'));
    }
    expect(await ledger('fan-allow')).toEqual([
      { at: '2020-11-02T02:00:00Z', outcome: 'enqueued', note: null, jobs: 2 },
      { at: '2020-11-03T02:00:00Z', outcome: 'enqueued', note: null, jobs: 2 },
      { at: '2020-11-04T02:00:00Z', outcome: 'enqueued', note: null, jobs: 2 },
    ]);
    expect(await ledger('fan-skip')).toEqual([
      { at: '2020-11-02T02:00:00Z', outcome: 'enqueued', note: null, jobs: 2 },
      { at: '2020-11-03T02:00:00Z', outcome: 'skipped', note: 'previous run still in progress', jobs: 0 },
      { at: '2020-11-04T02:00:00Z', outcome: 'enqueued', note: null, jobs: 2 },
    ]);
  });

  it('refuses an overlap policy other than allow or skip', () => {
    expect(() => defineSchedule({ name: 'x', cron: '* * * * *', overlap: 'queue' as never, handle() {} })).toThrow(UsageError);
    expect(() => defineSchedule({ name: 'x', cron: '* * * * *', overlap: 'queue' as never, handle() {} })).toThrow("schedule 'x': overlap must be 'allow' or 'skip' (got \"queue\")");
  });
});
