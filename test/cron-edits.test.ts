/**
 * A schedule whose cron or time zone was edited between deploys: the new version's ticks
 * since the old version's latest ledger row were never ticks of the schedule, so they are
 * not caught up (README, "Catch-up"). Each version is a ScheduleTicker of its own, its
 * passes driven at chosen instants.
 */
import { describe, expect, it } from 'vitest';
import { defineSchedule, type ScheduleOptions } from '../src/index.ts';
import { silentLogger } from '../src/logger.ts';
import { systemClock } from '../src/schedule/clock.ts';
import { ScheduleTicker, type TickerDeps } from '../src/schedule/ticker.ts';
import { Store } from '../src/store/index.ts';
import { useTestDatabase } from './support/db.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_schedule_ticks'] });

/** One daemon's ticker of the schedule `mailer` as that version defines it. */
function version(options: Partial<ScheduleOptions>, claimedBy: string, deps: Partial<TickerDeps> = {}): ScheduleTicker {
  const schedule = defineSchedule({ name: 'mailer', cron: '0 0 1 * *', timezone: 'UTC', period: 'tick', handle() {}, ...options } as ScheduleOptions);
  return new ScheduleTicker(schedule, { store: new Store(t.database), clock: systemClock, log: silentLogger(), claimedBy, ...deps });
}

const at = (iso: string) => new Date(iso);

async function jobTimes(): Promise<string[]> {
  const rows = await t.sql("SELECT scheduled_at FROM cronq_jobs WHERE schedule_name = 'mailer' ORDER BY scheduled_at");
  return rows.map((r) => new Date(r.scheduled_at).toISOString());
}

async function ledger(): Promise<Array<{ at: string; outcome: string; caughtUp: boolean; note: string | null; cron: string | null; timezone: string | null }>> {
  const rows = await t.sql(
    "SELECT scheduled_at, outcome, caught_up, note, cron, timezone FROM cronq_schedule_ticks WHERE schedule_name = 'mailer' ORDER BY scheduled_at",
  );
  return rows.map((r) => ({
    at: new Date(r.scheduled_at).toISOString(),
    outcome: r.outcome,
    caughtUp: Boolean(r.caught_up),
    note: r.note,
    cron: r.cron,
    timezone: r.timezone,
  }));
}

/** Each ledger row as [instant, outcome, note]. */
async function outcomes(): Promise<Array<[string, string, string | null]>> {
  return (await ledger()).map((r) => [r.at, r.outcome, r.note]);
}

