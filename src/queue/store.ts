/**
 * The only place that writes queue SQL. Every other module calls these functions.
 *
 * Concurrency contract, shared by everything below:
 * - "now" is always the database clock (`UTC_TIMESTAMP(6)`), never the host's.
 * - A claim stamps each row with a fresh random `lease_token` and a `lease_until`.
 *   Every later write by the claimer (`...IfLeased`) re-checks, under the row lock its
 *   UPDATE or `SELECT ... FOR UPDATE` takes, that the row is still `reserved` with that
 *   token and an unexpired lease; otherwise it changes nothing and reports false.
 *   A stale worker can therefore never finish, fail, renew or release a job.
 * - Transactions are short and run at READ COMMITTED (set per connection in db/client.ts).
 */
import { createHash, randomBytes } from 'node:crypto';
import { sql, type SQL } from 'drizzle-orm';
import { format as mysqlFormat, raw as mysqlRaw } from 'mysql2';
import { isConnectionError, type Db, type Executor } from '../db/client.ts';
import type { JobStatus } from '../db/schema.ts';

const NOW = sql`UTC_TIMESTAMP(6)`;
const LAST_ERROR_MAX = 2000;

/** A job as the claim returns it to the worker. */
export interface ClaimedJob {
  id: number;
  queue: string;
  kind: string;
  key: string;
  /** The payload as stored (JSON text); the worker parses it so a bad one can go dead. */
  payloadText: string;
  /** The attempt now running (1 on first delivery). */
  attempt: number;
  maxAttempts: number;
  scheduleName: string | null;
  periodKey: string | null;
  scheduledAt: Date | null;
  leaseToken: string;
}

/** One row to insert. `runAt` null means now by the database clock. */
export interface NewJobRow {
  queue: string;
  kind: string;
  key: string;
  payloadJson: string;
  maxAttempts: number;
  runAt: Date | null;
  scheduleName?: string | null;
  periodKey?: string | null;
  scheduledAt?: Date | null;
}

/** A claim's lease on one job: what every fenced write must present. */
export interface Lease {
  id: number;
  token: string;
}

/** What `failIfLeased` did. */
export type FailOutcome = { status: 'retry'; retryInMs: number } | { status: 'dead' } | { status: 'lease_lost' };

type Header = { affectedRows: number; insertId: number };

function header(result: unknown): Header {
  return (result as [Header])[0];
}

function rows<T>(result: unknown): T[] {
  return (result as [T[]])[0];
}

/** Parses a DATETIME string as the driver returns it ('YYYY-MM-DD HH:MM:SS.ffffff', UTC). */
export function parseDbTime(value: string | Date | null): Date | null {
  if (value === null) return null;
  if (value instanceof Date) return value;
  return new Date(`${value.replace(' ', 'T')}Z`);
}

function toDbTime(date: Date): string {
  return date.toISOString().replace('T', ' ').replace('Z', '');
}

/** A fresh lease token: 128 random bits as 32 hex characters. */
export function newLeaseToken(): string {
  return randomBytes(16).toString('hex');
}

/** The token of row `id` in the claim whose secret is `secret`: MD5(secret:id), as the claim's SQL computes it. */
export function leaseTokenFor(secret: string, id: number): string {
  return createHash('md5').update(`${secret}:${id}`).digest('hex');
}

function interval(ms: number): SQL {
  return sql`INTERVAL ${Math.max(0, Math.round(ms * 1000))} MICROSECOND`;
}

/** Truncates an error text for `last_error` / `failure_reason`. */
export function truncateError(text: string, max = LAST_ERROR_MAX): string {
  return text.length <= max ? text : `${text.slice(0, max - 15)}… [truncated]`;
}

const NOW_RAW = mysqlRaw('UTC_TIMESTAMP(6)');

function insertValues(row: NewJobRow): unknown[] {
  return [
    row.queue,
    row.kind,
    row.key,
    row.payloadJson,
    row.maxAttempts,
    row.runAt ? toDbTime(row.runAt) : NOW_RAW,
    row.scheduleName ?? null,
    row.periodKey ?? null,
    row.scheduledAt ? toDbTime(row.scheduledAt) : null,
    NOW_RAW,
    NOW_RAW,
  ];
}

