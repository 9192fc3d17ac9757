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
import type { Pool, PoolConnection } from 'mysql2/promise';

/** Client-side bound on the KILL itself. */
const KILL_TIMEOUT_MS = 5_000;

/**
 * Destroys `conn` at once (dropping it from its pool, whatever it is doing), then ends its
 * session on the server: `KILL <thread>` on another connection of `via`, the pool `conn`
 * came from. The server then interrupts any statement still running there and rolls back
 * the session's open transaction, which frees its row locks (and releases its named locks).
 *
 * Sent through the pool rather than on a fresh connection: the slot `conn` leaves is what
 * the KILL runs in, so ending sessions never opens more server connections than the pool
 * may hold. (A fresh connection per KILL did: 46 effects abandoned at once ran the test
 * server out of its 151 connections, refusing the KILLs themselves.) The general pool
 * always has connections for short statements (Database.dedicated keeps a reserve), and the
 * claim and overlap-lock pools a slot each one leaves. The KILLs of one pool go one after
 * another on one connection: on MariaDB 10.11 (2 cores), 46 KILLs sent at once took 2.2 s
 * to be answered, one after another 57 ms in all. A KILL that fails or times out destroys
 * its own connection and is not sent again (no KILL follows a KILL); the next one takes a
 * connection anew, and when none can be had the ones queued are dropped (the server cannot
 * be reached). Ending one's own session needs no privilege.
 *
 * Never throws. The returned promise settles once the pool's queue of KILLs, this one
 * among them, was answered or given up on (a session already gone answers 'unknown
 * thread'): callers need not wait, and most do not.
 */
export function endSession(conn: PoolConnection, via: Pick<Pool, 'getConnection'>): Promise<void> {
  const thread = Number(conn.threadId);
  conn.destroy();
  if (!Number.isSafeInteger(thread) || thread <= 0) return Promise.resolve();
  let queue = queues.get(via);
  if (!queue) {
    queue = { threads: [], draining: null };
    queues.set(via, queue);
  }
  queue.threads.push(thread);
  queue.draining ??= drain(via, queue);
  return queue.draining;
}

/** The sessions waiting to be ended through one pool, and the loop ending them (one per pool). */
interface KillQueue {
  threads: number[];
  draining: Promise<void> | null;
}

const queues = new WeakMap<object, KillQueue>();

async function drain(via: Pick<Pool, 'getConnection'>, queue: KillQueue): Promise<void> {
  while (queue.threads.length > 0) {
    let killer: PoolConnection;
    try {
      killer = await via.getConnection();
    } catch {
      queue.threads.length = 0; // the server cannot be reached: nothing more to do from here
      break;
    }
    let usable = true;
    while (usable && queue.threads.length > 0) {
      try {
        await killer.query({ sql: `KILL ${queue.threads.shift()}`, timeout: KILL_TIMEOUT_MS });
      } catch (error) {
        // 'unknown thread' (ER_NO_SUCH_THREAD): gone already, and this connection is fine.
        if ((error as { code?: string })?.code !== 'ER_NO_SUCH_THREAD') {
          usable = false;
          killer.destroy();
        }
      }
    }
    if (usable) killer.release();
  }
  // No await since the loop's last check: a KILL queued from now on starts a new drain.
  queue.draining = null;
}
