/**
 * Giving up on a connection whose statement may still be running on the server.
 *
 * Closing the socket is not enough: the server notices a closed socket only when it next
 * reads or writes it, so a statement still running there (a slow UPDATE, a SLEEP, a lock
 * wait, a GET_LOCK) goes on, and its transaction keeps every row lock (and a session its
 * named locks) until that statement ends, up to the server's own bounds or forever. So
 * every place that drops a connection after a client-side timeout, or in an unknown
 * state, ends its session with `KILL` too, through endSession.
 */
import mysql, { type Connection } from 'mysql2/promise';

/** Bounds on the side connection that sends the KILL: it never waits longer than these. */
const KILL_CONNECT_MS = 5_000;
const KILL_STATEMENT_MS = 5_000;

/**
 * Destroys `conn` at once (dropping it from its pool, whatever it is doing), then ends its
 * session on the server: `KILL <thread>` from a fresh connection of its own, opened with
 * `conn`'s host, port and credentials and closed right after. The server then interrupts
 * any statement still running there and rolls back the session's open transaction, which
 * frees its row locks (and releases its named locks).
 *
 * A connection of its own rather than one of a pool: the KILL is needed most when the
 * pool's connections are all busy or stuck (that is what timed out), and must never wait
 * behind the statements it is meant to end, nor leave a pool connection with an
 * unanswered command. Ending one's own session needs no privilege.
 *
 * Never throws. The returned promise settles once the KILL was answered or given up on
 * (a session already gone answers 'unknown thread'; an unreachable server fails the
 * connect): callers need not wait for it, and most do not.
 */
export function endSession(conn: Connection): Promise<void> {
  const thread = Number(conn.threadId);
  const { host, port, user, password, socketPath, ssl } = conn.config;
  conn.destroy();
  if (!Number.isSafeInteger(thread) || thread <= 0) return Promise.resolve();
  return kill({ host, port, user, password, socketPath, ssl, connectTimeout: KILL_CONNECT_MS }, thread);
}

async function kill(options: mysql.ConnectionOptions, thread: number): Promise<void> {
  let killer: Connection | undefined;
  try {
    killer = await mysql.createConnection(options);
    await killer.query({ sql: `KILL ${thread}`, timeout: KILL_STATEMENT_MS });
  } catch {
    // Gone already, or the server cannot be reached: nothing more to do from here.
  } finally {
    killer?.destroy();
  }
}
