import type { Store } from '../store/index.ts';

/**
 * What the scheduler asks of the store: the tick ledger (claim, renew, finish, fail, skip,
 * release, record skipped, read, adopt a row of unknown source), the overlap lock, its holder and the listing of this
 * daemon's lock connections, the overlap read, the pause read, the health reads, and the
 * job inserts a fan-out writes (a JobWriter, and keyHolders: who holds the keys it finds).
 * The scheduler holds this and nothing of the driver; `Store` satisfies it.
 */
export type SchedulerStore = Pick<
  Store,
  | 'latestTick'
  | 'adoptTickSourceIfUnknown'
  | 'recentTicks'
  | 'resumableTicks'
  | 'claimTickFanout'
  | 'renewTickIfOwned'
  | 'finishTickIfOwned'
  | 'failTickIfOwned'
  | 'skipTickIfOwned'
  | 'releaseTickIfOwned'
  | 'recordSkippedTicks'
  | 'holdOverlapLock'
  | 'overlapLockHolder'
  | 'endSession'
  | 'listOverlapConnections'
  | 'otherTickInFlight'
  | 'tickHasJobs'
  | 'pauseOf'
  | 'periodHasUnfinishedJobs'
  | 'insertJob'
  | 'insertJobs'
  | 'existingKeys'
  | 'keyHolders'
  | 'maxAllowedPacket'
>;
