/**
 * The recovery loop: every few seconds, expired leases back to the queue (the SQL is
 * store/recovery.ts). Runs in every daemon with workers.
 */
import type { Logger } from '../logger.ts';
import type { Observer } from '../observe.ts';
import type { DbHealth } from '../runtime/dbHealth.ts';
import { DB_ERROR_TEXT_MAX, errorText } from '../runtime/errorText.ts';
import { sleep } from '../runtime/wakeup.ts';
import type { Store } from '../store/index.ts';

export interface RecoveryOptions {
  store: Pick<Store, 'recoverExpiredLeases'>;
  log: Logger;
  health: DbHealth;
  /** Time between passes. */
  everyMs: number;
  /** Rows per transaction. */
  batchSize: number;
  /** Transactions per pass at most, so one pass stays short even after a mass expiry. */
  maxBatchesPerPass: number;
  /** Told about every pass that recovered leases (default: nobody). */
  observer?: Observer;
  /** A job whose lease expired this often goes dead (default MAX_LEASE_EXPIRIES). */
  maxLeaseExpiries?: number;
  /**
   * Where refused dead letters are logged (default: a RefusedDeadLetters of `log` for this
   * call alone); recoveryLoop keeps one across its passes, so the line comes at most once
   * a minute.
   */
  refusals?: RefusedDeadLetters;
}

export const RECOVERY_DEFAULTS = { everyMs: 5_000, batchSize: 100, maxBatchesPerPass: 20 };

/** At most one `recovery_dead_letters_refused` line per this many ms. */
export const REFUSED_LOG_EVERY_MS = 60_000;

/** Most job ids one `recovery_dead_letters_refused` line lists (`jobs` counts them all). */
const IDS_LOGGED = 20;

/**
 * Logs the dead letters recovery's batches could not write (`recovery_dead_letters_refused`,
 * an error, with the server's reason): the first at once, then at most one line per
 * REFUSED_LOG_EVERY_MS, however often passes meet them (the refused jobs are tried again
 * every pass), each saying how many refusals went unlogged since the one before.
 */
export class RefusedDeadLetters {
  private loggedAt = Number.NEGATIVE_INFINITY;
  private unlogged = 0;

  constructor(
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  /** A batch's dead letters for `ids` were refused with `error`. */
  refused(ids: readonly number[], error: unknown): void {
    const now = this.now();
    if (now - this.loggedAt < REFUSED_LOG_EVERY_MS) {
      this.unlogged += 1;
      return;
    }
    this.log.error(
      {
        event: 'recovery_dead_letters_refused',
        jobs: ids.length,
        job_ids: ids.slice(0, IDS_LOGGED),
        refusals_unlogged: this.unlogged,
        error: errorText(error, DB_ERROR_TEXT_MAX),
      },
      'the database refused the dead letters of expired leases on their last attempt; those jobs stay reserved (expired) until a pass can write them, the others were returned',
    );
    this.loggedAt = now;
    this.unlogged = 0;
  }
}

/**
 * One recovery pass: expired leases back to 'ready' (or 'dead' with a dead letter when
 * no attempts remain or the job's leases expired `maxLeaseExpiries` times), in bounded
 * batches, each its own transaction. Logs `leases_recovered` (and tells the observer)
 * when it recovered any, also when a later batch fails: the batches before it are
 * committed, and their jobs run again. Safe to run in every daemon at once (SKIP LOCKED
 * splits the rows).
 *
 * Dead letters the database refuses hold back nothing else: each batch commits the jobs
 * it returns regardless (RecoveryBatch.refused), the refused jobs stay reserved with
 * their leases expired, the pass skips them in its later batches (so it never reads them
 * over and over) and goes on, and the next pass tries them again. Logged through
 * `options.refusals`.
 */
export async function recoverOnce(options: RecoveryOptions): Promise<{ returned: number; dead: number }> {
  const total = { returned: 0, dead: 0 };
  const refusals = options.refusals ?? new RefusedDeadLetters(options.log);
  const skip: number[] = [];
  try {
    for (let i = 0; i < options.maxBatchesPerPass; i++) {
      const { returned, dead, refused } = await options.store.recoverExpiredLeases(options.batchSize, options.maxLeaseExpiries, skip);
      total.returned += returned;
      total.dead += dead;
      if (refused) {
        skip.push(...refused.ids);
        refusals.refused(refused.ids, refused.error);
      }
      if (returned + dead + (refused?.ids.length ?? 0) < options.batchSize) break;
    }
  } finally {
    if (total.returned + total.dead > 0) {
      options.log.warn(
        { event: 'leases_recovered', count: total.returned + total.dead, returned: total.returned, dead: total.dead },
        'expired leases recovered',
      );
      options.observer?.leasesRecovered(total.returned, total.dead);
    }
  }
  return total;
}

/**
 * Runs `recoverOnce` every `everyMs` until `signal` aborts. Errors are logged through
 * DbHealth and the loop goes on; it never throws.
 *
 * While the database is reported down (DbHealth; the worker pool's claim loop probes it)
 * no pass is sent, and the first pass after it answers again waits `everyMs` more: this
 * daemon's jobs whose results waited out the outage take their leases back and write
 * their results first (Finisher), instead of being returned and run again because their
 * deadlines passed while nothing could be written.
 */
export async function recoveryLoop(options: RecoveryOptions, signal: AbortSignal): Promise<void> {
  options = { ...options, refusals: options.refusals ?? new RefusedDeadLetters(options.log) };
  let afterOutage = false;
  while (!signal.aborted) {
    if (!options.health.healthy) {
      afterOutage = true;
      await options.health.untilHealthy(options.everyMs, signal);
      continue;
    }
    if (afterOutage) {
      afterOutage = false;
      await sleep(options.everyMs, signal);
      continue;
    }
    const sentAt = Date.now();
    try {
      await recoverOnce(options);
      options.health.ok(sentAt);
      await sleep(options.everyMs, signal);
    } catch (error) {
      await sleep(Math.max(options.health.backoffAfter(error, 'recovery', sentAt), 1_000), signal);
    }
  }
}
