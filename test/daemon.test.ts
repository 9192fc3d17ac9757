import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { useTestDatabase } from './support/db.ts';
import { spawn } from 'node:child_process';
import { CRONQ_BIN, DaemonProcess, REPO_ROOT, runCli } from './support/cli.ts';
import { eventually } from './support/events.ts';
import { isGone } from './support/process.ts';

const SCHEDULES = 'test/fixtures/schedules-daemon';
const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_dead_letters'] });
let env: Record<string, string>;
let daemons: DaemonProcess[] = [];

const silentSockets = new Set<Socket>();
const silent = createServer((socket) => {
  silentSockets.add(socket);
  socket.on('close', () => silentSockets.delete(socket));
});
beforeAll(() => new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve)));

// Registered after useTestDatabase, so (hooks unwind as a stack) it runs before the drop.
afterAll(async () => {
  await Promise.all(daemons.map((d) => d.kill()));
  for (const socket of silentSockets) socket.destroy();
  await new Promise((resolve) => silent.close(resolve));
});
// A test's daemons are gone before the next test empties the tables.
afterEach(async () => {
  await Promise.all(daemons.map((d) => d.kill()));
  daemons = [];
});
beforeEach(async () => {
  const trace = join(mkdtempSync(join(tmpdir(), 'cronq-')), 'trace');
  env = { DATABASE_URL: t.url, CRONQ_SCHEDULES: SCHEDULES, CRONQ_TEST_TRACE: trace, LOG_LEVEL: 'info' };
});

function daemon(args: string[] = [], extra: Record<string, string> = {}): DaemonProcess {
  const d = new DaemonProcess(['--poll', '50ms', ...args], { ...env, ...extra });
  daemons.push(d);
  return d;
}

