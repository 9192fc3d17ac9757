import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { defineSchedule, type ScheduleOptions } from '../src/index.ts';
import { claimTickFanout } from '../src/store/ledger.ts';
import { DueTickPlanner, planDueTicks } from '../src/schedule/plan.ts';
import { ScheduleTicker } from '../src/schedule/ticker.ts';
import { systemClock } from '../src/schedule/clock.ts';
import { Store } from '../src/store/index.ts';
import { useTestDatabase } from './support/db.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_schedule_ticks'] });
const silent = pino({ level: 'silent' });


const at = (iso: string) => new Date(iso);

function schedule(options: Partial<ScheduleOptions> = {}) {
  return defineSchedule({ name: 'renewal', cron: '0 2 * * *', timezone: 'Europe/Berlin', period: 'month', handle: () => undefined, ...options } as ScheduleOptions);
}

function ticker(s = schedule(), claimedBy = 'test:1') {
  return new ScheduleTicker(s, { store: new Store(t.database), clock: systemClock, log: silent, claimedBy });
}

/** Seeds the ledger as if the schedule last ticked at `iso`. */
async function lastTickAt(name: string, iso: string) {
  await t.sql(
    "INSERT INTO cronq_schedule_ticks (schedule_name, scheduled_at, period_key, outcome, started_at, finished_at) VALUES (?, ?, 'seed', 'enqueued', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
    [name, iso.replace('T', ' ').replace('Z', '')],
  );
}

async function ticks(name = 'renewal') {
  const rows = await t.sql(
    "SELECT DATE_FORMAT(scheduled_at, '%Y-%m-%dT%H:%i:%sZ') AS at, outcome, note, caught_up, jobs_enqueued, finished_at FROM cronq_schedule_ticks WHERE schedule_name = ? AND period_key <> 'seed' ORDER BY scheduled_at",
    [name],
  );
  return rows.map((r: any) => ({ at: r.at, outcome: r.outcome, note: r.note, caughtUp: Boolean(r.caught_up), jobs: r.jobs_enqueued, finished: r.finished_at !== null }));
}

async function jobKeys() {
  return (await t.sql('SELECT job_key FROM cronq_jobs ORDER BY job_key')).map((r: any) => r.job_key);
}

