/**
 * The recovery loop: every few seconds, expired leases back to the queue (the SQL is
 * store/recovery.ts). Runs in every daemon with workers.
 */
import type { Logger } from '../logger.ts';
import type { Observer } from '../observe.ts';
import type { DbHealth } from '../runtime/dbHealth.ts';
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
}

export const RECOVERY_DEFAULTS = { everyMs: 5_000, batchSize: 100, maxBatchesPerPass: 20 };

/**
 * One recovery pass: expired leases back to 'ready' (or 'dead' with a dead letter when
 * no attempts remain or the job's leases expired `maxLeaseExpiries` times), in bounded
 * batches, each its own transaction. Logs `leases_recovered` (and tells the observer)
 * when it recovered any, also when a later batch fails: the batches before it are
 * committed, and their jobs run again. Safe to run in every daemon at once (SKIP LOCKED
 * splits the rows).
 */
export async function recoverOnce(options: RecoveryOptions): Promise<{ returned: number; dead: number }> {
  const total = { returned: 0, dead: 0 };
  try {
    for (let i = 0; i < options.maxBatchesPerPass; i++) {
      const { returned, dead } = await options.store.recoverExpiredLeases(options.batchSize, options.maxLeaseExpiries);
      total.returned += returned;
      total.dead += dead;
      if (returned + dead < options.batchSize) break;
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
      await sleep(Math.max(options.health.backoffAfter(error, 'recovery'), 1_000), signal);
    }
  }
}
