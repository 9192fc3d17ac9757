/**
 * The claim: the one statement sequence that turns ready jobs into leases.
 *
 * Concurrency contract: a claim locks ready rows with `SELECT ... FOR UPDATE SKIP LOCKED`
 * (rows another claimer holds are skipped, never waited for, so no two claimers ever get
 * the same job), marks them reserved with attempts+1, a fresh random token each and
 * `lease_until = now + lease` from the database clock, and commits before it returns: no
 * handler may start before its reservation is durable. Every later write is fenced by
 * that token (fenced.ts).
 *
 * It runs on Database.claims, whose connections take several statements per packet. A
 * claim whose cursor shows rows enough ahead costs two round trips (three when its
 * cursor's instant runs out): the locking read opening the transaction, then the UPDATE
 * and the COMMIT together, with a plain count of the ready rows that follow
 * (ClaimCursor.ahead). A claim that may run out of rows (fewer than twice what it asks
 * for follow its cursor, or it has no cursor) finds them with a plain read first and
 * locks them by their exact keys in the claim index (lockFound, claimByPositionSql): one
 * round trip more, up to four more when another claim holds rows it found. So no locking
 * read walks past the last ready row over the entries not yet purged. The locking read
 * returns every column the worker needs (it visits each row to lock it anyway), and the
 * claim derives what the UPDATE writes (attempts + 1, leaseTokenOf), so no row is read a
 * second time. A limited queue is the exception (see below): its rows are found by a plain
 * read of ids alone, and only the rows kept are locked by their keys and read (one round
 * trip more); a queue at its limit costs no payload transfer.
 *
 * A queue of a kind with a cluster-wide limit (ClaimRequest.limits): its first packet locks
 * the kind's `cronq_kind_limits` row (FOR UPDATE: claims of that kind take turns, claims
 * of other kinds never touch it), counts the queue's unexpired reservations and finds its
 * first ready rows by a plain read; the claim keeps only as many as the limit leaves room
 * for and locks those by their keys, skipping any another transaction holds
 * (lockReadyWithin says why not by range): one round trip more when it keeps any. The
 * count commits before the lock is released, so claims of the kind together never hold
 * more than the limit; a lease that expires stops counting at once. No row for the kind
 * (deleted by hand) leaves no room: the kind waits until a daemon starts and writes it.
 * One claim reads at most one limited queue (the others wait for a later claim's turn),
 * so it holds at most one limit row: two claims can never wait on each other's.
 * Every value in these statements is escaped by mysql2's formatter, but the ids of
 * idsCondition, which are checked to be whole numbers and written as they are.
 */
import { randomBytes } from 'node:crypto';
import type { Pool, PoolConnection } from 'mysql2/promise';
import { driverError, isConnectionError, isLockConflict, TIMEOUTS } from '../db/client.ts';
import { endSession } from '../db/endSession.ts';
import type { Lease } from './fenced.ts';
import { format, holderOf, idsCondition, parseDbTime, PAYLOAD_KEPT_RAW } from './sql.ts';
import { sendUnreadableDead, UnreadableRowsError } from './unreadableRows.ts';

/** A job as the claim returns it to the worker. */
export interface ClaimedJob {
  id: number;
  queue: string;
  kind: string;
  key: string;
  /**
   * The payload as stored (JSON text); the worker parses it so a bad one can go dead.
   * Always text: a row the server would not return the payload of goes dead in the claim
   * (unreadableRows.ts) and is never handed out.
   */
  payloadText: string;
  /** The attempt now running (1 on first delivery). */
  attempt: number;
  maxAttempts: number;
  periodKey: string | null;
  scheduledAt: Date | null;
  /** What every fenced write about this job presents (fenced.ts). */
  lease: Lease;
  /** The lease's length, as the claim set it for this kind (LeaseLengths). */
  leaseMs: number;
  /** How often a lease on this job expired before (its process stopped or stalled while running it). */
  leaseExpiries: number;
}

/**
 * Where the last claim from one queue stopped: (available_at, id) of its last row,
 * exactly as the database stored it.
 */
export interface ClaimCursor {
  availableAt: string;
  id: number;
  /**
   * The claim that left the cursor here found no more ready rows after it (it locked fewer
   * rows from this queue than it asked for, or none): the cursor stands for the whole of
   * its instant, and the next claim reads only later instants, one range in one round
   * trip. A row of that same instant that commits afterwards is behind the cursor, like
   * any late commit (see ClaimRequest.cursors).
   */
  drained?: boolean;
  /**
   * About how many ready rows follow this position: counted by a plain read right after
   * the claim that left the cursor here committed (at most AHEAD_FACTOR times that claim's
   * size), less the rows claims have locked from it since; a plain read also counts rows
   * a concurrent claim has locked and not yet reserved. A claim that may reach the end of
   * a queue's ready rows (this is under twice its size, or unknown) finds them with a
   * plain read first and locks them by their keys (lockFound): a locking range read that
   * runs out of rows walks on over every not-yet-purged entry after them, locking and
   * unlocking each (right after a drain of 20,000 jobs, 20,000 entries: 15–60 ms), where a
   * plain read skips them at a tenth of the cost. Undefined: not known.
   */
  ahead?: number;
}

