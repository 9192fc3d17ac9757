import { DrizzleQueryError } from 'drizzle-orm';
import { drizzle, type MySql2Database } from 'drizzle-orm/mysql2';
import mysql, { type Pool, type PoolConnection, type PoolOptions } from 'mysql2/promise';
import { DatabaseUnreachableError, isInstance } from '../errors.ts';
import { endSession } from './endSession.ts';
import { Permits } from './permits.ts';
import * as schema from './schema.ts';
import { parseDatabaseUrl, type DatabaseTarget } from './url.ts';

export type Db = MySql2Database<typeof schema>;
/** A Drizzle handle that statements can run on: the pool-backed db or an open transaction. */
export type Executor = Pick<Db, 'execute' | 'select' | 'insert' | 'update' | 'delete'>;

/** Bounds on every wait, all well below the shortest sensible lease (see README, "Bounded waits"). */
export const TIMEOUTS = {
  connectMs: 5_000,
  /** Client-side bound on any one statement; the server's lock waits below end first. */
  queryMs: 15_000,
  innodbLockWaitS: 5,
  metadataLockWaitS: 10,
};

export interface Database {
  db: Db;
  /**
   * The pool; its statements carry no client-side timeout (migrations may be long).
   * `db` runs every statement with `queryTimeoutMs`.
   */
  pool: Pool;
  /**
   * A second, small pool (one connection per claim lane) whose connections accept
   * several statements per packet, opened on first use. Only the claim uses it
   * (store/claims.ts claimReady), with statements it builds and escapes itself: a claim is two or
   * three round trips instead of six. Same session settings as `pool`.
   */
  readonly claims: Pool;
  /**
   * A third small pool, opened on first use, whose connections each hold one named lock
   * for as long as a fan-out of an `overlap: 'skip'` schedule runs (store/overlap.ts).
   * Apart from `pool`, so that locks held never take the connections their holders'
   * inserts need; at most OVERLAP_LOCK_CONNECTIONS of a process's fan-outs hold one at
   * once, the others wait for a connection here. Same session settings as `pool`.
   */
  readonly overlapLocks: Pool;
  /**
   * Takes one connection of `pool` for a transaction that may hang and have to be
   * abandoned (a completion's effects: store/fenced.ts completeIfLeased). At most
   * `dedicatedLimit` are held at once, so however many such transactions hang, the
   * pool's other connections (at least RESERVED_CONNECTIONS of it) stay free for the
   * short statements the daemon's own bookkeeping runs on `db`: lease renewals,
   * completions, failures, recovery, heartbeats, enqueues. A caller beyond the limit
   * waits, first come, first served, until one is released or destroyed; `signal`
   * aborting ends that wait (rejecting with its reason, holding nothing), not a wait for
   * the pool itself, which the reserve keeps short.
   */
  dedicated(signal?: AbortSignal): Promise<DedicatedConnection>;
  /** Most connections `dedicated` hands out at once. */
  readonly dedicatedLimit: number;
  target: DatabaseTarget;
  close(): Promise<void>;
  /**
   * Closes every pool at once without waiting for the server: each connection's socket is
   * destroyed (close() waits for each server to answer its QUIT, which a frozen or
   * unreachable server never does). Statements still in flight fail with a connection
   * error; what the server makes of them is its own (an uncommitted transaction rolls back).
   */
  destroy(): void;
}

/**
 * Connections of the pool that Database.dedicated never hands out (when the pool has more
 * than this): what renewals and completions run on while effects hang.
 */
export const RESERVED_CONNECTIONS = 2;

/**
 * Connections a daemon's pool holds beyond the engine's (concurrency + RESERVED_CONNECTIONS)
 * for the reads of its web console (two pages at once, one connection each) and of one
 * /metrics collection: while those wait out a lock (a table another session holds), the
 * engine's renewals and completions still find theirs. Opened only while they read.
 */
export const OBSERVER_CONNECTIONS = 3;

