import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { connect as connectTcp, createServer, type AddressInfo, type Server } from 'node:net';
import mysql from 'mysql2/promise';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { connect, type Database } from '../src/db/client.ts';
import { createCronq, defineTask, MigrationNotBegunError } from '../src/index.ts';
import { applyMigrations, MIGRATIONS_FOLDER, MigrationHalfAppliedError, MigrationIncompleteError, MigrationNeedsStoppedDaemonsError, pendingMigrations } from '../src/db/migrate.ts';
import { CRONQ_BIN, DaemonProcess, REPO_ROOT, runCli } from './support/cli.ts';

/**
 * cronq keeps its own migration ledger (cronq_migrations), so an app's drizzle-kit
 * migrations in the same database (drizzle's __drizzle_migrations) never hide cronq's, and
 * installations that recorded cronq's migrations in drizzle's table upgrade in place.
 * Each test gets an empty database of its own.
 */
const serverUrl = inject('serverUrl');
const committed = readMigrationFiles({ migrationsFolder: MIGRATIONS_FOLDER });
let admin: mysql.Connection;
const created: Array<{ name: string; database: Database }> = [];

beforeAll(async () => {
  admin = await mysql.createConnection({ uri: serverUrl });
});

afterAll(async () => {
  for (const { name, database } of created) {
    await database.close().catch(() => undefined);
    await admin.query(`DROP DATABASE IF EXISTS \`${name}\``);
  }
  await admin.end();
});

async function emptyDatabase(): Promise<{ name: string; database: Database; sql: (s: string, p?: unknown[]) => Promise<any[]> }> {
  const name = `cronq_test_mig_${randomBytes(4).toString('hex')}`;
  await admin.query(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`);
  const database = connect(`${serverUrl}/${name}`, { poolSize: 2 });
  created.push({ name, database });
  return {
    name,
    database,
    sql: async (s, p = []) => {
      await admin.query(`USE \`${name}\``);
      const [rows] = await admin.query(s, p as any[]);
      return rows as any[];
    },
  };
}

/** What drizzle-kit's migrator creates and writes for an app's own migration. */
async function appMigration(sql: (s: string, p?: unknown[]) => Promise<any[]>, createdAt: number): Promise<void> {
  await sql('CREATE TABLE IF NOT EXISTS `__drizzle_migrations` (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at bigint)');
  await sql('CREATE TABLE app_invoices (id int PRIMARY KEY)');
  await sql('INSERT INTO `__drizzle_migrations` (hash, created_at) VALUES (?, ?)', ['app-hash', createdAt]);
}

const tables = async (sql: (s: string) => Promise<any[]>) =>
  (await sql("SELECT table_name AS t FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE 'cronq\\_%' ORDER BY 1")).map((r) => r.t);