/** Plain reads a claim that may run out of rows makes before it locks the rest by range (lockFound). */
const FOUND_ROUNDS = 2;

/** A claim's look-ahead counts at most this many times its own size (ClaimCursor.ahead). */
const AHEAD_FACTOR = 4;

/** Lease lengths: per kind where a task sets one, else the default. */
export interface LeaseLengths {
  byKind: ReadonlyMap<string, number>;
  defaultMs: number;
}

/** The lease a claim gives a job of `kind`, in ms. */
function leaseMsOf(leases: LeaseLengths, kind: string): number {
  return leases.byKind.get(kind) ?? leases.defaultMs;
}

/** A queue whose kind has a cluster-wide limit (its own queue: see TaskRegistry). */
export interface QueueLimit {
  kind: string;
  /** This daemon's value of the limit: the most rows one claim locks (the row's value is what holds). */
  maxRunning: number;
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
   * InnoDB purges them, and each costs a lookup in the locking read (right after a
   * drain of 20,000 jobs, thousands of page reads); skipping past them keeps a claim
   * cheap. The claim moves a queue's cursor forward as soon as it has locked rows, so
   * a concurrent claim sharing the map starts after them; a claim that finds nothing
   * after a cursor keeps it (marked drained). A ready row behind the cursor (a
   * transaction that committed late, a row enqueued with a past run time, the rows of
   * a claim that failed) is only found by a claim without one, so callers must drop
   * cursors regularly and whenever a claim fails.
   */
  cursors?: Map<string, ClaimCursor>;
  /** Rows never to claim (rows a claim could not update: see ClaimUpdateError). */
  excludeIds?: ReadonlySet<number>;
  /**
   * Claim only these rows, by primary key (jobs this process has just enqueued): no
   * queue's range of the claim index is read and no cursor moves. A row is claimed only
   * if it is still ready and due, in one of `queues` and not of a limited queue (those
   * are claimed within their limit, by range), and not excluded; the others are left as
   * they are, for a later claim by range. Right after a drain, the range read of an
   * emptied queue walks every not-yet-purged entry of the claim index that follows it
   * (InnoDB skips delete-marked entries without checking the range's end), thousands of
   * them for a second or so; a lookup by key costs the same whatever the index holds.
   */
  ids?: readonly number[];
  limit: number;
  leases: LeaseLengths;
  lockedBy: string;
  /** Queues of limited kinds, by queue; every other queue is claimed without a limit. */
  limits?: ReadonlyMap<string, QueueLimit>;
  /** Filled by the claim: limited queues it found or left at their limit (claiming again now gets nothing). */
  atLimit?: Set<string>;
}

/** A claim's secret: 64 random bits as 16 hex characters, the first half of each of its tokens. */
function newClaimSecret(): string {
  return randomBytes(8).toString('hex');
}

/**
 * The lease token a claim with `secret` writes for row `id`: the secret, then the id as 16
 * hex digits; the reserving UPDATE builds the same text in SQL. Distinct per row, and a
 * later claim of the same row matches it only if it drew the same 64 random bits.
 */
export function leaseTokenOf(secret: string, id: number): string {
  return secret + id.toString(16).padStart(16, '0');
}

/**
 * The claim's locking read of one queue on the claim index (status, queue, available_at,
 * id): a range in index order (no filesort) that its LIMIT stops, each row looked up in
 * the primary key (which the lock takes anyway) for CLAIM_COLUMNS. The index is forced:
 * a read of more than the index holds may otherwise be planned on another index or as a
 * full scan. `after` continues a cursor: exactly `available_at = cursor AND id > cursor.id`,
 * or `available_at > cursor`, each its own precise range (the range on more key parts wins
 * over a `ref` on (status, queue), which would walk the queue from the front, delete-marked
 * entries of claimed rows included; claim-plan.test.ts holds both to a range). (Should the
 * optimizer prefer a `ref` on (status, queue, available_at) for the first, as it may when
 * every row left shares the cursor's instant, that walk is bounded by that instant's rows.)
 */
export function claimSelectSql(
  queue: string,
  limit: number,
  after: 'same-instant' | 'later' | null,
  cursor: ClaimCursor | undefined,
  exclude: readonly number[],
  columns: string = CLAIM_COLUMNS,
  lock = true,
): string {
  const notExcluded = exclude.length === 0 ? '' : 'AND id NOT IN (?) ';
  const from = after === 'same-instant' ? 'available_at = ? AND id > ? AND ' : after === 'later' ? 'available_at > ? AND ' : '';
  const fromValues = after === 'same-instant' ? [cursor!.availableAt, cursor!.id] : after === 'later' ? [cursor!.availableAt] : [];
  return format(
    `SELECT ${columns} FROM cronq_jobs FORCE INDEX (cronq_jobs_claim)
    WHERE status = 'ready' AND queue = ? AND ${from}available_at <= UTC_TIMESTAMP(6) ${notExcluded}
    ORDER BY available_at, id LIMIT ?${lock ? ' FOR UPDATE SKIP LOCKED' : ''}`,
    [queue, ...fromValues, ...(exclude.length === 0 ? [] : [exclude]), limit],
  );
}

