import type { Db } from '../../src/db/client.ts';
import { claimReady, type NewJobRow } from '../../src/queue/store.ts';

/** A row for the store's insert functions: queue 'default', kind 'test', 3 attempts, due now. */
export function jobRow(key: string, extra: Partial<NewJobRow> = {}): NewJobRow {
  return { queue: 'default', kind: 'test', key, payloadJson: JSON.stringify({ key }), maxAttempts: 3, runAt: null, ...extra };
}

/** Claims up to `limit` jobs with a 30 s lease, as `lockedBy`, from `queues`. */
export function claimJobs(db: Db, limit: number, lockedBy = 'test:1', queues: string[] = ['default']) {
  return claimReady(db, { queues, limit, leaseMsFor: () => 30_000, lockedBy });
}