describe('fan-out', () => {
  it('enqueues exactly the keys of the period, and a second tick of the same period adds none', async () => {
    const users = [1, 2, 3];
    const s = schedule({
      async *jobs({ periodKey }) {
        expect(periodKey).toBe('2026-11');
        for (const id of users) yield { key: `user:${id}`, payload: { userId: id } };
      },
    });
    await lastTickAt('renewal', '2026-11-01T01:00:00Z');
    await ticker(s).catchUp(at('2026-11-02T01:00:00.100Z'));
    expect(await jobKeys()).toEqual(['renewal:user:1:2026-11', 'renewal:user:2:2026-11', 'renewal:user:3:2026-11']);
    await ticker(s).catchUp(at('2026-11-03T01:00:00.100Z'));
    expect(await jobKeys()).toHaveLength(3);
    expect(await ticks()).toEqual([
      { at: '2026-11-02T01:00:00Z', outcome: 'enqueued', note: null, caughtUp: false, jobs: 3, finished: true },
      { at: '2026-11-03T01:00:00Z', outcome: 'enqueued', note: null, caughtUp: false, jobs: 0, finished: true },
    ]);
    const [row] = await t.sql("SELECT schedule_name, period_key, queue, payload, DATE_FORMAT(scheduled_at, '%H:%i') AS hm FROM cronq_jobs WHERE job_key = 'renewal:user:2:2026-11'");
    expect(row).toMatchObject({ schedule_name: 'renewal', period_key: '2026-11', queue: 'default', hm: '01:00' });
  });

  it('keys a schedule without fan-out by name and period', async () => {
    const s = schedule({ name: 'report', period: 'day' });
    await lastTickAt('report', '2026-11-01T01:00:00Z');
    await ticker(s).catchUp(at('2026-11-02T01:00:01Z'));
    expect(await jobKeys()).toEqual(['report:2026-11-02']);
  });

  it('three schedulers ticking one schedule at once write one ledger row per tick and one job per key, fanning out once', async () => {
    let fanOuts = 0;
    const s = schedule({
      period: 'day',
      catchUp: { mode: 'all', window: '40d' },
      async *jobs() {
        fanOuts += 1;
        for (let i = 0; i < 2500; i++) yield { key: `user:${i}` };
      },
    });
    await lastTickAt('renewal', '2026-11-01T01:00:00Z');
    const now = at('2026-11-03T01:00:00.050Z'); // two ticks due: the 2nd (caught up) and the 3rd
    await Promise.all(['a:1', 'b:2', 'c:3'].map((id) => ticker(s, id).catchUp(now)));
    expect(fanOuts).toBe(2);
    const [{ n }] = await t.sql('SELECT COUNT(*) AS n FROM cronq_jobs');
    expect(Number(n)).toBe(5000);
    const rows = await ticks();
    expect(rows.map((r) => [r.at, r.outcome, r.jobs, r.finished])).toEqual([
      ['2026-11-02T01:00:00Z', 'enqueued', 2500, true],
      ['2026-11-03T01:00:00Z', 'enqueued', 2500, true],
    ]);
  });

  it('a tick whose daemon died mid fan-out is finished by another once its fan-out lease expires', async () => {
    const s = schedule({
      period: 'day',
      async *jobs() {
        for (let i = 0; i < 10; i++) yield { key: `user:${i}` };
      },
    });
    await lastTickAt('renewal', '2026-11-01T01:00:00Z');
    // The dead daemon claimed the tick and enqueued three of ten jobs before it died.
    await claimTickFanout(t.database.db, {
      scheduleName: 'renewal',
      scheduledAt: at('2026-11-02T01:00:00Z'),
      periodKey: '2026-11-02',
      caughtUp: false,
      note: null,
      claimedBy: 'dead:1',
      leaseMs: 60_000,
      source: { cron: '0 2 * * *', timezone: 'Europe/Berlin' },
    });
    await t.sql(
      `INSERT INTO cronq_jobs (kind, job_key, payload, schedule_name, period_key, scheduled_at) VALUES
        ('renewal', 'renewal:user:0:2026-11-02', '{}', 'renewal', '2026-11-02', '2026-11-02 01:00:00'),
        ('renewal', 'renewal:user:1:2026-11-02', '{}', 'renewal', '2026-11-02', '2026-11-02 01:00:00'),
        ('renewal', 'renewal:user:2:2026-11-02', '{}', 'renewal', '2026-11-02', '2026-11-02 01:00:00')`,
    );
    const now = at('2026-11-02T01:00:30Z');
    await ticker(s, 'alive:2').catchUp(now);
    expect(await jobKeys()).toHaveLength(3); // lease still held: the other daemon leaves it alone
    await t.sql('UPDATE cronq_schedule_ticks SET fanout_until = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE claimed_by = ?', ['dead:1']);
    await ticker(s, 'alive:2').catchUp(now);
    expect(await jobKeys()).toHaveLength(10);
    const [row] = await t.sql("SELECT claimed_by, jobs_enqueued, jobs_existing, finished_at FROM cronq_schedule_ticks WHERE period_key = '2026-11-02'");
    expect(row).toMatchObject({ claimed_by: 'alive:2', jobs_enqueued: 7, jobs_existing: 3 });
    expect(row.finished_at).not.toBeNull();
  });
});