/**
 * The locking read of a claim by id (ClaimRequest.ids): primary-key lookups of rows still
 * ready and due in `queues`, in id order.
 */
export function claimByIdSql(ids: readonly number[], queues: readonly string[], limit: number, exclude: readonly number[]): string {
  const notExcluded = exclude.length === 0 ? '' : 'AND id NOT IN (?) ';
  return format(
    `SELECT ${CLAIM_COLUMNS} FROM cronq_jobs FORCE INDEX (PRIMARY)
    WHERE id IN (?) AND status = 'ready' AND queue IN (?) AND available_at <= UTC_TIMESTAMP(6) ${notExcluded}
    ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED`,
    [ids, queues, ...(exclude.length === 0 ? [] : [exclude]), limit],
  );
}

/**
 * Most rows one locking read by key locks (claimByPositionSql): MariaDB turns an IN list of
 * in_predicate_conversion_threshold (1,000) values or more (each element of a row counting
 * as one, by its manual) into a join with a table of them, planned on this index as a walk
 * of the queue from its front (with FORCE INDEX (PRIMARY), as a scan of the whole table),
 * locking and unlocking each row it passes. 400 rows are 800 values.
 */
const POSITIONS_PER_READ = 400;

/**
 * The locking reads of rows a plain read found (ClaimTransaction.lockFound): each row by
 * its exact key in the claim index, one index dive per row (a point range on (status,
 * queue, available_at, id), which ends at that key: no walk past it), at most
 * POSITIONS_PER_READ rows a statement, for one packet. Rows still ready and due in
 * `queue` only, in index order. A row is locked as a range read locks it, its claim-index
 * entry first, so a concurrent range read skips it at that entry and holds no lock on it;
 * locked by primary key alone, the range read would keep its lock on the entry, and the
 * reserving UPDATE, which rewrites that entry, would wait for the other claim to commit
 * (two such claims over two queues deadlock).
 */
export function claimByPositionSql(queue: string, positions: ReadonlyArray<{ available_at: string; id: number }>): string[] {
  const reads: string[] = [];
  for (let i = 0; i < positions.length; i += POSITIONS_PER_READ) {
    const chunk = positions.slice(i, i + POSITIONS_PER_READ);
    reads.push(
      format(
        `SELECT ${CLAIM_COLUMNS} FROM cronq_jobs FORCE INDEX (cronq_jobs_claim)
        WHERE status = 'ready' AND queue = ? AND available_at <= UTC_TIMESTAMP(6) AND (available_at, id) IN (?)
        ORDER BY available_at, id LIMIT ? FOR UPDATE SKIP LOCKED`,
        [queue, chunk.map((p) => [p.available_at, Number(p.id)]), chunk.length],
      ),
    );
  }
  return reads;
}

/**
 * A plain read (no locks) counting up to `cap` ready and due rows of `queue` after
 * `cursor`, on the claim index (ClaimCursor.ahead): sent after a claim's COMMIT, in its
 * packet.
 */
export function aheadSql(queue: string, cursor: ClaimCursor, cap: number): string {
  return format(
    `SELECT COUNT(*) AS ahead FROM (SELECT id FROM cronq_jobs FORCE INDEX (cronq_jobs_claim)
    WHERE status = 'ready' AND queue = ? AND ((available_at = ? AND id > ?) OR available_at > ?) AND available_at <= UTC_TIMESTAMP(6)
    ORDER BY available_at, id LIMIT ?) AS ahead`,
    [queue, cursor.availableAt, cursor.id, cursor.availableAt, cap],
  );
}

/**
 * Opens `count` connections of the claim pool at once and leaves them idle in it, their
 * session settings applied. A new connection costs a handshake and a round trip per
 * session setting; opened one by one by the first claims, that delays a fresh daemon's
 * first jobs by those round trips, lane after lane. Failures are dropped: the claims
 * themselves meet and report an unreachable server.
 */
export async function openClaimConnections(claims: Pool, count: number): Promise<void> {
  await Promise.allSettled(
    Array.from({ length: count }, async () => {
      const conn = await claims.getConnection();
      try {
        // Queued behind the session settings: once it answers, they have run.
        await conn.query({ sql: 'DO 0', timeout: TIMEOUTS.queryMs });
      } catch (error) {
        void endSession(conn, claims); // timed out: whatever the session is doing, it goes
        throw error;
      }
      conn.release();
    }),
  );
}

