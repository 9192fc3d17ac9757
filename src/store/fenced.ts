/**
 * Every write by a claimer after its claim: complete, fail, renew, release.
 *
 * Concurrency contract, shared by everything below:
 * - "now" is always the database clock (`UTC_TIMESTAMP(6)`), never the host's.
 * - A claim stamps each row with a fresh random `lease_token` and a `lease_until`.
 *   Every later write by the claimer (`...IfLeased`) re-checks, under the row lock its
 *   UPDATE or `SELECT ... FOR UPDATE` takes, that the row is still `reserved` with that
 *   token and an unexpired lease; otherwise it changes nothing and reports false.
 *   A stale worker can therefore never finish, fail, renew or release a job.
 *   The two `...IfUnrecovered` writes drop only the deadline from that check (the token
 *   still must match, so nothing recovery returned is touched): taking a lease back
 *   after an outage, and releasing a job whose handler never started.
 * - Transactions are short and run at READ COMMITTED (set per connection in db/client.ts).
 */
import { sql, type SQL } from 'drizzle-orm';
import type { Database, Db, DedicatedConnection, Executor } from '../db/client.ts';
import { isInstance } from '../errors.ts';
import { boundedText } from '../runtime/errorText.ts';
import { fillReasonGroups } from './deadLetters.ts';
import { reasonGroup } from './failureReason.ts';
import { formatted, header, idsCondition, interval, NO_LEASE, NO_TIME, NO_TIME_RAW, NOW, PAYLOAD_KEPT, PAYLOAD_KEPT_RAW, rows } from './sql.ts';

/** Most characters of `last_error` (and so of `failure_reason`). */
const LAST_ERROR_MAX = 2000;

/** A claim's lease on one job: what every fenced write must present. */
export interface Lease {
  id: number;
  token: string;
}

/** What `failIfLeased` did. */
export type FailOutcome = { status: 'retry'; retryInMs: number } | { status: 'dead' } | { status: 'lease_lost' };

/** The fence: still reserved, same token, lease not expired — evaluated under the row lock. */
function leaseHeld(lease: Lease): SQL {
  return sql`id = ${lease.id} AND status = 'reserved' AND lease_fence = ${lease.token} AND lease_deadline > ${NOW}`;
}

/** leaseHeld without the deadline: still reserved under this token, so nobody recovered it (renewIfUnrecovered, releaseUnstartedIfUnrecovered). */
function leaseUnrecovered(lease: Lease): SQL {
  return sql`id = ${lease.id} AND status = 'reserved' AND lease_fence = ${lease.token}`;
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
      `${PAYLOAD_KEPT_RAW}UPDATE cronq_jobs
      SET status = 'done', lease_deadline = ?, last_error = NULL, finished_time = UTC_TIMESTAMP(6), updated_at = UTC_TIMESTAMP(6)
      WHERE ${idsCondition(ids)} AND status = 'reserved' AND lease_deadline > UTC_TIMESTAMP(6) AND lease_fence IN (?)`,
      [NO_TIME_RAW, tokens],
    ),
  );
  if (header(result).affectedRows === sorted.length) return new Set(ids);
  // Some leases were lost: done rows keep their token, so ask which ones were ours.
  const done = await db.execute(sql`SELECT id FROM cronq_jobs
    WHERE id IN ${ids} AND status = 'done' AND lease_fence IN ${tokens}`);
  return new Set(rows<{ id: number }>(done).map((r) => Number(r.id)));
}

/** How long a completion's effect may run, and what ends it sooner (completeIfLeased). */
export interface EffectBound {
  /**
   * Most milliseconds the completion may take until its effect has run, counted from when
   * completeIfLeased is called: a wait for a connection (Database.dedicated, when as many
   * effects as it hands out are running) counts, so a completion never waits past it.
   */
  limitMs: number;
  /** What the effect fails with when `limitMs` passes. */
  timedOut: () => Error;
  /** Aborting it abandons the effect (or the wait for its connection) at once; it fails with the signal's reason. */
  signal?: AbortSignal;
}