describe('cronq start', () => {
  it('SIGTERM during the post-claim pause releases the job with its attempt restored, and its handler never starts', async () => {
    const enq = await runCli(['enqueue', 'traced', '--key', 'pause:1'], env);
    expect(enq.code).toBe(0);
    const id = Number(enq.stdout.trim());
    const d = daemon([], { CRONQ_FAULT_POST_CLAIM_PAUSE_MS: '3000' });
    // The claim has committed once the row says reserved; the daemon is now inside its pause.
    await eventually(async () => (await t.sql("SELECT id FROM cronq_jobs WHERE status = 'reserved'")).length === 1, 20_000, 'the claim');
    d.signal('SIGTERM');
    expect(await d.exited).toBe(0);
    expect(d.events('claim_released_on_shutdown').map((e) => e.job_id)).toEqual([id]);
    expect(d.events('worker_stopped')).toHaveLength(1);
    expect(d.events('job_claimed')).toHaveLength(0);
    const [job] = await t.sql('SELECT status, attempts, lease_token FROM cronq_jobs WHERE id = ?', [id]);
    expect(job).toEqual({ status: 'ready', attempts: 0, lease_token: null });
    expect(existsSync(env.CRONQ_TEST_TRACE)).toBe(false);
  });

  it('warns in one line when its schedules folder holds nothing to load, and still runs', async () => {
    const d = daemon([], { CRONQ_SCHEDULES: 'test/fixtures/schedules-empty' });
    const [line] = await d.waitFor('nothing_loaded');
    expect(line).toMatchObject({ level: 'warn', schedules_dir: 'test/fixtures/schedules-empty' });
    expect(line.msg).toBe('no task or schedule loaded from test/fixtures/schedules-empty: this daemon will schedule and run nothing (is it the right folder?)');
    await d.waitFor('daemon_started');
    d.signal('SIGTERM');
    expect(await d.exited).toBe(0);
  });

  it('runs an enqueued job, then exits 0 on SIGTERM', async () => {
    const d = daemon();
    await d.waitFor('worker_started');
    const enq = await runCli(['enqueue', 'traced', '--key', 'run:1'], env);
    await d.waitFor('job_completed');
    expect(readFileSync(env.CRONQ_TEST_TRACE, 'utf8')).toBe('run:1\n');
    d.signal('SIGTERM');
    expect(await d.exited).toBe(0);
    const [job] = await t.sql('SELECT status, locked_by FROM cronq_jobs WHERE id = ?', [Number(enq.stdout)]);
    expect(job.status).toBe('done');
    expect(job.locked_by).toMatch(/^.+:\d+$/);
  });

  it('stops on SIGHUP (its terminal closed) as on SIGTERM: the running job is released, its attempt restored, exit 0', async () => {
    // Node's default for SIGHUP ends the process at once and silently, even under nohup
    // (Node resets the inherited ignore): the job stayed reserved until its lease ran out.
    const d = await stoppedWhileHanging('SIGHUP', 'hangs:hup');
    expect(d.events('shutdown_requested')).toMatchObject([{ signal: 'SIGHUP' }]);
  });

  it('aborts a handler that outlives --grace, releases its job and exits 0', async () => {
    await stoppedWhileHanging('SIGTERM', 'hangs:1');
  });

  /**
   * A daemon with --grace 300ms, sent `signal` while its handler of a `hangs` job (keyed
   * `key`) runs on past the grace: it exits 0 having released that job, attempt restored.
   */
  async function stoppedWhileHanging(signal: NodeJS.Signals, key: string) {
    const d = daemon(['--grace', '300ms']);
    await d.waitFor('worker_started');
    const enq = await runCli(['enqueue', 'hangs', '--key', key], env);
    await d.waitFor('job_claimed');
    d.signal(signal);
    expect(await d.exited).toBe(0);
    expect(d.events('job_released_on_shutdown')).toHaveLength(1);
    const [job] = await t.sql('SELECT status, attempts FROM cronq_jobs WHERE id = ?', [Number(enq.stdout)]);
    expect(job).toEqual({ status: 'ready', attempts: 0 });
    return d;
  }

  it('a second signal exits at once', async () => {
    const d = daemon(['--grace', '30s']);
    await d.waitFor('worker_started');
    await runCli(['enqueue', 'hangs', '--key', 'hangs:2'], env);
    await d.waitFor('job_claimed');
    d.signal('SIGTERM');
    await d.waitFor('shutdown_requested');
    d.signal('SIGTERM');
    expect(await d.exited).toBe(1);
  });

  it('a second signal also kills a running command, so it cannot run on beside its job run again after recovery', async () => {
    const d = daemon(['--grace', '30s'], { CRONQ_SCHEDULES: 'test/fixtures/schedules-commands' });
    await d.waitFor('worker_started');
    expect((await runCli(['tick', 'lingers', '--schedules', 'test/fixtures/schedules-commands'], env)).code).toBe(0);
    await eventually(async () => existsSync(env.CRONQ_TEST_TRACE), 20_000, 'the command to start');
    const shell = Number(readFileSync(env.CRONQ_TEST_TRACE, 'utf8'));
    expect(isGone(shell)).toBe(false);
    d.signal('SIGTERM');
    await d.waitFor('shutdown_requested');
    d.signal('SIGTERM');
    expect(await d.exited).toBe(1);
    await eventually(async () => isGone(shell), 2_000, 'the command to die with the daemon');
  });

  it('a signal while --no-migrate still waits on a database that does not answer exits 0, stopped as asked, not 1 with the pool it closed itself', async () => {
    // A database that accepts connections and never says a word: the schema check waits on it.
    const connected = new Promise<void>((resolve) => silent.once('connection', () => resolve()));
    const d = daemon(['--no-migrate'], { DATABASE_URL: `mysql://root@127.0.0.1:${(silent.address() as AddressInfo).port}/cronq_silent`, CRONQ_SCHEDULES: 'test/fixtures/schedules-empty' });
    await connected;
    d.signal('SIGTERM');
    expect(await d.exited).toBe(0);
    expect(d.events('shutdown_requested')).toHaveLength(1);
    expect(d.stderr).toBe('');
  });

  it('a signal while the start-up migration still connects to a database that does not answer exits 0 at once, not 1 after the connect timeout', async () => {
    // Nothing is applied before the connection answers: there is no DDL to let finish.
    const connected = new Promise<void>((resolve) => silent.once('connection', () => resolve()));
    const d = daemon([], { DATABASE_URL: `mysql://root@127.0.0.1:${(silent.address() as AddressInfo).port}/cronq_silent`, CRONQ_SCHEDULES: 'test/fixtures/schedules-empty' });
    await connected;
    const signalled = performance.now();
    d.signal('SIGTERM');
    expect(await d.exited).toBe(0);
    expect(performance.now() - signalled).toBeLessThan(3_000); // the connect timeout is 5 s
    expect(d.events('shutdown_requested')).toHaveLength(1);
    expect(d.stderr).toBe('');
  });

  it('Ctrl-C while cronq migrate still connects to a database that does not answer stops at once, nothing changed, exit 130', async () => {
    const connected = new Promise<void>((resolve) => silent.once('connection', () => resolve()));
    const child = spawn(process.execPath, [CRONQ_BIN, 'migrate'], {
      cwd: REPO_ROOT,
      env: { ...process.env, DATABASE_URL: `mysql://root@127.0.0.1:${(silent.address() as AddressInfo).port}/cronq_silent` },
    });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    await connected;
    const signalled = performance.now();
    child.kill('SIGINT');
    expect(await exited).toBe(130);
    expect(performance.now() - signalled).toBeLessThan(3_000); // the connect timeout is 5 s
    expect(stderr).toBe('cronq migrate: stopped before migrating: no migration was applied\n');
  });

  it('writes a failed job to the dead-letter table that SQL can read', async () => {
    const d = daemon();
    await d.waitFor('worker_started');
    await runCli(['enqueue', 'fails', '--key', 'report:2026-11'], env);
    await d.waitFor('job_dead');
    const letters = await t.sql('SELECT job_key, kind, failure_reason, reviewed_at FROM cronq_dead_letters WHERE reviewed_at IS NULL');
    expect(letters).toEqual([{ job_key: 'report:2026-11', kind: 'fails', failure_reason: 'Error: the report server said 503', reviewed_at: null }]);
  });

  it('with --no-migrate, refuses an unmigrated database with one line naming the fix', async () => {
    const name = `${t.name}_empty`;
    await t.sql(`CREATE DATABASE \`${name}\``);
    try {
      const r = await runCli(['start', '--no-migrate'], { ...env, DATABASE_URL: t.url.replace(/\/[^/]+$/, `/${name}`) });
      expect(r.code).toBe(1);
      expect(r.stderr.trim()).toMatch(/^cronq start: the database schema is not up to date \(\d+ migrations pending\): run 'cronq migrate'/);
    } finally {
      await t.sql(`DROP DATABASE \`${name}\``);
    }
  });

  it('refuses bad flags with one line and exit 64, before touching the database', async () => {
    for (const args of [['--concurrency', '0'], ['--prefetch', '10001'], ['--prefetch', 'lots'], ['--grace', 'soon'], ['--queues', 'a,,b'], ['--bogus']]) {
      const r = await runCli(['start', ...args], env);
      expect(r.code, args.join(' ')).toBe(64);
      expect(r.stderr.trim().split('\n'), args.join(' ')).toHaveLength(1);
    }
  });
});