describe('cronq migrations beside an app', () => {
  it('creates every cronq table when the app ran its own drizzle-kit migrations first, newer than all of cronq’s, and leaves the app’s ledger alone', async () => {
    const db = await emptyDatabase();
    await appMigration(db.sql, Date.now());
    const appLedger = await db.sql('SELECT id, hash, created_at FROM `__drizzle_migrations`');
    await applyMigrations(db.database);
    expect(await tables(db.sql)).toEqual(['cronq_console_sign_outs', 'cronq_daemons', 'cronq_dead_letters', 'cronq_jobs', 'cronq_kind_limits', 'cronq_migrations', 'cronq_pauses', 'cronq_schedule_ticks']);
    expect(await db.sql('SELECT id, hash, created_at FROM `__drizzle_migrations`')).toEqual(appLedger);
    expect((await db.sql('SELECT hash FROM cronq_migrations ORDER BY id')).map((r) => r.hash)).toEqual(committed.map((m) => m.hash));
    expect(await pendingMigrations(db.database)).toBe(0);
  });

  it('lets the app migrate after cronq: its rows go to drizzle’s table, cronq’s ledger is untouched, and cronq migrates again as a no-op', async () => {
    const db = await emptyDatabase();
    await applyMigrations(db.database);
    await appMigration(db.sql, 1);
    await applyMigrations(db.database);
    expect(await db.sql('SELECT COUNT(*) AS n FROM cronq_migrations')).toEqual([{ n: committed.length }]);
    expect(await db.sql('SELECT hash FROM `__drizzle_migrations`')).toEqual([{ hash: 'app-hash' }]);
  });

  it('upgrades an installation whose cronq migrations sit in __drizzle_migrations without re-running them, copying only cronq’s rows', async () => {
    const db = await emptyDatabase();
    await applyMigrations(db.database);
    // The ledger as cronq (through drizzle's migrator) wrote it before it had its own, with an app's row among them.
    await db.sql('CREATE TABLE `__drizzle_migrations` (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at bigint)');
    await db.sql('INSERT INTO `__drizzle_migrations` (hash, created_at) SELECT hash, created_at FROM cronq_migrations ORDER BY id');
    await db.sql('INSERT INTO `__drizzle_migrations` (hash, created_at) VALUES (?, ?)', ['app-hash', committed[2]!.folderMillis + 1]);
    await db.sql('DROP TABLE cronq_migrations');
    const drizzleLedger = await db.sql('SELECT id, hash, created_at FROM `__drizzle_migrations` ORDER BY id');
    expect(await pendingMigrations(db.database)).toBe(0); // a --no-migrate daemon runs on it before anyone migrates
    await db.sql("INSERT INTO cronq_jobs (queue, kind, job_key, payload) VALUES ('default', 'k', 'kept', '{}')");

    await applyMigrations(db.database); // re-running 0000 would fail: cronq_jobs exists

    expect((await db.sql('SELECT hash, created_at FROM cronq_migrations ORDER BY id')).map((r) => [r.hash, Number(r.created_at)])).toEqual(
      committed.map((m) => [m.hash, m.folderMillis]),
    );
    expect(await db.sql('SELECT id, hash, created_at FROM `__drizzle_migrations` ORDER BY id')).toEqual(drizzleLedger);
    expect(await db.sql('SELECT job_key FROM cronq_jobs')).toEqual([{ job_key: 'kept' }]);
  });

  it('fails loudly, naming the table, when a run ends with a cronq table missing', async () => {
    const db = await emptyDatabase();
    await applyMigrations(db.database);
    await db.sql('DROP TABLE cronq_daemons');
    const error = await applyMigrations(db.database).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MigrationIncompleteError);
    expect((error as Error).message).toMatch(/cronq_daemons does not exist/);
  });
});

describe('a migration an earlier run applied only in part', () => {
  it('is refused in one line naming the migration and what to do, not the raw duplicate-column error', async () => {
    const db = await emptyDatabase();
    await applyMigrations(db.database);
    // As after a kill -9 between 0007_fixed_width_leases' first and second statements: the
    // storage columns exist, the public columns are still stored ones, and the migration is
    // not recorded.
    const leases = committed[7]; // 0007_fixed_width_leases
    await db.sql(`ALTER TABLE cronq_jobs DROP INDEX cronq_jobs_claim, DROP COLUMN lease_token, DROP COLUMN lease_until, DROP COLUMN locked_by,
      DROP COLUMN finished_at, ADD lease_token char(32), ADD lease_until datetime(6), ADD locked_by varchar(255), ADD finished_at datetime(6),
      ADD INDEX cronq_jobs_claim (status, queue, available_at, id, finished_at)`);
    await db.sql('DELETE FROM cronq_migrations WHERE created_at = ?', [leases.folderMillis]);
    const error = await applyMigrations(db.database).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MigrationHalfAppliedError);
    const message = (error as Error).message;
    expect(message.split('\n')).toHaveLength(1);
    expect(message).toBe(
      "migration 0007_fixed_width_leases looks already applied in part (an earlier run cut off midway: kill -9, a lost connection?): its statement 1 of 3 failed with ER_DUP_FIELDNAME: Duplicate column name 'lease_fence', so an earlier run applied it. " +
        "Apply its statements from statement 2 on by hand (drizzle/0007_fixed_width_leases.sql in the cronq package) and record it in cronq_migrations, or undo statement 1 and run 'cronq migrate' again (docs/deploy.md, 'A half-applied migration')",
    );
    expect(await pendingMigrations(db.database)).toBe(1);
    const cli = await runCli(['migrate'], { DATABASE_URL: `${serverUrl}/${db.name}` });
    expect(cli.code).toBe(1);
    expect(cli.stderr).toBe(`cronq migrate: ${message}\n`);
  });
});