const INSERT_JOBS =
  'INSERT INTO cronq_jobs (queue, kind, job_key, payload, max_attempts, available_at, schedule_name, period_key, scheduled_at, created_at, updated_at) VALUES ?';

/**
 * Bulk statements are escaped by mysql2's own formatter (what the driver does to any
 * parameterised query) and handed to drizzle as finished SQL: building a thousand-row
 * statement chunk by chunk through drizzle's template costs more than running it.
 */
function formatted(statement: string, values: unknown[]): SQL {
  return sql.raw(mysqlFormat(statement, values as Parameters<typeof mysqlFormat>[1]));
}

/**
 * Inserts one job unless its key exists; either way returns the row's id.
 * Atomic under any number of concurrent callers: the unique key decides, and
 * `LAST_INSERT_ID(id)` hands the existing id back (no check-then-insert).
 * Runs on `exec`, so inside a caller's transaction it commits or rolls back with it.
 */
export async function insertJobIfAbsent(exec: Executor, row: NewJobRow): Promise<{ id: number; created: boolean }> {
  const result = await exec.execute(formatted(`${INSERT_JOBS} ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)`, [[insertValues(row)]]));
  const { affectedRows, insertId } = header(result);
  return { id: Number(insertId), created: affectedRows === 1 };
}

/**
 * Inserts many jobs in one statement; rows whose key exists (or repeats within
 * the batch) are left as they are. Returns how many rows were new.
 */
export async function insertJobsIfAbsent(exec: Executor, batch: NewJobRow[]): Promise<number> {
  if (batch.length === 0) return 0;
  const result = await exec.execute(formatted(`${INSERT_JOBS} ON DUPLICATE KEY UPDATE id = id`, [batch.map(insertValues)]));
  return header(result).affectedRows;
}

/** Which of `keys` already exist (a cheap read that lets a repeated fan-out skip its inserts). */
export async function existingKeys(exec: Executor, keys: string[]): Promise<Set<string>> {
  if (keys.length === 0) return new Set();
  const result = await exec.execute(formatted('SELECT job_key FROM cronq_jobs WHERE job_key IN (?)', [keys]));
  return new Set(rows<{ job_key: string }>(result).map((r) => r.job_key));
}

/**
 * Where the last claim from one queue stopped: (available_at, id) of its last row,
 * exactly as the database stored it.
 */
export interface ClaimCursor {
  availableAt: string;
  id: number;
}

export interface ClaimRequest {
  /**
   * Queues to claim from, in turn until `limit` is reached (see readyQueues for a
   * daemon that serves every queue). Each is read by its own exact index range.
   */
  queues: string[];
  /**
   * Per queue, start after this position instead of at the front.
   * Claimed rows leave delete-marked entries at the front of the claim index until
   * InnoDB purges them, and each costs a lookup; skipping past them keeps a busy
   * claim cheap. The claim moves a queue's cursor forward as soon as it has locked
   * rows, so a concurrent claim sharing the map starts after them. A ready row behind
   * the cursor (a transaction that committed late, or the rows of a claim that failed)
   * is only found by a claim without one, so callers must drop cursors regularly and
   * whenever a claim fails.
   */
  cursors?: Map<string, ClaimCursor>;
  /** Rows never to claim (rows a claim could not update: see ClaimUpdateError). */
  excludeIds?: ReadonlySet<number>;
  limit: number;
  /** Lease length for a job of this kind. */
  leaseMsFor: (kind: string) => number;
  lockedBy: string;
}

/**
 * The queues that have 'ready' jobs (due or not), by a loose scan of the claim index's
 * (status, queue) prefix: one index dive per queue, however many jobs wait. A plain
 * read, so it can be stale the moment it returns; callers re-read it regularly.
 */
export async function readyQueues(exec: Executor): Promise<string[]> {
  // DISTINCT over the (status, queue) prefix itself: with status alone in the WHERE, the
  // optimizer would walk every ready entry instead.
  const result = await exec.execute(sql`SELECT DISTINCT status, queue FROM cronq_jobs WHERE status = 'ready'`);
  return rows<{ queue: string }>(result).map((r) => r.queue);
}