describe('cronq enqueue', () => {
  it('prints the job id alone, and the same id again for the same key, saying on stderr that nothing was enqueued', async () => {
    const first = await runCli(['enqueue', 'traced', '--key', 'same:1', '--payload', '{"a":1}'], env);
    const second = await runCli(['enqueue', 'traced', '--key', 'same:1', '--payload', '{"a":2}'], env);
    expect(first).toMatchObject({ code: 0, stderr: '' });
    expect(first.stdout).toMatch(/^\d+\n$/);
    expect(second.stdout).toBe(first.stdout);
    expect(second).toMatchObject({ code: 0, stderr: `cronq enqueue: key 'same:1' already present (job ${first.stdout.trim()}, ready): nothing enqueued\n` });
    const rows = await t.sql('SELECT payload FROM cronq_jobs');
    expect(rows).toHaveLength(1);
    expect(JSON.parse(typeof rows[0].payload === 'string' ? rows[0].payload : JSON.stringify(rows[0].payload))).toEqual({ a: 1 });
  });

  it('applies --queue, --max-attempts and --run-at', async () => {
    const r = await runCli(
      ['enqueue', 'traced', '--key', 'opts:1', '--queue', 'night', '--max-attempts', '2', '--run-at', '2030-01-01T00:00:00Z'],
      env,
    );
    expect(r.code).toBe(0);
    const [job] = await t.sql('SELECT queue, max_attempts, available_at FROM cronq_jobs');
    expect(job.queue).toBe('night');
    expect(job.max_attempts).toBe(2);
    expect(job.available_at.toISOString()).toBe('2030-01-01T00:00:00.000Z');
  });

  it.each([
    [['traced', '--key', 'k', '--payload', '{oops'], /--payload is not valid JSON/],
    [['traced'], /--key KEY is required/],
    [['traced', '--key='], /--key must not be empty \(a job key is 1 to 255 characters\)/],
    [['traced', '--key', 'k'.repeat(300)], /300 characters long; at most 255/],
    [['traced', '--key', 'k', '--run-at', 'tomorrow'], /--run-at must be an ISO 8601 instant/],
    [['traced', '--key', 'k', '--run-at', '2030-01-01T00:00'], /--run-at must be an ISO 8601 instant/],
    [['traced', '--key', 'k', '--max-attempts', '0'], /--max-attempts must be a whole number/],
    [['traced', '--key', 'k', '--frobnicate'], /Unknown option '--frobnicate'/],
    [['no-such-kind', '--key', 'k'], /unknown kind 'no-such-kind'/],
  ])('refuses %j with one clear line, exit 64, and writes nothing', async (args, message) => {
    const r = await runCli(['enqueue', ...args], env);
    expect(r.code).toBe(64);
    expect(r.stderr).toMatch(message);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stdout).toBe('');
    expect(await t.sql('SELECT id FROM cronq_jobs')).toEqual([]);
  });

  it('names host and port, and exits 1 within seconds, when the database is unreachable', async () => {
    const started = Date.now();
    const r = await runCli(['enqueue', 'traced', '--key', 'k'], { ...env, DATABASE_URL: 'mysql://app:s3cret@127.0.0.1:1/cronq' });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/cannot reach the database at 127\.0\.0\.1:1/);
    expect(r.stderr).not.toMatch(/s3cret/);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});

