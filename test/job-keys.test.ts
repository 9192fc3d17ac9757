import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { drizzle } from 'drizzle-orm/mysql2';
import { migrate as drizzleMigrate } from 'drizzle-orm/mysql2/migrator';
import { afterEach, describe, expect, it } from 'vitest';
import { connect } from '../src/db/client.ts';
import { applyMigrations, MIGRATIONS_FOLDER } from '../src/db/migrate.ts';
import { createCronq, defineTask, PermanentError, UsageError, type Cronq } from '../src/index.ts';
import { runCli } from './support/cli.ts';
import { useTestDatabase } from './support/db.ts';
import { EventLog } from './support/events.ts';

/**
 * Job keys compare byte for byte: keys that differ only in trailing spaces or tabs are
 * different jobs (a PAD SPACE collation such as utf8mb4_bin made `pad:a ` the job of
 * `pad:a`). Migration 0004 moved job_key to a NO PAD binary collation.
 */
const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_dead_letters'] });
const KEYS = ['pad:a', 'pad:a ', 'pad:a\t', 'pad:a  '];
let cronq: Cronq | null = null;

afterEach(async () => {
  await cronq?.stop({ graceMs: 1_000 });
  cronq = null;
});

const hexOf = (s: string) => Buffer.from(s, 'utf8').toString('hex').toUpperCase();