describe('a stop during a migration', () => {
  /**
   * Starts `spawnIt` while this test holds the migration lock, waits until the process is
   * caught waiting for it inside applyMigrations, runs `interrupt`, then lets it go on.
   */
  async function interruptedWhileMigrating<T extends { child: ChildProcess }>(db: { name: string; sql: (s: string, p?: unknown[]) => Promise<any[]> }, spawnIt: () => T, interrupt: (p: T) => Promise<void>): Promise<T> {
    const holder = await mysql.createConnection({ uri: serverUrl });
    try {
      await holder.query(`SELECT GET_LOCK('cronq_migrate', 30)`);
      const p = spawnIt();
      const waiting = async () =>
        (await db.sql("SELECT COUNT(*) AS n FROM information_schema.processlist WHERE db = ? AND info LIKE 'SELECT GET_LOCK(%cronq_migrate%'", [db.name]))[0].n > 0;
      for (let i = 0; !(await waiting()); i++) {
        if (i > 1000 || p.child.exitCode !== null) throw new Error('the process never waited for the migration lock');
        await new Promise((r) => setTimeout(r, 20));
      }
      await interrupt(p);
      await holder.query(`SELECT RELEASE_LOCK('cronq_migrate')`);
      return p;
    } finally {
      await holder.end();
    }
  }

  it('SIGTERM while cronq start is migrating lets the migration finish, then exits 0 without starting', async () => {
    const db = await emptyDatabase();
    let daemon: DaemonProcess | undefined;
    try {
      daemon = await interruptedWhileMigrating(
        db,
        () => new DaemonProcess(['--no-scheduler'], { DATABASE_URL: `${serverUrl}/${db.name}`, CRONQ_SCHEDULES: 'test/fixtures/schedules-daemon' }),
        async (d) => {
          d.signal('SIGTERM');
          await d.waitFor('shutdown_requested');
        },
      );
      expect(await daemon.exited, daemon.stderr).toBe(0);
      expect(daemon.events('daemon_started')).toEqual([]);
      expect(await pendingMigrations(db.database)).toBe(0);
      await applyMigrations(db.database); // and the next run has nothing left to trip on
    } finally {
      await daemon?.kill();
    }
  });

  it('Ctrl-C during cronq migrate finishes the migration, saying so on one line, and a second run has nothing left to do', async () => {
    const db = await emptyDatabase();
    let stderr = '';
    const migrate = await interruptedWhileMigrating(
      db,
      () => {
        const child = spawn(process.execPath, [CRONQ_BIN, 'migrate'], { cwd: REPO_ROOT, env: { ...process.env, DATABASE_URL: `${serverUrl}/${db.name}` } });
        const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
        const noted = new Promise<void>((resolve) => child.stderr.on('data', (d) => ((stderr += d), stderr.includes('\n') && resolve())));
        return { child, exited, noted: Promise.race([noted, exited.then(() => undefined)]) };
      },
      async (p) => {
        p.child.kill('SIGINT');
        await p.noted;
      },
    );
    expect(await migrate.exited, stderr).toBe(0);
    expect(stderr).toBe('cronq migrate: finishing the migration in progress first (stopped midway it would stay half applied); a second signal stops at once\n');
    expect(await pendingMigrations(db.database)).toBe(0);
    await applyMigrations(db.database);
  });

  it('a stop once migrate() has connected, its CREATE DATABASE under way, waits for the migration to finish: the database answered, so it is not stopped half done', async () => {
    const db = await emptyDatabase();
    await admin.query(`DROP DATABASE \`${db.name}\``); // migrate() creates it
    const proxy = await holdingProxy('CREATE DATABASE');
    const cronq = createCronq({ databaseUrl: `mysql://root@127.0.0.1:${proxy.port}/${db.name}`, workers: false, scheduler: false, logger: false });
    try {
      const migrating = cronq.migrate().then(() => 'migrated', (error: unknown) => error);
      await proxy.holding;
      const stopping = cronq.stop({ graceMs: 0 });
      await new Promise((resolve) => setImmediate(resolve)); // the stop has reached the migration
      proxy.release();
      expect(await migrating).toBe('migrated');
      await stopping;
      expect(await pendingMigrations(db.database)).toBe(0);
    } finally {
      await cronq.stop({ graceMs: 0 });
      proxy.server.close();
    }
  });

  it('a stop while a second migrate() still connects ends that one at once and still waits for the first, holding the lock, to finish', async () => {
    const db = await emptyDatabase();
    const holder = await mysql.createConnection({ uri: serverUrl });
    const cronq = createCronq({ databaseUrl: `${serverUrl}/${db.name}`, workers: false, scheduler: false, logger: false });
    try {
      await holder.query(`SELECT GET_LOCK('cronq_migrate', 30)`);
      const first = cronq.migrate().then(() => 'migrated', (error: unknown) => error);
      const waiting = async () =>
        (await db.sql("SELECT COUNT(*) AS n FROM information_schema.processlist WHERE db = ? AND info LIKE 'SELECT GET_LOCK(%cronq_migrate%'", [db.name]))[0].n > 0;
      for (let i = 0; !(await waiting()); i++) {
        if (i > 1000) throw new Error('the first migrate() never waited for the migration lock');
        await new Promise((r) => setTimeout(r, 20));
      }
      // The second has not even connected when the stop comes: it has nothing to finish.
      const second = cronq.migrate().catch((error: unknown) => error);
      const stopping = cronq.stop({ graceMs: 0 });
      expect(await second).toBeInstanceOf(MigrationNotBegunError);
      await holder.query(`SELECT RELEASE_LOCK('cronq_migrate')`);
      expect(await first).toBe('migrated');
      await stopping;
      expect(await pendingMigrations(db.database)).toBe(0);
      await applyMigrations(db.database); // and the next run has nothing left to trip on
    } finally {
      await cronq.stop({ graceMs: 0 });
      await holder.end();
    }
  });
});