/**
 * The bound of a completion with effects ran out before its effects began: while it
 * waited for a connection of the effects' share, or for the job's row lock. Nothing ran
 * and nothing was written; the lease may still hold. The database's slowness, not the
 * effects': a caller may try the completion again under the lease.
 */
export class EffectNotStartedError extends Error {
  override name = 'EffectNotStartedError';
}

/** What completeIfLeased needs of the database: `db`, and for an effect a connection of the effects' share. */
export type CompletionDatabase = Pick<Database, 'db' | 'dedicated'>;

/**
 * Marks one job done inside a transaction that first locks the row and re-checks the
 * lease, then runs `effect(tx)` so the business effect and "done" commit together.
 * Returns false, having run nothing, when the lease was lost. An error thrown by the
 * effect rolls everything back and propagates.
 *
 * With an effect, the transaction runs on a connection of Database.dedicated: effects
 * take at most their share of the pool (waiting for it, first come, first served), so
 * however many of them hang, the rest of the pool stays free for renewals and other
 * completions.
 *
 * An effect still running when its `bound` ends (or its signal aborts) is abandoned:
 * the transaction's connection is destroyed and its session ended (a statement still
 * running on the server too), so the server rolls it back and frees the row lock, and
 * this rejects with the bound's error at once. The effect's code may go on in the
 * background, but every statement it sends fails and "done" is never written. A bound
 * that runs out while the completion still waits for its connection or for the job's
 * row lock rejects with EffectNotStartedError instead, having run nothing (an abort of
 * `bound.signal` there rejects with the signal's reason).
 */
export async function completeIfLeased(
  database: CompletionDatabase,
  lease: Lease,
  effect?: (tx: Executor) => Promise<void>,
  bound?: EffectBound,
): Promise<boolean> {
  if (!effect) return database.db.transaction(async (tx) => markDoneIfHeld(tx, lease));
  const ending = boundEnding(bound);
  // Where the completion was when its bound ran out, for the error that says so.
  let waitingFor: 'a database connection' | "the job's row lock" | null = 'a database connection';
  const notStarted = (reason: unknown) =>
    ending.timedOut && waitingFor !== null
      ? new EffectNotStartedError(`effects did not start within ${bound!.limitMs}ms: still waiting for ${waitingFor}; nothing was written`)
      : reason;
  try {
    let conn: DedicatedConnection;
    try {
      conn = await database.dedicated(ending.signal);
    } catch (error) {
      throw error === ending.signal?.reason ? notStarted(error) : error;
    }
    let abandonedWith: Error | null = null;
    try {
      if (ending.signal?.aborted) throw notStarted(ending.signal.reason); // ended during the pool's own wait (a new connection's handshake)
      const { tx } = conn;
      waitingFor = "the job's row lock";
      const ran = await untilEnded(
        (async () => {
          await tx.execute(sql`BEGIN`);
          const held = rows(await tx.execute(sql`SELECT id FROM cronq_jobs WHERE ${leaseHeld(lease)} FOR UPDATE`));
          if (held.length === 0) return false;
          waitingFor = null;
          await effect(tx);
          return true;
        })(),
        ending.signal,
        (error) => {
          abandonedWith = notStarted(error) as Error;
          conn.destroy();
        },
      );
      if (!ran) {
        await tx.execute(sql`ROLLBACK`);
        return false;
      }
      await markDone(tx, lease);
      await tx.execute(sql`COMMIT`);
      return true;
    } catch (error) {
      if (abandonedWith) throw abandonedWith;
      // Guarded: an effect may throw a revoked Proxy, and a throw here would skip the rollback.
      if (isInstance(error, EffectNotStartedError) || error === ending.signal?.reason) throw error; // nothing sent yet
      // As drizzle's transaction() does: roll back, and a failed rollback's error wins (the connection is gone).
      await conn.tx.execute(sql`ROLLBACK`);
      throw error;
    } finally {
      conn.release(); // a no-op once destroyed
    }
  } finally {
    ending.clear();
  }
}

/**
 * A signal that aborts when `bound` ends: with `bound.timedOut()` once `limitMs` has
 * passed from now (`timedOut` is then true), or with the reason of `bound.signal`. No
 * signal without a bound.
 */