/** Connections in Database.claims: one per claim lane of a worker pool. */
export const CLAIM_CONNECTIONS = 2;

/** Connections in Database.overlapLocks: overlap locks one process holds at once. */
export const OVERLAP_LOCK_CONNECTIONS = 4;

export interface ConnectOptions {
  poolSize?: number;
  /**
   * Client-side bound on each statement run through `db` (default TIMEOUTS.queryMs).
   * A statement still unanswered then fails and its connection is destroyed, so a
   * network that silently drops packets costs seconds, not TCP's ~15 minutes.
   */
  queryTimeoutMs?: number;
  /**
   * Most connections of the pool Database.dedicated holds at once (default: poolSize less
   * RESERVED_CONNECTIONS, at least 1).
   */
  dedicatedConnections?: number;
  /** What a refusal of `url` calls it (default DATABASE_URL; createCronq's option: databaseUrl). */
  urlName?: string;
}

/**
 * Opens a pool on `url`. Every connection is UTC, READ COMMITTED and has bounded
 * lock waits before its first statement runs. Does not touch the server until used;
 * call `ping()` to fail fast with a clear message.
 */
export function connect(url: string, options: ConnectOptions = {}): Database {
  const target = parseDatabaseUrl(url, options.urlName);
  const poolSize = options.poolSize ?? 10;
  const pool = sessionPool({ ...poolOptions(target, poolSize) });
  const timed = withQueryTimeout(pool, options.queryTimeoutMs ?? TIMEOUTS.queryMs);
  const db = drizzle(timed, { schema, mode: 'default' });
  const share = new Permits(options.dedicatedConnections ?? Math.max(1, poolSize - RESERVED_CONNECTIONS));
  let claims: Pool | null = null;
  let overlapLocks: Pool | null = null;
  return {
    db,
    pool,
    dedicated: async (signal) => {
      const permit = await share.acquire(signal);
      try {
        return await dedicatedConnection(timed, pool, permit);
      } catch (error) {
        permit();
        throw error;
      }
    },
    dedicatedLimit: share.limit,
    get claims() {
      // Times as the server wrote them ('YYYY-MM-DD HH:MM:SS.ffffff'): a claim cursor must
      // keep every microsecond of available_at, which a Date would round to milliseconds.
      claims ??= sessionPool({ ...poolOptions(target, CLAIM_CONNECTIONS), multipleStatements: true, dateStrings: true });
      return claims;
    },
    get overlapLocks() {
      overlapLocks ??= sessionPool(poolOptions(target, OVERLAP_LOCK_CONNECTIONS));
      return overlapLocks;
    },
    target,
    close: async () => {
      await Promise.all([pool.end(), claims?.end(), overlapLocks?.end()]);
    },
    destroy: () => {
      for (const each of [pool, claims, overlapLocks]) if (each) destroyPool(each);
    },
  };
}

/** The parts of mysql2's core pool that destroyPool reaches into (not in its typings). */
interface CorePool {
  _allConnections?: { toArray(): CoreConnection[] };
}

/** The parts of a mysql2 connection that destroyPool reaches into (not in its typings). */
interface CoreConnection {
  destroy(): void;
  /** mysql2's own end of a connection on a fatal error: fails its handshake and queued statements with `error`. */
  _handleFatalError?(error: Error): void;
  stream?: { destroy(): void };
}

/**
 * Destroys every connection of `pool` and ends it, waiting for no server (Database.destroy).
 * What still waits on a connection (a statement, the handshake of a connect to a server
 * that never answers) fails with 'Pool is closed.': closed without an answer, mysql2 would
 * leave its promise pending for ever. Its socket is destroyed, not half-closed for a
 * frozen server to answer.
 */
function destroyPool(pool: Pool): void {
  const core = (pool as unknown as { pool?: CorePool }).pool;
  for (const conn of core?._allConnections?.toArray() ?? []) {
    try {
      conn._handleFatalError?.(new Error('Pool is closed.'));
    } catch {
      // An 'error' no listener is left for (the connection failed before): nothing waits on it.
    }
    conn.destroy();
    conn.stream?.destroy();
  }
  pool.end().catch(() => undefined);
}

