/**
 * A connection given up on after a client-side timeout takes its server-side session with
 * it (db/endSession.ts): the statement still running there is ended, and the row locks and
 * named locks its session held are freed at once, not when the server next looks at the
 * closed socket.
 */
import { sql } from 'drizzle-orm';
import mysql from 'mysql2/promise';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { connect, isConnectionError, type Database } from '../src/db/client.ts';
import { claimReady } from '../src/store/claims.ts';
import { insertJobIfAbsent } from '../src/store/jobs.ts';
import { holdOverlapLock } from '../src/store/overlap.ts';
import { interceptedClaims } from './support/claimsPool.ts';
import { useTestDatabase } from './support/db.ts';
import { eventually } from './support/events.ts';
import { claimJobs, jobRow, THIRTY_SECOND_LEASES } from './support/jobs.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs'] });
let timed: Database | null = null;

beforeEach(async () => {
  await t.sql('CREATE TABLE IF NOT EXISTS accounts (id INT PRIMARY KEY, balance INT NOT NULL)');
  await t.sql('DELETE FROM accounts');
  await t.sql('INSERT INTO accounts VALUES (1, 0), (2, 0)');
});
afterEach(async () => {
  await timed?.close();
  timed = null;
});

/** Far longer than any test waits: a session left running it outlives the test. */
const LONG_S = 20;

/** A session of its own whose lock waits end after `lockWaitS` (the test's bound on "freed at once"). */
async function otherSession(lockWaitS = 2) {
  const conn = await mysql.createConnection({ uri: t.url });
  await conn.query(`SET SESSION innodb_lock_wait_timeout = ${lockWaitS}`);
  return conn;
}

/** True while the server still runs session `thread`. */
async function alive(thread: number): Promise<boolean> {
  return (await t.sql('SELECT ID FROM information_schema.PROCESSLIST WHERE ID = ?', [thread])).length > 0;
}

/** The sessions of this database still running a SLEEP of LONG_S (but the one asking). */
async function sleepers(): Promise<number[]> {
  const found = await t.sql<{ ID: number }>(
    `SELECT ID FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND ID <> CONNECTION_ID() AND INFO LIKE '%SLEEP(${LONG_S})%'`,
  );
  return found.map((r) => Number(r.ID));
}

const failureOf = (work: Promise<unknown>) =>
  work.then(
    () => null,
    (e: unknown) => e as { code?: string; cause?: { code?: string } },
  );
const codeOf = (e: { code?: string; cause?: { code?: string } } | null) => e?.cause?.code ?? e?.code;

describe('a statement on db that times out client-side', () => {
  it('is ended on the server too: its session leaves the process list and the row it had written is free at once', async () => {
    timed = connect(t.url, { poolSize: 2, queryTimeoutMs: 300 });
    let thread = 0;
    const failed = await failureOf(
      timed.db.transaction(async (tx) => {
        const [[row]] = (await tx.execute(sql`SELECT CONNECTION_ID() AS id`)) as unknown as [[{ id: number }]];
        thread = Number(row.id);
        await tx.execute(sql`UPDATE accounts SET balance = balance + 1 WHERE id = 1`);
        await tx.execute(sql.raw(`SELECT SLEEP(${LONG_S})`));
      }),
    );
    expect(isConnectionError(failed)).toBe(true); // drizzle's ROLLBACK on the destroyed connection, after the timeout
    // Waits for the lock: freed by the rollback of the ended session, within 2 s; left to the
    // server, it would be held until the SLEEP ends.
    const other = await otherSession(2);
    try {
      await other.query('UPDATE accounts SET balance = 10 WHERE id = 1');
    } finally {
      await other.end();
    }
    await eventually(async () => !(await alive(thread)), 2_000, `session ${thread} to end`);
    expect(await t.sql('SELECT balance FROM accounts WHERE id = 1')).toEqual([{ balance: 10 }]);
  });

  it('waiting for a row lock is ended too: the rows its transaction locked before are free long before its lock wait would end', async () => {
    timed = connect(t.url, { poolSize: 2, queryTimeoutMs: 300 });
    const holder = await otherSession();
    try {
      await holder.query('START TRANSACTION');
      await holder.query('SELECT id FROM accounts WHERE id = 1 FOR UPDATE');
      const failed = await failureOf(
        timed.db.transaction(async (tx) => {
          await tx.execute(sql`UPDATE accounts SET balance = balance + 1 WHERE id = 2`);
          await tx.execute(sql`UPDATE accounts SET balance = balance + 1 WHERE id = 1`); // waits for holder (up to 5 s)
        }),
      );
      expect(isConnectionError(failed)).toBe(true);
      // Row 2 is free well within the abandoned session's lock wait of TIMEOUTS.innodbLockWaitS (5 s).
      const third = await otherSession(1);
      try {
        await third.query('UPDATE accounts SET balance = 20 WHERE id = 2');
      } finally {
        await third.end();
      }
      expect(await t.sql('SELECT id, balance FROM accounts ORDER BY id')).toEqual([
        { id: 1, balance: 0 },
        { id: 2, balance: 20 },
      ]);
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
  });
});

describe('a claim whose packet times out client-side', () => {
  it('ends its session: the rows its locking read locked are claimed by the next claim at once', async () => {
    await insertJobIfAbsent(t.database.db, jobRow('held'));
    let stalled = false;
    // The claim's locking packet, with a SLEEP after it, under a timeout of 300 ms.
    const stalling = interceptedClaims(t.database.claims, (statement, send) => {
      if (stalled || !/FOR UPDATE/.test(statement)) return send(statement);
      stalled = true;
      return send(`${statement};\nDO SLEEP(${LONG_S})`, 300);
    });
    const failed = await failureOf(claimReady(stalling, { queues: ['default'], limit: 1, leases: THIRTY_SECOND_LEASES, lockedBy: 'test:stalled' }));
    expect(stalled).toBe(true);
    expect(codeOf(failed)).toBe('PROTOCOL_SEQUENCE_TIMEOUT');
    await eventually(async () => (await sleepers()).length === 0, 2_000, 'the stalled claim session to end');
    // SKIP LOCKED: a row the stalled session still held would be skipped, not waited for.
    const claimed = await claimJobs(t.database, 1, 'test:next');
    expect(claimed.map((j) => j.key)).toEqual(['held']);
  });
});

describe('an overlap lock whose release times out client-side', () => {
  it('is freed with the session: another fan-out takes the lock at once', async () => {
    const stalling = interceptedClaims(t.database.overlapLocks, (statement, send) =>
      /RELEASE_LOCK/.test(statement) ? send(`SELECT SLEEP(${LONG_S}) AS freed`, 300) : send(statement),
    );
    const lock = await holdOverlapLock(stalling, 'nightly', 0);
    expect(lock).not.toBeNull();
    await lock!.release(); // never throws
    // Waits up to 2 s for the lock: left to the server, the session would hold it until the SLEEP ends.
    const next = await holdOverlapLock(t.database.overlapLocks, 'nightly', 2);
    expect(next).not.toBeNull();
    await next!.release();
    expect(await sleepers()).toEqual([]);
  });
});