function boundEnding(bound: EffectBound | undefined): { signal: AbortSignal | undefined; readonly timedOut: boolean; clear(): void } {
  if (!bound) return { signal: undefined, timedOut: false, clear: () => undefined };
  const ended = new AbortController();
  const { signal } = bound;
  const onAbort = () => ended.abort(signal!.reason);
  if (signal?.aborted) onAbort();
  else signal?.addEventListener('abort', onAbort, { once: true });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = !ended.signal.aborted;
    ended.abort(bound.timedOut());
  }, Math.max(0, bound.limitMs));
  return {
    signal: ended.signal,
    get timedOut() {
      return timedOut;
    },
    clear: () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    },
  };
}

/** Settles as `work` does, or rejects sooner when `signal` aborts, calling `abandon` with its reason first. */
function untilEnded<T>(work: Promise<T>, signal: AbortSignal | undefined, abandon: (error: Error) => void): Promise<T> {
  if (!signal) return work;
  let onAbort: (() => void) | undefined;
  const ended = new Promise<never>((_, reject) => {
    const end = () => {
      abandon(signal.reason as Error);
      reject(signal.reason);
    };
    if (signal.aborted) return end();
    onAbort = end;
    signal.addEventListener('abort', onAbort, { once: true });
  });
  ended.catch(() => undefined); // an abort landing as `work` settles must not go unhandled
  work.catch(() => undefined); // nor a failure of `work` after it was abandoned
  return Promise.race([work, ended]).finally(() => {
    if (onAbort) signal.removeEventListener('abort', onAbort);
  });
}

async function markDoneIfHeld(tx: Executor, lease: Lease): Promise<boolean> {
  const held = rows(await tx.execute(sql`SELECT id FROM cronq_jobs WHERE ${leaseHeld(lease)} FOR UPDATE`));
  if (held.length === 0) return false;
  await markDone(tx, lease);
  return true;
}

async function markDone(tx: Executor, lease: Lease): Promise<void> {
  await tx.execute(sql`${PAYLOAD_KEPT}UPDATE cronq_jobs
    SET status = 'done', lease_deadline = ${NO_TIME}, last_error = NULL, finished_time = ${NOW}, updated_at = ${NOW}
    WHERE id = ${lease.id}`);
}

export interface Failure {
  /** Text for last_error / failure_reason (already free of secrets). */
  error: string;
  /** Dead at once, whatever attempts remain. */
  permanent: boolean;
  /** Delay before the next attempt, if one remains. */
  retryInMs: number;
}


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
    const error = boundedText(failure.error, LAST_ERROR_MAX);
    if (failure.permanent || held[0].attempts >= held[0].max_attempts) {
      await markDead(tx, [lease.id], error);
      return { status: 'dead' } as const;
    }
    await tx.execute(sql`${PAYLOAD_KEPT}UPDATE cronq_jobs
      SET status = 'ready', ${NO_LEASE}, last_error = ${error},
          available_at = ${NOW} + ${interval(failure.retryInMs)}, updated_at = ${NOW}
      WHERE id = ${lease.id}`);
    return { status: 'retry', retryInMs: failure.retryInMs } as const;
  });
}

/** What releaseInterruptedIfLeased did. */
export type InterruptedOutcome = 'released' | 'dead' | 'lease_lost';

/**
 * Gives back a job whose handler a shutdown cut short (its grace ran out), fenced like
 * every write (row lock, token, unexpired lease), in one transaction: 'ready', available
 * now, attempt restored (the stop was the daemon's, not a failure of the handler), and one
 * more in `lease_expiries`, which counts the processes that stopped while running the job,
 * as lease recovery counts one that died. When that count reaches `maxLeaseExpiries` the
 * job goes dead instead, with its dead letter: a handler that stops its own daemon (a
 * `systemctl restart` of the service, a signal to its process) was otherwise handed back
 * at attempt 0 each time and stopped every daemon in turn for ever.
 */