type ClaimRow = {
  id: number;
  queue: string;
  kind: string;
  job_key: string;
  payload: string;
  attempts: number;
  max_attempts: number;
  schedule_name: string | null;
  period_key: string | null;
  scheduled_at: string | null;
};

/**
 * The claim's locking read of one queue, covering the claim index
 * (status, queue, available_at, id): a range in index order (no filesort) that its LIMIT
 * stops. Covering, because for a wider read the optimizer may prefer a `ref` on
 * (status, queue), which walks the queue from the front, delete-marked entries of
 * claimed rows included. `after` continues a cursor: exactly `available_at = cursor AND id > cursor.id`, or
 * `available_at > cursor`, each its own precise range. (Should the optimizer prefer a
 * `ref` on (status, queue, available_at) for the first, as it may when every row left
 * shares the cursor's instant, that walk is bounded by the rows of one instant.)
 */
export function claimSelectSql(
  queue: string,
  limit: number,
  after: 'same-instant' | 'later' | null,
  cursor: ClaimCursor | undefined,
  exclude: readonly number[],
): string {
  const notExcluded = exclude.length === 0 ? '' : 'AND id NOT IN (?) ';
  const from = after === 'same-instant' ? 'available_at = ? AND id > ? AND ' : after === 'later' ? 'available_at > ? AND ' : '';
  const fromValues = after === 'same-instant' ? [cursor!.availableAt, cursor!.id] : after === 'later' ? [cursor!.availableAt] : [];
  return mysqlFormat(
    `SELECT id, available_at FROM cronq_jobs
    WHERE status = 'ready' AND queue = ? AND ${from}available_at <= UTC_TIMESTAMP(6) ${notExcluded}
    ORDER BY available_at, id LIMIT ? FOR UPDATE SKIP LOCKED`,
    [queue, ...fromValues, ...(exclude.length === 0 ? [] : [exclude]), limit] as Parameters<typeof mysqlFormat>[1],
  );
}

function claimSelectStatement(...args: Parameters<typeof claimSelectSql>): SQL {
  return sql.raw(claimSelectSql(...args));
}

/** Locks up to `limit` ready rows of one queue, oldest first, from the cursor on. */
async function lockReady(
  tx: Executor,
  queue: string,
  limit: number,
  cursor: ClaimCursor | undefined,
  exclude: readonly number[],
): Promise<Array<{ id: number; available_at: string }>> {
  type Locked = { id: number; available_at: string };
  if (!cursor) return rows<Locked>(await tx.execute(claimSelectStatement(queue, limit, null, undefined, exclude)));
  const same = rows<Locked>(await tx.execute(claimSelectStatement(queue, limit, 'same-instant', cursor, exclude)));
  if (same.length === limit) return same;
  return [...same, ...rows<Locked>(await tx.execute(claimSelectStatement(queue, limit - same.length, 'later', cursor, exclude)))];
}

/** Runs a claim's reserving UPDATE, turning a refusal that is not about the connection into ClaimUpdateError. */
async function reserve(ids: number[], update: () => Promise<unknown>): Promise<void> {
  try {
    await update();
  } catch (error) {
    if (isConnectionError(error)) throw error;
    throw new ClaimUpdateError(ids, error);
  }
}

/**
 * The database refused to reserve rows it had just locked for a claim: not a connection
 * problem, but something about those rows (on MariaDB, a payload that breaks the JSON
 * CHECK constraint, written with the checks off; or a trigger). `ids` are the rows of
 * the failed claim, so a caller can narrow it down and stop claiming the culprit.
 */
export class ClaimUpdateError extends Error {
  override name = 'ClaimUpdateError';
  constructor(
    readonly ids: number[],
    cause: unknown,
  ) {
    super(`reserving jobs ${ids.join(', ')} failed`, { cause });
  }
}

/**
 * Claims up to `limit` ready jobs, oldest `available_at` first, in one short transaction:
 * `SELECT ... FOR UPDATE SKIP LOCKED`, then one UPDATE marking them reserved with
 * attempts+1, a fresh token each and `lease_until = now + lease`. Rows another claimer
 * holds are skipped, never waited for, so concurrent claimers never get the same job.
 * Returns after COMMIT: no handler may start before the reservation is durable.
 *
 * With several queues, each is read by its own index range (rotating which goes first)
 * rather than one IN-list query that would have to sort.
 */
