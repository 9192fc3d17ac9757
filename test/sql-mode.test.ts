import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCronq, type Cronq } from '../src/cronq.ts';
import { defineTask } from '../src/tasks/define.ts';
import { runCli } from './support/cli.ts';
import { EventLog } from './support/events.ts';
import { findServerBinary, PrivateServer, queryOnce } from './support/privateServer.ts';

/**
 * Statements are formatted client-side with backslash escapes, which a server running
 * `sql_mode=NO_BACKSLASH_ESCAPES` reads differently: every session cronq opens must set
 * its own mode. A private server started in that mode (never the shared one).
 */
const haveBinary = findServerBinary() !== null;
const skip = !haveBinary && Boolean(process.env.DATABASE_URL);

/** Under NO_BACKSLASH_ESCAPES, mysql2's `\'` ends the string: the rest ran as SQL, the subquery's result stored as the payload. */
const INJECTION =
  "x', (SELECT JSON_ARRAY(CURRENT_USER(), VERSION())), 5, UTC_TIMESTAMP(6), NULL, NULL, NULL, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)) -- ";
const KEYS = ["plain'quote", "back\\slash\\'quote\\", INJECTION.padEnd(143, 'x')];

let server: PrivateServer;
let url: string;

/** One statement on a connection of its own (queryOnce). */
const query = <T = any>(statement: string, values: unknown[] = []) => queryOnce<T>(url, statement, values);

describe.skipIf(skip)(skip ? 'sql_mode (skipped: no mariadbd/mysqld binary here and DATABASE_URL points elsewhere)' : 'sql_mode', () => {
  beforeAll(async () => {
    server = await PrivateServer.create({ serverArgs: ['--sql-mode=NO_BACKSLASH_ESCAPES'] });
    url = `${server.url}/cronq_sql_mode`;
  }, 60_000);

  afterAll(async () => {
    await server?.destroy();
  });

  it(
    'on a server in NO_BACKSLASH_ESCAPES mode, keys with quotes and backslashes round-trip unchanged through enqueue, claim, complete, fail, dead letters and the CLI, and the payload is never replaced',
    async () => {
      const setup = createCronq({ databaseUrl: url, logger: false, allowUnknownKind: true });
      await setup.migrate();
      expect(String((await query('SELECT @@GLOBAL.sql_mode AS m'))[0].m)).toContain('NO_BACKSLASH_ESCAPES');
      expect(KEYS[2]).toHaveLength(143);

      const seen: Array<{ kind: string; key: string; payload: unknown }> = [];
      const events = new EventLog('info');
      const tasks = [
        defineTask({ name: 'keep', handle: (job) => void seen.push({ kind: job.kind, key: job.key, payload: job.payload }) }),
        defineTask({
          name: 'refuse',
          maxAttempts: 2,
          backoff: { base: '10ms', max: '10ms' },
          handle: (job) => {
            seen.push({ kind: job.kind, key: job.key, payload: job.payload });
            throw new Error(`refused ${job.key}`);
          },
        }),
      ];
      let cronq: Cronq | undefined;
      try {
        // One each through enqueue, enqueueMany and the CLI, before any daemon claims.
        for (const key of KEYS) {
          const { created } = await setup.enqueue({ kind: 'keep', key, payload: { key } }).catch((e) => {
            throw new Error(`enqueue ${key}`, { cause: e });
          });
          expect(created).toBe(true);
          expect(await setup.enqueue({ kind: 'keep', key, payload: { key } })).toMatchObject({ created: false });
        }
        expect(await setup.enqueueMany(KEYS.map((key) => ({ kind: 'refuse', key: `many:${key}`, payload: { key }, maxAttempts: 2 })))).toEqual({
          inserted: KEYS.length,
          existing: 0,
        });
        for (const key of KEYS) {
          const cli = await runCli(['enqueue', 'keep', '--key', `cli:${key}`, '--payload', JSON.stringify({ key }), '--allow-unknown-kind'], {
            DATABASE_URL: url,
          });
          expect(cli.stderr).toBe('');
          expect(cli.code).toBe(0);
        }

        cronq = createCronq({ databaseUrl: url, tasks, logger: events.logger, allowUnknownKind: true, pollInterval: '20ms' });
        await cronq.start();
        await events.waitFor('job_completed', KEYS.length * 2);
        await events.waitFor('job_dead', KEYS.length);

        const stored = await query<{ job_key: string; kind: string; status: string; payload: string | { key: string }; last_error: string | null }>(
          'SELECT job_key, kind, status, payload, last_error FROM cronq_jobs ORDER BY id',
        );
        const expected = [
          ...KEYS.map((key) => ({ kind: 'keep', job_key: key, status: 'done', key })),
          ...KEYS.map((key) => ({ kind: 'refuse', job_key: `many:${key}`, status: 'dead', key })),
          ...KEYS.map((key) => ({ kind: 'keep', job_key: `cli:${key}`, status: 'done', key })),
        ];
        expect(stored.map((r) => ({ kind: r.kind, job_key: r.job_key, status: r.status, key: (typeof r.payload === 'string' ? JSON.parse(r.payload) : r.payload).key }))).toEqual(expected);
        for (const r of stored.filter((r) => r.kind === 'refuse')) expect(r.last_error).toBe(`Error: refused ${r.job_key}`);
        // The handler saw each key and payload as enqueued (the failing ones twice: fail, then dead).
        expect(seen.filter((s) => s.kind === 'keep').map((s) => s.key).sort()).toEqual(
          expected.filter((e) => e.kind === 'keep').map((e) => e.job_key).sort(),
        );
        for (const s of seen) expect(s.key.endsWith((s.payload as { key: string }).key)).toBe(true);
        expect(seen.filter((s) => s.kind === 'refuse')).toHaveLength(KEYS.length * 2);

        const dead = await runCli(['dead', 'list', '--json'], { DATABASE_URL: url });
        expect(dead.code).toBe(0);
        const letters = JSON.parse(dead.stdout) as Array<{ id: number; key: string; kind: string }>;
        expect(letters.map((l) => l.key).sort()).toEqual(KEYS.map((k) => `many:${k}`).sort());
        for (const letter of letters) {
          const shown = await runCli(['dead', 'show', String(letter.id), '--json'], { DATABASE_URL: url });
          const detail = JSON.parse(shown.stdout);
          expect(`many:${detail.payload.key}`).toBe(letter.key);
          expect(detail.failureReason).toBe(`Error: refused ${letter.key}`);
        }
      } finally {
        await cronq?.stop({ graceMs: 1_000 });
        await setup.stop();
      }
    },
    60_000,
  );
});
