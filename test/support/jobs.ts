import type { Database } from '../../src/db/client.ts';
import { claimReady, type ClaimedJob } from '../../src/store/claims.ts';
import type { NewJobRow } from '../../src/store/jobs.ts';

/** A row for the store's insert functions: queue 'default', kind 'test', 3 attempts, due now. */
export function jobRow(key: string, extra: Partial<NewJobRow> = {}): NewJobRow {
  return { queue: 'default', kind: 'test', key, payloadJson: JSON.stringify({ key }), maxAttempts: 3, runAt: null, ...extra };
}

/** Leases of 30 s for every kind. */
export const THIRTY_SECOND_LEASES = { byKind: new Map<string, number>(), defaultMs: 30_000 };

/** Claims up to `limit` jobs with a 30 s lease, as `lockedBy`, from `queues`. */
export function claimJobs(database: Database, limit: number, lockedBy = 'test:1', queues: string[] = ['default']) {
  return claimReady(database.claims, { queues, limit, leases: THIRTY_SECOND_LEASES, lockedBy });
}

/** A job as a claim hands it to the worker, without a database: queue 'default', attempt 1 of 5, `key` `${kind}:${id}`. */
export function claimedJob(id: number, kind = 'k', leaseMs = 60_000): ClaimedJob {
  return {
    id,
    queue: 'default',
    kind,
    key: `${kind}:${id}`,
    payloadText: '{}',
    attempt: 1,
    maxAttempts: 5,
    periodKey: null,
    scheduledAt: null,
    lease: { id, token: 'f'.repeat(32) },
    leaseMs,
    leaseExpiries: 0,
  };
}
