/**
 * A schedule edited between deploys while one of its ticks was left unfinished (its
 * daemon died mid fan-out): the tick is resumed by the new version, and finishes in the
 * period key its ledger row was claimed with, so the row and its jobs agree and the
 * entities written before the crash are not enqueued again under the new key shape.
 */
import { describe, expect, it } from 'vitest';
import { defineSchedule } from '../src/index.ts';
import { silentLogger } from '../src/logger.ts';
import { systemClock } from '../src/schedule/clock.ts';
import { ScheduleTicker } from '../src/schedule/ticker.ts';
import { Store } from '../src/store/index.ts';
import { useTestDatabase } from './support/db.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_schedule_ticks'] });

describe('a tick left unfinished before its schedule changed period', () => {
  it('is finished by the new version in the period key it was claimed with: no entity twice, its jobs under its row', async () => {
    // Version 1 (period day) claimed 2 January's tick, wrote entity a's job and died.
    await t.sql(
      `INSERT INTO cronq_schedule_ticks (schedule_name, scheduled_at, period_key, outcome, caught_up, claimed_by, fanout_until, started_at)
       VALUES ('evolve', '2030-01-02 00:00:00', '2030-01-02', 'enqueued', FALSE, 'v1:dead', UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, UTC_TIMESTAMP(6))`,
    );
    await t.sql(
      `INSERT INTO cronq_jobs (queue, kind, job_key, payload, schedule_name, period_key, scheduled_at)
       VALUES ('default', 'evolve', 'evolve:a:2030-01-02', '{}', 'evolve', '2030-01-02', '2030-01-02 00:00:00')`,
    );
    // Version 2 has period month.
    const v2 = defineSchedule({
      name: 'evolve',
      cron: '0 0 * * *',
      timezone: 'UTC',
      period: 'month',
      handle() {},
      async *jobs() {
        yield { key: 'a' };
        yield { key: 'b' };
      },
    });
    const ticker = new ScheduleTicker(v2, { store: new Store(t.database), clock: systemClock, log: silentLogger(), claimedBy: 'v2:1' });
    await ticker.catchUp(new Date('2030-01-02T00:00:10Z'));

    const jobs = await t.sql("SELECT job_key, period_key FROM cronq_jobs WHERE schedule_name = 'evolve' ORDER BY job_key");
    expect(jobs.map((r) => [r.job_key, r.period_key])).toEqual([
      ['evolve:a:2030-01-02', '2030-01-02'],
      ['evolve:b:2030-01-02', '2030-01-02'],
    ]);
    const [tick] = await t.sql("SELECT period_key, jobs_enqueued, jobs_existing, finished_at IS NOT NULL AS finished FROM cronq_schedule_ticks WHERE schedule_name = 'evolve'");
    expect({ ...tick, jobs_enqueued: Number(tick.jobs_enqueued), jobs_existing: Number(tick.jobs_existing), finished: Number(tick.finished) }).toEqual({
      period_key: '2030-01-02',
      jobs_enqueued: 1,
      jobs_existing: 1,
      finished: 1,
    });
  }, 30_000);
});
