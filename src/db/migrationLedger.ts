/**
 * cronq's own record of applied migrations, `cronq_migrations` (id, hash, created_at: the
 * shape of drizzle's `__drizzle_migrations`), so an app's drizzle-kit migrations in the
 * same database never hide cronq's, in either order.
 *
 * Concurrency contract: every function here runs on the one connection that holds the
 * `cronq_migrate` named lock (see applyMigrations), so no two cronq processes write the
 * ledger at once. Reads by readers without the lock (pendingMigrations) see whole rows:
 * each row is one autocommit INSERT.
 */
import type mysql from 'mysql2/promise';

/** One applied migration: the SHA-256 of its SQL file and its journal timestamp (ms). */
export interface LedgerRow {
  hash: string;
  createdAt: number;
}

export const LEDGER_TABLE = 'cronq_migrations';
/** The table drizzle's migrator uses, where cronq recorded its migrations before it had its own. */
export const DRIZZLE_LEDGER_TABLE = '__drizzle_migrations';

/** Creates the ledger when missing (DDL: needs CREATE). */
export async function createLedgerIfMissing(conn: mysql.PoolConnection): Promise<void> {
  await conn.query(
    `CREATE TABLE IF NOT EXISTS \`${LEDGER_TABLE}\` (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at bigint)`,
  );
}

/** Rows of `table` (cronq's ledger or drizzle's), oldest first; [] when the table does not exist. */
export async function ledgerRows(conn: mysql.Pool | mysql.PoolConnection, table: string): Promise<LedgerRow[]> {
  try {
    const [rows] = await conn.query(`SELECT hash, created_at FROM \`${table}\` ORDER BY created_at, id`);
    return (rows as Array<{ hash: string; created_at: string | number | null }>).map((r) => ({ hash: r.hash, createdAt: Number(r.created_at ?? 0) }));
  } catch (error) {
    if ((error as { code?: string }).code === 'ER_NO_SUCH_TABLE') return [];
    throw error;
  }
}

/** Records one applied migration. */
export async function recordMigration(conn: mysql.PoolConnection, row: LedgerRow): Promise<void> {
  await conn.query(`INSERT INTO \`${LEDGER_TABLE}\` (hash, created_at) VALUES (?, ?)`, [row.hash, row.createdAt]);
}

/**
 * Runs one migration's statements on `conn`, in order, then records it, as drizzle's
 * migrator did: one connection, because a migration may carry session variables and a
 * prepared statement from one statement to the next (0004_faults.sql does). MySQL commits
 * DDL statement by statement, so a failure leaves the migration unrecorded and the
 * statements before it applied: the next run fails loudly on them rather than skipping.
 * A failed statement throws MigrationStatementError (which one, and the driver's error).
 */
export async function runMigration(conn: mysql.PoolConnection, statements: string[], row: LedgerRow): Promise<void> {
  const sent = statements.filter((statement) => statement.trim());
  await conn.beginTransaction();
  try {
    for (const [i, statement] of sent.entries()) {
      try {
        await conn.query(statement);
      } catch (error) {
        throw new MigrationStatementError(i + 1, sent.length, error);
      }
    }
    await recordMigration(conn, row);
    await conn.commit();
  } catch (error) {
    await conn.rollback().catch(() => undefined);
    throw error;
  }
}

/** One statement of a migration failed: which (from 1) of how many; `cause` is the driver's error. */
export class MigrationStatementError extends Error {
  override name = 'MigrationStatementError';
  constructor(
    readonly statement: number,
    readonly statements: number,
    override readonly cause: unknown,
  ) {
    super(`statement ${statement} of ${statements} failed: ${(cause as Error)?.message ?? String(cause)}`, { cause });
  }
}

/** Which of `tables` do not exist in the connection's current database. */
export async function missingTables(conn: mysql.PoolConnection, tables: readonly string[]): Promise<string[]> {
  const [rows] = await conn.query('SELECT table_name AS name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name IN (?)', [tables]);
  const present = new Set((rows as Array<{ name: string }>).map((r) => r.name));
  return tables.filter((t) => !present.has(t));
}
