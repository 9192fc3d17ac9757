import type { Logger } from '../logger.ts';
import type { OverlapLock } from '../store/index.ts';
import type { SchedulerStore } from './schedulerStore.ts';
import { staleHolderOf } from './staleHolder.ts';

/** Whole seconds the lock is waited for after its holder's session was ended (even with a wait of 0). */
const SESSION_END_WAIT_S = 1;

/** The daemon whose cronq_daemons row lists its locks' connections: its id and heartbeat interval (its DaemonHeartbeat's). */
export interface ListedDaemon {
  id: string;
  heartbeatMs: number;
}

export type OverlapGuardStore = Pick<SchedulerStore, 'holdOverlapLock' | 'overlapLockHolder' | 'endSession' | 'listOverlapConnections'>;

/**
 * Takes the overlap locks of one daemon's schedules (store/overlap.ts), one per fan-out of
 * an `overlap: 'skip'` schedule, shared by all its tickers.
 *
 * Contract under concurrency:
 * - Before a lock is taken, the connection it is to be held on is listed in this daemon's
 *   cronq_daemons row (`daemon`, with its heartbeat interval), with the others it holds
 *   locks on: the writes of one guard run one after another, each writing the set as it
 *   is then, so the row lists every connection holding one of its locks from before the
 *   lock is taken. A listing that fails takes no lock (the error is thrown). Without
 *   `daemon` (or its row) nothing is listed, and no other daemon ever ends its sessions.
 * - When the lock stays taken for the whole wait, the holder is looked up: a session that
 *   a stale daemon's row lists (staleHolderOf: silent for STALE_AFTER_HEARTBEATS of its own
 *   heartbeats) is ended (KILL), which frees the lock, and the lock is asked for once more
 *   within a new wait. A holder that is alive, or listed by no daemon, or one of this
 *   guard's own, is never ended; the tick is skipped as before. The verdict is a snapshot:
 *   a stalled daemon that wakes between it and the KILL loses that connection (its
 *   fan-out goes on with its other connections; its release fails and is ignored).
 * - A KILL the server refuses (daemons connecting as different users, without the
 *   privilege to end each other's sessions) is logged once per holding session and the
 *   tick skipped; it never throws. Two daemons freeing the same lock at once are harmless:
 *   the second KILL finds the session gone.
 */
export class OverlapGuard {
  /** Connection ids this daemon's locks are held on (or about to be). */
  private readonly held = new Set<number>();
  /** The listing writes, run one after another. */
  private listing: Promise<void> = Promise.resolve();
  /** Holding sessions whose KILL was refused, already logged. */
  private readonly refusedLogged = new Set<number>();

  constructor(private readonly deps: { store: OverlapGuardStore; log: Logger; daemon: ListedDaemon | null }) {}

  /**
   * The schedule's overlap lock within `waitS` (and as long again, at least a second, when a
   * stalled daemon's session had to be ended first), or null when another live or unattributable fan-out keeps it.
   */
  async hold(scheduleName: string, waitS: number): Promise<OverlapLock | null> {
    const lock = await this.take(scheduleName, waitS);
    if (lock !== null) return lock;
    const holder = await this.deps.store.overlapLockHolder(scheduleName);
    if (holder === null || this.held.has(holder.connectionId)) return null;
    const stale = staleHolderOf(holder);
    if (stale === null) return null;
    const outcome = await this.deps.store.endSession(stale.connectionId);
    if (!outcome.ended && outcome.why === 'refused') {
      if (!this.refusedLogged.has(stale.connectionId)) {
        this.refusedLogged.add(stale.connectionId);
        this.deps.log.error(
          { event: 'overlap_lock_kill_refused', schedule: scheduleName, daemon: stale.daemonId, connection_id: stale.connectionId, silent_ms: stale.silentMs, error: outcome.reason },
          "cannot end the session of a stalled daemon holding the schedule's overlap lock; its ticks are skipped until that session ends",
        );
      }
      return null;
    }
    if (outcome.ended) {
      this.deps.log.warn(
        { event: 'overlap_lock_freed', schedule: scheduleName, daemon: stale.daemonId, connection_id: stale.connectionId, silent_ms: stale.silentMs },
        "ended the session of a stalled daemon holding the schedule's overlap lock",
      );
    }
    // The server frees the lock as the killed session ends, a moment after KILL returns.
    return this.take(scheduleName, Math.max(waitS, SESSION_END_WAIT_S));
  }

  private async take(scheduleName: string, waitS: number): Promise<OverlapLock | null> {
    let listed: number | null = null;
    let lock: OverlapLock | null;
    try {
      lock = await this.deps.store.holdOverlapLock(scheduleName, waitS, {
        beforeLock: async (connectionId) => {
          listed = connectionId;
          this.held.add(connectionId);
          await this.list();
        },
      });
    } catch (error) {
      if (listed !== null) this.held.delete(listed);
      throw error;
    }
    if (lock === null) {
      if (listed !== null) this.held.delete(listed);
      return null;
    }
    const taken = lock;
    return {
      connectionId: taken.connectionId,
      release: async () => {
        // The row keeps naming it until the next listing: harmless, as a connection id is
        // not reused while the server runs, and after a restart older listings are ignored.
        this.held.delete(taken.connectionId);
        await taken.release();
      },
    };
  }

  /** Writes the held set (as it is when the write runs) after any write before it. */
  private list(): Promise<void> {
    const { daemon, store } = this.deps;
    if (daemon === null) return Promise.resolve();
    const write = this.listing.catch(() => undefined).then(() => store.listOverlapConnections(daemon, [...this.held]));
    this.listing = write;
    return write;
  }
}
