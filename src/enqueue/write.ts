/**
 * Writing validated job rows: one (enqueueOne, for the API) or a stream in batches
 * bounded by rows and bytes (enqueueRows, for enqueueMany and fan-outs), refused rows
 * found and named. The statements are store/jobs.ts, reached through a JobWriter (the
 * Store, or `store.inTransaction(tx)` inside a caller's transaction).
 */
import { EnqueueError, EnqueueRefusedError } from '../errors.ts';
import { driverFailure, isLockConflict } from '../runtime/dbHealth.ts';
import { refusalReason, isRowRefusal } from '../store/refusal.ts';
import { encodeJobRow, INSERT_STATEMENT_OVERHEAD_BYTES, type EncodedJobRow, type JobWriter, type NewJobRow } from '../store/jobs.ts';

/** Below this many rows a batch goes straight to the INSERT, without reading existing keys first. */
const PRECHECK_MIN_ROWS = 10;

/** A batch's present keys when it read none (shared: never added to). */
const NONE_PRESENT: ReadonlySet<string> = new Set();

/** Rows per INSERT statement when enqueueing many. */
export const ENQUEUE_BATCH_SIZE = 1000;

/** Refused jobs an enqueue keeps (key and reason) beyond counting them: memory stays bounded. */
export const REFUSED_LISTED_MAX = 1000;

/** A job the database refused for its content (or too large to send): never inserted. */
export interface RefusedJob {
  key: string;
  /** One line: what is wrong, then the server's words. Never the payload. */
  reason: string;
}

/** In a stream of rows: one its producer refused already (a fan-out entity that is not a valid job). */
export interface RefusedRow {
  refused: RefusedJob;
}

/** What enqueueRows did. */
export interface EnqueueOutcome {
  inserted: number;
  existing: number;
  /** How many rows were refused (see RefusedJob); the first REFUSED_LISTED_MAX are in `refused`. */
  refusedCount: number;
  refused: RefusedJob[];
  /** True when `signal` stopped the stream (rows gathered by then are written): rows after it were not read. */
  stopped: boolean;
}

export interface EnqueueRowsOptions {
  batchSize?: number;
  /**
   * Most bytes one INSERT statement may have (below the server's max_allowed_packet:
   * see statementByteLimit). A single row larger than that is refused, never sent.
   * Default: statementByteLimitOf(writer).
   */
  maxStatementBytes?: number;
  /**
   * Runs after each batch is written, told what that batch did, its keys (those of rows
   * the server refused among them) and the keys its read of existing keys found (empty
   * when it read none), so a caller can look at the existing ones.
   */
  afterBatch?: (batch: { inserted: number; existing: number; refused: number; keys: readonly string[]; present: ReadonlySet<string> }) => Promise<void>;
  /**
   * Reads which of a batch's keys exist, before its INSERT (default: the writer's
   * existingKeys); a fan-out reads who holds them in the same statement.
   */
  existingKeys?: (keys: string[]) => Promise<ReadonlySet<string>>;
  /** Batch INSERTs in flight at once (1 inside a caller's transaction). */
  parallel?: number;
  /** Told about each refused row as it is found (too large: at once; refused by the server: when its batch is written). */
  onRefused?: (job: RefusedJob) => void;
  /**
   * Once aborted, no further row is read: the rows gathered are written, as are the
   * writes in flight. A producer still working on its next row when it aborts (an API
   * call that never answers) is not waited for: that row is dropped, and the producer
   * is asked to return once it gets that far.
   */
  signal?: AbortSignal;
}

/**
 * The largest statement to send to a server whose max_allowed_packet is `maxAllowedPacket`:
 * a tenth below it, so the protocol's framing never tips a batch over.
 */
export function statementByteLimit(maxAllowedPacket: number): number {
  return Math.floor(maxAllowedPacket * 0.9) - 1024;
}

const byteLimits = new WeakMap<JobWriter, Promise<number>>();

/**
 * statementByteLimit of the server behind `writer` (pass the Store: one per Database),
 * read once per writer and shared by every enqueue through it. A failed read is not cached.
 */
export function statementByteLimitOf(writer: JobWriter): Promise<number> {
  let limit = byteLimits.get(writer);
  if (!limit) {
    limit = writer.maxAllowedPacket().then(statementByteLimit);
    limit.catch(() => byteLimits.delete(writer));
    byteLimits.set(writer, limit);
  }
  return limit;
}

/**
 * Streams rows into the queue in batches of at most `batchSize` rows and
 * `maxStatementBytes` bytes: a batch of ten rows or more
 * first reads which of its keys exist (a cheap unique-index read, so repeating a fan-out
 * writes nothing) until a batch finds none,
 * then inserts the rest in one statement whose ON DUPLICATE KEY clause absorbs keys
 * that appeared meanwhile. Holds at most `parallel` + 1 batches in memory. `afterBatch`
 * runs after each batch (a fan-out renews its tick lease there).
 *
 * A batch the server refuses for a row's content is split in halves until the refused
 * rows are alone (O(bad · log n) statements); the others are inserted and each refused
 * one is counted, listed and passed to `onRefused`. Any other error (connection,
 * lock wait) fails the call as it is: rows written before it stay written.
 */
