import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestDatabase } from './support/db.ts';
import { DaemonProcess, runCli } from './support/cli.ts';

/**
 * The runtime identity needs SELECT, INSERT, UPDATE and DELETE on its database and
 * nothing else; schema changes run separately with an administrative URL.
 * A real user with exactly those grants, on the shared server, dropped afterwards.
 */
const SCHEDULES = 'test/fixtures/schedules-privileges';
const user = `cq_${randomBytes(4).toString('hex')}`;
/** The migration user of docs/deploy.md: DDL on the cronq database, nothing global. */
const adminUser = `cqa_${randomBytes(4).toString('hex')}`;
const adminPassword = randomBytes(12).toString('hex');
// Characters a URL must percent-encode, so both forms are checked for leaks.
const password = `Pw${randomBytes(9).toString('hex')}@:/`;
const encoded = encodeURIComponent(password);
const t = useTestDatabase();
let restricted: string;
let freshName: string;
const daemons: DaemonProcess[] = [];

/** `url` (a mysql:// URL ending in a database) for another user or database. */
function urlFor(base: string, { as, database }: { as?: { user: string; password: string }; database?: string }): string {
  const u = new URL(base);
  if (as) {
    u.username = as.user;
    u.password = encodeURIComponent(as.password);
  }
  if (database) u.pathname = `/${database}`;
  return u.toString();
}

function expectNoPassword(text: string, where: string): void {
  expect(text.includes(password), `password in ${where}`).toBe(false);
  expect(text.includes(encoded), `encoded password in ${where}`).toBe(false);
}

beforeAll(async () => {
  freshName = `${t.name}_fresh`;
  await t.sql(`CREATE USER '${user}'@'%' IDENTIFIED BY '${password}'`);
  for (const db of [t.name, freshName]) await t.sql(`GRANT SELECT, INSERT, UPDATE, DELETE ON \`${db}\`.* TO '${user}'@'%'`);
  await t.sql(`CREATE USER '${adminUser}'@'%' IDENTIFIED BY '${adminPassword}'`);
  await t.sql(`GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, INDEX, DROP, REFERENCES ON \`${freshName}\`.* TO '${adminUser}'@'%'`);
  restricted = urlFor(t.url, { as: { user, password } });
});

afterAll(async () => {
  await Promise.all(daemons.map((d) => d.kill()));
  await t.sql(`DROP USER IF EXISTS '${user}'@'%'`);
  await t.sql(`DROP USER IF EXISTS '${adminUser}'@'%'`);
  await t.sql(`DROP DATABASE IF EXISTS \`${freshName}\``);
});

