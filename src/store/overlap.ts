/**
 * The guard of a schedule with `overlap: 'skip'`: a named lock per schedule, and the
 * check made under it — does another tick of the schedule still have work in flight?
 *
 * Concurrency contract: the daemon that owns a tick in the ledger (claimTickFanout) takes
 * the schedule's lock (holdOverlapLock), then checks (otherTickInFlight), then writes the
 * tick's jobs (each INSERT commits on its own), then releases the lock. So the check and
 * the writes of one tick are atomic with respect to every other tick of the schedule,
 * whichever daemon owns it and in whichever order the ticks are fanned out: a tick that
 * takes the lock after another's fan-out sees its committed jobs, and a job that finishes
 * during a check is at worst counted as in flight (the tick is skipped: the safe side).
 *
 * The lock is MySQL's / MariaDB's named lock (GET_LOCK), held by one connection of
 * Database.overlapLocks for the whole fan-out. It is the server's, not a row's: it takes
 * no part in InnoDB's lock waits, and the server frees it when that connection ends, so a
 * daemon that dies holding it blocks the schedule no longer than its connection lives.
 * Each connection holds at most one such lock and its holder waits for no other named
 * lock, so two fan-outs can never wait on each other's; a wait is bounded by `waitS`.
 * Named locks are server-wide: the name is built from the database's name and the
 * schedule's, so two databases on one server never share one.
 *
 * A daemon that stalls holding a lock (SIGSTOP, a frozen VM, a blocked event loop) keeps
 * its connection, so the lock too. To tell such a holder apart, a daemon lists the
 * connection a lock is to be held on in its cronq_daemons row (store/daemons.ts
 * listOverlapConnections) before GET_LOCK, through `beforeLock`: a holder that
 * IS_USED_LOCK names afterwards is listed in its own daemon's row by then
 * (overlapLockHolder reads both in one statement). Ending a session (endSession) is the
 * caller's decision (schedule/staleHolder.ts); it frees every named lock of that session.
 */
import { sql } from 'drizzle-orm';
import type { Pool, PoolConnection } from 'mysql2/promise';
import { driverError, TIMEOUTS, type Executor } from '../db/client.ts';
// Named apart from this module's endSession, which ends another daemon's session by id.
import { endSession as abandonConnection } from '../db/endSession.ts';
import { parseDbTime, rows, toDbTime } from './sql.ts';

/** A schedule's overlap lock, held until `release` (which never throws, and may be called again). */
export interface OverlapLock {
  /** The server's id of the connection holding it (CONNECTION_ID(), what IS_USED_LOCK names). */
  readonly connectionId: number;
  release(): Promise<void>;
}

export interface HoldOptions {
  /**
   * Runs once the connection is taken and before GET_LOCK, with that connection's id
   * (to list it as the lock's holder). If it throws, the connection goes back to the
   * pool holding nothing and holdOverlapLock throws that error. Its time counts against
   * the wait.
   */
  beforeLock?: (connectionId: number) => Promise<void>;
}

/**
 * The lock's name: a prefix and the SHA-1 of database and schedule name (54 characters,
 * below MySQL's limit of 64 whatever the schedule is called).
 */
const LOCK_NAME = "CONCAT('cronq_overlap_', SHA1(CONCAT(DATABASE(), '/', ?)))";
/** LOCK_NAME of `scheduleName` for a drizzle statement. */
const lockName = (scheduleName: string) => sql`CONCAT('cronq_overlap_', SHA1(CONCAT(DATABASE(), '/', ${scheduleName})))`;

/**
 * Takes the schedule's overlap lock on a connection of `locks`, waiting at most `waitS`
 * whole seconds (0: only if free now) in all — plus TIMEOUTS.connectMs to open a
 * connection — for one of the pool's connections and for another daemon's fan-out to
 * release the lock. Returns the held lock, or null when the
 * wait ran out (another tick of the schedule is being fanned out now, or this process's
 * lock connections are all busy). A connection error throws, holding nothing.
 */
