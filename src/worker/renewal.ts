import type { DbHealth } from '../runtime/dbHealth.ts';
import type { Lease } from '../store/index.ts';
import type { WorkerStore } from './workerStore.ts';

/** What a renewal needs of the run whose lease it keeps (JobRun). */
export interface RenewableRun {
  readonly lease: Lease;
  readonly leaseMs: number;
  /** The lease was found gone: renewing stops. */
  readonly leaseLost: boolean;
  /** The run's final write is done or given up: renewing stops. */
  readonly settled: boolean;
  /** A renewal sent at `requestedAt` (Date.now()) landed: the lease runs leaseMs from then. */
  leaseRenewed(requestedAt: number): void;
  /** A renewal found the lease gone. */
  markLeaseLost(where: string): void;
}

/**
 * Renews `run`'s lease every third of its length (at least every 250 ms apart) until the
 * returned function is called. A renewal that finds the lease gone marks the run's lease
 * lost; a database error is reported to `health` and the next renewal tries again (the
 * lease keeps running out meanwhile). In an outage no renewal is sent: it could not
 * land, and the claim loop probes for the database's return.
 */
export function keepLeaseAlive(run: RenewableRun, store: Pick<WorkerStore, 'renew'>, health: DbHealth): () => void {
  const every = Math.max(250, Math.floor(run.leaseMs / 3));
  const timer = setInterval(() => void renewOnce(run, store, health), every);
  timer.unref();
  return () => clearInterval(timer);
}

async function renewOnce(run: RenewableRun, store: Pick<WorkerStore, 'renew'>, health: DbHealth): Promise<void> {
  if (run.leaseLost || run.settled || !health.healthy) return;
  const requestedAt = Date.now();
  try {
    const held = await store.renew(run.lease, run.leaseMs);
    health.ok(requestedAt);
    if (held) run.leaseRenewed(requestedAt);
    else run.markLeaseLost('renew');
  } catch (error) {
    health.backoffAfter(error, 'renew');
  }
}