describe('catch-up', () => {
  // A daily 02:00 Berlin schedule (01:00Z in winter) last ticked on Nov 1; the daemons were down until Nov 6, 12:00Z.
  const downUntil = at('2026-11-06T12:00:00Z');
  const missed = ['2026-11-02T01:00:00Z', '2026-11-03T01:00:00Z', '2026-11-04T01:00:00Z', '2026-11-05T01:00:00Z', '2026-11-06T01:00:00Z'];

  it("mode 'all' enqueues every missed tick in the window", async () => {
    const s = schedule({ period: 'day', catchUp: { mode: 'all', window: '40d' } });
    await lastTickAt('renewal', '2026-11-01T01:00:00Z');
    await ticker(s).catchUp(downUntil);
    const rows = await ticks();
    expect(rows.map((r) => r.at)).toEqual(missed);
    expect(rows.every((r) => r.outcome === 'enqueued' && r.caughtUp && r.note === 'caught up')).toBe(true);
    expect(await jobKeys()).toEqual(['renewal:2026-11-02', 'renewal:2026-11-03', 'renewal:2026-11-04', 'renewal:2026-11-05', 'renewal:2026-11-06']);
  });

  it("mode 'all' stops at its cap, recording the older missed ticks as skipped", async () => {
    const s = schedule({ period: 'day', catchUp: { mode: 'all', window: '40d', max: 2 } });
    await lastTickAt('renewal', '2026-11-01T01:00:00Z');
    await ticker(s).catchUp(downUntil);
    expect((await ticks()).map((r) => [r.at, r.outcome, r.note])).toEqual([
      [missed[0], 'skipped', 'over the catch-up cap (max 2)'],
      [missed[1], 'skipped', 'over the catch-up cap (max 2)'],
      [missed[2], 'skipped', 'over the catch-up cap (max 2)'],
      [missed[3], 'enqueued', 'caught up'],
      [missed[4], 'enqueued', 'caught up'],
    ]);
  });

  it("mode 'latest' enqueues only the most recent missed tick and records the rest as skipped", async () => {
    const s = schedule({ period: 'day', catchUp: { mode: 'latest', window: '40d' } });
    await lastTickAt('renewal', '2026-11-01T01:00:00Z');
    await ticker(s).catchUp(downUntil);
    const rows = await ticks();
    expect(rows.filter((r) => r.outcome === 'enqueued').map((r) => r.at)).toEqual([missed[4]]);
    expect(rows.filter((r) => r.outcome === 'skipped').map((r) => r.at)).toEqual(missed.slice(0, 4));
    expect(await jobKeys()).toEqual(['renewal:2026-11-06']);
  });

  it('ticks older than the window are recorded as skipped, never enqueued', async () => {
    const s = schedule({ period: 'day', catchUp: { mode: 'all', window: '2d' } });
    await lastTickAt('renewal', '2026-11-01T01:00:00Z');
    await ticker(s).catchUp(downUntil);
    expect((await ticks()).map((r) => [r.at, r.outcome, r.note])).toEqual([
      [missed[0], 'skipped', 'older than the catch-up window (2d)'],
      [missed[1], 'skipped', 'older than the catch-up window (2d)'],
      [missed[2], 'skipped', 'older than the catch-up window (2d)'],
      [missed[3], 'enqueued', 'caught up'],
      [missed[4], 'enqueued', 'caught up'],
    ]);
  });

  it('with catchUp false, missed ticks are recorded as skipped and an on-time tick still runs', async () => {
    const s = schedule({ period: 'day', catchUp: false });
    await lastTickAt('renewal', '2026-11-01T01:00:00Z');
    await ticker(s).catchUp(at('2026-11-06T01:00:00.200Z'));
    const rows = await ticks();
    expect(rows.map((r) => [r.at, r.outcome])).toEqual([...missed.slice(0, 4).map((m) => [m, 'skipped']), [missed[4], 'enqueued']]);
    expect(rows[0].note).toBe('missed; catch-up is off');
  });

  it('a schedule with no ledger row starts fresh: no backfill, its latest past tick recorded as skipped', async () => {
    const s = schedule({ period: 'day' });
    await ticker(s).catchUp(downUntil);
    expect(await ticks()).toEqual([
      { at: '2026-11-06T01:00:00Z', outcome: 'skipped', note: 'before the schedule was first started', caughtUp: true, jobs: 0, finished: true },
    ]);
    expect(await jobKeys()).toEqual([]);
  });

  it('records a long outage of a minutely schedule tick by tick, without enqueueing what is outside the window', async () => {
    const s = schedule({ name: 'minutely', cron: '* * * * *', timezone: 'UTC', period: 'minute', catchUp: { mode: 'all', window: '10m' } });
    await lastTickAt('minutely', '2026-11-01T00:00:00Z');
    await ticker(s).catchUp(at('2026-11-08T00:00:30Z')); // a week: 10,080 missed minutes
    const [{ skipped, enqueued }] = await t.sql(
      "SELECT SUM(outcome = 'skipped') AS skipped, SUM(outcome = 'enqueued') AS enqueued FROM cronq_schedule_ticks WHERE schedule_name = 'minutely' AND period_key <> 'seed'",
    );
    expect(Number(enqueued)).toBe(10);
    expect(Number(skipped)).toBe(10_080 - 10);
    const [{ n }] = await t.sql('SELECT COUNT(*) AS n FROM cronq_jobs');
    expect(Number(n)).toBe(10);
  });
});

describe('a long catch-up window', () => {
  it('is planned a page at a time: two days of an every-second schedule never hold the event loop for long, and only the latest max are enqueued', async () => {
    const s = schedule({ name: 'secondly', cron: '* * * * * *', timezone: 'UTC', period: 'tick', catchUp: { mode: 'all', window: '3d', max: 5 } });
    await lastTickAt('secondly', '2026-11-01T00:00:00Z');
    let longest = 0;
    let last = performance.now();
    const probe = setInterval(() => {
      const now = performance.now();
      longest = Math.max(longest, now - last);
      last = now;
    }, 5);
    const started = performance.now();
    try {
      await ticker(s).catchUp(at('2026-11-03T00:00:00.500Z')); // 172,800 seconds due, all within the window
    } finally {
      clearInterval(probe);
    }
    const took = performance.now() - started;
    const [{ skipped, enqueued }] = await t.sql(
      "SELECT SUM(outcome = 'skipped') AS skipped, SUM(outcome = 'enqueued') AS enqueued FROM cronq_schedule_ticks WHERE schedule_name = 'secondly' AND period_key <> 'seed'",
    );
    expect(Number(enqueued)).toBe(5);
    expect(Number(skipped)).toBe(172_800 - 5);
    expect(await jobKeys()).toHaveLength(5);
    // Listing and planning every instant at once held it for 1.2 s of the 7 s the catch-up
    // took here (16 %); a page of 1,000 holds it for some 20-35 ms (the first, compiling,
    // about 100 ms: under 2 %). As a share, so a loaded machine slows both sides alike.
    expect(longest / took).toBeLessThan(0.08);
  }, 60_000);
});