describe('a runtime user with only SELECT, INSERT, UPDATE and DELETE', () => {
  it('has exactly those grants', async () => {
    const grants = await t.sql(`SHOW GRANTS FOR '${user}'@'%'`);
    const text = grants.map((g) => Object.values(g)[0]).join('\n');
    expect(text).toMatch(new RegExp(`GRANT SELECT, INSERT, UPDATE, DELETE ON \`${t.name}\`\\.\\* TO`));
    expect(text).not.toMatch(/CREATE|ALTER|DROP|INDEX|ALL PRIVILEGES/);
  });

  it('runs cronq start --no-migrate: enqueues by CLI, completes a job, dead-letters a failure with secrets masked, exits 0 on SIGTERM, and never prints the password', async () => {
    const env = { DATABASE_URL: restricted, CRONQ_SCHEDULES: SCHEDULES, LOG_LEVEL: 'debug' };
    const d = new DaemonProcess(['--no-migrate', '--poll', '50ms'], env);
    daemons.push(d);
    const [started] = await d.waitFor('daemon_started');
    expect(started.database).toBe(urlFor(t.url, { as: { user, password: 'x' } }).replace(':x@', ':***@'));

    const ids: Record<string, number> = {};
    const token = `tok_${randomBytes(8).toString('hex')}`;
    const cases = [['ok', '{}'], ['fails', '{}'], ['leaks', JSON.stringify({ url: restricted })], ['effect-fails', JSON.stringify({ token })]];
    for (const [kind, payload] of cases) {
      const r = await runCli(['enqueue', kind, '--key', `priv:${kind}`, '--payload', payload], env);
      expect(r, `enqueue ${kind}`).toMatchObject({ code: 0, stderr: '' });
      ids[kind] = Number(r.stdout);
    }
    await d.waitFor('job_completed');
    await d.waitFor('job_dead', 3);

    const jobs = await t.sql('SELECT job_key, status, last_error FROM cronq_jobs ORDER BY job_key');
    expect(jobs.map((j) => [j.job_key, j.status])).toEqual([
      ['priv:effect-fails', 'dead'],
      ['priv:fails', 'dead'],
      ['priv:leaks', 'dead'],
      ['priv:ok', 'done'],
    ]);
    const letters = await t.sql('SELECT job_id, failure_reason FROM cronq_dead_letters ORDER BY job_id');
    expect(letters.map((l) => l.job_id).sort()).toEqual([ids.fails, ids.leaks, ids['effect-fails']].sort());
    const leaked = letters.find((l) => l.job_id === ids.leaks)!.failure_reason as string;
    expect(leaked).toBe(`Error: could not reach ${urlFor(t.url, { as: { user, password: 'x' } }).replace(':x@', ':***@')}: connection refused`);
    expectNoPassword(jobs.map((j) => j.last_error ?? '').join('\n'), 'last_error');
    expectNoPassword(leaked, 'failure_reason');
    // A failed effect statement is described by the driver's error, not by drizzle's
    // "Failed query: ... params: ..." (the parameters come from the payload).
    const effectReason = letters.find((l) => l.job_id === ids['effect-fails'])!.failure_reason as string;
    expect(effectReason).toMatch(/no_such_table/);
    expect(effectReason).not.toContain(token);
    expect(JSON.stringify(d.lines)).not.toContain(token);

    d.signal('SIGTERM');
    expect(await d.exited).toBe(0);
    expect(d.events('worker_stopped')).toHaveLength(1);
    expectNoPassword(JSON.stringify(d.lines), 'the daemon log');
    expectNoPassword(d.stderr, 'the daemon stderr');
  });

  it('cannot migrate: cronq migrate fails with one line naming the missing privilege, and changes nothing', async () => {
    const before = await t.sql('SELECT table_name FROM information_schema.tables WHERE table_schema = ? ORDER BY 1', [t.name]);
    const r = await runCli(['migrate'], { DATABASE_URL: restricted });
    expect([1, 64]).toContain(r.code);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/denied/i);
    expectNoPassword(r.stdout + r.stderr, 'migrate output');
    expect(await t.sql('SELECT table_name FROM information_schema.tables WHERE table_schema = ? ORDER BY 1', [t.name])).toEqual(before);
  });

  it('cronq start without --no-migrate fails in one line that says to start with --no-migrate and migrate with MIGRATION_DATABASE_URL', async () => {
    const r = await runCli(['start'], { DATABASE_URL: restricted, CRONQ_SCHEDULES: SCHEDULES }, 20_000);
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/denied.*--no-migrate.*cronq migrate|denied.*cronq migrate.*--no-migrate/i);
    expect(r.stderr).toContain('MIGRATION_DATABASE_URL');
    expectNoPassword(r.stdout + r.stderr, 'start output');
  });

  it('cronq migrate uses MIGRATION_DATABASE_URL (the documented migration user) over DATABASE_URL (restricted), creating the database, and the restricted daemon then runs on that schema', async () => {
    const admin = urlFor(t.url, { as: { user: adminUser, password: adminPassword }, database: freshName });
    const runtime = urlFor(restricted, { database: freshName });
    const r = await runCli(['migrate'], { DATABASE_URL: runtime, MIGRATION_DATABASE_URL: admin });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe(`migrated ${admin.replace(`:${adminPassword}@`, ':***@')}`);
    const tables = await t.sql('SELECT table_name AS t FROM information_schema.tables WHERE table_schema = ?', [freshName]);
    expect(tables.map((x) => x.t)).toEqual(expect.arrayContaining(['cronq_jobs', 'cronq_dead_letters']));

    const env = { DATABASE_URL: runtime, CRONQ_SCHEDULES: SCHEDULES };
    const d = new DaemonProcess(['--no-migrate', '--poll', '50ms'], env);
    daemons.push(d);
    await d.waitFor('worker_started');
    expect((await runCli(['enqueue', 'ok', '--key', 'fresh:ok'], env)).code).toBe(0);
    await d.waitFor('job_completed');
    d.signal('SIGTERM');
    expect(await d.exited).toBe(0);
  });

  it.each([
    ['an unreachable server', () => `mysql://${user}:${encoded}@127.0.0.1:1/${t.name}`, /cannot reach the database at 127\.0\.0\.1:1/],
    ['a wrong password', () => urlFor(restricted, { as: { user, password: `${password}-wrong` } }), /Access denied/],
  ])('names the problem in one line and never prints the password, for %s (even with LOG_LEVEL=debug stacks)', async (_what, url, message) => {
    for (const level of ['info', 'debug']) {
      const r = await runCli(['start', '--no-migrate'], { DATABASE_URL: url(), CRONQ_SCHEDULES: SCHEDULES, LOG_LEVEL: level }, 20_000);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toMatch(message);
      if (level === 'info') expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expectNoPassword(r.stdout + r.stderr, `start output at ${level}`);
      expect(r.stdout + r.stderr).not.toContain(`${password}-wrong`);
    }
  });
});