/**
 * The pool behind `db`, as drizzle holds it (withQueryTimeout): a statement sent on it gets
 * `db`'s client-side timeout unless it sets its own, and a connection whose statement
 * timed out is destroyed and its session ended. For a plain statement that needs a
 * timeout of its own (ping); `Database.pool`'s statements have none, and one given a
 * `timeout` there stays unanswered on its connection, which the pool never gets back.
 */
export function timedPool(db: Db): Pool {
  return (db as unknown as { $client: Pool }).$client;
}

/** One connection of a pool held for a transaction that may have to be abandoned (Database.dedicated). */
export interface DedicatedConnection {
  /** Runs statements on this connection only (each with the pool's statement timeout). */
  tx: Executor;
  /** Gives the connection back to its pool. */
  release(): void;
  /**
   * Closes the connection at once, whatever it is doing, and drops it from its pool; then
   * ends its session on the server (endSession: KILL, from another connection of the pool), so
   * the server rolls back its open transaction and frees its locks even while it is still
   * running one of its statements. Statements sent on it afterwards fail. Not released
   * afterwards.
   */
  destroy(): void;
}

/**
 * Takes one connection of `timed` (the timed pool behind `db`, over `pool`) for a
 * transaction the caller runs itself, so it can abandon it (destroy) when something inside
 * never ends: drizzle's `transaction()` offers no way to. `permit` is given back with the
 * connection.
 */
async function dedicatedConnection(timed: Pool, pool: Pool, permit: () => void): Promise<DedicatedConnection> {
  const conn = await timed.getConnection();
  let gone = false;
  return {
    tx: drizzle({ client: conn, schema, mode: 'default' }),
    release: () => {
      if (gone) return;
      gone = true;
      conn.release();
      permit();
    },
    destroy: () => {
      if (gone) return;
      gone = true;
      void endSession(conn, pool);
      permit();
    },
  };
}

/**
 * The `sql_mode` of every session cronq opens, whatever the server's default.
 *
 * Statements are formatted client-side (mysql2 escapes quotes with a backslash), which
 * is only safe while the server reads a backslash as an escape: under
 * NO_BACKSLASH_ESCAPES a key `a\' ...` would end the string and run the rest as SQL.
 * A fixed mode rather than the server's minus that flag: the code is written and tested
 * against exactly these semantics, and a server's ANSI_QUOTES or PIPES_AS_CONCAT would
 * change them too. Strict (a value too long for its column is an error, never silently
 * cut) and the same on MySQL 8 and MariaDB, whose defaults it otherwise matches.
 */
export const SESSION_SQL_MODE = 'STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION';

/** Sets SESSION_SQL_MODE on a connection that is about to be used (see sessionPool). */
export const SET_SQL_MODE = `SET SESSION sql_mode = '${SESSION_SQL_MODE}'`;

/**
 * A pool whose every connection has SESSION_SQL_MODE, is UTC, READ COMMITTED and has
 * bounded lock waits. The 'connection' event fires on the callback-style connection
 * before it is handed out, and statements queue in order, so these run before any
 * caller's statement. Most failures here need no handling of their own (the
 * connection's next statement fails the same way), but each must have a callback: an
 * unhandled 'error' would crash. The sql_mode is the exception: a connection that did
 * not take it must run nothing, so it is destroyed and the caller's statement fails as
 * a lost connection would.
 */
function sessionPool(options: PoolOptions): Pool {
  const pool = mysql.createPool(options);
  const ignore = () => undefined;
  pool.pool.on('connection', (conn) => {
    conn.query(SET_SQL_MODE, (error: unknown) => {
      if (error) conn.destroy();
    });
    conn.query(`SET SESSION time_zone = '+00:00'`, ignore);
    conn.query(`SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED`, ignore);
    conn.query(
      `SET SESSION innodb_lock_wait_timeout = ${TIMEOUTS.innodbLockWaitS}, SESSION lock_wait_timeout = ${TIMEOUTS.metadataLockWaitS}`,
      ignore,
    );
  });
  return pool;
}