describe('a paused schedule with a large catch-up cap', () => {
  it('records the ticks it would have enqueued as skipped a page at a time, never holding the event loop for long', async () => {
    const s = schedule({ name: 'paused-secondly', cron: '* * * * * *', timezone: 'UTC', period: 'minute', catchUp: { mode: 'all', window: '3d', max: 100_000 } });
    await lastTickAt('paused-secondly', '2026-11-01T00:00:00Z');
    await t.sql("INSERT INTO cronq_pauses (target, name, reason, paused_by) VALUES ('schedule', 'paused-secondly', 'audit', 'ann')");
    let longest = 0;
    let last = performance.now();
    const probe = setInterval(() => {
      const now = performance.now();
      longest = Math.max(longest, now - last);
      last = now;
    }, 5);
    const started = performance.now();
    try {
      await ticker(s).catchUp(at('2026-11-02T00:00:00.500Z')); // 86,400 seconds due, all within the window and the cap
    } finally {
      clearInterval(probe);
      await t.sql("DELETE FROM cronq_pauses WHERE name = 'paused-secondly'");
    }
    const took = performance.now() - started;
    const [{ skipped, enqueued, paused }] = await t.sql(
      "SELECT SUM(outcome = 'skipped') AS skipped, SUM(outcome = 'enqueued') AS enqueued, SUM(note LIKE 'paused by ann since %: audit') AS paused FROM cronq_schedule_ticks WHERE schedule_name = 'paused-secondly' AND period_key <> 'seed'",
    );
    expect([Number(skipped), Number(enqueued), Number(paused)]).toEqual([86_400, 0, 86_400]);
    expect(await jobKeys()).toEqual([]);
    // Here the period keys and rows of all 86,400 at once held it for 310-410 ms (10-15 %
    // of the pass), and the listing, whose pages had nothing to skip and so awaited no
    // statement, for some 550 ms in microtasks; paged and yielding, about 40 ms (2 %).
    expect(longest / took).toBeLessThan(0.08);
  }, 60_000);
});

describe('DueTickPlanner', () => {
  it('fed page by page plans exactly what planDueTicks plans at once, holding no more than the cap between pages', () => {
    const now = at('2026-01-02T00:00:00Z');
    const due = Array.from({ length: 5_000 }, (_, i) => new Date(now.getTime() - (5_000 - i) * 30_000));
    for (const catchUp of [
      { mode: 'all' as const, windowMs: 86_400_000, max: 7 },
      { mode: 'latest' as const, windowMs: 3_600_000, max: 1 },
      { mode: 'off' as const, windowMs: 0, max: 0 },
    ]) {
      const whole = planDueTicks(due, now, catchUp);
      const planner = new DueTickPlanner(now, catchUp);
      const skip = [];
      for (let i = 0; i < due.length; i += 333) {
        skip.push(...planner.add(due.slice(i, i + 333)));
        expect(planner.finish().length).toBeLessThanOrEqual(catchUp.mode === 'off' ? 3 : catchUp.max);
      }
      expect({ enqueue: planner.finish(), skip }, catchUp.mode).toEqual(whole);
    }
  });
});

describe('planDueTicks', () => {
  const catchUp = { mode: 'all' as const, windowMs: 3_600_000, max: 1000 };
  it('enqueues an on-time tick even with catch-up off', () => {
    const now = at('2026-01-01T00:00:10Z');
    expect(planDueTicks([at('2026-01-01T00:00:00Z')], now, { mode: 'off', windowMs: 0, max: 0 })).toEqual({
      enqueue: [{ at: at('2026-01-01T00:00:00Z'), late: false }],
      skip: [],
    });
  });
  it('treats a tick beyond the tolerance as late', () => {
    const plan = planDueTicks([at('2026-01-01T00:00:00Z')], at('2026-01-01T00:02:00Z'), catchUp, 60_000);
    expect(plan.enqueue).toEqual([{ at: at('2026-01-01T00:00:00Z'), late: true }]);
  });
});
