/**
 * enqueueOne's handling of lock conflicts: a deadlock rolls back only the insert when it
 * is not part of a caller's transaction (retried), and the caller's whole transaction
 * when it is (never papered over).
 */
import { describe, expect, it } from 'vitest';
import { EnqueueError } from '../src/errors.ts';
import { enqueueOne } from '../src/enqueue/write.ts';
import type { JobWriter, NewJobRow } from '../src/store/jobs.ts';

const row: NewJobRow = {
  queue: 'default',
  kind: 'k',
  key: 'deadlocked',
  payloadJson: '{}',
  maxAttempts: 5,
  runAt: null,
  scheduleName: null,
  periodKey: null,
  scheduledAt: null,
};

/** A writer whose first `failures` inserts lose a deadlock, as mysql2 reports one. */
function deadlockingWriter(failures: number): JobWriter & { calls: () => number } {
  let calls = 0;
  const deadlock = () => Object.assign(new Error('Deadlock found when trying to get lock; try restarting transaction'), { code: 'ER_LOCK_DEADLOCK', errno: 1213 });
  return {
    calls: () => calls,
    insertJob: async () => {
      calls += 1;
      if (calls <= failures) throw deadlock();
      return { id: 7, created: true };
    },
    insertJobs: async () => 0,
    existingKeys: async () => new Set(),
    maxAllowedPacket: async () => 16 * 1024 * 1024,
  };
}

describe('enqueueOne', () => {
  it('retries an insert of its own that lost a deadlock', async () => {
    const writer = deadlockingWriter(2);
    expect(await enqueueOne(writer, row, 1_000_000, { ownTransaction: true })).toEqual({ id: 7, created: true });
    expect(writer.calls()).toBe(3);
  });

  it("reports a deadlock inside a caller's transaction at once, as an EnqueueError naming it", async () => {
    const writer = deadlockingWriter(1);
    const failed = await enqueueOne(writer, row, 1_000_000, { ownTransaction: false }).catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(EnqueueError);
    expect(String((failed as Error).message)).toMatch(/ER_LOCK_DEADLOCK/);
    expect(writer.calls()).toBe(1);
  });
});