/** A database as the first `count` migrations left it, built by running them statement by statement and recording each. */
async function afterMigrations(count: number) {
  const db = await emptyDatabase();
  const before = committed.slice(0, count);
  expect(committed[count].folderMillis).toBeGreaterThan(before[count - 1].folderMillis);
  await db.sql('CREATE TABLE cronq_migrations (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at bigint)');
  for (const migration of before) {
    for (const statement of migration.sql) if (statement.trim() !== '') await db.sql(statement);
    await db.sql('INSERT INTO cronq_migrations (hash, created_at) VALUES (?, ?)', [migration.hash, migration.folderMillis]);
  }
  return db;
}

/** The database as 0006 left it (afterMigrations), with a job in each lease state. */
async function at0006WithJobs() {
  const db = await afterMigrations(7);
  await db.sql(`INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, attempts, lease_token, lease_until, locked_by, finished_at) VALUES
    ('default', 'k', 'waiting', '{"a":1}', 'ready', 0, NULL, NULL, NULL, NULL),
    ('default', 'k', 'running', '{"a":2}', 'reserved', 1, REPEAT('c', 32), '2099-01-02 03:04:05.678901', 'host-a:4242', NULL),
    ('default', 'k', 'finished', '{"a":3}', 'done', 1, REPEAT('d', 32), NULL, 'a-host-name-longer-than-the-padded-width-of-forty-eight:1', '2026-11-30 12:00:00.123456'),
    ('default', 'k', 'retried', '{"a":4}', 'ready', 2, NULL, NULL, NULL, NULL),
    ('default', 'k', 'dead', '{"a":5}', 'dead', 3, REPEAT('e', 32), NULL, 'wörker-ü:7', '2026-11-30 12:00:01.000001'),
    ('default', 'k', 'cancelled', '{"a":6}', 'cancelled', 1, REPEAT('f', 32), NULL, 'ホスト:42', '2026-11-30 12:00:02.000002'),
    ('default', 'k', 'waited', '{"a":7}', 'cancelled', 0, NULL, NULL, NULL, '2026-11-30 12:00:03.000003')`);
  const read = () => db.sql('SELECT job_key, status, attempts, payload, lease_token, lease_until, locked_by, finished_at FROM cronq_jobs ORDER BY id');
  return { ...db, read };
}