/**
 * readyQueues' statement. GROUP BY the (status, queue) prefix itself, MIN over the key
 * part after it: "Using index for group-by" (claim-plan.test.ts). With status alone in the
 * WHERE, the optimizer could walk every ready entry instead.
 */
export const READY_QUEUES_SQL =
  "SELECT status, queue FROM cronq_jobs WHERE status = 'ready' GROUP BY status, queue HAVING MIN(available_at) <= UTC_TIMESTAMP(6)";

/**
 * The queues that have 'ready' jobs due now, by a loose scan of the claim index's
 * (status, queue) prefix with each queue's earliest available_at (the next key part):
 * one index dive per queue, however many jobs wait. Queues whose ready jobs are all due
 * later are left out: a claim reads each listed queue in turn, so 10,000 queues holding
 * one future job each made every claim 10,000 reads (a 5,000-job drain took 12–17 s
 * instead of 0.4 s). A plain read, so it can be stale the moment it returns; callers
 * re-read it regularly (a queue whose first job falls due is seen at the next read).
 */
export async function readyQueues(claims: Pool): Promise<string[]> {
  const [rows] = await claims.query({ sql: READY_QUEUES_SQL, timeout: TIMEOUTS.queryMs });
  return (rows as Array<{ queue: string }>).map((r) => r.queue);
}

/**
 * The database refused to reserve rows it had just locked for a claim: not a connection
 * problem, but something about those rows (on MariaDB, a payload that breaks the JSON
 * CHECK constraint, written with the checks off; or a trigger). `ids` are the rows of
 * the failed claim, so a caller can narrow it down and stop claiming the culprit.
 * `lostLockRace`: the refusal was a deadlock or a lock wait timeout, which says nothing
 * about the rows (InnoDB rolled the UPDATE back whole): worth trying again as it is
 * before blaming a row.
 */
export class ClaimUpdateError extends Error {
  override name = 'ClaimUpdateError';
  readonly lostLockRace: boolean;
  constructor(
    readonly ids: number[],
    cause: unknown,
  ) {
    super(`reserving jobs ${ids.join(', ')} failed`, { cause });
    this.lostLockRace = isLockConflict(cause);
  }
}

/** A row as the locking read returns it, locked and still 'ready' (attempts not yet counted). */
type Locked = {
  id: number;
  available_at: string;
  queue: string;
  kind: string;
  job_key: string;
  /** NULL when the server refused the text (larger than max_allowed_packet: unreadableRows.ts). */
  payload: string | null;
  attempts: number;
  max_attempts: number;
  period_key: string | null;
  scheduled_at: string | null;
  lease_expiries: number;
};

/** What a claim reads of each row it locks: all the worker needs, so nothing is read back after the UPDATE. */
const CLAIM_COLUMNS = `id, available_at, queue, kind, job_key, CAST(payload AS CHAR) AS payload, attempts, max_attempts,
    period_key, scheduled_at, lease_expiries`;

/** What a plain read of candidates reads: each row's position in the claim index, not its payload (the rows kept are read with their lock). */
const POSITION_COLUMNS = 'id, available_at';

/** A row as a plain read of candidates returns it (POSITION_COLUMNS): found, not locked. */
type Position = Pick<Locked, 'id' | 'available_at'>;

/** One claim transaction on one connection: statements go out in as few packets as the reads allow. */
class ClaimTransaction {
  private open = false;
  private done = false;

  /** `conn` is a connection of `pool` (which ends its session should it be dropped). */
  constructor(
    private readonly conn: PoolConnection,
    private readonly pool: Pick<Pool, 'getConnection'>,
  ) {}

  /** Sends `statements` as one packet (opening the transaction with the first); returns each one's result. */
  async send(statements: string[]): Promise<unknown[]> {
    const all = this.open ? statements : ['START TRANSACTION', ...statements];
    this.open = true;
    const [results] = await this.conn.query({ sql: all.join(';\n'), timeout: TIMEOUTS.queryMs });
    const each = all.length === 1 ? [results] : (results as unknown[]);
    return all.length === statements.length ? each : each.slice(1);
  }

  /** Ends a transaction that claimed nothing. */
  async finish(): Promise<void> {
    if (this.open) await this.conn.query({ sql: 'COMMIT', timeout: TIMEOUTS.queryMs });
  }

  /** Hands the connection back to the pool (once). */
  release(): void {
    if (this.done) return;
    this.done = true;
    this.conn.release();
  }

  /**
   * After a failure: roll back and hand the connection back if it still answers, else drop
   * it and end its session (endSession): a packet that timed out may still be running on
   * the server, holding the rows its locking read locked (other claims would skip them)
   * and about to reserve them.
   */
  async abandon(error: unknown): Promise<void> {
    if (this.done) return;
    if (!isConnectionError(error)) {
      try {
        await this.conn.query({ sql: 'ROLLBACK', timeout: TIMEOUTS.queryMs });
        this.release();
        return;
      } catch {
        // fall through: the connection is in an unknown state
      }
    }
    this.done = true;
    void endSession(this.conn, this.pool);
  }