/**
 * The pool as drizzle sees it: every `query`/`execute`, on the pool or on a connection
 * taken from it for a transaction, gets mysql2's `timeout` option (unless it sets its
 * own), and a connection whose statement timed out is destroyed and its session ended
 * (endSession). mysql2 only fails the statement: the connection would stay in the pool
 * with an unanswered command, and `end()` would wait for it forever; and the server would
 * go on running the statement, holding its transaction's row locks (a lock wait for up to
 * innodb_lock_wait_timeout, and then the transaction stays open) until it ends.
 */
function withQueryTimeout(pool: Pool, timeoutMs: number): Pool {
  const timed = (q: unknown) => (typeof q === 'string' ? { sql: q, timeout: timeoutMs } : { timeout: timeoutMs, ...(q as object) });
  const isTimeout = (error: unknown) => (error as { code?: string })?.code === 'PROTOCOL_SEQUENCE_TIMEOUT';

  function guard(conn: PoolConnection): PoolConnection {
    let destroyed = false;
    const run = (method: 'query' | 'execute') => async (q: unknown, ...rest: unknown[]) => {
      try {
        return await (conn[method] as (...args: unknown[]) => Promise<unknown>)(timed(q), ...rest);
      } catch (error) {
        if (isTimeout(error) && !destroyed) {
          destroyed = true;
          void endSession(conn, pool);
        }
        throw error;
      }
    };
    const overrides: Record<string | symbol, unknown> = {
      query: run('query'),
      execute: run('execute'),
      release: () => destroyed || conn.release(),
      // Destroyed from outside (dedicatedConnection): never released afterwards either.
      destroy: () => {
        if (destroyed) return;
        destroyed = true;
        conn.destroy();
      },
    };
    return new Proxy(conn, {
      get(target, property) {
        if (property in overrides) return overrides[property];
        const value = Reflect.get(target, property, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  }

  const onConnection = (method: 'query' | 'execute') => async (...args: unknown[]) => {
    const conn = guard(await pool.getConnection());
    try {
      return await (conn[method] as (...a: unknown[]) => Promise<unknown>)(...args);
    } finally {
      conn.release();
    }
  };
  const overrides: Record<string | symbol, unknown> = {
    query: onConnection('query'),
    execute: onConnection('execute'),
    getConnection: async () => guard(await pool.getConnection()),
  };
  return new Proxy(pool, {
    get(target, property) {
      if (property in overrides) return overrides[property];
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

function poolOptions(target: DatabaseTarget, size: number): PoolOptions {
  return {
    host: target.host,
    port: target.port,
    user: target.user,
    password: target.password,
    database: target.database,
    connectionLimit: size,
    maxIdle: size,
    idleTimeout: 60_000,
    connectTimeout: TIMEOUTS.connectMs,
    timezone: 'Z',
    supportBigNumbers: true,
    bigNumberStrings: false,
    // Affected rows count changed rows, not matched ones: ON DUPLICATE KEY UPDATE id=id
    // then reports 0 for an existing key, which is how enqueue tells "created" apart.
    flags: ['-FOUND_ROWS'],
    enableKeepAlive: true,
    // No stack capture per statement: it costs more than the statement on a busy claim loop,
    // and errors are reported by code and message anyway.
    trace: false,
  };
}

/** Wraps a connection failure in one line naming host, port and the server's reason. */
export function unreachable(target: DatabaseTarget, error: unknown): DatabaseUnreachableError {
  const reason = (error as { code?: string; message?: string })?.code ?? (error as Error)?.message ?? String(error);
  const message = (error as Error)?.message && (error as { code?: string }).code !== (error as Error).message
    ? `${(error as { code?: string }).code ?? ''} ${(error as Error).message}`.trim()
    : reason;
  return new DatabaseUnreachableError(
    `cannot reach the database at ${target.address} (database '${target.database}'): ${message}`,
    { cause: error },
  );
}

/**
 * The mysql2 error under drizzle's wrapper: drizzle rethrows every failed statement as a
 * DrizzleQueryError whose message is the SQL and its params and whose `cause` holds the
 * driver's error (with `code`, `errno`, `fatal`). Any other error comes back as it is.
 */
export function driverError(error: unknown): unknown {
  let e = error;
  while (isInstance(e, DrizzleQueryError) && e.cause !== undefined && e.cause !== null) e = e.cause;
  return e;
}

/** What driverFailure keeps of a driver's error: no SQL, no parameters. */
export type DriverFailure = Error & { code?: string; errno?: number; sqlState?: string; fatal?: boolean };

/**
 * The driver's error behind a failed statement, cut to what is safe to show a caller:
 * a new Error with its code, errno, SQL state, fatal flag and the first line of its
 * message (at most 500 characters), neither drizzle's wrapper (whose message is the SQL
 * with every parameter) nor the driver's error itself (which keeps the SQL). null for
 * anything else (a named cronq error, a UsageError, the pool's codeless 'Pool is
 * closed.'): the caller passes that on as it is.
 */
export function driverFailure(error: unknown): DriverFailure | null {
  const e = driverError(error) as { code?: string; errno?: number; message?: string; sqlState?: string; fatal?: boolean } | null | undefined;
  // A driver error: drizzle's wrapper, or mysql2's own (a server error has an errno; a lost connection a code).
  // Never throws: what a fan-out threw is asked too (a revoked Proxy refuses every read; it is no driver's).
  if (e === error && !isDriverShaped(e)) return null;
  const text = typeof e?.message === 'string' ? e.message.slice(0, 4096) : 'no message';
  // The server quotes values (a duplicate key): drop a high surrogate the cut left alone.
  const message = text.split('\n', 1)[0].trimEnd().slice(0, 500).replace(/[\uD800-\uDBFF]$/, '');
  return Object.assign(new Error(message), { code: e?.code, errno: e?.errno, sqlState: e?.sqlState, fatal: e?.fatal });
}

/** Whether `e` reads as mysql2's error: an errno (a server error), or a connection error's code; false when reading it throws. */
function isDriverShaped(e: { code?: string; errno?: number } | null | undefined): boolean {
  try {
    return typeof e?.errno === 'number' || (typeof e?.code === 'string' && isConnectionError(e));
  } catch {
    return false;
  }
}

/**
 * True for a deadlock or a lock wait timeout: the statement lost a race for a row lock
 * and InnoDB rolled it (or its transaction) back whole, so it changed nothing and may
 * simply be run again. Not a connection problem (isConnectionError).
 */
export function isLockConflict(error: unknown): boolean {
  // Never throws: what a handler or an effect threw is asked too (a getter that throws is no driver's error).
  try {
    const code = (driverError(error) as { code?: string })?.code;
    return code === 'ER_LOCK_DEADLOCK' || code === 'ER_LOCK_WAIT_TIMEOUT';
  } catch {
    return false;
  }
}

/** True for errors that mean the connection or server is gone, not that a statement was wrong. Never throws, as isLockConflict. */
export function isConnectionError(error: unknown): boolean {
  try {
    error = driverError(error);
    const code = (error as { code?: string })?.code ?? '';
    const message = (error as Error)?.message;
    return (
      /^(ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|ENOTFOUND|EHOSTUNREACH|PROTOCOL_CONNECTION_LOST|PROTOCOL_SEQUENCE_TIMEOUT|ER_CON_COUNT_ERROR|ER_SERVER_SHUTDOWN|ER_CONNECTION_KILLED|ER_QUERY_INTERRUPTED)$/.test(String(code)) ||
      (error as { fatal?: boolean })?.fatal === true ||
      (typeof message === 'string' && /Pool is closed|Connection lost|closed state|connect ETIMEDOUT/i.test(message))
    );
  } catch {
    return false;
  }
}
