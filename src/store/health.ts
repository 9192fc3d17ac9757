/**
 * Asking the database whether it answers, and what time it is there. Plain reads: no
 * locks, no transaction.
 */
import { sql } from 'drizzle-orm';
import { timedPool, TIMEOUTS, unreachable, type Database, type Executor } from '../db/client.ts';
import { DatabaseMissingError } from '../errors.ts';
import { parseDbTime, rows } from './sql.ts';

/** The database clock, for tests and for anything that must agree with leases. */
export async function databaseNow(exec: Executor): Promise<Date> {
  const result = await exec.execute(sql`SELECT UTC_TIMESTAMP(6) AS now`);
  return parseDbTime(rows<{ now: string }>(result)[0].now)!;
}

/**
 * Runs `SELECT 1`; throws DatabaseUnreachableError naming host and port (never the password)
 * when the server cannot be reached or refuses the login, DatabaseMissingError when it
 * answers but has no database of that name.
 */
export async function ping(database: Database): Promise<void> {
  try {
    // On the timed pool: a ping that times out (a network dropping packets) has its
    // connection dropped and its session ended, rather than kept by the pool for good.
    await timedPool(database.db).query({ sql: 'SELECT 1', timeout: TIMEOUTS.connectMs });
  } catch (error) {
    const { database: name, address } = database.target;
    if ((error as { code?: string })?.code === 'ER_BAD_DB_ERROR') {
      throw new DatabaseMissingError(`database '${name}' does not exist on ${address}: run 'cronq migrate' to create it`, { cause: error });
    }
    throw unreachable(database.target, error);
  }
}