  /**
   * Locks up to `limit` ready rows of one queue, oldest first, from the cursor on (after a
   * drained cursor, from the next instant on). Never locks a row it does not claim: a
   * concurrent claim that skipped such a row could move the shared cursor past it.
   */
  async lockReady(queue: string, limit: number, cursor: ClaimCursor | undefined, exclude: readonly number[]): Promise<{ rows: Locked[]; exhausted: boolean }> {
    // Twice: a claim of another lane still in flight may hold as many of those rows.
    if (cursor?.ahead === undefined || cursor.ahead < 2 * limit) return this.lockFound(queue, limit, cursor, exclude);
    const rows = await this.lockInRange(queue, limit, cursor, exclude);
    return { rows, exhausted: rows.length < limit };
  }

  /**
   * lockReady for a queue that may hold fewer ready rows than `limit` after the cursor
   * (ClaimCursor.ahead): a plain read finds them (up to `limit`), then they are locked by
   * their exact keys in the claim index (claimByPositionSql), so no locking read goes past
   * the last of them. Rows found that another claim holds (a plain read sees rows a
   * concurrent claim has locked and not yet reserved) are skipped, and the rows after the
   * last one found are found and locked the same way, once more; should that too come
   * back short while more rows follow, the rest of `limit` is locked by range after the
   * last one found, as a range read alone would have (only then can a read walk past the
   * end). `exhausted` when a plain read (or that range read) came back short: no ready
   * row followed, but for rows another claim holds.
   */
  private async lockFound(queue: string, limit: number, cursor: ClaimCursor | undefined, exclude: readonly number[]): Promise<{ rows: Locked[]; exhausted: boolean }> {
    const rows: Locked[] = [];
    let from = cursor;
    for (let round = 0; round < FOUND_ROUNDS; round++) {
      const want = limit - rows.length;
      const plain = (after: 'same-instant' | 'later' | null) => claimSelectSql(queue, want, after, from, exclude, POSITION_COLUMNS, false);
      const reads = !from ? [plain(null)] : from.drained ? [plain('later')] : [plain('same-instant'), plain('later')];
      const found = ((await this.send(reads)) as Position[][]).flat().slice(0, want);
      // In index order: each read's rows are, and the reads follow each other.
      if (found.length > 0) rows.push(...((await this.send(claimByPositionSql(queue, found))) as Locked[][]).flat());
      if (found.length < want) return { rows, exhausted: true };
      if (rows.length === limit) return { rows, exhausted: false };
      const last = found[found.length - 1];
      from = { availableAt: last.available_at, id: Number(last.id) };
    }
    const more = await this.lockInRange(queue, limit - rows.length, from, exclude);
    return { rows: [...rows, ...more], exhausted: more.length < limit - rows.length };
  }

  /** Locks up to `limit` ready rows of one queue by a locking range read from the cursor on (the front without one). */
  private async lockInRange(queue: string, limit: number, cursor: ClaimCursor | undefined, exclude: readonly number[]): Promise<Locked[]> {
    if (!cursor) return (await this.send([claimSelectSql(queue, limit, null, undefined, exclude)]))[0] as Locked[];
    const same = cursor.drained ? [] : ((await this.send([claimSelectSql(queue, limit, 'same-instant', cursor, exclude)]))[0] as Locked[]);
    if (same.length === limit) return same;
    const later = (await this.send([claimSelectSql(queue, limit - same.length, 'later', cursor, exclude)]))[0] as Locked[];
    return [...same, ...later];
  }

  /**
   * After a packet holding this claim's COMMIT failed: ends the transaction should it still
   * be open, then reads the rows of `ids` that the COMMIT reserved (status 'reserved', their
   * fence this claim's `secret`: leaseTokenOf), as they were before the UPDATE (attempts
   * not yet counted). None when it did not commit.
   */
  async reservedBy(secret: string, ids: readonly number[]): Promise<Locked[]> {
    const [, found] = await this.send([
      'ROLLBACK',
      format(`SELECT ${CLAIM_COLUMNS} FROM cronq_jobs WHERE ${idsCondition(ids)} AND status = 'reserved' AND LEFT(lease_fence, 16) = ?`, [secret]),
    ]);
    return (found as Locked[]).map((row) => ({ ...row, attempts: row.attempts - 1 }));
  }

  /** Locks the rows of `ids` still ready and due in `queues` (claimByIdSql), up to `limit`. */
  async lockByIds(ids: readonly number[], queues: readonly string[], limit: number, exclude: readonly number[]): Promise<Locked[]> {
    if (ids.length === 0 || queues.length === 0) return [];
    return (await this.send([claimByIdSql(ids, queues, limit, exclude)]))[0] as Locked[];
  }