export async function holdOverlapLock(locks: Pool, scheduleName: string, waitS: number, options: HoldOptions = {}): Promise<OverlapLock | null> {
  const startedAt = Date.now();
  // The pool wait counts against waitS, plus the time to open a connection if none is idle.
  const conn = await connectionWithin(locks, waitS * 1000 + TIMEOUTS.connectMs);
  if (!conn) return null; // every lock connection busy with other fan-outs for the whole wait
  const connectionId = Number(conn.threadId);
  if (options.beforeLock) {
    try {
      await options.beforeLock(connectionId);
    } catch (error) {
      conn.release();
      throw error;
    }
  }
  const leftS = Math.max(0, waitS - Math.floor((Date.now() - startedAt) / 1000));
  let got: unknown;
  try {
    const [result] = await conn.query({
      sql: `SELECT GET_LOCK(${LOCK_NAME}, ?) AS got`,
      values: [scheduleName, leftS],
      timeout: leftS * 1000 + TIMEOUTS.queryMs,
    });
    got = (result as Array<{ got: unknown }>)[0]?.got;
  } catch (error) {
    // Whatever the server did (a GET_LOCK still waiting there, or granted since), the lock goes with the session.
    void abandonConnection(conn, locks);
    throw error;
  }
  if (got === null || got === undefined) {
    conn.destroy();
    throw new Error(`GET_LOCK failed for the overlap lock of schedule '${scheduleName}'`);
  }
  if (Number(got) !== 1) {
    conn.release(); // timed out: holds nothing
    return null;
  }
  return heldOn(conn, locks, connectionId, scheduleName);
}

/**
 * A connection of `locks` within `ms`, or null; one that arrives after the wait ran out is
 * handed straight back to the pool. (mysql2's pool has no acquire timeout of its own.)
 */
async function connectionWithin(locks: Pool, ms: number): Promise<PoolConnection | null> {
  let timedOut = false;
  let timer: NodeJS.Timeout | undefined;
  const asked = locks.getConnection();
  const late = new Promise<null>((resolve) => {
    timer = setTimeout(() => {
      timedOut = true;
      resolve(null);
    }, ms);
  });
  try {
    return await Promise.race([asked, late]);
  } finally {
    clearTimeout(timer);
    if (timedOut) asked.then((conn) => conn.release(), () => undefined);
  }
}

function heldOn(conn: PoolConnection, locks: Pool, connectionId: number, scheduleName: string): OverlapLock {
  let released = false;
  return {
    connectionId,
    async release() {
      if (released) return;
      released = true;
      try {
        const [result] = await conn.query({ sql: `SELECT RELEASE_LOCK(${LOCK_NAME}) AS freed`, values: [scheduleName], timeout: TIMEOUTS.queryMs });
        // 1: freed, back to the pool. Anything else (the lock was lost with an earlier
        // connection, or is not ours): the connection must never be reused holding a lock.
        if (Number((result as Array<{ freed: unknown }>)[0]?.freed) === 1) {
          conn.release();
          return;
        }
      } catch {
        // A lost connection freed the lock already; ending its session frees it otherwise
        // (a RELEASE_LOCK that timed out: the session, and the lock, would live on).
      }
      void abandonConnection(conn, locks);
    },
  };
}

/**
 * True when a job of any other tick of `scheduleName` (scheduled_at not `tick`, earlier
 * or later) is still 'ready' (waiting, or waiting to retry) or 'reserved' (running).
 * The tick's own jobs do not count. Jobs of a schedule are written to its queue, so the
 * read is bounded by that queue's ready and reserved jobs (the claim index) or by the
 * schedule's own rows (cronq_jobs_schedule), whichever the optimizer finds smaller, and
 * stops at the first match. A plain READ COMMITTED read: made under the overlap lock, it
 * sees every job a fan-out that released the lock before committed.
 */
export async function otherTickInFlight(exec: Executor, scheduleName: string, queue: string, tick: Date): Promise<boolean> {
  const found = await exec.execute(sql`SELECT 1 AS busy FROM cronq_jobs
    WHERE status IN ('ready', 'reserved') AND queue = ${queue} AND schedule_name = ${scheduleName} AND scheduled_at <> ${toDbTime(tick)}
    LIMIT 1`);
  return rows(found).length > 0;
}

/**
 * True when the tick itself already has a job (any status): a fan-out that was taken
 * over had written some of it. Bounded by the schedule's rows of the tick's period
 * (cronq_jobs_schedule).
 */
export async function tickHasJobs(exec: Executor, scheduleName: string, periodKey: string, tick: Date): Promise<boolean> {
  const found = await exec.execute(sql`SELECT 1 AS written FROM cronq_jobs
    WHERE schedule_name = ${scheduleName} AND period_key = ${periodKey} AND scheduled_at = ${toDbTime(tick)}
    LIMIT 1`);
  return rows(found).length > 0;
}