describe('job keys', () => {
  it('keys that differ only in trailing spaces or a tab are different jobs, through enqueue, enqueueMany and cronq enqueue', async () => {
    cronq = createCronq({ databaseUrl: t.url, logger: false, allowUnknownKind: true });
    const ids = [];
    for (const key of KEYS) {
      const { id, created } = await cronq.enqueue({ kind: 'pad', key });
      expect(created, JSON.stringify(key)).toBe(true);
      ids.push(id);
    }
    expect(new Set(ids).size).toBe(KEYS.length);
    // The same keys again: each finds its own job, not its neighbour's.
    for (const [i, key] of KEYS.entries()) expect(await cronq.enqueue({ kind: 'pad', key })).toEqual({ id: ids[i], created: false });

    const many = Array.from({ length: 300 }, (_, i) => ({ kind: 'pad', key: `many:${i}${' '.repeat(i % 3)}` }));
    expect(await cronq.enqueueMany(many)).toEqual({ inserted: 300, existing: 0 });
    expect(await cronq.enqueueMany(many)).toEqual({ inserted: 0, existing: 300 });

    // The CLI: keys that differ from pad:a and from each other only at the end.
    const cli = (key: string) =>
      runCli(['enqueue', 'pad', '--key', key, '--allow-unknown-kind'], { DATABASE_URL: t.url, CRONQ_SCHEDULES: 'test/fixtures/schedules-effects' });
    await t.sql("DELETE FROM cronq_jobs WHERE job_key <> 'pad:a'");
    const [space, tab] = await Promise.all([cli('pad:a '), cli('pad:a\t')]);
    expect([space.stderr, tab.stderr]).toEqual(['', '']);
    const cliIds = [space.stdout.trim(), tab.stdout.trim()];
    expect(new Set([String(ids[0]), ...cliIds]).size).toBe(3);
    expect((await cli('pad:a ')).stdout.trim()).toBe(cliIds[0]);

    const rows = await t.sql('SELECT id, HEX(job_key) AS hex FROM cronq_jobs ORDER BY HEX(job_key)');
    expect(rows.map((r) => [String(r.id), r.hex])).toEqual([
      [String(ids[0]), hexOf('pad:a')],
      [cliIds[1], hexOf('pad:a\t')],
      [cliIds[0], hexOf('pad:a ')],
    ]);
  });

  it('a key holding a lone UTF-16 surrogate is refused, never stored as U+FFFD where it would be the job of another key', async () => {
    cronq = createCronq({ databaseUrl: t.url, logger: false, allowUnknownKind: true });
    expect((await cronq.enqueue({ kind: 'cut', key: 'cut:\ufffd' })).created).toBe(true);
    for (const key of ['cut:\ud83d', 'cut:\ude00', 'cut:\ude00\ud83d']) {
      await expect(cronq.enqueue({ kind: 'cut', key }), JSON.stringify(key)).rejects.toThrow(/^job key holds a lone UTF-16 surrogate .* at character 4/);
      await expect(cronq.enqueueMany([{ kind: 'cut', key }])).rejects.toThrow(UsageError);
    }
    // A kind is a task's name: letters, digits, '.', '_' and '-' only, so no surrogate at all.
    await expect(cronq.enqueue({ kind: 'cut\ud83d', key: 'cut:kind' })).rejects.toThrow(/^job kind \(a task's name\) must be 1-64 letters/);
    // A whole emoji is a pair, not a lone half.
    expect((await cronq.enqueue({ kind: 'cut', key: 'cut:\ud83d\ude00' })).created).toBe(true);
    expect((await t.sql('SELECT HEX(job_key) AS hex FROM cronq_jobs ORDER BY id')).map((r) => r.hex)).toEqual([hexOf('cut:\ufffd'), hexOf('cut:😀')]);
  });

  it('dead letters keep the exact key, trailing spaces and tab included', async () => {
    const log = new EventLog('info');
    cronq = createCronq({
      databaseUrl: t.url,
      logger: log.logger,
      pollInterval: '50ms',
      tasks: [defineTask({ name: 'doomed', handle: () => Promise.reject(new PermanentError('no')) })],
    });
    await cronq.start();
    for (const key of KEYS) await cronq.enqueue({ kind: 'doomed', key });
    await log.waitFor('job_dead', KEYS.length);
    const letters = await t.sql('SELECT HEX(l.job_key) AS hex, l.job_id = j.id AS same FROM cronq_dead_letters l JOIN cronq_jobs j ON j.job_key = l.job_key ORDER BY l.job_id');
    expect(letters).toEqual(KEYS.map((k) => ({ hex: hexOf(k), same: 1 })));
    const listed = await runCli(['dead', 'list', '--json'], { DATABASE_URL: t.url });
    expect((JSON.parse(listed.stdout) as Array<{ key: string }>).map((l) => l.key).sort()).toEqual([...KEYS].sort());
  });
});

describe('migration 0004 on an existing database', () => {
  it('a database migrated through 0003, with jobs and dead letters, upgrades in place: rows kept, keys then compared byte for byte', async () => {
    const name = `${t.name}_upgrade`;
    const folder = mkdtempSync(join(tmpdir(), 'cronq-migrations-'));
    await t.sql(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`);
    const database = connect(t.url.replace(/\/[^/]+$/, `/${name}`));
    try {
      // The committed migrations up to 0003 only, as a database of the previous release has them.
      cpSync(MIGRATIONS_FOLDER, folder, { recursive: true });
      const journalPath = join(folder, 'meta', '_journal.json');
      const journal = JSON.parse(readFileSync(journalPath, 'utf8'));
      journal.entries = journal.entries.filter((e: { idx: number }) => e.idx <= 3);
      writeFileSync(journalPath, JSON.stringify(journal));
      await drizzleMigrate(drizzle(database.pool), { migrationsFolder: folder });
      const collation = async () =>
        (await database.pool.query(
          `SELECT table_name AS t, collation_name AS c FROM information_schema.columns WHERE table_schema = ? AND column_name = 'job_key' ORDER BY table_name`,
          [name],
        ))[0] as Array<{ t: string; c: string }>;
      expect((await collation()).map((r) => r.c)).toEqual(['utf8mb4_bin', 'utf8mb4_bin']);

      await database.pool.query(`INSERT INTO cronq_jobs (queue, kind, job_key, payload, max_attempts, available_at, created_at, updated_at)
        VALUES ('default', 'pad', 'pad:a', '{"n":1}', 5, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)),
               ('default', 'pad', 'old:b ', '{"n":2}', 5, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`);
      await database.pool.query(`INSERT INTO cronq_dead_letters (job_id, queue, kind, job_key, payload, failure_reason, attempts, dead_at)
        SELECT id, queue, kind, job_key, payload, 'Error: old', 5, UTC_TIMESTAMP(6) FROM cronq_jobs`);
      // Under the old collation the trailing space was ignored: this is the collision being fixed.
      const [collided] = (await database.pool.query(
        `INSERT INTO cronq_jobs (queue, kind, job_key, payload, max_attempts, available_at, created_at, updated_at)
        VALUES ('default', 'pad', 'pad:a ', '{}', 5, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE id = id`,
      )) as unknown as [{ affectedRows: number }];
      expect(collided.affectedRows).toBe(0);

      await applyMigrations(database);
      expect((await collation()).map((r) => r.c)).toEqual(
        (await collation()).map(() => expect.stringMatching(/^(utf8mb4_nopad_bin|utf8mb4_0900_bin)$/)),
      );
      const [jobs] = await database.pool.query('SELECT HEX(job_key) AS hex, payload FROM cronq_jobs ORDER BY id');
      expect((jobs as Array<{ hex: string; payload: unknown }>).map((j) => [j.hex, typeof j.payload === 'string' ? JSON.parse(j.payload) : j.payload])).toEqual([
        [hexOf('pad:a'), { n: 1 }],
        [hexOf('old:b '), { n: 2 }],
      ]);
      const [letters] = await database.pool.query('SELECT HEX(job_key) AS hex FROM cronq_dead_letters ORDER BY job_id');
      expect((letters as Array<{ hex: string }>).map((l) => l.hex)).toEqual([hexOf('pad:a'), hexOf('old:b ')]);

      const upgraded = createCronq({ databaseUrl: t.url.replace(/\/[^/]+$/, `/${name}`), logger: false, allowUnknownKind: true });
      try {
        expect(await upgraded.enqueue({ kind: 'pad', key: 'pad:a ' })).toMatchObject({ created: true });
        expect(await upgraded.enqueue({ kind: 'pad', key: 'old:b' })).toMatchObject({ created: true });
        expect(await upgraded.enqueue({ kind: 'pad', key: 'old:b ' })).toMatchObject({ created: false });
      } finally {
        await upgraded.stop();
      }
    } finally {
      await database.close();
      await t.sql(`DROP DATABASE IF EXISTS \`${name}\``);
      rmSync(folder, { recursive: true, force: true });
    }
  });
});
