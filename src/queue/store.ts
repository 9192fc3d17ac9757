/**
 * Queue SQL: enqueue and every write after a claim. The claim itself is in claimStore.ts;
 * dead letters, stats and retention have their own stores beside this one.
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
import { sql, type SQL } from 'drizzle-orm';
import { format as mysqlFormat, raw as mysqlRaw } from 'mysql2';
import type { Db, Executor } from '../db/client.ts';
import type { JobStatus } from '../db/schema.ts';
import { sliceChars } from '../errorText.ts';

const NOW = sql`UTC_TIMESTAMP(6)`;
const LAST_ERROR_MAX = 2000;

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

function interval(ms: number): SQL {
  return sql`INTERVAL ${Math.max(0, Math.round(ms * 1000))} MICROSECOND`;
}

/** Truncates an error text for `last_error` / `failure_reason` (never splitting a surrogate pair). */
export function truncateError(text: string, max = LAST_ERROR_MAX): string {
  return text.length <= max ? text : `${sliceChars(text, max - 15)}… [truncated]`;
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

/** A row as it will be sent: its VALUES tuple, escaped once, and that tuple's size in bytes. */
export interface EncodedJobRow {
  readonly key: string;
  readonly payloadJson: string;
  readonly tuple: string;
  readonly bytes: number;
}

const INSERT_MANY_SUFFIX = ' ON DUPLICATE KEY UPDATE id = id';

/**
 * Escapes a row for a batch INSERT once, so a batch can be bounded by the bytes it will
 * send (and split, when the server refuses a row, without escaping it again).
 */
export function encodeJobRow(row: NewJobRow): EncodedJobRow {
  const tuple = mysqlFormat('(?)', [insertValues(row)] as Parameters<typeof mysqlFormat>[1]);
  return { key: row.key, payloadJson: row.payloadJson, tuple, bytes: Buffer.byteLength(tuple) + 1 };
}

/** Bytes of a batch INSERT besides its rows' tuples (each tuple counts its separating comma). */
export const INSERT_STATEMENT_OVERHEAD_BYTES = Buffer.byteLength(`${INSERT_JOBS}${INSERT_MANY_SUFFIX}`);

/**
 * Inserts many jobs in one statement; rows whose key exists (or repeats within
 * the batch) are left as they are. Returns how many rows were new. A row the server
 * refuses (its content: see refusal.ts) fails the whole statement, which inserts nothing.
 */
export async function insertJobsIfAbsent(exec: Executor, batch: Array<NewJobRow | EncodedJobRow>): Promise<number> {
  if (batch.length === 0) return 0;
  const tuples = batch.map((r) => ('tuple' in r ? r : encodeJobRow(r)).tuple);
  const result = await exec.execute(sql.raw(`${INSERT_JOBS.slice(0, -1)}${tuples.join(',')}${INSERT_MANY_SUFFIX}`));
  return header(result).affectedRows;
}

/**
 * The server's `max_allowed_packet` in bytes: no statement may be larger. A global
 * setting (read-only per session), so callers read it once per pool and cache it.
 */
export async function maxAllowedPacket(exec: Executor): Promise<number> {
  const result = await exec.execute(sql`SELECT @@max_allowed_packet AS bytes`);
  return Number(rows<{ bytes: number | string }>(result)[0].bytes);
}

/** Which of `keys` already exist (a cheap read that lets a repeated fan-out skip its inserts). */
export async function existingKeys(exec: Executor, keys: string[]): Promise<Set<string>> {
  if (keys.length === 0) return new Set();
  const result = await exec.execute(formatted('SELECT job_key FROM cronq_jobs WHERE job_key IN (?)', [keys]));
  return new Set(rows<{ job_key: string }>(result).map((r) => r.job_key));
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

/**
 * Inside a transaction holding the rows' locks: 'dead' plus a dead letter each. `error` is
 * the text, or an expression over the row's columns; `also` more assignments (evaluated
 * after last_error).
 */
async function markDead(tx: Executor, ids: number[], error: string | SQL, also: SQL = sql``): Promise<void> {
  await tx.execute(sql`UPDATE cronq_jobs
    SET status = 'dead', lease_until = NULL, last_error = ${error}, finished_at = ${NOW}, updated_at = ${NOW}${also}
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
 * its handler, a kind this daemon does not run): 'ready', available now (or after
 * `delayMs`), attempts - 1. Only the row with this token is touched; false when the
 * lease was already lost.
 */
export async function releaseIfLeased(db: Db, lease: Lease, reason: string, delayMs = 0): Promise<boolean> {
  const result = await db.execute(sql`UPDATE cronq_jobs
    SET status = 'ready', attempts = IF(attempts > 0, attempts - 1, 0), lease_token = NULL, lease_until = NULL,
        locked_by = NULL, last_error = ${truncateError(reason)}, available_at = ${NOW} + ${interval(delayMs)}, updated_at = ${NOW}
    WHERE ${leaseHeld(lease)}`);
  return header(result).affectedRows === 1;
}

/** Default of `maxLeaseExpiries`: a job whose lease expired this often goes dead. */
export const MAX_LEASE_EXPIRIES = 3;

/** Who held an expired lease, as the row says (an expression: texts differ per row). */
const HELD_BY = sql`COALESCE(locked_by, 'an unknown worker')`;

/**
 * Returns jobs whose lease expired to 'ready' (available now; the attempt stays
 * counted, since the handler may have run), or to 'dead' with a dead letter. Each
 * expiry adds one to `lease_expiries` and says in `last_error` who held the lease. A
 * job goes dead when that count reaches `maxLeaseExpiries` (the processes running it
 * stopped or stalled that often: a handler that kills its process must not take every
 * daemon down in turn), or when no attempts remain. At most `limit` rows per call,
 * locked with SKIP LOCKED so several daemons recovering at once split the work instead
 * of waiting on each other.
 *
 * Reads the status='reserved' prefix of the claim index in index order and checks each
 * row's lease: as many rows as jobs in flight, which spares every claim and completion
 * the cost of a second index on (status, lease_until).
 */
export async function recoverExpiredLeases(
  db: Db,
  limit: number,
  maxLeaseExpiries = MAX_LEASE_EXPIRIES,
): Promise<{ returned: number; dead: number }> {
  return db.transaction(async (tx) => {
    const expired = rows<{ id: number; attempts: number; max_attempts: number; lease_expiries: number }>(
      await tx.execute(sql`SELECT id, attempts, max_attempts, lease_expiries FROM cronq_jobs
        WHERE status = 'reserved' AND lease_until <= ${NOW}
        ORDER BY queue, available_at, id LIMIT ${limit} FOR UPDATE SKIP LOCKED`),
    );
    const crashed = expired.filter((r) => r.lease_expiries + 1 >= maxLeaseExpiries).map((r) => Number(r.id));
    const exhausted = expired
      .filter((r) => r.lease_expiries + 1 < maxLeaseExpiries && r.attempts >= r.max_attempts)
      .map((r) => Number(r.id));
    const retry = expired.filter((r) => r.lease_expiries + 1 < maxLeaseExpiries && r.attempts < r.max_attempts).map((r) => Number(r.id));
    // last_error is assigned before lease_expiries grows, so it reads the old count
    // whether the server assigns left to right or all at once.
    const counted = sql`, lease_expiries = LEAST(lease_expiries + 1, 32767)`;
    if (retry.length > 0) {
      await tx.execute(sql`UPDATE cronq_jobs
        SET status = 'ready', lease_token = NULL, lease_until = NULL,
            last_error = CONCAT('lease expired while held by ', ${HELD_BY}, '; returned to the queue'),
            locked_by = NULL, available_at = ${NOW}, updated_at = ${NOW}${counted}
        WHERE id IN ${retry}`);
    }
    if (exhausted.length > 0) {
      await markDead(tx, exhausted, sql`CONCAT('lease expired while held by ', ${HELD_BY}, ' after the final attempt')`, counted);
    }
    if (crashed.length > 0) {
      await markDead(
        tx,
        crashed,
        sql`CONCAT('the process running it stopped ', lease_expiries + 1, ' times without finishing it (its lease expired; last held by ',
          ${HELD_BY}, '). Typical causes: process.exit(), an out-of-memory kill or kill -9 while its handler ran, or a handler ',
          'blocking the event loop longer than its lease; see "What a handler must not do" in the README')`,
        counted,
      );
    }
    return { returned: retry.length, dead: exhausted.length + crashed.length };
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