describe('a schedule whose cron was edited', () => {
  it('monthly made minutely enqueues only the on-time minute at the deploy, no burst of minutes that were never ticks', async () => {
    await version({}, 'v1:1').catchUp(at('2030-01-01T00:00:05Z'));
    await version({ cron: '* * * * *' }, 'v2:1').catchUp(at('2030-01-03T10:00:30Z'));

    expect(await jobTimes()).toEqual(['2030-01-01T00:00:00.000Z', '2030-01-03T10:00:00.000Z']);
    expect(await ledger()).toEqual([
      { at: '2030-01-01T00:00:00.000Z', outcome: 'enqueued', caughtUp: false, note: null, cron: '0 0 1 * *', timezone: 'UTC' },
      {
        at: '2030-01-03T10:00:00.000Z',
        outcome: 'enqueued',
        caughtUp: false,
        note: "cron changed from `0 0 1 * *` to `* * * * *`: ticks before this were not the schedule's",
        cron: '* * * * *',
        timezone: 'UTC',
      },
    ]);
  }, 60_000);

  it('records the new cron’s latest past tick as skipped with the edit when it is late, and catches up normally after it', async () => {
    await version({}, 'v1:1').catchUp(at('2030-01-01T00:00:05Z'));
    const v2 = { cron: '0 8 * * *', catchUp: { mode: 'all', window: '3d' } } as const;
    await version(v2, 'v2:1').catchUp(at('2030-01-03T10:00:00Z'));
    // The new version's daemon is down over two of its own ticks: both are caught up.
    await version(v2, 'v2:2').catchUp(at('2030-01-05T10:00:00Z'));

    expect(await jobTimes()).toEqual(['2030-01-01T00:00:00.000Z', '2030-01-04T08:00:00.000Z', '2030-01-05T08:00:00.000Z']);
    expect(await outcomes()).toEqual([
      ['2030-01-01T00:00:00.000Z', 'enqueued', null],
      ['2030-01-03T08:00:00.000Z', 'skipped', "cron changed from `0 0 1 * *` to `0 8 * * *`: ticks before this were not the schedule's"],
      ['2030-01-04T08:00:00.000Z', 'enqueued', 'caught up'],
      ['2030-01-05T08:00:00.000Z', 'enqueued', 'caught up'],
    ]);
  }, 60_000);

  it('a new cron whose first tick comes after the old row writes nothing until then, and its daemon down over that tick records it as skipped (the ledger cannot tell it ran)', async () => {
    await version({ cron: '0 * * * *' }, 'v1:1').catchUp(at('2030-01-03T09:00:05Z'));
    await version({ cron: '30 8 * * *' }, 'v2:1').catchUp(at('2030-01-03T10:00:00Z'));
    expect(await ledger()).toHaveLength(1);
    await version({ cron: '30 8 * * *' }, 'v2:2').catchUp(at('2030-01-04T09:00:00Z'));

    expect(await jobTimes()).toEqual(['2030-01-03T09:00:00.000Z']);
    expect(await outcomes()).toEqual([
      ['2030-01-03T09:00:00.000Z', 'enqueued', null],
      ['2030-01-04T08:30:00.000Z', 'skipped', "cron changed from `0 * * * *` to `30 8 * * *`: ticks before this were not the schedule's"],
    ]);
  }, 60_000);

  it('a time zone edit counts as an edit too: the new zone’s ticks since the old row are not caught up', async () => {
    await version({ cron: '0 8 * * *' }, 'v1:1').catchUp(at('2030-01-01T08:00:05Z'));
    await version({ cron: '0 8 * * *', timezone: 'America/New_York' }, 'v2:1').catchUp(at('2030-01-04T12:00:00Z'));

    expect(await jobTimes()).toEqual(['2030-01-01T08:00:00.000Z']);
    expect(await outcomes()).toEqual([
      ['2030-01-01T08:00:00.000Z', 'enqueued', null],
      ['2030-01-03T13:00:00.000Z', 'skipped', "timezone changed from UTC to America/New_York: ticks before this were not the schedule's"],
    ]);
  }, 60_000);

  it('an unchanged minutely cron whose daemon was down for 3 minutes catches its 3 ticks up', async () => {
    await version({ cron: '* * * * *' }, 'd:1').catchUp(at('2030-01-03T10:00:05Z'));
    await version({ cron: '* * * * *' }, 'd:2').catchUp(at('2030-01-03T10:03:30Z'));

    expect(await jobTimes()).toEqual(['2030-01-03T10:00:00.000Z', '2030-01-03T10:01:00.000Z', '2030-01-03T10:02:00.000Z', '2030-01-03T10:03:00.000Z']);
    expect((await ledger()).map((r) => [r.at, r.caughtUp])).toEqual([
      ['2030-01-03T10:00:00.000Z', false],
      ['2030-01-03T10:01:00.000Z', true],
      ['2030-01-03T10:02:00.000Z', true],
      ['2030-01-03T10:03:00.000Z', false],
    ]);
  }, 60_000);

  it('a rewrite that only moves blanks and tabs is no edit: the missed minutes are caught up', async () => {
    await version({ cron: '* * * * *' }, 'd:1').catchUp(at('2030-01-03T10:00:05Z'));
    await version({ cron: ' *  *\t* * * ' }, 'd:2').catchUp(at('2030-01-03T10:03:30Z'));

    expect(await jobTimes()).toHaveLength(4);
    expect((await ledger()).map((r) => r.cron)).toEqual(['* * * * *', '* * * * *', '* * * * *', '* * * * *']);
  }, 60_000);

  it('a row written before the ledger recorded crons (NULL) is caught up from as before: the new cron’s ticks within the window', async () => {
    await t.sql(
      `INSERT INTO cronq_schedule_ticks (schedule_name, scheduled_at, period_key, outcome, started_at, finished_at)
       VALUES ('mailer', '2030-01-01 00:00:00', '2030-01-01T00:00', 'enqueued', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`,
    );
    await version({ cron: '* * * * *', catchUp: { mode: 'all', window: '5m' } }, 'v2:1').catchUp(at('2030-01-03T10:00:30Z'));

    expect(await jobTimes()).toEqual([
      '2030-01-03T09:56:00.000Z',
      '2030-01-03T09:57:00.000Z',
      '2030-01-03T09:58:00.000Z',
      '2030-01-03T09:59:00.000Z',
      '2030-01-03T10:00:00.000Z',
    ]);
    // Every minute since the old row before the window: 2 days, 9 h 55 min.
    const [skipped] = await t.sql("SELECT COUNT(*) AS n FROM cronq_schedule_ticks WHERE schedule_name = 'mailer' AND outcome = 'skipped'");
    expect(Number(skipped.n)).toBe(2 * 1440 + 9 * 60 + 55);
  }, 60_000);

  it('in a rolling deploy, daemons of the old and the new cron running at once each run their own ticks, with no burst either way', async () => {
    const hourly = version({ cron: '0 * * * *' }, 'old:1');
    const minutely = version({ cron: '* * * * *' }, 'new:1');
    await hourly.catchUp(at('2030-01-03T10:00:05Z'));
    await minutely.catchUp(at('2030-01-03T10:00:30Z')); // 10:00 is in the ledger already
    await minutely.catchUp(at('2030-01-03T10:01:05Z'));
    await hourly.catchUp(at('2030-01-03T10:01:10Z')); // a pass of the old version between its ticks
    await hourly.catchUp(at('2030-01-03T11:00:05Z'));
    // The new version's daemon stalled from 10:01 to 11:03: its minutes after the old version's row are its own, caught up.
    await minutely.catchUp(at('2030-01-03T11:03:05Z'));
    await hourly.catchUp(at('2030-01-03T12:00:05Z'));

    expect((await ledger()).map((r) => [r.at.slice(11, 16), r.cron, r.caughtUp, r.note])).toEqual([
      ['10:00', '0 * * * *', false, null],
      ['10:01', '* * * * *', false, null],
      ['11:00', '0 * * * *', false, null],
      ['11:01', '* * * * *', true, 'caught up'],
      ['11:02', '* * * * *', true, 'caught up'],
      ['11:03', '* * * * *', false, null],
      ['12:00', '0 * * * *', false, null],
    ]);
    expect(await jobTimes()).toHaveLength(7);
  }, 60_000);

  it('enqueues the on-time tick of an edit between two long crons, its note cut to the column', async () => {
    // Crons of about 150 characters (every hour named): the edit's note names both, over 255 characters.
    const minutes = (from: number) => Array.from({ length: 30 }, (_, i) => from + 2 * i).join(',');
    const hours = Array.from({ length: 24 }, (_, i) => i).join(',');
    const [before, after] = [`${minutes(0)} ${hours} * * *`, `${minutes(1)} ${hours} * * *`];
    await version({ cron: before }, 'v1:1').catchUp(at('2030-01-01T00:00:05Z'));
    await version({ cron: after }, 'v2:1').catchUp(at('2030-01-03T10:01:30Z'));

    expect(await jobTimes()).toEqual(['2030-01-01T00:00:00.000Z', '2030-01-03T10:01:00.000Z']);
    const [, edited] = await ledger();
    expect(edited).toMatchObject({ outcome: 'enqueued', cron: after });
    expect([...edited.note!]).toHaveLength(255);
    expect(edited.note).toMatch(/^cron changed from `0,2,4,.*…$/);
  }, 60_000);
  it('a tick the old cron has too is the schedule’s: hourly made every 5 minutes, deployed over 10:00, catches 10:00 up', async () => {
    await version({ cron: '0 * * * *' }, 'v1:1').catchUp(at('2030-01-03T09:00:05Z'));
    // The deploy stops the old daemon at 09:59:30 and starts the new one at 10:01:30.
    await version({ cron: '*/5 * * * *' }, 'v2:1').catchUp(at('2030-01-03T10:01:30Z'));

    expect(await jobTimes()).toEqual(['2030-01-03T09:00:00.000Z', '2030-01-03T10:00:00.000Z']);
    expect((await ledger()).map((r) => [r.at.slice(11, 16), r.outcome, r.caughtUp, r.cron])).toEqual([
      ['09:00', 'enqueued', false, '0 * * * *'],
      ['10:00', 'enqueued', true, '*/5 * * * *'],
    ]);
  }, 60_000);

  it('the first row of the new cron says the cron changed also when the old cron has that tick too (on time, late, or paused)', async () => {
    const change = 'cron changed from `0 * * * *` to `*/5 * * * *`';
    await version({ cron: '0 * * * *' }, 'v1:1').catchUp(at('2030-01-03T09:00:05Z'));
    // Deployed at 10:00:30: 10:00 is on time, and shared.
    await version({ cron: '*/5 * * * *' }, 'v2:1').catchUp(at('2030-01-03T10:00:30Z'));
    expect((await ledger()).map((r) => [r.at.slice(11, 16), r.outcome, r.cron, r.note])).toEqual([
      ['09:00', 'enqueued', '0 * * * *', null],
      ['10:00', 'enqueued', '*/5 * * * *', change],
    ]);

    // Late (caught up), and skipped while paused: the row's own note first, then the edit.
    for (const paused of [false, true]) {
      await t.sql('DELETE FROM cronq_schedule_ticks');
      await t.sql('DELETE FROM cronq_jobs');
      if (paused) await t.sql("INSERT INTO cronq_pauses (target, name, reason, paused_by) VALUES ('schedule', 'mailer', 'deploy', 'ann')");
      await version({ cron: '0 * * * *' }, 'v1:1').catchUp(at('2030-01-03T09:00:05Z'));
      await version({ cron: '*/5 * * * *' }, 'v2:1').catchUp(at('2030-01-03T10:01:30Z'));
      const [, first] = await ledger();
      expect(first, `paused: ${paused}`).toMatchObject({ at: '2030-01-03T10:00:00.000Z', cron: '*/5 * * * *', caughtUp: true });
      expect(first.note, `paused: ${paused}`).toMatch(paused ? new RegExp(`^paused by ann since \\S+: deploy; ${change.replace(/[*]/g, '\\*')}$`) : /^caught up; /);
      if (!paused) expect(first.note).toBe(`caught up; ${change}`);
    }
    await t.sql('DELETE FROM cronq_pauses');
  }, 60_000);

  it('the first tick of the new cron skipped for overlap keeps the words saying the cron changed, after the skip’s own', async () => {
    // v1's job of 09:00 (or January 1st) is still ready when v2's first tick comes: overlap 'skip' skips it.
    await version({ cron: '0 * * * *', overlap: 'skip' }, 'v1:1').catchUp(at('2030-01-03T09:00:05Z'));
    await version({ cron: '*/5 * * * *', overlap: 'skip' }, 'v2:1').catchUp(at('2030-01-03T10:00:30Z'));
    expect((await outcomes())[1]).toEqual(['2030-01-03T10:00:00.000Z', 'skipped', 'previous run still in progress; cron changed from `0 * * * *` to `*/5 * * * *`']);

    // Not shared: the edit's note says the ticks before were not the schedule's.
    await t.sql('DELETE FROM cronq_schedule_ticks');
    await t.sql('DELETE FROM cronq_jobs');
    await version({ overlap: 'skip' }, 'v1:1').catchUp(at('2030-01-01T00:00:05Z'));
    await version({ cron: '* * * * *', overlap: 'skip' }, 'v2:1').catchUp(at('2030-01-03T10:00:30Z'));
    expect((await outcomes())[1]).toEqual([
      '2030-01-03T10:00:00.000Z',
      'skipped',
      "previous run still in progress; cron changed from `0 0 1 * *` to `* * * * *`: ticks before this were not the schedule's",
    ]);
  }, 60_000);

  it('the first tick of the new cron whose fan-out fails keeps the words saying the cron changed, after the failure, within the column', async () => {
    const failing = (message: string) => ({
      async *jobs() {
        throw new Error(message);
      },
    });
    const deps = { fanoutRetry: { attempts: 1, backoff: { baseMs: 1, maxMs: 1 } } };
    await version({ cron: '0 * * * *' }, 'v1:1').catchUp(at('2030-01-03T09:00:05Z'));
    await version({ cron: '*/5 * * * *', ...failing('boom') }, 'v2:1', deps).catchUp(at('2030-01-03T10:01:30Z'));
    expect((await ledger())[1]).toMatchObject({
      at: '2030-01-03T10:00:00.000Z',
      outcome: 'failed',
      caughtUp: true,
      note: 'failed after 1 attempt: Error: boom; cron changed from `0 * * * *` to `*/5 * * * *`',
    });

    // The longest failure (its error cut to 200 characters) and two long crons: the note is cut at its end, the words kept.
    await t.sql('DELETE FROM cronq_schedule_ticks');
    const hours = Array.from({ length: 24 }, (_, i) => i).join(',');
    const [before, after] = [`${Array.from({ length: 60 }, (_, i) => i).join(',')} ${hours} * * *`, `${Array.from({ length: 30 }, (_, i) => 2 * i).join(',')} ${hours} * * *`];
    await version({ cron: before }, 'v1:1').catchUp(at('2030-01-03T10:00:05Z'));
    await version({ cron: after, ...failing('x'.repeat(500)) }, 'v2:1', deps).catchUp(at('2030-01-03T10:02:30Z'));
    const [, failed] = await ledger();
    expect(failed).toMatchObject({ at: '2030-01-03T10:02:00.000Z', outcome: 'failed' });
    expect([...failed.note!]).toHaveLength(255);
    expect(failed.note).toMatch(/^failed after 1 attempt: Error: x+…; cron changed from `0,1,2,.*…$/);
  }, 60_000);

  it('the note of a shared first tick between two long crons is cut to the column', async () => {
    // Crons of about 150 characters; the old one fires at every minute the new one does (and more).
    const hours = Array.from({ length: 24 }, (_, i) => i).join(',');
    const [before, after] = [`${Array.from({ length: 60 }, (_, i) => i).join(',')} ${hours} * * *`, `${Array.from({ length: 30 }, (_, i) => 2 * i).join(',')} ${hours} * * *`];
    await version({ cron: before }, 'v1:1').catchUp(at('2030-01-03T10:00:05Z'));
    await version({ cron: after }, 'v2:1').catchUp(at('2030-01-03T10:02:30Z'));

    const [, edited] = await ledger();
    expect(edited).toMatchObject({ at: '2030-01-03T10:02:00.000Z', outcome: 'enqueued', cron: after });
    expect([...edited.note!]).toHaveLength(255);
    expect(edited.note).toMatch(/^cron changed from `0,1,2,.*…$/);
  }, 60_000);

  it('every tick the old cron has too, within the window, is caught up; the others are not (daily made weekdays)', async () => {
    // Monday 2030-01-07 08:00; the new version first runs on Saturday 12 at 09:00.
    await version({ cron: '0 8 * * *' }, 'v1:1').catchUp(at('2030-01-07T08:00:05Z'));
    const v2 = { cron: '0 8 * * 1-5', catchUp: { mode: 'all', window: '4d' } } as const;
    await version(v2, 'v2:1').catchUp(at('2030-01-12T09:00:00Z'));

    // Tue 8 is older than the window; Wed 9, Thu 10 and Fri 11 are caught up.
    expect(await jobTimes()).toEqual(['2030-01-07T08:00:00.000Z', '2030-01-09T08:00:00.000Z', '2030-01-10T08:00:00.000Z', '2030-01-11T08:00:00.000Z']);
    // Restarted later the same day: nothing more (no burst, nothing written twice).
    await version(v2, 'v2:2').catchUp(at('2030-01-12T18:00:00Z'));
    expect(await jobTimes()).toHaveLength(4);
  }, 60_000);

  it('a tick the old cron does not have, between shared ones, stays uncaught (hourly made half-hourly over a 2-hour outage)', async () => {
    await version({ cron: '0 * * * *' }, 'v1:1').catchUp(at('2030-01-03T08:00:05Z'));
    await version({ cron: '0,30 * * * *' }, 'v2:1').catchUp(at('2030-01-03T10:10:00Z'));

    expect((await jobTimes()).map((t) => t.slice(11, 16))).toEqual(['08:00', '09:00', '10:00']);
    // A restart before the new cron's own first tick (10:30) loses nothing and bursts nothing.
    await version({ cron: '0,30 * * * *' }, 'v2:2').catchUp(at('2030-01-03T10:20:00Z'));
    await version({ cron: '0,30 * * * *' }, 'v2:2').catchUp(at('2030-01-03T10:30:05Z'));
    expect((await jobTimes()).map((t) => t.slice(11, 16))).toEqual(['08:00', '09:00', '10:00', '10:30']);
  }, 60_000);
  it('a catch-up of shared ticks cut short (shutdown) is resumed after a restart without catching up the ticks the old cron did not have', async () => {
    await version({ cron: '0 * * * *' }, 'v1:1').catchUp(at('2030-01-03T08:00:05Z'));
    const shutdown = new AbortController();
    // Stopped right after its first tick's fan-out (09:00): 10:00 is still to do.
    const stopped = version({ cron: '0,30 * * * *' }, 'v2:1', { onEnqueued: () => shutdown.abort() });
    await stopped.catchUp(at('2030-01-03T10:10:00Z'), shutdown.signal);
    expect((await jobTimes()).map((t) => t.slice(11, 16))).toEqual(['08:00', '09:00']);

    await version({ cron: '0,30 * * * *' }, 'v2:2').catchUp(at('2030-01-03T10:20:00Z'));
    expect((await jobTimes()).map((t) => t.slice(11, 16))).toEqual(['08:00', '09:00', '10:00']);
  }, 60_000);
  it('an edit to an equivalent cron and zone spelling (0 0 * * 0 as 0 0 * * 7, UTC as Etc/UTC) loses no missed tick', async () => {
    await version({ cron: '0 0 * * 0' }, 'v1:1').catchUp(at('2030-01-06T00:00:05Z'));
    await version({ cron: '0 0 * * 7', timezone: 'Etc/UTC', catchUp: { mode: 'all', window: '15d' } }, 'v2:1').catchUp(at('2030-01-20T12:00:00Z'));

    expect(await jobTimes()).toEqual(['2030-01-06T00:00:00.000Z', '2030-01-13T00:00:00.000Z', '2030-01-20T00:00:00.000Z']);
    expect((await ledger()).map((r) => [r.at.slice(0, 10), r.cron, r.timezone, r.note])).toEqual([
      ['2030-01-06', '0 0 * * 0', 'UTC', null],
      ['2030-01-13', '0 0 * * 0', 'UTC', 'caught up'],
      ['2030-01-20', '0 0 * * 7', 'Etc/UTC', 'caught up; cron changed from `0 0 * * 0` to `0 0 * * 7`, timezone changed from UTC to Etc/UTC'],
    ]);
  }, 60_000);
  it('a row of unknown source (an older daemon’s) read once by a daemon of this version records its cron: a later edit does not burst', async () => {
    await t.sql(
      `INSERT INTO cronq_schedule_ticks (schedule_name, scheduled_at, period_key, outcome, started_at, finished_at)
       VALUES ('mailer', '2030-01-01 00:00:00', '2030-01-01T00:00', 'enqueued', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`,
    );
    // The upgrade, cron unchanged: a monthly schedule writes no row before February.
    await version({}, 'v1:1').catchUp(at('2030-01-02T10:00:00Z'));
    expect((await ledger()).map((r) => [r.cron, r.timezone])).toEqual([['0 0 1 * *', 'UTC']]);
    await version({ cron: '* * * * *' }, 'v2:1').catchUp(at('2030-01-03T10:00:30Z'));

    expect(await jobTimes()).toEqual(['2030-01-03T10:00:00.000Z']);
    expect(await ledger()).toHaveLength(2);
  }, 60_000);
  it('a row of unknown source at an instant this version’s cron does not have is left unknown (an older daemon of another cron wrote it)', async () => {
    await t.sql(
      `INSERT INTO cronq_schedule_ticks (schedule_name, scheduled_at, period_key, outcome, started_at, finished_at)
       VALUES ('mailer', '2030-01-03 10:01:00', '2030-01-03T10:01', 'enqueued', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`,
    );
    await version({ cron: '*/2 * * * *' }, 'v2:1').catchUp(at('2030-01-03T10:01:30Z'));
    expect((await ledger()).map((r) => [r.at.slice(11, 16), r.cron])).toEqual([['10:01', null]]);
  }, 60_000);
  it('the catch-up mode applies to the shared ticks as to any: latest enqueues only the most recent tick, false none of the late ones', async () => {
    // Hourly made 0,20,40 (10:00 and 11:00 shared, 10:20... not): the new version starts at 11:20:30.
    await version({ cron: '0 * * * *' }, 'v1:1').catchUp(at('2030-01-03T09:00:05Z'));
    await version({ cron: '0,20,40 * * * *', catchUp: { mode: 'latest' } }, 'v2:1').catchUp(at('2030-01-03T11:20:30Z'));
    expect((await ledger()).map((r) => [r.at.slice(11, 16), r.outcome, r.note?.slice(0, 12) ?? null])).toEqual([
      ['09:00', 'enqueued', null],
      ['10:00', 'skipped', 'superseded b'],
      ['11:00', 'skipped', 'superseded b'],
      ['11:20', 'enqueued', 'cron changed'],
    ]);

    await t.sql('DELETE FROM cronq_schedule_ticks');
    await t.sql('DELETE FROM cronq_jobs');
    await version({ cron: '0 * * * *' }, 'v1:1').catchUp(at('2030-01-03T09:00:05Z'));
    await version({ cron: '0,20,40 * * * *', catchUp: false }, 'v2:1').catchUp(at('2030-01-03T11:10:00Z'));
    // 11:00 is the latest and shared: late, it is skipped as any missed tick is; 10:00 is out of reach, not recorded.
    expect((await ledger()).map((r) => [r.at.slice(11, 16), r.outcome, r.note])).toEqual([
      ['09:00', 'enqueued', null],
      ['11:00', 'skipped', 'missed; catch-up is off; cron changed from `0 * * * *` to `0,20,40 * * * *`'],
    ]);
    expect(await jobTimes()).toHaveLength(1);
  }, 60_000);
});