/** A daemon whose cronq_daemons row lists a connection as one its overlap locks are held on. */
export interface HolderListing {
  daemonId: string;
  heartbeatAt: Date;
  /** Its heartbeat interval (null: a row written before migration 0008). */
  heartbeatMs: number | null;
  /** When its list was written (null: never). */
  listedAt: Date | null;
}

/** Who holds a schedule's overlap lock, as overlapLockHolder reads it. */
export interface LockHolder {
  /** The holding session's connection id. */
  connectionId: number;
  /** Every daemon whose row lists that connection (none: nobody attributable). */
  listedBy: HolderListing[];
  /** The database clock when read. */
  now: Date;
  /**
   * When the server started, to the second (its clock less `Uptime`), later than it did
   * rather than earlier: connection ids start again from 1 after a restart, so a listing
   * older than this names a session of another server run. Null when nobody lists the holder.
   */
  serverStartedAt: Date | null;
}

/**
 * The session holding `scheduleName`'s overlap lock and the daemons whose rows list it,
 * read in one statement (a plain read of every cronq_daemons row: rows silent for a day
 * are deleted, so there are few); null when the lock is free. A snapshot: the lock may be
 * released, and the daemon heard from, just after.
 */
export async function overlapLockHolder(exec: Executor, scheduleName: string): Promise<LockHolder | null> {
  const found = await exec.execute(sql`SELECT h.holder, UTC_TIMESTAMP(6) AS now, d.id, d.heartbeat_at, d.heartbeat_ms, d.overlap_listed_at
    FROM (SELECT IS_USED_LOCK(${lockName(scheduleName)}) AS holder) h
    LEFT JOIN cronq_daemons d ON JSON_CONTAINS(d.overlap_connections, CAST(h.holder AS CHAR))`);
  type Raw = { holder: number | string | null; now: string | Date; id: string | null; heartbeat_at: string | Date | null; heartbeat_ms: number | null; overlap_listed_at: string | Date | null };
  const raws = rows<Raw>(found);
  if (raws.length === 0 || raws[0].holder === null) return null;
  const listedBy = raws.flatMap((r): HolderListing[] =>
    r.id === null
      ? []
      : [{ daemonId: r.id, heartbeatAt: parseDbTime(r.heartbeat_at)!, heartbeatMs: r.heartbeat_ms === null ? null : Number(r.heartbeat_ms), listedAt: parseDbTime(r.overlap_listed_at) }],
  );
  const now = parseDbTime(raws[0].now)!;
  let serverStartedAt: Date | null = null;
  if (listedBy.length > 0) {
    // SHOW STATUS needs no privilege and reads the same on MySQL and MariaDB.
    const status = rows<{ Value: string }>(await exec.execute(sql`SHOW GLOBAL STATUS LIKE 'Uptime'`));
    serverStartedAt = new Date(now.getTime() - Number(status[0]?.Value ?? 0) * 1000);
  }
  return { connectionId: Number(raws[0].holder), listedBy, now, serverStartedAt };
}

/** What endSession did: ended it, found it gone already, or was refused (another user's session, without the privilege). */
export type EndSessionOutcome = { ended: true } | { ended: false; why: 'gone' } | { ended: false; why: 'refused'; reason: string };

/**
 * Ends the session `connectionId` (KILL CONNECTION): the server rolls back its open
 * transaction and frees its named locks as it ends. A user may end its own sessions;
 * another user's needs SUPER or CONNECTION ADMIN (CONNECTION_ADMIN on MySQL 8; PROCESS
 * is not enough), else 'refused'.
 * Other failures (a lost connection) throw.
 */
export async function endSession(exec: Executor, connectionId: number): Promise<EndSessionOutcome> {
  if (!Number.isSafeInteger(connectionId) || connectionId <= 0) throw new Error(`endSession: not a connection id: ${connectionId}`);
  try {
    await exec.execute(sql.raw(`KILL CONNECTION ${connectionId}`));
    return { ended: true };
  } catch (error) {
    const e = driverError(error) as { code?: string; message?: string };
    if (e?.code === 'ER_NO_SUCH_THREAD') return { ended: false, why: 'gone' };
    if (e?.code === 'ER_KILL_DENIED_ERROR') return { ended: false, why: 'refused', reason: String(e.message ?? e.code).split('\n', 1)[0] };
    throw error;
  }
}
