/**
 * How much of a stored payload a read of one row returns (jobByIdOrKey, getDeadLetter):
 * all of it, its first characters, or none of it. A payload may be tens of megabytes, and
 * a reader not shown it (the console's viewers without the token) should not cost the
 * database a read of it: `{ payload: false }` names no payload expression at all, not even
 * its size (LENGTH of a long value reads it whole).
 */
import { sql, type SQL } from 'drizzle-orm';

/** The payload fields a read returns unless asked for none (`payload: false`). */
export interface PayloadFields {
  /**
   * The payload exactly as stored (JSON text), or with `payloadCharsMax` only its first
   * that many characters (cut when `payloadChars` is larger); null when the server will
   * not return it, the whole payload being larger than its max_allowed_packet
   * (`payloadBytes` says how large), bounded or not.
   */
  payloadText: string | null;
  /** The stored payload's size in bytes. */
  payloadBytes: number;
  /** The stored payload's length in characters (code points, as the database counts them). */
  payloadChars: number;
}

/** A row as read with `{ payload: false }`: every field but the payload's. */
export type WithoutPayload<T extends PayloadFields> = Omit<T, keyof PayloadFields>;

/** The whole payload, or (`payloadCharsMax`) its first that many characters (code points). */
export interface PayloadBound {
  /** Read only the payload's first that many characters (code points; a whole number, 1 or more): the read costs the same however large the payload. Default: all of it. */
  payloadCharsMax?: number;
}

/** None of the payload: not its text, nor its size. */
export interface NoPayload {
  /** false: the read names no payload column at all, and the result has no payload fields. */
  payload: false;
}

/** What a one-row read returns of the payload. */
export type PayloadReadOptions = PayloadBound | NoPayload;

export function readsNoPayload(options: PayloadReadOptions): options is NoPayload {
  return 'payload' in options && options.payload === false;
}

/**
 * The select list's payload columns for `column` (`payload_text`, `payload_bytes`,
 * `payload_chars`, after a comma), or nothing with `payload: false`. The cast stays around
 * the whole when bounded, so a payload over max_allowed_packet is null, never a start of it.
 */
export function payloadColumns(column: SQL, options: PayloadReadOptions): SQL {
  if (readsNoPayload(options)) return sql``;
  const text = options.payloadCharsMax === undefined ? sql`CAST(${column} AS CHAR)` : sql`LEFT(CAST(${column} AS CHAR), ${options.payloadCharsMax})`;
  return sql`, ${text} AS payload_text, LENGTH(${column}) AS payload_bytes, CHAR_LENGTH(${column}) AS payload_chars`;
}

/** The payload fields of a row read with payloadColumns, or none with `payload: false`. */
export function payloadFieldsOf(row: { payload_text?: unknown; payload_bytes?: unknown; payload_chars?: unknown }, options: PayloadReadOptions): PayloadFields | Record<never, never> {
  if (readsNoPayload(options)) return {};
  return {
    payloadText: row.payload_text === null || row.payload_text === undefined ? null : String(row.payload_text),
    payloadBytes: Number(row.payload_bytes),
    payloadChars: Number(row.payload_chars),
  };
}
