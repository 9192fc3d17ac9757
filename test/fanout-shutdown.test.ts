import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { DaemonProcess } from './support/cli.ts';
import { useTestDatabase } from './support/db.ts';
import { eventually } from './support/events.ts';

const ENTITIES = 200_000;
const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_schedule_ticks'] });
let daemons: DaemonProcess[] = [];

// Registered after useTestDatabase, so (hooks unwind as a stack) it runs before the drop.
afterAll(async () => {
  await Promise.all(daemons.map((d) => d.kill()));
});
afterEach(async () => {
  await Promise.all(daemons.map((d) => d.kill()));
  daemons = [];
});

function daemon(args: string[]): DaemonProcess {
  const d = new DaemonProcess(['--poll', '50ms', ...args], {
    DATABASE_URL: t.url,
    CRONQ_SCHEDULES: 'test/fixtures/schedules-fanout',
    CRONQ_TEST_ENTITIES: String(ENTITIES),
    LOG_LEVEL: 'info',
  });
  daemons.push(d);
  return d;
}

const jobCount = async () => Number((await t.sql('SELECT COUNT(*) AS n FROM cronq_jobs'))[0].n);

describe('SIGTERM during a long fan-out', () => {
  it('stops claiming at once, leaves the tick for the next daemon and exits 0 within the grace; the next daemon finishes it', async () => {
    const first = daemon(['--grace', '5s']);
    // Mid fan-out: some batches written (and jobs being claimed), most entities still to come.
    await eventually(async () => (await jobCount()) >= 5_000, 60_000, 'the fan-out to be under way');
    const signalledAt = Date.now();
    first.signal('SIGTERM');
    expect(await first.exited).toBe(0);
    expect(Date.now() - signalledAt).toBeLessThan(5_000);
    const order = first.lines.map((l) => l.event);
    const requested = order.indexOf('shutdown_requested');
    expect(requested).toBeGreaterThan(0);
    expect(order.slice(requested)).not.toContain('job_claimed');
    expect(first.events('schedule_tick_interrupted')).toHaveLength(1);
    expect(first.events('schedule_tick')).toHaveLength(0);
    const [tick] = await t.sql('SELECT finished_at, fanout_until <= UTC_TIMESTAMP(6) AS lease_over FROM cronq_schedule_ticks');
    expect(tick).toMatchObject({ finished_at: null, lease_over: 1 });
    const left = await jobCount();
    expect(left).toBeLessThan(ENTITIES);
    expect(Number((await t.sql("SELECT COUNT(*) AS n FROM cronq_jobs WHERE status = 'reserved'"))[0].n)).toBe(0);

    // The next daemon resumes the tick at once and enqueues the rest, each key once.
    const second = daemon(['--no-workers']);
    const [resumed] = await second.waitFor('schedule_tick', 1, 120_000);
    expect(resumed.enqueued).toBe(ENTITIES - left);
    expect(await jobCount()).toBe(ENTITIES);
    const ticks = await t.sql('SELECT finished_at IS NOT NULL AS finished, jobs_enqueued + jobs_existing AS seen FROM cronq_schedule_ticks ORDER BY scheduled_at');
    expect(ticks[0]).toEqual({ finished: 1, seen: ENTITIES });
  }, 180_000);
});
