/**
 * All SQL on the console's sign-outs (`cronq_console_sign_outs`): a row says that the
 * session whose cookie hashes to `session_hash` was signed out, and every daemon's
 * console refuses that cookie from then on.
 *
 * Concurrency contract: recording is idempotent (the primary key; a second sign-out of
 * one session changes nothing) and takes effect for every daemon at its next read, as
 * soon as the statement commits. The look-up is a plain primary-key read, no lock.
 * Recording first deletes at most SIGN_OUTS_PRUNED_PER_WRITE rows past their expiry (the
 * expiry index), so the table holds about the sign-outs of one session lifetime.
 */
import { sql } from 'drizzle-orm';
import type { Executor } from '../db/client.ts';
import { NOW, rows, toDbTime } from './sql.ts';

/** Expired sign-outs deleted at most by one recordSignOut. */
const SIGN_OUTS_PRUNED_PER_WRITE = 100;

/** Records that the session hashing to `sessionHash` is signed out, kept until `expiresAt` (then pruned by a later sign-out). */
export async function recordSignOut(exec: Executor, sessionHash: string, expiresAt: Date): Promise<void> {
  await exec.execute(sql`DELETE FROM cronq_console_sign_outs WHERE expires_at < ${NOW} LIMIT ${SIGN_OUTS_PRUNED_PER_WRITE}`);
  await exec.execute(sql`INSERT IGNORE INTO cronq_console_sign_outs (session_hash, expires_at) VALUES (${sessionHash}, ${toDbTime(expiresAt)})`);
}

/** Whether the session hashing to `sessionHash` was signed out (one primary-key read). */
export async function isSignedOut(exec: Executor, sessionHash: string): Promise<boolean> {
  const found = rows<{ one: number }>(await exec.execute(sql`SELECT 1 AS one FROM cronq_console_sign_outs WHERE session_hash = ${sessionHash} LIMIT 1`));
  return found.length > 0;
}
