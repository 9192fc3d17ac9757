/**
 * Job inserts: enqueue one job or a batch, each idempotent on the job key. Writes after
 * a claim are in fenced.ts, the claim itself in claims.ts, lease recovery in recovery.ts.
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
import { sql } from 'drizzle-orm';
import type { Executor } from '../db/client.ts';
import { format, formatted, header, NOW_RAW, rows, toDbTime } from './sql.ts';

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
  const tuple = format('(?)', [insertValues(row)]);
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

/** A job holding a key (keyHolders). */
export interface KeyHolder {
  id: number;
  key: string;
  kind: string;
}

/**
 * Which of `keys` exist (as existingKeys), and among their jobs those whose
 * `schedule_name` and `period_key` are not `scheduleName` and `periodKey` (either one
 * differs or is NULL), lowest id first. One lookup per key on the unique job_key index
 * and a read of the row it finds (existingKeys reads the index alone).
 */
export async function keyHolders(
  exec: Executor,
  keys: readonly string[],
  scheduleName: string,
  periodKey: string,
): Promise<{ existing: Set<string>; outside: KeyHolder[] }> {
  if (keys.length === 0) return { existing: new Set(), outside: [] };
  const result = await exec.execute(
    formatted('SELECT id, job_key, kind, (schedule_name <=> ? AND period_key <=> ?) AS own FROM cronq_jobs WHERE job_key IN (?)', [scheduleName, periodKey, keys]),
  );
  const existing = new Set<string>();
  const outside: KeyHolder[] = [];
  for (const r of rows<{ id: number | string; job_key: string; kind: string; own: number | string }>(result)) {
    existing.add(r.job_key);
    if (Number(r.own) !== 1) outside.push({ id: Number(r.id), key: r.job_key, kind: r.kind });
  }
  outside.sort((x, y) => x.id - y.id);
  return { existing, outside };
}

/**
 * The job inserts on one executor: the pool (Store implements it) or a caller's
 * transaction (`store.inTransaction(tx)`), where every write commits or rolls back with
 * that transaction. The enqueue layer writes through this and never holds the driver.
 */
export interface JobWriter {
  /** insertJobIfAbsent. */
  insertJob(row: NewJobRow): Promise<{ id: number; created: boolean }>;
  /** insertJobsIfAbsent. */
  insertJobs(batch: Array<NewJobRow | EncodedJobRow>): Promise<number>;
  /** existingKeys. */
  existingKeys(keys: string[]): Promise<Set<string>>;
  /** maxAllowedPacket (server-wide: the same inside a transaction). */
  maxAllowedPacket(): Promise<number>;
}

/** A JobWriter whose statements run on `exec`. */
export function jobWriterOn(exec: Executor): JobWriter {
  return {
    insertJob: (row) => insertJobIfAbsent(exec, row),
    insertJobs: (batch) => insertJobsIfAbsent(exec, batch),
    existingKeys: (keys) => existingKeys(exec, keys),
    maxAllowedPacket: () => maxAllowedPacket(exec),
  };
}