  /**
   * lockReady for a limited queue: locks the kind's limit row, counts the queue's live
   * reservations and finds its first ready rows by a plain read (POSITION_COLUMNS), all in
   * one packet; then locks at most the room the limit leaves of them by their keys
   * (claimByPositionSql, SKIP LOCKED), reading every column of those alone. A locking
   * range read here would walk on past the queue's last ready row over every claim-index
   * entry not yet purged after it, holding the limit row the while (after a drain of
   * 20,000 jobs of another queue: ~22 ms a claim, against ~1.3 ms for the plain read), and
   * every claim of the kind in every daemon waits its turn behind that. The rows must still
   * be locked, not only re-checked by the reserving UPDATE: claims of the kind take turns
   * on the limit row, but a cancellation, a caller's transaction that enqueued an existing
   * key, or a daemon that does not know the limit may hold one, and an UPDATE would wait
   * for it (up to the lock wait timeout) holding the limit row, or deadlock with it over
   * the rows this claim locked in other queues. A row held is skipped. `full` when the
   * queue is at its limit with the rows locked. `exhausted` only when the reads themselves
   * came back short: the queue has no ready row past the rows found, but for rows another
   * transaction holds. Rows left out for lack of room are not a drained queue.
   */
  async lockReadyWithin(
    queue: string,
    limit: QueueLimit,
    want: number,
    cursor: ClaimCursor | undefined,
    exclude: readonly number[],
  ): Promise<{ rows: Locked[]; full: boolean; exhausted: boolean }> {
    const ask = Math.min(want, limit.maxRunning);
    const plain = (after: 'same-instant' | 'later' | null) => claimSelectSql(queue, ask, after, cursor, exclude, POSITION_COLUMNS, false);
    const reads = !cursor ? [plain(null)] : cursor.drained ? [plain('later')] : [plain('same-instant'), plain('later')];
    const [maxRows, countRows, ...found] = await this.send([...limitSql(queue, limit), ...reads]);
    const max = Number((maxRows as Array<{ max_running: number }>)[0]?.max_running ?? 0);
    const running = Number((countRows as Array<{ running: number }>)[0].running);
    const take = Math.min(ask, Math.max(0, max - running));
    // In index order: each read's rows are, and the reads follow each other.
    const candidates = (found as Position[][]).flat().slice(0, ask);
    const kept = candidates.slice(0, take);
    // Read to the end of what exists only when every row found was kept and fewer came than asked.
    const exhausted = candidates.length < ask && kept.length === candidates.length;
    const rows = kept.length === 0 ? [] : ((await this.send(claimByPositionSql(queue, kept))) as Locked[][]).flat();
    return { rows, full: running + rows.length >= max, exhausted };
  }
}

/**
 * The first statements of a limited queue's claim, sent with its locking read: lock the
 * kind's limit row, then count the queue's live reservations (the reserved prefix of the
 * claim index: as many rows as are in flight).
 */
export function limitSql(queue: string, limit: QueueLimit): string[] {
  return [
    format('SELECT max_running FROM cronq_kind_limits WHERE kind = ? FOR UPDATE', [limit.kind]),
    format("SELECT COUNT(*) AS running FROM cronq_jobs WHERE status = 'reserved' AND queue = ? AND lease_deadline > UTC_TIMESTAMP(6)", [queue]),
  ];
}

/** `lease_until` for each row: its kind's lease, one CASE over the kinds that differ from the default. */
function leaseMicros(leases: LeaseLengths): string {
  const us = (ms: number) => Math.round(ms * 1000);
  const special = [...leases.byKind].filter(([, ms]) => ms !== leases.defaultMs);
  if (special.length === 0) return String(us(leases.defaultMs));
  const whens = special.map(([kind, ms]) => format('WHEN ? THEN ?', [kind, us(ms)])).join(' ');
  return `CASE kind ${whens} ELSE ${us(leases.defaultMs)} END`;
}

/**
 * Claims up to `limit` ready jobs, each queue's oldest `available_at` first, in one short
 * transaction (see the module comment), and returns them in id order. With several queues, each is read by its own
 * index range, rotating which goes first, rather than one IN-list query that would sort.
 * A refusal of the reserving UPDATE that is not about the connection is ClaimUpdateError.
 * A locked row whose payload the server will not return (larger than max_allowed_packet)
 * goes dead in the same transaction, attempts unchanged, with a dead letter saying why
 * (unreadableRows.ts), and the claim goes on with the others; should that write be
 * refused, the claim rolls back whole and throws UnreadableRowsError naming those rows.
 */
export async function claimReady(claims: Pool, request: ClaimRequest, rotation = 0): Promise<ClaimedJob[]> {
  if (request.limit <= 0 || request.queues.length === 0) return [];
  const conn = await claims.getConnection();
  const tx = new ClaimTransaction(conn, claims);
  try {
    const locked = await lockClaimable(tx, request, rotation);
    const rows = hasUnreadable(locked.rows) ? await dropUnreadable(tx, locked.rows) : locked.rows;
    if (rows.length === 0) {
      await tx.finish();
      tx.release();
      return [];
    }
    const secret = newClaimSecret();
    const reserved = await reserveLocked(tx, request, rows, secret, locked.peek);
    tx.release();
    return claimedJobsOf(reserved, secret, request.leases);
  } catch (error) {
    await tx.abandon(error);
    throw error;
  }
}