export async function claimReady(db: Db, request: ClaimRequest, rotation = 0): Promise<ClaimedJob[]> {
  if (request.limit <= 0 || request.queues.length === 0) return [];
  return db.transaction(async (tx) => {
    const lockedIds: number[] = [];
    for (const queue of rotate(request.queues, rotation)) {
      const want = request.limit - lockedIds.length;
      if (want <= 0) break;
      const got = await lockReady(tx, queue, want, request.cursors?.get(queue), [...(request.excludeIds ?? [])]);
      for (const r of got) lockedIds.push(Number(r.id));
      const last = got.at(-1);
      if (last) advanceCursor(request.cursors, queue, { availableAt: last.available_at, id: Number(last.id) });
      else request.cursors?.delete(queue);
    }
    if (lockedIds.length === 0) return [];
    // The rows are locked: read them whole by primary key.
    const picked = rows<ClaimRow>(
      await tx.execute(
        formatted(
          `SELECT id, queue, kind, job_key, CAST(payload AS CHAR) AS payload, attempts, max_attempts,
            schedule_name, period_key, scheduled_at
          FROM cronq_jobs WHERE id IN (?) ORDER BY queue, available_at, id`,
          [lockedIds],
        ),
      ),
    );
    // One random secret per claim; each row's token is MD5(secret:id), computed alike
    // here and in SQL: unpredictable, distinct per row, and one short UPDATE per lease
    // length instead of a CASE per row.
    const secret = newLeaseToken();
    const claimed = picked.map((row) => ({ row, token: leaseTokenFor(secret, Number(row.id)), leaseMs: request.leaseMsFor(row.kind) }));
    const byLease = new Map<number, number[]>();
    for (const c of claimed) {
      const ids = byLease.get(c.leaseMs);
      if (ids) ids.push(Number(c.row.id));
      else byLease.set(c.leaseMs, [Number(c.row.id)]);
    }
    for (const [leaseMs, ids] of byLease) {
      await reserve(ids, () =>
        tx.execute(
          formatted(
            `UPDATE cronq_jobs
            SET status = 'reserved', attempts = attempts + 1, lease_token = MD5(CONCAT(?, ':', id)),
                lease_until = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, locked_by = ?, updated_at = UTC_TIMESTAMP(6)
            WHERE id IN (?)`,
            [secret, Math.round(leaseMs * 1000), request.lockedBy, ids],
          ),
        ),
      );
    }
    return claimed.map(({ row, token }) => ({
      id: Number(row.id),
      queue: row.queue,
      kind: row.kind,
      key: row.job_key,
      payloadText: row.payload,
      attempt: row.attempts + 1,
      maxAttempts: row.max_attempts,
      scheduleName: row.schedule_name,
      periodKey: row.period_key,
      scheduledAt: parseDbTime(row.scheduled_at),
      leaseToken: token,
    }));
  });
}

/** Moves a queue's cursor to `to` unless it already stands further on (claims may finish out of order). */
function advanceCursor(cursors: Map<string, ClaimCursor> | undefined, queue: string, to: ClaimCursor): void {
  const at = cursors?.get(queue);
  if (at && (at.availableAt > to.availableAt || (at.availableAt === to.availableAt && at.id >= to.id))) return;
  cursors?.set(queue, to);
}

function rotate<T>(items: T[], by: number): T[] {
  const k = ((by % items.length) + items.length) % items.length;
  return [...items.slice(k), ...items.slice(0, k)];
}

/** The fence: still reserved, same token, lease not expired — evaluated under the row lock. */
function leaseHeld(lease: Lease): SQL {
  return sql`id = ${lease.id} AND status = 'reserved' AND lease_token = ${lease.token} AND lease_until > ${NOW}`;
}

/**
 * Marks every job in `leases` done in one autocommit UPDATE, each row fenced by its
 * own token and unexpired lease (the UPDATE re-checks them under its row lock).
 * Returns the ids it completed; a job missing from the set had lost its lease and
 * was not touched.
 */