export async function releaseInterruptedIfLeased(db: Db, lease: Lease, reason: string, maxLeaseExpiries: number): Promise<InterruptedOutcome> {
  const counted = sql`, lease_expiries = LEAST(lease_expiries + 1, 32767)`;
  // The common case in one autocommit UPDATE: a stop with room left (a shutdown may hand
  // back as many runs as it has slots, one after another, within its margin).
  const handedBack = await db.execute(sql`${PAYLOAD_KEPT}UPDATE cronq_jobs
    SET ${released(reason)}${counted}
    WHERE ${leaseHeld(lease)} AND lease_expiries + 1 < ${maxLeaseExpiries}`);
  if (header(handedBack).affectedRows === 1) return 'released';
  // Lease gone, or this is the stop that sends it dead: decided under the row lock.
  return db.transaction(async (tx) => {
    const held = rows<{ lease_expiries: number }>(await tx.execute(sql`SELECT lease_expiries FROM cronq_jobs WHERE ${leaseHeld(lease)} FOR UPDATE`));
    if (held.length === 0) return 'lease_lost';
    const why =
      `the process running it stopped ${Number(held[0].lease_expiries) + 1} times without finishing it (the last time ${reason}). Typical causes: ` +
      'a handler that stops its own daemon (systemctl restart of its service, a signal to its process) or one that outlasts the shutdown grace ' +
      'at every deploy; see "What a handler must not do" in the README';
    await markDead(tx, [lease.id], boundedText(why, LAST_ERROR_MAX), counted);
    return 'dead';
  });
}

/**
 * Inside a transaction holding the rows' locks: 'dead' plus a dead letter each. `error` is
 * the text, or an expression over the row's columns; `also` more assignments (evaluated
 * after last_error). Each dead letter gets its `reason_group` in the same transaction:
 * from the text at once, or, for an expression, from what the server computed.
 */
export async function markDead(tx: Executor, ids: number[], error: string | SQL, also: SQL = sql``): Promise<void> {
  await tx.execute(sql`${PAYLOAD_KEPT}UPDATE cronq_jobs
    SET status = 'dead', lease_deadline = ${NO_TIME}, last_error = ${error}, finished_time = ${NOW}, updated_at = ${NOW}${also}
    WHERE id IN ${ids}`);
  const group = typeof error === 'string' ? reasonGroup(error) : null;
  const inserted = await tx.execute(sql`${PAYLOAD_KEPT}INSERT INTO cronq_dead_letters
      (job_id, queue, kind, job_key, payload, failure_reason, attempts, dead_at, reason_group)
    SELECT id, queue, kind, job_key, payload, last_error, attempts, ${NOW}, ${group} FROM cronq_jobs
    WHERE id IN ${ids}`);
  if (group === null) await fillReasonGroups(tx, ids, header(inserted).insertId);
}

/**
 * Extends a running job's lease to now + `leaseMs`, fenced by token and unexpired lease.
 * False means the lease is gone (recovered, or another worker holds the job): the
 * caller must abort the handler and discard its result.
 */
export async function renewIfLeased(db: Db, lease: Lease, leaseMs: number): Promise<boolean> {
  const result = await db.execute(sql`${PAYLOAD_KEPT}UPDATE cronq_jobs
    SET lease_deadline = ${NOW} + ${interval(leaseMs)}, updated_at = ${NOW}
    WHERE ${leaseHeld(lease)}`);
  return header(result).affectedRows === 1;
}

/**
 * Takes a lease back after its deadline passed unnoticed (the database was away while its
 * worker waited to write the result): extends it to now + `leaseMs` when the row is still
 * `reserved` under this token, whether or not the deadline has passed. Past the deadline
 * recovery may return the job at any moment, but until it has (it clears the token, under
 * the row lock this UPDATE takes too), nobody else can hold or have run the job, so the
 * worker that ran it may still write its result. False when the job was recovered,
 * released, cancelled or finished meanwhile: the caller discards its result.
 * Only for a worker that waited out an outage; everything else renews with renewIfLeased.
 */