describe('migration 0007 (fixed-width lease storage) on a table that has rows', () => {
  it('keeps what every row reads as lease_token, lease_until, locked_by and finished_at', async () => {
    const db = await at0006WithJobs();
    const old = await db.read();
    await applyMigrations(db.database);
    expect(await pendingMigrations(db.database)).toBe(0);
    expect(await db.read()).toEqual(old);
    expect(old[1]).toMatchObject({ lease_token: 'c'.repeat(32), locked_by: 'host-a:4242' });
    expect(old[0]).toMatchObject({ lease_token: null, lease_until: null, locked_by: null, finished_at: null });
    // Storage holds blanks of the written width, never NULL.
    expect(await db.sql('SELECT job_key, LENGTH(lease_holder) AS holder, lease_fence FROM cronq_jobs ORDER BY id')).toEqual([
      { job_key: 'waiting', holder: 48, lease_fence: '' },
      { job_key: 'running', holder: 48, lease_fence: 'c'.repeat(32) },
      { job_key: 'finished', holder: 57, lease_fence: 'd'.repeat(32) },
      { job_key: 'retried', holder: 48, lease_fence: '' },
      { job_key: 'dead', holder: 48, lease_fence: 'e'.repeat(32) },
      { job_key: 'cancelled', holder: 48, lease_fence: 'f'.repeat(32) },
      { job_key: 'waited', holder: 48, lease_fence: '' },
    ]);
  });

  it('reads a holder name that ended with spaces without them (names may no longer end so), and one of spaces only as NULL', async () => {
    const db = await at0006WithJobs();
    await db.sql(`UPDATE cronq_jobs SET locked_by = CASE job_key WHEN 'running' THEN 'host-a:4242  ' WHEN 'retried' THEN '   ' END
      WHERE job_key IN ('running', 'retried')`);
    await applyMigrations(db.database);
    expect(await db.sql("SELECT job_key, locked_by FROM cronq_jobs WHERE job_key IN ('running', 'retried') ORDER BY id")).toEqual([
      { job_key: 'running', locked_by: 'host-a:4242' },
      { job_key: 'retried', locked_by: null },
    ]);
  });

  it.each([1, 2, 3])(
    'cut off after statement %i, is finished by doing what its refusal says, and then reads as if it had run whole',
    async (ranBefore) => {
      const db = await at0006WithJobs();
      const old = await db.read();
      const migration = committed[7];
      const statements = migration.sql.filter((statement) => statement.trim() !== '');
      for (const statement of statements.slice(0, ranBefore)) await db.sql(statement);
      const error = await applyMigrations(db.database).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(MigrationHalfAppliedError);
      // What the message says to do: apply the statements it names, then record the migration.
      const from = Number(/from statement (\d+)/.exec((error as Error).message)?.[1]);
      for (const statement of statements.slice(from - 1)) await db.sql(statement);
      await db.sql('INSERT INTO cronq_migrations (hash, created_at) VALUES (?, ?)', [migration.hash, migration.folderMillis]);
      await applyMigrations(db.database);
      expect(await pendingMigrations(db.database)).toBe(0);
      expect(await db.read()).toEqual(old);
    },
  );
});