export async function completeManyIfLeased(db: Db, leases: Lease[]): Promise<Set<number>> {
  if (leases.length === 0) return new Set();
  const sorted = [...leases].sort((a, b) => a.id - b.id); // one lock order: no deadlocks between batches
  const ids = sorted.map((l) => l.id);
  // Tokens are 128-bit and unique, so "token in the batch's set" is the per-row check.
  const tokens = sorted.map((l) => l.token);
  const result = await db.execute(
    formatted(
      `UPDATE cronq_jobs
      SET status = 'done', lease_until = NULL, last_error = NULL, finished_at = UTC_TIMESTAMP(6), updated_at = UTC_TIMESTAMP(6)
      WHERE id IN (?) AND status = 'reserved' AND lease_until > UTC_TIMESTAMP(6) AND lease_token IN (?)`,
      [ids, tokens],
    ),
  );
  if (header(result).affectedRows === sorted.length) return new Set(ids);
  // Some leases were lost: done rows keep their token, so ask which ones were ours.
  const done = await db.execute(sql`SELECT id FROM cronq_jobs
    WHERE id IN ${ids} AND status = 'done' AND lease_token IN ${tokens}`);
  return new Set(rows<{ id: number }>(done).map((r) => Number(r.id)));
}

/**
 * Marks one job done inside a transaction that first locks the row and re-checks the
 * lease, then runs `effect(tx)` so the business effect and "done" commit together.
 * Returns false, having run nothing, when the lease was lost. An error thrown by the
 * effect rolls everything back and propagates.
 */
export async function completeIfLeased(
  db: Db,
  lease: Lease,
  effect?: (tx: Executor) => Promise<void>,
): Promise<boolean> {
  return db.transaction(async (tx) => {
    const held = rows(await tx.execute(sql`SELECT id FROM cronq_jobs WHERE ${leaseHeld(lease)} FOR UPDATE`));
    if (held.length === 0) return false;
    if (effect) await effect(tx);
    await tx.execute(sql`UPDATE cronq_jobs
      SET status = 'done', lease_until = NULL, last_error = NULL, finished_at = ${NOW}, updated_at = ${NOW}
      WHERE id = ${lease.id}`);
    return true;
  });
}

export interface Failure {
  /** Text for last_error / failure_reason (already free of secrets). */
  error: string;
  /** Dead at once, whatever attempts remain. */
  permanent: boolean;
  /** Delay before the next attempt, if one remains. */
  retryInMs: number;
}

const DEAD_LETTER_FROM_JOB = sql.raw(`INSERT INTO cronq_dead_letters
    (job_id, queue, kind, job_key, payload, failure_reason, attempts, dead_at)
  SELECT id, queue, kind, job_key, payload, last_error, attempts, UTC_TIMESTAMP(6) FROM cronq_jobs`);

/**
 * Records a handler failure, fenced like completion (row lock, token, unexpired lease).
 * With attempts left and not permanent: back to 'ready' after `retryInMs`.
 * Otherwise: 'dead', plus a `cronq_dead_letters` row, in the same transaction.
 */
export async function failIfLeased(db: Db, lease: Lease, failure: Failure): Promise<FailOutcome> {
  return db.transaction(async (tx) => {
    const held = rows<{ attempts: number; max_attempts: number }>(
      await tx.execute(sql`SELECT attempts, max_attempts FROM cronq_jobs WHERE ${leaseHeld(lease)} FOR UPDATE`),
    );
    if (held.length === 0) return { status: 'lease_lost' } as const;
    const error = truncateError(failure.error);
    if (failure.permanent || held[0].attempts >= held[0].max_attempts) {
      await markDead(tx, [lease.id], error);
      return { status: 'dead' } as const;
    }
    await tx.execute(sql`UPDATE cronq_jobs
      SET status = 'ready', lease_token = NULL, lease_until = NULL, locked_by = NULL, last_error = ${error},
          available_at = ${NOW} + ${interval(failure.retryInMs)}, updated_at = ${NOW}
      WHERE id = ${lease.id}`);
    return { status: 'retry', retryInMs: failure.retryInMs } as const;
  });
}

