/**
 * Lease recovery's SQL: jobs whose lease expired go back to 'ready', or dead.
 *
 * Concurrency contract, shared by everything below:
 * - "now" is always the database clock (`UTC_TIMESTAMP(6)`), never the host's.
 * - A claim stamps each row with a fresh random `lease_token` and a `lease_until`.
 *   Every later write by the claimer (`...IfLeased`) re-checks, under the row lock its
 *   UPDATE or `SELECT ... FOR UPDATE` takes, that the row is still `reserved` with that
 *   token and an unexpired lease; otherwise it changes nothing and reports false.
 *   A stale worker can therefore never finish, fail, renew or release a job.
 * - Transactions are short and run at READ COMMITTED (set per connection in db/client.ts).
 * - Rows are locked with SKIP LOCKED, so daemons recovering at once split the work.
 */
import { sql, type SQL } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { markDead } from './fenced.ts';
import { LEASE_EXPIRIES } from '../defaults.ts';
import { NO_LEASE, NOW, PAYLOAD_KEPT, rows } from './sql.ts';


/** Who held an expired lease, as the row says (an expression: texts differ per row). */
const HELD_BY = sql`COALESCE(NULLIF(RTRIM(lease_holder), ''), 'an unknown worker')`;

/**
 * Candidates a recovery batch reads, per row it takes: batches of up to this many daemons
 * recovering at once split the expired leases instead of reading the same ones.
 */
const RECOVERY_CANDIDATES = 4;

/**
 * The plain read of recovery's candidates (recoverExpiredLeases): expired leases, in
 * claim-index order, at most `limit`, none of `skip`.
 */
export function expiredLeasesSql(limit: number, skip: readonly number[] = []): SQL {
  const notSkipped = skip.length === 0 ? sql`` : sql` AND id NOT IN ${skip}`;
  return sql`SELECT id FROM cronq_jobs WHERE status = 'reserved' AND lease_deadline <= ${NOW}${notSkipped}
    ORDER BY queue, available_at, id LIMIT ${limit}`;
}

/** What one recovery batch did (recoverExpiredLeases). */
export interface RecoveryBatch {
  /** Jobs returned to 'ready'. */
  returned: number;
  /** Jobs sent 'dead', each with its dead letter. */
  dead: number;
  /**
   * Present when the database refused this batch's dead letters (the dead-letter table
   * missing, a trigger refusing the row): those jobs, left 'reserved' with their leases
   * expired exactly as they were (nothing of them was written), and the error. The
   * returned jobs are committed all the same.
   */
  refused?: { ids: number[]; error: unknown };
}

/** The savepoint a batch's dead letters are written under, after its returned jobs. */
const DEAD_LETTERS_SAVEPOINT = 'cronq_recovery_dead';

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
 * The jobs returned are written first; the dead ones (their 'dead' and their dead letters)
 * after them, under a savepoint: should the database refuse those writes (the dead-letter
 * table missing, a trigger, a row it will not take), the savepoint is rolled back, the
 * batch commits its returned jobs, and the refused ids come back in `refused`, still
 * 'reserved' and expired, for a later pass (a caller passes them as `skip` for the rest
 * of its pass, so they are not read again). Only a failure that leaves no transaction to
 * commit (a lost connection, a deadlock, which rolls back the whole transaction) fails the
 * batch.
 *
 * Reads the status='reserved' prefix of the claim index in index order and checks each
 * row's lease: as many rows as jobs in flight, which spares every claim and completion
 * the cost of a second index on (status, lease_until). That read is plain (no locks):
 * the expired leases it finds (up to RECOVERY_CANDIDATES times `limit`) are then locked
 * by primary key, `limit` at most, each re-checked reserved and expired under its lock
 * (SKIP LOCKED: a row another recovery or a fenced write holds is skipped, and the batch
 * takes the next ones). A locking read of the prefix would lock and unlock every lease it passes,
 * live ones that completions are writing included, and every entry not yet purged that
 * completions left in the prefix (right after a drain of 20,000 jobs, 19,000 of them:
 * ~25 ms a batch, against ~3.5 ms for the plain read).
 */
export async function recoverExpiredLeases(
  db: Db,
  limit: number,
  maxLeaseExpiries = LEASE_EXPIRIES.default,
  skip: readonly number[] = [],
): Promise<RecoveryBatch> {
  return db.transaction(async (tx): Promise<RecoveryBatch> => {
    // More candidates than the batch takes: those another daemon's recovery holds are
    // skipped, and the batch goes on with the ones after them.
    const found = rows<{ id: number }>(await tx.execute(expiredLeasesSql(RECOVERY_CANDIDATES * limit, skip))).map((r) => Number(r.id));
    if (found.length === 0) return { returned: 0, dead: 0 };
    const expired = rows<{ id: number; attempts: number; max_attempts: number; lease_expiries: number }>(
      await tx.execute(sql`SELECT id, attempts, max_attempts, lease_expiries FROM cronq_jobs FORCE INDEX (PRIMARY)
        WHERE id IN ${found} AND status = 'reserved' AND lease_deadline <= ${NOW}
        ORDER BY id LIMIT ${limit} FOR UPDATE SKIP LOCKED`),
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
      await tx.execute(sql`${PAYLOAD_KEPT}UPDATE cronq_jobs
        SET status = 'ready', last_error = CONCAT('lease expired while held by ', ${HELD_BY}, '; returned to the queue'),
            ${NO_LEASE}, available_at = ${NOW}, updated_at = ${NOW}${counted}
        WHERE id IN ${retry}`);
    }
    const dead = [...exhausted, ...crashed];
    if (dead.length === 0) return { returned: retry.length, dead: 0 };
    await tx.execute(sql.raw(`SAVEPOINT ${DEAD_LETTERS_SAVEPOINT}`));
    try {
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
    } catch (error) {
      // No transaction left to keep (a lost connection, a deadlock): the batch fails whole.
      await tx.execute(sql.raw(`ROLLBACK TO SAVEPOINT ${DEAD_LETTERS_SAVEPOINT}`)).catch(() => {
        throw error;
      });
      return { returned: retry.length, dead: 0, refused: { ids: dead, error } };
    }
    return { returned: retry.length, dead: dead.length };
  });
}
