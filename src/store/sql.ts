/**
 * The SQL plumbing every store file shares: the database clock, time conversion,
 * reading driver results, intervals and pre-escaped statements, each defined once. No
 * statement runs here. (Which driver errors mean "lost a lock race" or "connection gone"
 * is db/client.ts's: isLockConflict, isConnectionError.)
 */
import { sql, type SQL } from 'drizzle-orm';
import { format as mysqlFormat, raw as mysqlRaw } from 'mysql2';
import { LEASE_STORAGE } from '../db/schema.ts';

/** The database clock: every "now" in cronq's SQL, never the host's. */
export const NOW = sql`UTC_TIMESTAMP(6)`;

/** NOW for statements built by mysql2's formatter (see `formatted`). */
export const NOW_RAW = mysqlRaw('UTC_TIMESTAMP(6)');

/**
 * The blanks of cronq_jobs' lease storage (LEASE_STORAGE in db/schema.ts): every write
 * that ends or clears a lease writes these, never NULL, so the row keeps its width and
 * the next claim rewrites it in place.
 */
export const NO_TIME = sql.raw(`'${LEASE_STORAGE.noTime}'`);
/** NO_TIME for statements built by mysql2's formatter. */
export const NO_TIME_RAW = mysqlRaw(`'${LEASE_STORAGE.noTime}'`);
/** `lease_holder` of a job nobody holds: LEASE_STORAGE.holderWidth spaces. */
export const NO_HOLDER = ' '.repeat(LEASE_STORAGE.holderWidth);

/**
 * `name` as `lease_holder` stores it: right-padded with spaces to the holder width in
 * UTF-8 bytes, the blank's stored size, so a claim by a name with multibyte characters
 * also rewrites the row in place (a name longer than that is stored whole).
 */
export function holderOf(name: string): string {
  return name + ' '.repeat(Math.max(0, LEASE_STORAGE.holderWidth - Buffer.byteLength(name, 'utf8')));
}

/**
 * Begins every write to a row of cronq_jobs or cronq_dead_letters that leaves its payload
 * as stored (a claim, a renewal, a completion, a failure, a release, a cancel, a triage
 * write; the copy into a dead letter, which writes the row's own payload). MariaDB's JSON
 * column is LONGTEXT with a `json_valid()` CHECK, and MariaDB evaluates a table's CHECKs on
 * every row an UPDATE changes, whichever columns it sets: each write read and parsed the
 * whole payload again (500 rows of 64 KB payloads: 86 ms per UPDATE with the CHECK, 6 ms
 * without), and the claim and the batched completion write whole batches in one statement.
 * This turns the CHECKs off for that one statement only (`SET STATEMENT ... FOR`, the
 * session keeps them). A MariaDB executable comment: MySQL reads it as a comment (its JSON
 * type is binary and validated only when written). Never on a statement that writes a
 * payload from outside the row: those keep the CHECK (enqueue's INSERT).
 */
export const PAYLOAD_KEPT_RAW = '/*M! SET STATEMENT check_constraint_checks=0 FOR */ ';
/** PAYLOAD_KEPT_RAW for drizzle's `sql` template. */
export const PAYLOAD_KEPT = sql.raw(PAYLOAD_KEPT_RAW);

/** The SET clause of a write that gives a job's lease back: no fence, no deadline, no holder. */
export const NO_LEASE = sql`lease_fence = '', lease_deadline = ${NO_TIME}, lease_holder = ${NO_HOLDER}`;

/** A DATETIME(6) value as the database writes it ('YYYY-MM-DD HH:MM:SS.ffffff', UTC). */
export type DbTime = string;

/** A Date as a DATETIME(6) literal (UTC, millisecond precision). */
export function toDbTime(date: Date): DbTime {
  return date.toISOString().replace('T', ' ').replace('Z', '');
}

/** Parses a DATETIME string as the driver returns it ('YYYY-MM-DD HH:MM:SS.ffffff', UTC). */
export function parseDbTime(value: string | Date | null): Date | null {
  if (value === null) return null;
  if (value instanceof Date) return value;
  return new Date(`${value.replace(' ', 'T')}Z`);
}

/** What the driver reports for a write. */
export type Header = { affectedRows: number; insertId: number };

/** The write header of a statement's result. */
export function header(result: unknown): Header {
  return (result as [Header])[0];
}

/** The rows of a read's result. */
export function rows<T>(result: unknown): T[] {
  return (result as [T[]])[0];
}

/** `INTERVAL n MICROSECOND` for `ms` milliseconds; a negative span counts as zero. */
export function interval(ms: number): SQL {
  return sql`INTERVAL ${Math.max(0, Math.round(ms * 1000))} MICROSECOND`;
}

/** mysql2's own escaping formatter, typed for the values cronq passes it. */
export function format(statement: string, values: unknown[]): string {
  return mysqlFormat(statement, values as Parameters<typeof mysqlFormat>[1]);
}

/**
 * Bulk statements are escaped by mysql2's own formatter (what the driver does to any
 * parameterised query) and handed to drizzle as finished SQL: building a thousand-row
 * statement chunk by chunk through drizzle's template costs more than running it.
 */
export function formatted(statement: string, values: unknown[]): SQL {
  return sql.raw(format(statement, values));
}

/**
 * A condition that holds for exactly the rows whose `id` is in `ids` (whole numbers; none:
 * no row), written as primary-key ranges: each run of consecutive ids is one
 * `id BETWEEN a AND b`, the ids standing alone one `id IN (...)`. InnoDB reads a range
 * with one index dive and then row after row, where an IN list costs a dive from the
 * root per id; the ids of a claim or a completion batch are mostly runs (jobs enqueued
 * together are claimed together). Measured here: an UPDATE of 500 consecutive rows cost
 * ~4.8 µs a row by range against ~6.4 by IN list.
 */
export function idsCondition(ids: readonly number[]): string {
  // Written into the statement as they are, not escaped: whole numbers only (a fraction
  // would make a run of it, and a string could be anything).
  for (const id of ids) if (!Number.isSafeInteger(id)) throw new TypeError(`not a job id: ${String(id)}`);
  if (ids.length === 0) return 'FALSE';
  const sorted = [...new Set(ids)].sort((a, b) => a - b);
  const ranges: string[] = [];
  const single: number[] = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1) j++;
    if (j - i >= 2) ranges.push(`id BETWEEN ${sorted[i]} AND ${sorted[j]}`);
    else for (let k = i; k <= j; k++) single.push(sorted[k]);
    i = j + 1;
  }
  if (single.length > 0) ranges.push(`id IN (${single.join(', ')})`);
  return ranges.length === 1 ? ranges[0] : `(${ranges.join(' OR ')})`;
}
