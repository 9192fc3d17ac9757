import mysql from 'mysql2/promise';
import { TIMEOUTS } from '../../src/db/client.ts';

/**
 * Runs `work` while a second connection holds a lock: it runs `lock` (a `SELECT … FOR
 * UPDATE`, an uncommitted INSERT) in a transaction it keeps open until `work` settles,
 * then rolls it back. Meanwhile every session cronq opens waits at most `waitS` for a row
 * lock (TIMEOUTS.innodbLockWaitS, which each connection reads as it connects: create the
 * cronq, or run the command, inside `work`), so a lock wait ends in a second, not five.
 * The server's own setting is not touched.
 */
export async function whileLocked<T>(url: string, lock: { sql: string; values?: unknown[] }, work: () => Promise<T>, waitS = 1): Promise<T> {
  const holder = await mysql.createConnection({ uri: url });
  const wasS = TIMEOUTS.innodbLockWaitS;
  try {
    await holder.beginTransaction();
    await holder.query(lock.sql, lock.values);
    TIMEOUTS.innodbLockWaitS = waitS;
    return await work();
  } finally {
    TIMEOUTS.innodbLockWaitS = wasS;
    await holder.rollback().catch(() => undefined);
    await holder.end();
  }
}
