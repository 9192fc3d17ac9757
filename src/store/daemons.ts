/**
 * Daemon SQL: which daemons run workers, for which kinds and queues, and when each was
 * last heard from (`cronq_daemons`). This is how a daemon tells "a kind I do not know,
 * that another daemon runs" (a rolling deploy) from "a kind nobody runs any more".
 *
 * Concurrency contract:
 * - Each daemon writes only its own row (id = its `locked_by`, host:pid), by upsert, so
 *   daemons never contend; every time is the database clock (`UTC_TIMESTAMP(6)`).
 * - Rows are history, not locks: a crashed daemon's row simply stops being refreshed.
 *   Readers judge liveness by `heartbeat_at` (and `stopped_at`), never by the row's
 *   presence; any daemon may delete rows not heard from for a day (30 days for rows that
 *   list overlap connections).
 * - Reads are plain (no locks) and may be a heartbeat stale, which the callers' bounds
 *   (several heartbeats) absorb.
 * - `overlap_connections` lists the connections the daemon's overlap locks are held on,
 *   each written (and committed) before its lock is taken, so a holder found by
 *   IS_USED_LOCK afterwards is already listed in its daemon's row (store/overlap.ts).
 */
import { sql } from 'drizzle-orm';
import type { Executor } from '../db/client.ts';
import { header, interval, parseDbTime, rows } from './sql.ts';

/** What a daemon records about itself. */
export interface DaemonRecord {
  /** `host:pid`, the daemon's locked_by. */
  id: string;
  host: string;
  pid: number;
  /** The kinds it can run. */
  kinds: string[];
  /** The queues it claims from; null for every queue. */
  queues: string[] | null;
}

/** Rows not heard from for this long may be deleted by any daemon (but see LISTING_DAEMON_ROW_RETENTION_MS). */
export const DAEMON_ROW_RETENTION_MS = 24 * 3_600_000;

/**
 * Records this daemon as running from now (started_at and heartbeat_at now, not
 * stopped), replacing a previous row with the same id (a pid reused after a restart).
 */
export async function registerDaemon(exec: Executor, daemon: DaemonRecord): Promise<void> {
  const kinds = JSON.stringify(daemon.kinds);
  const queues = daemon.queues === null ? null : JSON.stringify(daemon.queues);
  await exec.execute(sql`INSERT INTO cronq_daemons (id, host, pid, kinds, queues, started_at, heartbeat_at, stopped_at)
    VALUES (${daemon.id}, ${daemon.host}, ${daemon.pid}, ${kinds}, ${queues}, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), NULL)
    ON DUPLICATE KEY UPDATE host = VALUES(host), pid = VALUES(pid), kinds = VALUES(kinds), queues = VALUES(queues),
      started_at = VALUES(started_at), heartbeat_at = VALUES(heartbeat_at), stopped_at = NULL`);
}

/**
 * Refreshes this daemon's heartbeat_at. Writes the whole record again if the row is
 * gone (deleted as silent after a long outage or pause), keeping started_at otherwise.
 */
export async function heartbeatDaemon(exec: Executor, daemon: DaemonRecord): Promise<void> {
  const kinds = JSON.stringify(daemon.kinds);
  const queues = daemon.queues === null ? null : JSON.stringify(daemon.queues);
  await exec.execute(sql`INSERT INTO cronq_daemons (id, host, pid, kinds, queues, started_at, heartbeat_at, stopped_at)
    VALUES (${daemon.id}, ${daemon.host}, ${daemon.pid}, ${kinds}, ${queues}, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), NULL)
    ON DUPLICATE KEY UPDATE heartbeat_at = VALUES(heartbeat_at), stopped_at = NULL`);
}

/**
 * Writes the connection ids this daemon's overlap locks are (about to be) held on, when,
 * and its heartbeat interval (`heartbeatMs`, by which other daemons judge it stale).
 * Without a row (none registered) nothing is written: a lock then taken belongs to no
 * daemon, so no other daemon ever ends its session. (Only this statement writes the
 * columns of migration 0008, so a daemon started before `migrate()` still registers.)
 */