// claimReady's steps, each a function of its own: a fresh daemon's first claims run them
// before V8 has compiled them, and one async function holding them all took TurboFan
// ~90 ms to compile (twice, once per deoptimisation) on a background thread, against the
// database server for the machine's CPU through the first seconds of a drain.

/** The queue whose ready rows may go on after a claim: its look-ahead is counted after the COMMIT (ClaimCursor.ahead). */
type Peek = { queue: string; at: ClaimCursor; cap: number };

/**
 * Locks the rows a claim takes: the rows of `request.ids` alone, or each queue's oldest
 * ready rows by range, in turn from `rotation`, moving their cursors (see ClaimRequest).
 */
async function lockClaimable(tx: ClaimTransaction, request: ClaimRequest, rotation: number): Promise<{ rows: Locked[]; peek: Peek | null }> {
  const rows: Locked[] = [];
  const exclude = [...(request.excludeIds ?? [])];
  if (request.ids) {
    // A claim by id: those rows alone, from the queues claimed without a limit.
    const queues = request.queues.filter((queue) => !request.limits?.has(queue));
    rows.push(...(await tx.lockByIds(request.ids, queues, request.limit, exclude)));
    return { rows, peek: null };
  }
  let peek: Peek | null = null;
  let heldLimit = false;
  for (const queue of rotate(request.queues, rotation)) {
    const want = request.limit - rows.length;
    if (want <= 0) break;
    const limit = request.limits?.get(queue);
    if (limit && heldLimit) continue;
    heldLimit ||= limit !== undefined;
    const cursor = request.cursors?.get(queue);
    const got = limit ? await lockWithinLimit(tx, request, queue, limit, want, cursor, exclude) : await tx.lockReady(queue, want, cursor, exclude);
    for (const row of got.rows) rows.push(row);
    const at = moveCursor(request.cursors, queue, cursor, got);
    if (at && !got.exhausted && !limit) peek = { queue, at, cap: AHEAD_FACTOR * want };
  }
  return { rows, peek };
}

/** lockReadyWithin, noting a queue found or left at its limit in `request.atLimit`. */
async function lockWithinLimit(
  tx: ClaimTransaction,
  request: ClaimRequest,
  queue: string,
  limit: QueueLimit,
  want: number,
  cursor: ClaimCursor | undefined,
  exclude: readonly number[],
): Promise<{ rows: Locked[]; exhausted: boolean }> {
  const within = await tx.lockReadyWithin(queue, limit, want, cursor, exclude);
  if (within.full) request.atLimit?.add(queue);
  return within;
}

/**
 * Moves `queue`'s cursor past the rows a claim locked from it (`exhausted`: the queue's
 * ready rows ran out, so it is marked drained); returns where it now stands, or undefined
 * when nothing was locked.
 */
function moveCursor(
  cursors: Map<string, ClaimCursor> | undefined,
  queue: string,
  cursor: ClaimCursor | undefined,
  got: { rows: Locked[]; exhausted: boolean },
): ClaimCursor | undefined {
  const last = got.rows.at(-1);
  if (!last) {
    if (cursor && got.exhausted) markDrained(cursors, queue, cursor);
    return undefined;
  }
  const ahead = got.exhausted ? 0 : cursor?.ahead === undefined ? undefined : Math.max(0, cursor.ahead - got.rows.length);
  const at: ClaimCursor = { availableAt: last.available_at, id: Number(last.id), drained: got.exhausted, ahead };
  advanceCursor(cursors, queue, at);
  return at;
}

/** Whether a row locked has a payload the server would not return (larger than max_allowed_packet). */
function hasUnreadable(rows: readonly Locked[]): boolean {
  for (const row of rows) if (row.payload === null) return true;
  return false;
}

/**
 * Sends the locked rows whose payload the server would not return dead in the claim's
 * transaction, before the reservation, and returns the others (unreadableRows.ts).
 */
async function dropUnreadable(tx: ClaimTransaction, rows: Locked[]): Promise<Locked[]> {
  const unreadable = rows.filter((row) => row.payload === null).map((row) => Number(row.id));
  try {
    await sendUnreadableDead((statements) => tx.send(statements), unreadable);
  } catch (error) {
    if (isConnectionError(error)) throw error;
    if (isLockConflict(error)) throw new ClaimUpdateError(rows.map((row) => Number(row.id)), error);
    throw new UnreadableRowsError(unreadable, error);
  }
  return rows.filter((row) => row.payload !== null);
}