/** Inside a transaction holding the rows' locks: 'dead' plus a dead letter each. */
async function markDead(tx: Executor, ids: number[], error: string): Promise<void> {
  await tx.execute(sql`UPDATE cronq_jobs
    SET status = 'dead', lease_until = NULL, last_error = ${error}, finished_at = ${NOW}, updated_at = ${NOW}
    WHERE id IN ${ids}`);
  await tx.execute(sql`${DEAD_LETTER_FROM_JOB} WHERE id IN ${ids}`);
}

/**
 * Extends a running job's lease to now + `leaseMs`, fenced by token and unexpired lease.
 * False means the lease is gone (recovered, or another worker holds the job): the
 * caller must abort the handler and discard its result.
 */
export async function renewIfLeased(db: Db, lease: Lease, leaseMs: number): Promise<boolean> {
  const result = await db.execute(sql`UPDATE cronq_jobs
    SET lease_until = ${NOW} + ${interval(leaseMs)}, updated_at = ${NOW}
    WHERE ${leaseHeld(lease)}`);
  return header(result).affectedRows === 1;
}

/**
 * Gives a claimed job back without counting the attempt (shutdown before or during
 * its handler): 'ready', available now, attempts - 1. Only the row with this token
 * is touched; false when the lease was already lost.
 */
export async function releaseIfLeased(db: Db, lease: Lease, reason: string): Promise<boolean> {
  const result = await db.execute(sql`UPDATE cronq_jobs
    SET status = 'ready', attempts = IF(attempts > 0, attempts - 1, 0), lease_token = NULL, lease_until = NULL,
        locked_by = NULL, last_error = ${truncateError(reason)}, available_at = ${NOW}, updated_at = ${NOW}
    WHERE ${leaseHeld(lease)}`);
  return header(result).affectedRows === 1;
}

/**
 * Returns jobs whose lease expired to 'ready' (available now; the attempt stays
 * counted, since the handler may have run), or to 'dead' with a dead letter when no
 * attempts remain. At most `limit` rows per call, locked with SKIP LOCKED so several
 * daemons recovering at once split the work instead of waiting on each other.
 *
 * Reads the status='reserved' prefix of the claim index in index order and checks each
 * row's lease: as many rows as jobs in flight, which spares every claim and completion
 * the cost of a second index on (status, lease_until).
 */
export async function recoverExpiredLeases(db: Db, limit: number): Promise<{ returned: number; dead: number }> {
  return db.transaction(async (tx) => {
    const expired = rows<{ id: number; attempts: number; max_attempts: number }>(
      await tx.execute(sql`SELECT id, attempts, max_attempts FROM cronq_jobs
        WHERE status = 'reserved' AND lease_until <= ${NOW}
        ORDER BY queue, available_at, id LIMIT ${limit} FOR UPDATE SKIP LOCKED`),
    );
    const exhausted = expired.filter((r) => r.attempts >= r.max_attempts).map((r) => Number(r.id));
    const retry = expired.filter((r) => r.attempts < r.max_attempts).map((r) => Number(r.id));
    if (retry.length > 0) {
      await tx.execute(sql`UPDATE cronq_jobs
        SET status = 'ready', lease_token = NULL, lease_until = NULL, locked_by = NULL,
            last_error = 'lease expired; returned to the queue', available_at = ${NOW}, updated_at = ${NOW}
        WHERE id IN ${retry}`);
    }
    if (exhausted.length > 0) await markDead(tx, exhausted, 'lease expired after the final attempt');
    return { returned: retry.length, dead: exhausted.length };
  });
}

/** The database clock, for tests and for anything that must agree with leases. */
export async function databaseNow(exec: Executor): Promise<Date> {
  const result = await exec.execute(sql`SELECT UTC_TIMESTAMP(6) AS now`);
  return parseDbTime(rows<{ now: string }>(result)[0].now)!;
}

/** Counts of jobs by status, for tests, stats and the CLI. */
export async function countByStatus(exec: Executor): Promise<Record<JobStatus, number>> {
  const result = await exec.execute(sql`SELECT status, COUNT(*) AS n FROM cronq_jobs GROUP BY status`);
  const counts: Record<JobStatus, number> = { ready: 0, reserved: 0, done: 0, dead: 0 };
  for (const r of rows<{ status: JobStatus; n: number }>(result)) counts[r.status] = Number(r.n);
  return counts;
}