export async function enqueueRows(
  writer: JobWriter,
  rows: AsyncIterable<NewJobRow | RefusedRow> | Iterable<NewJobRow | RefusedRow>,
  options: EnqueueRowsOptions,
): Promise<EnqueueOutcome> {
  const batchSize = options.batchSize ?? ENQUEUE_BATCH_SIZE;
  const maxStatementBytes = options.maxStatementBytes ?? (await statementByteLimitOf(writer));
  const maxRowBytes = maxStatementBytes - INSERT_STATEMENT_OVERHEAD_BYTES;
  const parallel = Math.max(1, options.parallel ?? 1);
  const outcome: EnqueueOutcome = { inserted: 0, existing: 0, refusedCount: 0, refused: [], stopped: false };
  let total = 0;
  let refusedSent = 0;
  const refuse = (job: RefusedJob) => {
    outcome.refusedCount += 1;
    if (outcome.refused.length < REFUSED_LISTED_MAX) outcome.refused.push(job);
    options.onRefused?.(job);
  };
  // Only outside a caller's transaction (parallel > 1): a deadlock there rolls back the
  // caller's whole transaction, which a retry must not paper over. Per statement, so a
  // retry never re-reports rows refused by an earlier statement of the same batch.
  const insert = (batch: EncodedJobRow[]) =>
    parallel > 1 ? withDeadlockRetry(() => writer.insertJobs(batch)) : writer.insertJobs(batch);
  /** Inserts `batch`; when the server refuses a row, halves it until each refused row is alone. Returns [inserted, refused]. */
  const insertFindingRefused = async (batch: EncodedJobRow[]): Promise<[number, number]> => {
    try {
      return [await insert(batch), 0];
    } catch (error) {
      if (!isRowRefusal(error)) throw error;
      if (batch.length === 1) {
        refuse({ key: batch[0].key, reason: refusalReason(batch[0].payloadJson, error) });
        return [0, 1];
      }
      const half = batch.length >> 1;
      const [a, ra] = await insertFindingRefused(batch.slice(0, half));
      const [b, rb] = await insertFindingRefused(batch.slice(half));
      return [a + b, ra + rb];
    }
  };
  const readExisting = options.existingKeys ?? ((keys: string[]) => writer.existingKeys(keys));
  let lastBatchHadExisting = true;
  const write = async (batch: EncodedJobRow[]) => {
    // Read which keys exist only while that pays: for a handful of rows the read costs as
    // much as it saves, and once a batch found none (a fresh fan-out, or a resumed one past
    // where it stopped) the rest are new too; ON DUPLICATE KEY absorbs any straggler.
    const check = batch.length >= PRECHECK_MIN_ROWS && lastBatchHadExisting;
    const keys = batch.map((r) => r.key);
    const present: ReadonlySet<string> = check ? await readExisting(keys) : NONE_PRESENT;
    lastBatchHadExisting = present.size > 0;
    const fresh = present.size === 0 ? batch : batch.filter((r) => !present.has(r.key));
    const [added, refused] = await insertFindingRefused(fresh); // not `inserted += await`: writes overlap
    outcome.inserted += added;
    refusedSent += refused;
    total += batch.length;
    await options.afterBatch?.({ inserted: added, existing: batch.length - added - refused, refused, keys, present });
  };
  // Batches are written while the next is gathered, so producing rows (the caller's
  // generator) and the database's work overlap; at most `parallel` writes in flight,
  // each on its own pooled connection. Pass 1 (the default) inside a transaction.
  const writing: Promise<void>[] = [];
  /** Failed writes, first first: after one, no further row is read. */
  const failures: unknown[] = [];
  let batch: EncodedJobRow[] = [];
  let batchBytes = 0;
  const flush = async () => {
    if (writing.length >= parallel) await writing.shift();
    writing.push(write(batch).catch((error) => void failures.push(error)));
    batch = [];
    batchBytes = 0;
  };
  let streamError: { error: unknown } | null = null;
  const stream = options.signal ? untilAborted(rows, options.signal, () => (outcome.stopped = failures.length === 0)) : rows;
  try {
    for await (const row of stream) {
      // A batch boundary (nothing gathered since the last flush): no row is read after a failed write.
      if (batch.length === 0 && (options.signal?.aborted || failures.length > 0)) {
        outcome.stopped = failures.length === 0;
        break;
      }
      if ('refused' in row) {
        refuse(row.refused);
        continue;
      }
      const encoded = encodeJobRow(row);
      if (encoded.bytes > maxRowBytes) {
        refuse({ key: row.key, reason: tooLarge(encoded.bytes + INSERT_STATEMENT_OVERHEAD_BYTES, maxStatementBytes) });
        continue;
      }
      if (batchBytes + encoded.bytes > maxRowBytes) await flush();
      batch.push(encoded);
      batchBytes += encoded.bytes;
      if (batch.length >= batchSize) await flush();
    }
  } catch (error) {
    // The rows' producer failed: what it yielded before still goes in.
    streamError = { error };
  }
  if (batch.length > 0 && failures.length === 0) await flush();
  if (outcome.stopped && failures.length > 0) outcome.stopped = false;
  // No write is left in flight when this returns, and the first failure is the one reported.
  await Promise.all(writing);
  if (failures.length > 0) throw failures[0];
  if (streamError) throw streamError.error;
  outcome.existing = total - outcome.inserted - refusedSent;
  return outcome;
}

