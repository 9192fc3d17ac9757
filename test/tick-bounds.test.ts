/**
 * `cronq tick` / admin.tick run a fan-out by hand, with no ledger lease: a jobs() that
 * hangs must not hang the command. It is bounded as the scheduler's fan-out is by its
 * lease (no progress for the whole bound: stopped), and it honours Ctrl-C.
 */
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { createCronq, defineSchedule, TickFanoutError, type ScheduleOptions } from '../src/index.ts';
import { CRONQ_BIN, REPO_ROOT } from './support/cli.ts';
import { useTestDatabase } from './support/db.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs'] });
const FIRE = new Date('2026-11-30T05:00:00Z');
const jobs = async () => (await t.sql('SELECT job_key FROM cronq_jobs ORDER BY job_key')).map((r: any) => r.job_key);
const bulk = (jobs: ScheduleOptions['jobs']) => defineSchedule({ name: 'bulk', cron: '0 2 * * *', timezone: 'UTC', period: 'day', handle: () => undefined, jobs } as ScheduleOptions);

describe('a tick run by hand whose jobs() hangs', () => {
  it('is stopped once it makes no progress for the bound, rejecting in one line, with the jobs gathered before written', async () => {
    const s = bulk(async function* () {
      yield { key: 'a' };
      yield { key: 'b' };
      await new Promise(() => undefined);
    });
    const cronq = createCronq({ databaseUrl: t.url, tasks: [s], workers: false, scheduler: false, logger: false });
    try {
      const started = performance.now();
      const error = await cronq.admin.tick('bulk', { at: FIRE, stallMs: 300 }).then(() => null, (e: unknown) => e);
      expect(performance.now() - started).toBeLessThan(5_000);
      expect(error).toBeInstanceOf(TickFanoutError);
      expect((error as Error).message).toBe(
        'tick bulk at 2026-11-30T02:00:00.000Z (period 2026-11-30): fan-out failed after 2 jobs enqueued (0 already present): StalledFanoutError: jobs() made no progress for 300 ms (no entity yielded, no batch written), the scheduler\'s fan-out lease: stopped',
      );
      expect(await jobs()).toEqual(['bulk:a:2026-11-30', 'bulk:b:2026-11-30']);
    } finally {
      await cronq.stop();
    }
  });

  it('runs to its end while each entity comes within the bound, however long the whole takes', async () => {
    const s = bulk(async function* () {
      for (let i = 0; i < 8; i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        yield { key: `slow${i}` };
      }
    });
    const cronq = createCronq({ databaseUrl: t.url, tasks: [s], workers: false, scheduler: false, logger: false });
    try {
      expect(await cronq.admin.tick('bulk', { at: FIRE, stallMs: 300 })).toMatchObject({ status: 'enqueued', inserted: 8 });
    } finally {
      await cronq.stop();
    }
  });

  it('cronq tick stops on Ctrl-C with one line naming the tick and the jobs written, exit 130', async () => {
    const child = spawn(process.execPath, [CRONQ_BIN, 'tick', 'hangs', '--at', '2026-11-30T05:00:00Z'], {
      cwd: REPO_ROOT,
      env: { ...process.env, DATABASE_URL: t.url, CRONQ_SCHEDULES: 'test/fixtures/schedules-fanout-hangs' },
    });
    let stderr = '';
    let stdout = '';
    const hanging = new Promise<void>((resolve) =>
      child.stderr.on('data', (d) => {
        stderr += d;
        if (stderr.includes('jobs() hangs now\n')) resolve();
      }),
    );
    child.stdout.on('data', (d) => (stdout += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    await hanging;
    child.kill('SIGINT');
    expect(await exited).toBe(130);
    expect(stdout).toBe('');
    expect(stderr).toBe(
      'jobs() hangs now\ncronq tick: tick hangs at 2026-11-30T02:00:00.000Z (period 2026-11-30): fan-out failed after 2 jobs enqueued (0 already present): Interrupted: interrupted by SIGINT\n',
    );
    expect(await jobs()).toEqual(['hangs:h:0:2026-11-30', 'hangs:h:1:2026-11-30']);
  });
});