describe('migration 0007 while daemons run', () => {
  it('is refused in one line naming the live daemons, applying nothing, until every daemon has stopped or gone quiet for 30 s', async () => {
    const db = await at0006WithJobs();
    const daemon = (id: string, heartbeatAgoS: number, stopped: boolean) =>
      db.sql(
        `INSERT INTO cronq_daemons (id, host, pid, kinds, queues, started_at, heartbeat_at, stopped_at)
         VALUES (?, 'h', 1, '[]', NULL, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, UTC_TIMESTAMP(6) - INTERVAL ? SECOND, IF(?, UTC_TIMESTAMP(6), NULL))`,
        [id, heartbeatAgoS, stopped],
      );
    await daemon('old-a:11', 2, false);
    await daemon('old-b:12', 25, false);
    await daemon('crashed:13', 40, false);
    await daemon('stopped:14', 1, true);
    const error = await applyMigrations(db.database).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MigrationNeedsStoppedDaemonsError);
    expect((error as Error).message).toBe(
      'migration 0007_fixed_width_leases changes columns that running daemons write, so it is applied only while none runs, and 2 daemons beat their heartbeat within the last 30 s ' +
        "(old-a:11, old-b:12). Stop every daemon (one that crashed counts as stopped 30 s after its last heartbeat), then run 'cronq migrate' again, then start them on this version (docs/deploy.md, 'Deploying a new version')",
    );
    expect(await pendingMigrations(db.database)).toBe(committed.length - 7); // 0007 and every one after it
    expect(await db.sql("SHOW COLUMNS FROM cronq_jobs LIKE 'lease_fence'")).toEqual([]);
    const cli = await runCli(['migrate'], { DATABASE_URL: `${serverUrl}/${db.name}` });
    expect(cli.code).toBe(1);
    expect(cli.stderr.trim().split('\n')).toHaveLength(1);
    expect(cli.stderr).toContain('old-a:11, old-b:12');
    await db.sql("UPDATE cronq_daemons SET stopped_at = UTC_TIMESTAMP(6) WHERE id LIKE 'old-%'");
    await applyMigrations(db.database);
    expect(await pendingMigrations(db.database)).toBe(0);
  });
  it('does not count the daemon that migrates: migrate() after start() applies 0007 beside its own heartbeat', async () => {
    const db = await at0006WithJobs();
    const cronq = createCronq({ databaseUrl: `${serverUrl}/${db.name}`, tasks: [defineTask({ name: 'noop', handle() {} })], scheduler: false, logger: false, lockedBy: 'self-test:1' });
    try {
      await cronq.start();
      expect(await db.sql("SELECT id FROM cronq_daemons WHERE stopped_at IS NULL")).toEqual([{ id: 'self-test:1' }]);
      await cronq.migrate();
      expect(await pendingMigrations(db.database)).toBe(0);
    } finally {
      await cronq.stop({ graceMs: 0 });
    }
  });
});

describe('migration 0009 (the cron each tick was computed from) on a ledger that has rows', () => {
  it('reads the old rows as of an unknown cron (NULL), and a daemon of the version before still writes ticks as it did', async () => {
    const db = await afterMigrations(9);
    // The statements of the version before (ledger.ts's claim and skip), column lists as they were.
    const oldClaim = (at: string) =>
      db.sql(`INSERT INTO cronq_schedule_ticks (schedule_name, scheduled_at, period_key, outcome, caught_up, note, claimed_by, fanout_until, started_at)
        VALUES ('mailer', '${at}', 'k', 'enqueued', FALSE, NULL, 'old:1', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`);
    const oldSkip = (at: string) =>
      db.sql(`INSERT INTO cronq_schedule_ticks (schedule_name, scheduled_at, period_key, outcome, caught_up, note, started_at, finished_at)
        VALUES ('mailer', '${at}', 'k', 'skipped', TRUE, 'missed', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`);
    await oldClaim('2030-01-01 00:00:00');
    await oldSkip('2030-01-01 00:01:00');
    await applyMigrations(db.database);
    expect(await pendingMigrations(db.database)).toBe(0);
    await oldClaim('2030-01-01 00:02:00');
    await oldSkip('2030-01-01 00:03:00');
    expect(await db.sql('SELECT outcome, cron, timezone FROM cronq_schedule_ticks ORDER BY scheduled_at')).toEqual([
      { outcome: 'enqueued', cron: null, timezone: null },
      { outcome: 'skipped', cron: null, timezone: null },
      { outcome: 'enqueued', cron: null, timezone: null },
      { outcome: 'skipped', cron: null, timezone: null },
    ]);
  });
});

/**
 * A TCP proxy to the test server that holds back, from the first client packet holding
 * `text` on, what its client sends, until `release()`; `holding` resolves once it does.
 */
async function holdingProxy(text: string): Promise<{ port: number; server: Server; holding: Promise<void>; release: () => void }> {
  const target = new URL(serverUrl);
  let held: Array<() => void> | null = null;
  let released = false;
  let startHolding!: () => void;
  const holding = new Promise<void>((resolve) => (startHolding = resolve));
  const server = createServer((client) => {
    const upstream = connectTcp(Number(target.port || 3306), target.hostname);
    upstream.pipe(client);
    client.on('data', (chunk) => {
      if (!released && held === null && chunk.includes(text)) {
        held = [];
        startHolding();
      }
      if (held !== null && !released) held.push(() => upstream.write(chunk));
      else upstream.write(chunk);
    });
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const release = () => {
    released = true;
    for (const send of held ?? []) send();
  };
  return { port: (server.address() as AddressInfo).port, server, holding, release };
}