/**
 * Inserts one job unless its key exists (insertJobIfAbsent), for the API. A job larger
 * than one statement may carry, or whose content the server refuses, throws
 * EnqueueRefusedError naming its key and what is wrong; any other failure throws
 * EnqueueError with the server's reason. Neither carries the payload or the SQL.
 * `ownTransaction`: the insert is not part of a caller's transaction, so a deadlock on
 * the unique key (two enqueues of keys whose rows were just deleted and not yet purged,
 * say), which rolls back only this insert, is retried like a batch's.
 */
export async function enqueueOne(
  writer: JobWriter,
  row: NewJobRow,
  maxStatementBytes: number,
  { ownTransaction }: { ownTransaction: boolean },
): Promise<{ id: number; created: boolean }> {
  const bytes = encodeJobRow(row).bytes + INSERT_STATEMENT_OVERHEAD_BYTES;
  if (bytes > maxStatementBytes) throw new EnqueueRefusedError([{ key: row.key, reason: tooLarge(bytes, maxStatementBytes) }], 1, NOTHING_WRITTEN);
  try {
    return await (ownTransaction ? withDeadlockRetry(() => writer.insertJob(row)) : writer.insertJob(row));
  } catch (error) {
    if (isRowRefusal(error)) {
      throw new EnqueueRefusedError([{ key: row.key, reason: refusalReason(row.payloadJson, error) }], 1, NOTHING_WRITTEN);
    }
    throw enqueueFailure(error, `enqueueing job ${JSON.stringify(row.key)}`);
  }
}

const NOTHING_WRITTEN = Object.freeze({ inserted: 0, existing: 0 });

function tooLarge(bytes: number, maxStatementBytes: number): string {
  return `job is ${bytes} bytes as SQL, more than one statement may carry (${maxStatementBytes} bytes, below the server's max_allowed_packet)`;
}

/**
 * What the API throws for a failed statement: an EnqueueError with the driver's code and
 * first line, never drizzle's wrapper (whose message holds the SQL with every payload)
 * nor the driver's error as it is (it keeps the SQL too). Other errors pass unchanged.
 */
export function enqueueFailure(error: unknown, what: string): unknown {
  const cause = driverFailure(error);
  if (!cause) return error;
  return new EnqueueError(`${what} failed: ${cause.code ? `${cause.code}: ` : ''}${cause.message}`, cause.code, cause.errno, { cause });
}

/**
 * Two INSERTs in flight can deadlock on the unique key (a key repeated across two
 * batches; keys of rows deleted and not yet purged); InnoDB then rolls one back whole,
 * so running it again is safe outside a caller's transaction.
 */
async function withDeadlockRetry<T>(write: () => Promise<T>, attempts = 3): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await write();
    } catch (error) {
      if (attempt >= attempts || !isLockConflict(error)) throw error;
    }
  }
}

/**
 * `rows` until `signal` aborts, when it calls `onAbort` and ends at once, even while
 * the producer is still working on its next row: that pending row is dropped (and any
 * failure of it ignored), and the producer is asked to return once it gets that far.
 */
async function* untilAborted<T>(rows: AsyncIterable<T> | Iterable<T>, signal: AbortSignal, onAbort: () => void): AsyncGenerator<T> {
  const iterator: AsyncIterator<T> | Iterator<T> = Symbol.asyncIterator in rows ? rows[Symbol.asyncIterator]() : rows[Symbol.iterator]();
  let finished = false;
  try {
    for (;;) {
      const first = await settledOrAborted(Promise.resolve(iterator.next()), signal);
      if (first === 'aborted') {
        finished = true;
        Promise.resolve(iterator.return?.()).catch(() => undefined);
        onAbort();
        return;
      }
      if (first.done) {
        finished = true;
        return;
      }
      yield first.value;
    }
  } finally {
    // The consumer stopped early (a failed write, a throw): close the producer, as for-await would.
    if (!finished) await iterator.return?.();
  }
}

/**
 * `next`'s outcome, or 'aborted' when `signal` aborts first (a later failure of `next` is
 * then ignored). The listener lives only while `next` is pending: the scheduler's signal
 * outlives every fan-out, and one promise raced per row would hold a reaction per row.
 */
function settledOrAborted<R>(next: Promise<R>, signal: AbortSignal): Promise<R | 'aborted'> {
  if (signal.aborted) return Promise.resolve('aborted');
  return new Promise((resolve, reject) => {
    const aborted = () => resolve('aborted');
    signal.addEventListener('abort', aborted, { once: true });
    next.then(
      (value) => {
        signal.removeEventListener('abort', aborted);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', aborted);
        reject(error);
      },
    );
  });
}
