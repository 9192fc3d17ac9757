import type { Store } from '../store/index.ts';

/**
 * What the worker asks of the store: claims, the fenced writes on what it claimed, the
 * database clock, and who serves a kind. The worker holds this and nothing of the
 * driver; `Store` satisfies it, and tests hand `JobRun` a fake.
 */
export type WorkerStore = Pick<
  Store,
  'claimConnections' | 'claim' | 'readyQueues' | 'pausedQueues' | 'completeMany' | 'complete' | 'fail' | 'renew' | 'renewUnrecovered' | 'release' | 'releaseInterrupted' | 'releaseUnstarted' | 'releaseUnstartedMany' | 'moveToQueue' | 'now' | 'servingOf' | 'cancellationOf'
>;

/** What DaemonHeartbeat asks of the store: this daemon's row in cronq_daemons. */
export type HeartbeatStore = Pick<Store, 'registerDaemon' | 'heartbeatDaemon' | 'markDaemonStopped' | 'deleteSilentDaemons'>;
