import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, beforeEach, inject } from 'vitest';
import { connect, type Database } from '../../src/db/client.ts';
import { applyMigrations } from '../../src/db/migrate.ts';

export interface TestDatabase {
  /** DATABASE_URL for this file's own database. */
  url: string;
  name: string;
  /** A migrated pool on it, for assertions and direct store calls. */
  database: Database;
  /** Runs SQL on a fresh admin connection (for setup and checks outside the pool). */
  sql<T = any>(statement: string, params?: unknown[]): Promise<T[]>;
  drop(): Promise<void>;
}

/** Creates a throwaway, migrated database for one test file. */
export async function createTestDatabase(prefix = 'cronq_test'): Promise<TestDatabase> {
  const serverUrl = inject('serverUrl');
  const name = `${prefix}_${randomBytes(4).toString('hex')}`;
  const admin = await mysql.createConnection({ uri: serverUrl, multipleStatements: false });
  await admin.query(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`);
  await admin.query(`USE \`${name}\``);
  await admin.query(`SET time_zone = "+00:00"`);
  const url = `${serverUrl}/${name}`;
  const database = connect(url, { poolSize: 20 });
  await applyMigrations(database);
  return {
    url,
    name,
    database,
    async sql(statement, params = []) {
      const [rows] = await admin.query({ sql: statement, values: params as any[], timezone: 'Z' } as any);
      return rows as any[];
    },
    async drop() {
      await database.close().catch(() => undefined);
      await admin.query(`DROP DATABASE IF EXISTS \`${name}\``);
      await admin.end();
    },
  };
}

/**
 * Gives the calling test file its own migrated database: created before its first test,
 * dropped after its last, with `emptyBeforeEach` tables emptied before every test. The
 * returned handle forwards to that database (usable inside tests and hooks only).
 */
export function useTestDatabase(options: { emptyBeforeEach?: string[]; prefix?: string } = {}): TestDatabase {
  let current: TestDatabase | undefined;
  const db = () => {
    if (!current) throw new Error('the test database exists only inside tests and hooks');
    return current;
  };
  beforeAll(async () => {
    current = await createTestDatabase(options.prefix);
  });
  afterAll(async () => {
    await current?.drop();
  });
  beforeEach(async () => {
    for (const table of options.emptyBeforeEach ?? []) await db().sql(`DELETE FROM \`${table}\``);
  });
  return {
    get url() {
      return db().url;
    },
    get name() {
      return db().name;
    },
    get database() {
      return db().database;
    },
    sql: (statement, params) => db().sql(statement, params),
    drop: () => db().drop(),
  };
}