export async function renewIfUnrecovered(db: Db, lease: Lease, leaseMs: number): Promise<boolean> {
  const result = await db.execute(sql`${PAYLOAD_KEPT}UPDATE cronq_jobs
    SET lease_deadline = ${NOW} + ${interval(leaseMs)}, updated_at = ${NOW}
    WHERE ${leaseUnrecovered(lease)}`);
  return header(result).affectedRows === 1;
}

/**
 * Gives a claimed job back without counting the attempt (shutdown before or during
 * its handler, a kind this daemon does not run): 'ready', available now (or after
 * `delayMs`), attempts - 1; with `intoQueue`, moved into that queue too (a job of a
 * kind with a cluster-wide limit claimed from another queue, where its limit does not
 * hold). Only the row with this token is touched; false when the lease was already lost.
 */
export function releaseIfLeased(db: Db, lease: Lease, reason: string, delayMs = 0, intoQueue?: string): Promise<boolean> {
  return releaseWhere(db, leaseHeld(lease), reason, delayMs, intoQueue);
}

/**
 * Gives back, attempt restored, a job whose handler never started (claimed ahead and
 * left in the buffer, or taken by a claim its worker then failed to hand on): as
 * releaseIfLeased, but while the row is still `reserved` under this token even if its
 * deadline passed (an outage held the release back): until recovery has returned the
 * job (it clears the token under the row lock this UPDATE takes too) nobody else can
 * hold it, and nothing ran, so no lease expiry is owed. False once recovered, cancelled
 * or otherwise gone. Never for a job whose handler started: its expired lease counts.
 */
export function releaseUnstartedIfUnrecovered(db: Db, lease: Lease, reason: string): Promise<boolean> {
  return releaseWhere(db, leaseUnrecovered(lease), reason, 0);
}

/**
 * releaseUnstartedIfUnrecovered for many jobs at once (a shutdown hands back its whole
 * read-ahead buffer, up to `prefetch` jobs; callers send a few hundred per call): one
 * short transaction locks, in id order, those still `reserved` under their own token and
 * gives them back, attempt restored. Returns the ids released; a job missing from the set
 * was recovered, cancelled or otherwise gone, and was not touched.
 */
export async function releaseUnstartedManyIfUnrecovered(db: Db, leases: Lease[], reason: string): Promise<Set<number>> {
  if (leases.length === 0) return new Set();
  return db.transaction(async (tx) => {
    // Tokens are unique, so "token in the set" is the per-row check (as in completeManyIfLeased).
    const held = rows<{ id: number }>(
      await tx.execute(
        formatted(`SELECT id FROM cronq_jobs WHERE ${idsCondition(leases.map((l) => l.id))} AND status = 'reserved' AND lease_fence IN (?) ORDER BY id FOR UPDATE`, [
          leases.map((l) => l.token),
        ]),
      ),
    ).map((r) => Number(r.id));
    if (held.length === 0) return new Set<number>();
    await tx.execute(sql`${PAYLOAD_KEPT}UPDATE cronq_jobs SET ${released(reason)} WHERE ${sql.raw(idsCondition(held))}`);
    return new Set(held);
  });
}

async function releaseWhere(db: Db, fence: SQL, reason: string, delayMs: number, intoQueue?: string): Promise<boolean> {
  const result = await db.execute(sql`${PAYLOAD_KEPT}UPDATE cronq_jobs SET ${released(reason, delayMs, intoQueue)} WHERE ${fence}`);
  return header(result).affectedRows === 1;
}

/**
 * The SET clause of every release: 'ready', attempt restored, no lease, `reason` in
 * last_error, available after `delayMs`; with `intoQueue`, moved into that queue.
 */
function released(reason: string, delayMs = 0, intoQueue?: string): SQL {
  const queue = intoQueue === undefined ? sql`` : sql`queue = ${intoQueue}, `;
  return sql`status = 'ready', ${queue}attempts = IF(attempts > 0, attempts - 1, 0), ${NO_LEASE},
    last_error = ${boundedText(reason, LAST_ERROR_MAX)}, available_at = ${NOW} + ${interval(delayMs)}, updated_at = ${NOW}`;
}

/** Default of `maxLeaseExpiries`: a job whose lease expired this often goes dead. */