/**
 * Reserves the locked `rows` and commits, then counts the look-ahead of `peek`; returns
 * the rows reserved, as they were read (attempts not yet counted).
 *
 * One random secret per claim; each row's token is that secret followed by its id
 * (leaseTokenOf): distinct per row, unpredictable, and the same here as written there.
 * The UPDATE finds every row: each is locked by this transaction and was 'ready' under
 * that lock. Should a statement fail, the server runs nothing after it: no COMMIT if the
 * UPDATE failed. The count comes after the COMMIT: should it fail, the reservation has
 * committed, and reading the rows back by their fence (reservedBy) tells the one case
 * from the other.
 */
async function reserveLocked(tx: ClaimTransaction, request: ClaimRequest, rows: Locked[], secret: string, peek: Peek | null): Promise<Locked[]> {
  const ids = rows.map((row) => Number(row.id));
  const statements = [
    format(
      `${PAYLOAD_KEPT_RAW}UPDATE cronq_jobs
      SET status = 'reserved', attempts = attempts + 1, lease_fence = CONCAT(?, LPAD(LOWER(HEX(id)), 16, '0')),
          lease_deadline = UTC_TIMESTAMP(6) + INTERVAL (${leaseMicros(request.leases)}) MICROSECOND,
          lease_holder = ?, updated_at = UTC_TIMESTAMP(6)
      WHERE ${idsCondition(ids)}`,
      [secret, holderOf(request.lockedBy)],
    ),
    'COMMIT',
  ];
  const counted = peek !== null && request.cursors !== undefined;
  if (counted) statements.push(aheadSql(peek.queue, peek.at, peek.cap));
  try {
    const results = await tx.send(statements);
    if (counted) {
      const [{ ahead }] = results[results.length - 1] as Array<{ ahead: number }>;
      setAhead(request.cursors!, peek.queue, peek.at, Number(ahead));
    }
    return rows;
  } catch (error) {
    // A failed count (a statement timeout, a killed query) leaves the connection usable.
    const mayHaveCommitted = counted && (!isConnectionError(error) || (driverError(error) as { code?: string })?.code === 'ER_QUERY_INTERRUPTED');
    const reserved = mayHaveCommitted ? await tx.reservedBy(secret, ids).catch(() => []) : [];
    if (reserved.length === 0) {
      if (isConnectionError(error)) throw error;
      throw new ClaimUpdateError(ids, error);
    }
    // Committed: only the count failed. The cursor keeps its estimate.
    return reserved;
  }
}

/** The claimed jobs handed to the worker, in id order: `rows` as reserved by the claim with `secret`. */
function claimedJobsOf(rows: Locked[], secret: string, leases: LeaseLengths): ClaimedJob[] {
  rows.sort((a, b) => Number(a.id) - Number(b.id));
  return rows.map((row) => claimedJobOf(row, secret, leases));
}

/** One row of claimedJobsOf. */
function claimedJobOf(row: Locked, secret: string, leases: LeaseLengths): ClaimedJob {
  const id = Number(row.id);
  return {
    id,
    queue: row.queue,
    kind: row.kind,
    key: row.job_key,
    // Text: the unreadable rows went dead before the reservation, and reservedBy reads these same rows on this session.
    payloadText: row.payload!,
    attempt: row.attempts + 1,
    maxAttempts: row.max_attempts,
    periodKey: row.period_key,
    scheduledAt: parseDbTime(row.scheduled_at),
    lease: { id, token: leaseTokenOf(secret, id) },
    leaseMs: leaseMsOf(leases, row.kind),
    leaseExpiries: Number(row.lease_expiries),
  };
}

/** Moves a queue's cursor to `to` unless it already stands further on (claims may finish out of order). */
function advanceCursor(cursors: Map<string, ClaimCursor> | undefined, queue: string, to: ClaimCursor): void {
  const at = cursors?.get(queue);
  if (at && (at.availableAt > to.availableAt || (at.availableAt === to.availableAt && at.id >= to.id))) return;
  cursors?.set(queue, to);
}

/** The look-ahead counted after `at` (ClaimCursor.ahead), kept unless a concurrent claim moved the cursor meanwhile. */
function setAhead(cursors: Map<string, ClaimCursor>, queue: string, at: ClaimCursor, ahead: number): void {
  const now = cursors.get(queue);
  if (now && now.availableAt === at.availableAt && now.id === at.id) cursors.set(queue, { ...now, ahead });
}

/** A claim found nothing after `cursor`: keep it, marked drained (nothing ahead), unless a concurrent claim moved it meanwhile. */
function markDrained(cursors: Map<string, ClaimCursor> | undefined, queue: string, cursor: ClaimCursor): void {
  // Nothing follows it now, whatever was counted before (ClaimCursor.ahead).
  if (cursors?.get(queue) === cursor) cursors.set(queue, { ...cursor, drained: true, ahead: 0 });
}

function rotate<T>(items: T[], by: number): T[] {
  const k = ((by % items.length) + items.length) % items.length;
  return [...items.slice(k), ...items.slice(0, k)];
}
