/**
 * Cluster-wide concurrency limits (`cronq_kind_limits`): one row per limited kind, the
 * most of its jobs reserved at once across every daemon. The claim reads and locks it
 * (claims.ts); this file writes it.
 *
 * Concurrency contract:
 * - Each daemon upserts the rows of the limited kinds it runs when its workers start;
 *   the last writer wins, so a rolling deploy that changes a limit converges on the new
 *   value as the new daemons start. The claim reads the row under its lock every time,
 *   so a changed value (by a daemon or by hand) applies from the next claim on.
 * - The upsert takes the row lock for an instant, so a start waits at most for one claim
 *   of that kind to commit; claims of other kinds never touch these rows.
 */
import { sql } from 'drizzle-orm';
import type { Executor } from '../db/client.ts';
import { NOW, parseDbTime, rows } from './sql.ts';

/** One kind's limit. */
export interface KindLimit {
  /** The limited kind. */
  kind: string;
  /** Most of its jobs running at once across every daemon (the task's `concurrency`, as the last daemon to start wrote it). */
  maxRunning: number;
}

/** Writes each kind's limit, replacing the value another daemon wrote (last writer wins). */
export async function upsertKindLimits(exec: Executor, limits: readonly KindLimit[]): Promise<void> {
  if (limits.length === 0) return;
  // In kind order, so two daemons starting at once lock the rows in the same order.
  const sorted = [...limits].sort((a, b) => (a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : 0));
  const values = sql.join(
    sorted.map((l) => sql`(${l.kind}, ${l.maxRunning}, ${NOW})`),
    sql`, `,
  );
  await exec.execute(sql`INSERT INTO cronq_kind_limits (kind, max_running, updated_at) VALUES ${values}
    ON DUPLICATE KEY UPDATE max_running = VALUES(max_running), updated_at = VALUES(updated_at)`);
}

/** A limit in force, with how many jobs of its kind hold a live reservation now. */
export interface KindLimitStatus extends KindLimit {
  /** Reserved jobs of the kind whose lease has not run out (what a claim counts). */
  running: number;
  /** When a daemon (or a person) last wrote the row, by the database clock. */
  updatedAt: Date;
}

/**
 * Every limit in force, by kind name, with its running count: plain reads, each count
 * over the reserved part of the claim index (as many rows as jobs in flight).
 */
export async function listKindLimits(exec: Executor): Promise<KindLimitStatus[]> {
  const found = rows<{ kind: string; max_running: number; updated_at: string; running: number }>(
    await exec.execute(sql`SELECT l.kind, l.max_running, l.updated_at,
        (SELECT COUNT(*) FROM cronq_jobs j WHERE j.status = 'reserved' AND j.kind = l.kind AND j.lease_deadline > ${NOW}) AS running
      FROM cronq_kind_limits l ORDER BY l.kind`),
  );
  return found.map((r) => ({ kind: r.kind, maxRunning: Number(r.max_running), running: Number(r.running), updatedAt: parseDbTime(r.updated_at)! }));
}
