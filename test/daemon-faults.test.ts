import { afterEach, describe, expect, it } from 'vitest';
import { recoverExpiredLeases } from '../src/store/recovery.ts';
import { DaemonProcess, runCli } from './support/cli.ts';
import { useTestDatabase } from './support/db.ts';
import { eventually } from './support/events.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_dead_letters'] });
let daemons: DaemonProcess[] = [];

afterEach(async () => {
  await Promise.all(daemons.map((d) => d.kill()));
  daemons = [];
});

function env() {
  return { DATABASE_URL: t.url, CRONQ_SCHEDULES: 'test/fixtures/schedules-faults', LOG_LEVEL: 'info' };
}

function daemon(args: string[] = []): DaemonProcess {
  const d = new DaemonProcess(['--poll', '50ms', '--no-migrate', ...args], env());
  daemons.push(d);
  return d;
}

async function enqueue(kind: string, key: string): Promise<number> {
  const result = await runCli(['enqueue', kind, '--key', key], env());
  expect(result.code).toBe(0);
  return Number(result.stdout.trim());
}

async function insertExpired(key: string, attempts: number, maxAttempts: number, leaseExpiries: number): Promise<void> {
  await t.sql(
    `INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, attempts, max_attempts, available_at, lease_fence, lease_deadline,
       lease_holder, lease_expiries, created_at, updated_at)
     VALUES ('default', 'k', ?, '{}', 'reserved', ?, ?, UTC_TIMESTAMP(6), 'tok', UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, 'host-a:4242', ?,
       UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`,
    [key, attempts, maxAttempts, leaseExpiries],
  );
}

describe('lease recovery counts expiries', () => {
  it('returns an expired job naming who held it, and sends it dead once its leases expired the bounded number of times', async () => {
    await insertExpired('first', 1, 5, 0);
    await insertExpired('third', 3, 5, 2);
    await insertExpired('final', 5, 5, 0);
    expect(await recoverExpiredLeases(t.database.db, 100, 3)).toEqual({ returned: 1, dead: 2 });
    const jobs = await t.sql('SELECT job_key, status, lease_expiries, last_error FROM cronq_jobs ORDER BY job_key');
    expect(jobs).toEqual([
      { job_key: 'final', status: 'dead', lease_expiries: 1, last_error: 'lease expired while held by host-a:4242 after the final attempt' },
      { job_key: 'first', status: 'ready', lease_expiries: 1, last_error: 'lease expired while held by host-a:4242; returned to the queue' },
      { job_key: 'third', status: 'dead', lease_expiries: 3, last_error: expect.stringMatching(/^the process running it stopped 3 times without finishing it \(its lease expired; last held by host-a:4242\)\. Typical causes: process\.exit\(\), an out-of-memory kill/) },
    ]);
    const letters = await t.sql('SELECT job_key, failure_reason FROM cronq_dead_letters ORDER BY job_key');
    expect(letters.map((l) => l.job_key)).toEqual(['final', 'third']);
    expect(letters[1].failure_reason).toBe(jobs[2].last_error);
  });
});

describe('a handler that misbehaves in cronq start', () => {
  it('logs an unhandled rejection and an uncaught exception as JSON events naming the job, and keeps running', async () => {
    const d = daemon();
    await d.waitFor('worker_started');
    const id = await enqueue('floats', 'floats:1');
    const [rejection] = await d.waitFor('unhandled_rejection');
    const [exception] = await d.waitFor('uncaught_exception');
    expect(rejection).toMatchObject({ job_id: id, kind: 'floats', key: 'floats:1', error: 'Error: floating rejection from a handler' });
    expect(exception).toMatchObject({ job_id: id, kind: 'floats', key: 'floats:1', error: 'Error: thrown from a handler timer' });
    await d.waitFor('job_completed');
    await enqueue('quick', 'quick:after');
    await d.waitFor('job_completed', 2);
    d.signal('SIGTERM');
    expect(await d.exited).toBe(0);
    expect(d.stderr).toBe('');
  });

  it.each([
    ['0', 'exits-zero'],
    ['256', 'exits-256'],
  ])('a handler that calls process.exit(%s) ends the daemon with 70, logged, so a supervisor restarting on failure restarts it', async (code, kind) => {
    await enqueue(kind, `${kind}:1`);
    const d = daemon();
    expect(await d.exited).toBe(70);
    const [line] = await d.waitFor('daemon_exit_unexpected');
    expect(line).toMatchObject({ level: 'fatal', exit_code: 0, reported_exit_code: 70 });
    expect(line.msg).toMatch(new RegExp(`^process\\.exit\\(${code}\\) was called while the daemon was running, not by its stop`));
  });

  it('a job that kills its process is recognised when claimed again, and goes dead after the bounded number of crashes', async () => {
    const id = await enqueue('exits', 'exits:1');
    const first = daemon();
    expect(await first.exited).toBe(3);
    await eventually(async () => (await recoverExpiredLeases(t.database.db, 100, 2)).returned === 1, 10_000, 'the first lease to expire');
    const [afterFirst] = await t.sql('SELECT status, lease_expiries, last_error FROM cronq_jobs WHERE id = ?', [id]);
    expect(afterFirst).toEqual({ status: 'ready', lease_expiries: 1, last_error: expect.stringMatching(new RegExp(`^lease expired while held by .+:${first.child.pid}; returned`)) });

    const second = daemon();
    expect(await second.exited).toBe(3);
    expect(second.events('job_reclaimed_after_lease_expiry')).toMatchObject([{ job_id: id, key: 'exits:1', lease_expiries: 1 }]);
    await eventually(async () => (await recoverExpiredLeases(t.database.db, 100, 2)).dead === 1, 10_000, 'the second lease to expire');
    const [letter] = await t.sql('SELECT failure_reason FROM cronq_dead_letters WHERE job_id = ?', [id]);
    expect(letter.failure_reason).toMatch(new RegExp(`^the process running it stopped 2 times without finishing it \\(its lease expired; last held by .+:${second.child.pid}\\)`));
  });

  it('/metrics shows the age of the oldest job running in this process, 0 when none', async () => {
    const d = daemon(['--http', '127.0.0.1:0']);
    const [{ port }] = await d.waitFor('http_listening');
    await d.waitFor('daemon_started'); // bound before the engine starts, serving once it has
    const gauge = async () => {
      const body = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      const line = body.split('\n').find((l) => l.startsWith('cronq_oldest_running_job_age_seconds '));
      return line === undefined ? undefined : Number(line.split(' ')[1]);
    };
    expect(await gauge()).toBe(0);
    await enqueue('hangs', 'hangs:1');
    await d.waitFor('job_claimed');
    await eventually(async () => ((await gauge()) ?? 0) > 0.2, 10_000, 'a positive age');
  });
});
