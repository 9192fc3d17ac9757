import { describe, expect, it } from 'vitest';
import { RefusedDeadLetters, recoverOnce } from '../src/maintenance/recovery.ts';
import { noopObserver } from '../src/observe.ts';
import { DbHealth } from '../src/runtime/dbHealth.ts';
import { Store } from '../src/store/index.ts';
import { insertJobIfAbsent } from '../src/store/jobs.ts';
import { useTestDatabase } from './support/db.ts';
import { EventLog } from './support/events.ts';
import { claimJobs, jobRow } from './support/jobs.ts';

describe('a recovery pass', () => {
  it('reports the leases its committed batches recovered when a later batch fails, then fails', async () => {
    const log = new EventLog();
    const told: Array<[number, number]> = [];
    const lost = Object.assign(new Error('Connection lost: The server closed the connection.'), { code: 'PROTOCOL_CONNECTION_LOST' });
    const answers = [{ returned: 100, dead: 0 }, { returned: 98, dead: 2 }];
    const store = {
      recoverExpiredLeases: async () => {
        const next = answers.shift();
        if (!next) throw lost;
        return next;
      },
    };
    await expect(
      recoverOnce({
        store,
        log: log.logger,
        health: new DbHealth(log.logger),
        everyMs: 1_000,
        batchSize: 100,
        maxBatchesPerPass: 20,
        observer: { ...noopObserver, leasesRecovered: (returned, dead) => void told.push([returned, dead]) },
      }),
    ).rejects.toBe(lost);
    expect(log.named('leases_recovered').map((e) => [e.returned, e.dead])).toEqual([[198, 2]]);
    expect(told).toEqual([[198, 2]]);
  });
});

describe('a recovery pass whose dead letters the database refuses', () => {
  const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_dead_letters'] });

  it('still returns the retryable expired leases, leaves the refused ones reserved and expired, skips them for the rest of the pass, and logs that at most once a minute', async () => {
    // 'last' comes first in recovery's order, so a batch of one meets it before 'again'.
    const { id: lastId } = await insertJobIfAbsent(t.database.db, jobRow('last', { maxAttempts: 1 }));
    const { id: againId } = await insertJobIfAbsent(t.database.db, jobRow('again', { maxAttempts: 3 }));
    expect(await claimJobs(t.database, 2)).toHaveLength(2);
    await t.sql('UPDATE cronq_jobs SET lease_deadline = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND');
    const log = new EventLog();
    const store = new Store(t.database);
    let batches = 0;
    const counting = {
      recoverExpiredLeases: (...args: Parameters<Store['recoverExpiredLeases']>) => (batches++, store.recoverExpiredLeases(...args)),
    };
    let clock = 1_000_000;
    const refusals = new RefusedDeadLetters(log.logger, () => clock);
    const pass = () =>
      recoverOnce({ store: counting, log: log.logger, health: new DbHealth(log.logger), everyMs: 1_000, batchSize: 1, maxBatchesPerPass: 20, refusals });
    const jobsNow = () =>
      t.sql(`SELECT id, status, attempts, lease_expiries, lease_deadline <= UTC_TIMESTAMP(6) AS expired, last_error
        FROM cronq_jobs ORDER BY id`);

    await t.sql('RENAME TABLE cronq_dead_letters TO cronq_dead_letters_away');
    try {
      expect(await pass()).toEqual({ returned: 1, dead: 0 });
      // 'last' refused, 'again' returned, then nothing: never 'last' again in this pass.
      expect(batches).toBe(3);
      const [last, again] = await jobsNow();
      expect(again).toMatchObject({ id: againId, status: 'ready', attempts: 1, lease_expiries: 1 });
      expect(last).toEqual({ id: lastId, status: 'reserved', attempts: 1, lease_expiries: 0, expired: 1, last_error: null });
      const [refused] = log.named('recovery_dead_letters_refused');
      expect(refused).toMatchObject({ jobs: 1, job_ids: [lastId], refusals_unlogged: 0 });
      expect(refused.error).toMatch(/cronq_dead_letters/);
      expect(log.named('leases_recovered').map((e) => [e.returned, e.dead])).toEqual([[1, 0]]);

      // The next pass meets it again, once, and says nothing within the minute...
      batches = 0;
      expect(await pass()).toEqual({ returned: 0, dead: 0 });
      expect(batches).toBe(2);
      expect(log.named('recovery_dead_letters_refused')).toHaveLength(1);
      // ...and once a minute has passed, says it again, counting what it left out.
      clock += 60_000;
      await pass();
      expect(log.named('recovery_dead_letters_refused').map((e) => e.refusals_unlogged)).toEqual([0, 1]);
      expect(log.named('db_error')).toEqual([]);
    } finally {
      await t.sql('RENAME TABLE cronq_dead_letters_away TO cronq_dead_letters');
    }

    // With its table back, the refused job goes dead as recovery always sent it: attempt counted, the usual reason.
    expect(await pass()).toEqual({ returned: 0, dead: 1 });
    const [last] = await jobsNow();
    expect(last).toMatchObject({ id: lastId, status: 'dead', attempts: 1, lease_expiries: 1 });
    const letters = await t.sql('SELECT job_id, failure_reason, attempts FROM cronq_dead_letters');
    expect(letters).toEqual([{ job_id: lastId, failure_reason: 'lease expired while held by test:1 after the final attempt', attempts: 1 }]);
  });
});