describe('cronq CLI', () => {
  it('an unknown command is a usage error', async () => {
    const r = await runCli(['frobnicate'], env);
    expect(r.code).toBe(64);
    expect(r.stderr.trim()).toBe("cronq: unknown command 'frobnicate' (see cronq --help)");
  });

  it('--help lists every command, and each command describes its flags', async () => {
    const main = await runCli(['--help'], env);
    expect(main.code).toBe(0);
    for (const command of ['start', 'migrate', 'enqueue']) {
      expect(main.stdout).toContain(`  ${command}`);
      const help = await runCli([command, '--help'], env);
      expect(help.code).toBe(0);
      expect(help.stdout).toContain(`Usage: cronq ${command}`);
    }
    const start = await runCli(['start', '--help'], env);
    for (const flag of ['--schedules', '--concurrency', '--queues', '--grace', '--no-migrate']) expect(start.stdout).toContain(flag);
  });

  it('migrate creates a missing database and is harmless to repeat', async () => {
    const name = `${t.name}_fresh`;
    const url = t.url.replace(/\/[^/]+$/, `/${name}`);
    try {
      expect((await runCli(['migrate'], { ...env, DATABASE_URL: url })).code).toBe(0);
      expect((await runCli(['migrate'], { ...env, DATABASE_URL: url })).code).toBe(0);
      const tables = await t.sql('SELECT table_name AS t FROM information_schema.tables WHERE table_schema = ? ORDER BY 1', [name]);
      expect(tables.map((r: any) => r.t)).toEqual(expect.arrayContaining(['cronq_dead_letters', 'cronq_jobs']));
    } finally {
      await t.sql(`DROP DATABASE IF EXISTS \`${name}\``);
    }
  });
});