export async function listOverlapConnections(exec: Executor, daemon: { id: string; heartbeatMs: number }, connectionIds: readonly number[]): Promise<void> {
  await exec.execute(sql`UPDATE cronq_daemons
    SET overlap_connections = ${JSON.stringify(connectionIds)}, overlap_listed_at = UTC_TIMESTAMP(6), heartbeat_ms = ${daemon.heartbeatMs}
    WHERE id = ${daemon.id}`);
}

/** Marks this daemon stopped now (a clean stop); its kinds count as served until now. */
export async function markDaemonStopped(exec: Executor, id: string): Promise<void> {
  await exec.execute(sql`UPDATE cronq_daemons
    SET stopped_at = UTC_TIMESTAMP(6), heartbeat_at = UTC_TIMESTAMP(6) WHERE id = ${id}`);
}

/**
 * A row listing overlap connections is kept this long after its last heartbeat: the
 * daemon may be stalled holding a lock, which can be freed only while its row names the
 * session, and a daily schedule's next tick comes a day after its last.
 */
export const LISTING_DAEMON_ROW_RETENTION_MS = 30 * DAEMON_ROW_RETENTION_MS;

/**
 * Deletes rows not heard from for `olderThanMs`, or for LISTING_DAEMON_ROW_RETENTION_MS
 * when they list overlap connections; returns how many.
 */
export async function deleteSilentDaemons(exec: Executor, olderThanMs = DAEMON_ROW_RETENTION_MS): Promise<number> {
  const result = await exec.execute(sql`DELETE FROM cronq_daemons
    WHERE heartbeat_at < UTC_TIMESTAMP(6) - ${interval(olderThanMs)}
      AND (overlap_connections IS NULL OR JSON_LENGTH(overlap_connections) = 0
        OR heartbeat_at < UTC_TIMESTAMP(6) - ${interval(Math.max(olderThanMs, LISTING_DAEMON_ROW_RETENTION_MS))})`);
  return header(result).affectedRows;
}

/** Whether anyone runs a kind, as `servingOf` reads it. */
export interface Serving {
  /** A daemon not stopped, heard from within `aliveMs`, runs this kind on this queue. */
  alive: boolean;
  /**
   * How long, by the database clock, since a daemon serving it was last heard from
   * (or, when none ever was, since the job was created). 0 when `alive`.
   */
  unservedForMs: number;
}

/**
 * Who serves jobs of `kind` on `queue`: a daemon serves it when its kinds include it
 * and it claims from that queue (or from every queue). `jobId` is the job asking; its
 * `created_at` is the start of the wait when no daemon ever served the kind.
 */
export async function servingOf(exec: Executor, query: { jobId: number; kind: string; queue: string; aliveMs: number }): Promise<Serving> {
  const serves = sql`JSON_CONTAINS(kinds, JSON_QUOTE(${query.kind})) AND (queues IS NULL OR JSON_CONTAINS(queues, JSON_QUOTE(${query.queue})))`;
  const result = await exec.execute(sql`SELECT
      (SELECT COUNT(*) FROM cronq_daemons WHERE ${serves} AND stopped_at IS NULL
        AND heartbeat_at > UTC_TIMESTAMP(6) - ${interval(query.aliveMs)}) AS alive,
      (SELECT MAX(heartbeat_at) FROM cronq_daemons WHERE ${serves}) AS last_served,
      (SELECT created_at FROM cronq_jobs WHERE id = ${query.jobId}) AS created_at,
      UTC_TIMESTAMP(6) AS now`);
  const row = rows<{ alive: number; last_served: string | Date | null; created_at: string | Date | null; now: string | Date }>(result)[0];
  if (Number(row.alive) > 0) return { alive: true, unservedForMs: 0 };
  const now = parseDbTime(row.now)!.getTime();
  const since = parseDbTime(row.last_served) ?? parseDbTime(row.created_at);
  if (since === null) return { alive: false, unservedForMs: 0 };
  // A zero date written by hand (strict mode off) reads as no instant: the earliest there
  // is, as the server orders it, so long unserved; never NaN, which no SQL interval takes.
  if (Number.isNaN(since.getTime())) return { alive: false, unservedForMs: Number.MAX_SAFE_INTEGER };
  return { alive: false, unservedForMs: Math.max(0, now - since.getTime()) };
}
