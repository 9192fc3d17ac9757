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
 *
 * One clock: the database's (UTC_TIMESTAMP), for pruning and for a session's own expiry
 * (sessionStanding), which every daemon shares. Were a session's expiry judged by each
 * daemon's clock, one running behind the database's by more than the record outlives the
 * session would take a signed-out cookie again once its record was pruned.
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

/** Where a session stands: signed out (a sign-out recorded), expired (by the database's clock), else held. */
export type SessionStanding = 'held' | 'signed_out' | 'expired';

/**
 * Where the session hashing to `sessionHash`, which expires at `expiresAt`, stands now by
 * the database's clock, in one statement (a primary-key read and the clock); signed out
 * wins over expired. A record is kept past its session's expiry (recordSignOut's
 * `expiresAt`), so whatever is still held was never signed out.
 */
export async function sessionStanding(exec: Executor, sessionHash: string, expiresAt: Date): Promise<SessionStanding> {
  const [r] = rows<{ signed_out: number | string; expired: number | string }>(
    await exec.execute(sql`SELECT EXISTS (SELECT 1 FROM cronq_console_sign_outs WHERE session_hash = ${sessionHash}) AS signed_out,
      ${NOW} > ${toDbTime(expiresAt)} AS expired`),
  );
  if (Number(r.signed_out) === 1) return 'signed_out';
  return Number(r.expired) === 1 ? 'expired' : 'held';
}

/** Whether the session hashing to `sessionHash` was signed out (one primary-key read). */
export async function isSignedOut(exec: Executor, sessionHash: string): Promise<boolean> {
  const found = rows<{ one: number }>(await exec.execute(sql`SELECT 1 AS one FROM cronq_console_sign_outs WHERE session_hash = ${sessionHash} LIMIT 1`));
  return found.length > 0;
}
