import type { DbHealth } from '../runtime/dbHealth.ts';
import type { Cancellation, Lease } from '../store/index.ts';
import type { WorkerStore } from './workerStore.ts';

/** What a renewal needs of the run whose lease it keeps (JobRun). */
export interface RenewableRun {
  readonly lease: Lease;
  readonly leaseMs: number;
  /** When the lease ends as far as this process knows (Date.now() time). */
  readonly leaseDeadline: number;
  /** The lease was found gone: renewing stops. */
  readonly leaseLost: boolean;
  /** The run's final write is done or given up: renewing stops. */
  readonly settled: boolean;
  /** A renewal sent at `requestedAt` (Date.now()) landed: the lease runs leaseMs from then. */
  leaseRenewed(requestedAt: number): void;
  /** A renewal found the lease gone. */
  markLeaseLost(where: string): void;
  /** A renewal found the lease gone because an operator cancelled the job. */
  markCancelled(cancellation: Cancellation): void;
}

type RenewalStore = Pick<WorkerStore, 'renew' | 'renewUnrecovered' | 'cancellationOf'>;

/**
 * Renews `run`'s lease every third of its length (at least every 250 ms apart) until the
 * returned function is called. A renewal that finds the lease gone asks once whether an
 * operator cancelled the job (then the run is marked cancelled) and otherwise, or when
 * that read fails, marks the run's lease lost; a database error is reported to `health` and the next renewal tries again (the
 * lease keeps running out meanwhile). In an outage no renewal is sent: it could not
 * land, and the claim loop probes for the database's return.
 */
export function keepLeaseAlive(run: RenewableRun, store: RenewalStore, health: DbHealth): () => void {
  const every = Math.max(250, Math.floor(run.leaseMs / 3));
  const timer = setInterval(() => void renewOnce(run, store, health), every);
  timer.unref();
  return () => clearInterval(timer);
}

/**
 * Sends one renewal of `run`'s lease now, as keepLeaseAlive's timer does (the same
 * outcomes: renewed, marked lost or cancelled, or an error reported to `health`). Never throws.
 */
export async function renewOnce(run: RenewableRun, store: RenewalStore, health: DbHealth): Promise<void> {
  if (!health.healthy) return;
  const renew = async () => {
    if (await store.renew(run.lease, run.leaseMs)) return true;
    // Sent in time, answered past the deadline (a server frozen with it in its socket ran it
    // once thawed): the fence saw the time, not the job gone. Take it back while still ours.
    return Date.now() >= run.leaseDeadline && store.renewUnrecovered(run.lease, run.leaseMs);
  };
  await sendRenewal(run, health, renew, store);
}

/**
 * Takes `run`'s lease back after an outage (renewIfUnrecovered): its deadline may have
 * passed while the database was away, and the job is still the run's as long as nobody
 * recovered it. Renewed (a full lease from now), marked lost or cancelled when it is gone,
 * or, after a database error, reported to `health` and left as it was. Never throws.
 */
export async function reclaimOnce(run: RenewableRun, store: RenewalStore, health: DbHealth): Promise<void> {
  await sendRenewal(run, health, () => store.renewUnrecovered(run.lease, run.leaseMs), store);
}

/** One renewal by `renew`, with renewOnce's and reclaimOnce's outcomes. Never throws. */
async function sendRenewal(run: RenewableRun, health: DbHealth, renew: () => Promise<boolean>, store: RenewalStore): Promise<void> {
  if (run.leaseLost || run.settled) return;
  const requestedAt = Date.now();
  try {
    const held = await renew();
    health.ok(requestedAt);
    if (held) run.leaseRenewed(requestedAt);
    else await leaseGone(run, store);
  } catch (error) {
    health.backoffAfter(error, 'renew', requestedAt);
  }
}

/** The lease is gone: cancelled by an operator, or lost any other way. Never throws. */
async function leaseGone(run: RenewableRun, store: RenewalStore): Promise<void> {
  const cancellation = await store.cancellationOf(run.lease).catch(() => null);
  if (cancellation) run.markCancelled(cancellation);
  else run.markLeaseLost('renew');
}
