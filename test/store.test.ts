import { sql } from 'drizzle-orm';
import { beforeEach, describe, expect, it } from 'vitest';
import { completeIfLeased, completeManyIfLeased, failIfLeased, releaseIfLeased, releaseUnstartedManyIfUnrecovered, renewIfLeased, renewIfUnrecovered } from '../src/store/fenced.ts';
import { insertJobIfAbsent, insertJobsIfAbsent } from '../src/store/jobs.ts';
import { recoverExpiredLeases } from '../src/store/recovery.ts';
import { cancelJob } from '../src/store/cancel.ts';
import { rows } from '../src/store/sql.ts';
import { jobs as publicJobs } from '../src/schema.ts';
import { connect } from '../src/db/client.ts';
import { claimReady, ClaimUpdateError, openClaimConnections, type ClaimedJob } from '../src/store/claims.ts';
import { CLAIM_CONNECTIONS } from '../src/db/client.ts';
import { interceptedClaims } from './support/claimsPool.ts';
import { useTestDatabase } from './support/db.ts';
import { claimJobs, jobRow, THIRTY_SECOND_LEASES } from './support/jobs.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_dead_letters'] });
beforeEach(async () => {
  await t.sql('CREATE TABLE IF NOT EXISTS effects (job_key VARCHAR(255) PRIMARY KEY)');
  await t.sql('DELETE FROM effects');
});

const row = jobRow;
const claim = (limit: number, lockedBy?: string, queues?: string[]) => claimJobs(t.database, limit, lockedBy, queues);

const lease = (job: ClaimedJob) => job.lease;

/** The claim pool, counting the packets its claims send (each one round trip). */
function countingClaims() {
  let sent: string[] = [];
  const pool = interceptedClaims(t.database.claims, (sql, send) => {
    sent.push(sql);
    return send(sql);
  });
  return { pool, roundTrips: () => sent.length, packets: () => sent, reset: () => (sent = []) };
}

/** The claim pool, calling `hook` before and after each packet a claim sends. */
function hookedClaims(hook: (statement: string, phase: 'before' | 'after') => Promise<void> | void) {
  return interceptedClaims(t.database.claims, async (sql, send) => {
    await hook(sql, 'before');
    const result = await send(sql);
    await hook(sql, 'after');
    return result;
  });
}

/** Runs `body` while another transaction holds the rows of `keys` (FOR UPDATE), as a concurrent claim would; then lets them go. */
async function whileHeld<T>(keys: string[], body: () => Promise<T>): Promise<T> {
  const other = await t.database.claims.getConnection();
  try {
    await other.query('START TRANSACTION');
    await other.query('SELECT id FROM cronq_jobs FORCE INDEX (cronq_jobs_job_key) WHERE job_key IN (?) FOR UPDATE', [keys]);
    return await body();
  } finally {
    await other.query('ROLLBACK');
    other.release();
  }
}

/** The packets holding a locking range read of the claim index (a lock by exact key is not one). */
const rangeLocksIn = (packets: string[]) =>
  packets.filter((p) => /FORCE INDEX \(cronq_jobs_claim\)(?![\s\S]*\(available_at, id\) IN)[\s\S]*FOR UPDATE SKIP LOCKED/.test(p));

/**
 * A promise and the function that resolves it. Awaited, it rejects if not opened within
 * 10 s, naming `name`: a claim held at a gate that never opens then fails (rolling back
 * its transaction) instead of holding its row locks past the test, where every later
 * test's emptying of the table would wait for them.
 */
function gate(name = 'gate') {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  let timer: NodeJS.Timeout | undefined;
  const promise = Promise.race([
    opened,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${name} never opened`)), 10_000);
      timer.unref();
    }),
  ]);
  promise.catch(() => undefined); // a gate nobody awaited must not report an unhandled rejection
  return {
    promise,
    open: () => {
      clearTimeout(timer);
      open();
    },
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Makes every current lease already expired, by the database clock. */
const expireLeases = () => t.sql("UPDATE cronq_jobs SET lease_deadline = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE status = 'reserved'");

describe('enqueue', () => {
  it('gives one row and the same id to fifty concurrent enqueues of one key', async () => {
    const results = await Promise.all(
      Array.from({ length: 50 }, () => insertJobIfAbsent(t.database.db, row('same-key'))),
    );
    const ids = new Set(results.map((r) => r.id));
    expect(ids.size).toBe(1);
    expect(results.filter((r) => r.created)).toHaveLength(1);
    const [{ n }] = await t.sql("SELECT COUNT(*) AS n FROM cronq_jobs WHERE job_key = 'same-key'");
    expect(Number(n)).toBe(1);
    expect(results[0].id).toBeGreaterThan(0);
  });

  it('leaves no job behind when the caller rolls back its transaction', async () => {
    const boom = new Error('caller changed its mind');
    await expect(
      t.database.db.transaction(async (tx) => {
        const { created } = await insertJobIfAbsent(tx, row('rolled-back'));
        expect(created).toBe(true);
        throw boom;
      }),
    ).rejects.toBe(boom);
    expect(await t.sql("SELECT id FROM cronq_jobs WHERE job_key = 'rolled-back'")).toHaveLength(0);
  });

  it('commits a transactional enqueue together with the caller', async () => {
    await t.database.db.transaction(async (tx) => {
      await insertJobIfAbsent(tx, row('committed'));
      await tx.execute(sql`INSERT INTO effects (job_key) VALUES ('committed')`);
    });
    expect(await t.sql("SELECT id FROM cronq_jobs WHERE job_key = 'committed'")).toHaveLength(1);
  });

  it('counts only new rows in a batch, duplicates within the batch included', async () => {
    await insertJobIfAbsent(t.database.db, row('b-1'));
    const inserted = await insertJobsIfAbsent(t.database.db, [row('b-1'), row('b-2'), row('b-3'), row('b-2')]);
    expect(inserted).toBe(2);
  });

  it('keeps keys that differ only in case apart', async () => {
    const a = await insertJobIfAbsent(t.database.db, row('User:1'));
    const b = await insertJobIfAbsent(t.database.db, row('user:1'));
    expect(a.id).not.toBe(b.id);
  });
});

describe('claim', () => {
  it('never hands one job to two of several stores claiming 2,000 jobs at once', async () => {
    const jobs = Array.from({ length: 2000 }, (_, i) => row(`c-${i}`));
    await insertJobsIfAbsent(t.database.db, jobs);
    const stores = Array.from({ length: 4 }, () => connect(t.url, { poolSize: 2 }));
    try {
      const claimedIds: number[] = [];
      await Promise.all(
        stores.map(async (store, s) => {
          for (;;) {
            const got = await claimReady(store.claims, { queues: ['default'], limit: 50, leases: THIRTY_SECOND_LEASES, lockedBy: `s${s}` });
            if (got.length === 0) return;
            claimedIds.push(...got.map((j) => j.id));
          }
        }),
      );
      expect(claimedIds).toHaveLength(2000);
      expect(new Set(claimedIds).size).toBe(2000);
      const [{ n }] = await t.sql("SELECT COUNT(*) AS n FROM cronq_jobs WHERE status = 'reserved' AND attempts = 1");
      expect(Number(n)).toBe(2000);
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });

  it('claims oldest available first and skips jobs not yet due', async () => {
    await insertJobIfAbsent(t.database.db, row('later', { runAt: new Date(Date.now() + 3_600_000) }));
    await insertJobIfAbsent(t.database.db, row('first', { runAt: new Date(Date.now() - 60_000) }));
    await insertJobIfAbsent(t.database.db, row('second'));
    const got = await claim(10);
    expect(got.map((j) => j.key)).toEqual(['first', 'second']);
    expect(got.every((j) => /^[0-9a-f]{32}$/.test(j.lease.token))).toBe(true);
    expect(new Set(got.map((j) => j.lease.token)).size).toBe(2);
  });

  it('hands back each job as the claim left its row: the token and attempt written, every column read under the lock', async () => {
    // Ids past 9 and past 255, so a token's id part has hex letters and more than one byte.
    await t.sql('ALTER TABLE cronq_jobs AUTO_INCREMENT = 250');
    await insertJobsIfAbsent(
      t.database.db,
      Array.from({ length: 12 }, (_, i) => row(`as-written-${i}`, { payloadJson: JSON.stringify({ i, text: 'ü' }), periodKey: `2026-${i + 1}`, scheduledAt: new Date(Date.UTC(2026, i, 1)) })),
    );
    await t.sql("UPDATE cronq_jobs SET attempts = 2, lease_expiries = 1 WHERE job_key = 'as-written-3'");
    const got = await claim(12);
    expect(got).toHaveLength(12);
    const stored = await t.sql(
      'SELECT id, queue, kind, job_key, CAST(payload AS CHAR) AS payload, attempts, max_attempts, period_key, scheduled_at, lease_token, lease_expiries, status FROM cronq_jobs ORDER BY id',
    );
    expect(got.map((j) => j.id)).toEqual(stored.map((r) => Number(r.id)));
    got.forEach((job, i) => {
      const r = stored[i];
      expect(r.status).toBe('reserved');
      expect(job.lease).toEqual({ id: Number(r.id), token: r.lease_token });
      expect([job.queue, job.kind, job.key, JSON.parse(job.payloadText), job.attempt, job.maxAttempts, job.periodKey, job.leaseExpiries]).toEqual([
        r.queue,
        r.kind,
        r.job_key,
        JSON.parse(r.payload),
        r.attempts,
        r.max_attempts,
        r.period_key,
        r.lease_expiries,
      ]);
      expect(job.scheduledAt?.toISOString()).toBe(new Date(Date.UTC(2026, i, 1)).toISOString());
    });
    expect(got[3].attempt).toBe(3);
    expect(got[3].leaseExpiries).toBe(1);
  });

  it('hands each claimed job its lease and the lease length of its kind', async () => {
    await insertJobIfAbsent(t.database.db, row('lease-slow', { kind: 'slow' }));
    await insertJobIfAbsent(t.database.db, row('lease-plain'));
    const leases = { byKind: new Map([['slow', 120_000]]), defaultMs: 30_000 };
    const got = await claimReady(t.database.claims, { queues: ['default'], limit: 10, leases, lockedBy: 'c' });
    expect(got.map((j) => [j.key, j.leaseMs, j.lease.id === j.id])).toEqual([
      ['lease-slow', 120_000, true],
      ['lease-plain', 30_000, true],
    ]);
    const [r] = await t.sql("SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(6), lease_until) AS s FROM cronq_jobs WHERE job_key = 'lease-slow'");
    expect(Number(r.s)).toBeGreaterThan(100);
  });

  it('claims only from the queues asked for', async () => {
    await insertJobIfAbsent(t.database.db, row('q-a', { queue: 'a' }));
    await insertJobIfAbsent(t.database.db, row('q-b', { queue: 'b' }));
    await insertJobIfAbsent(t.database.db, row('q-c', { queue: 'c' }));
    const got = await claim(10, 'x', ['a', 'c']);
    expect(got.map((j) => j.key).sort()).toEqual(['q-a', 'q-c']);
  });

  it('moves the claim cursor to the last row claimed, to the microsecond, and the next claim continues after it', async () => {
    await insertJobsIfAbsent(t.database.db, Array.from({ length: 5 }, (_, i) => row(`cursor-${i}`, { runAt: new Date(Date.now() - 60_000 + i) })));
    await t.sql("UPDATE cronq_jobs SET available_at = available_at + INTERVAL id MICROSECOND WHERE job_key LIKE 'cursor-%'");
    const cursors = new Map();
    const first = await claimReady(t.database.claims, { queues: ['default'], limit: 2, leases: THIRTY_SECOND_LEASES, lockedBy: 'c', cursors });
    const [last] = await t.sql("SELECT DATE_FORMAT(available_at, '%Y-%m-%d %H:%i:%s.%f') AS at FROM cronq_jobs WHERE id = ?", [first[1].id]);
    // Three rows follow it, as counted after the claim's COMMIT.
    expect(cursors.get('default')).toEqual({ availableAt: last.at, id: first[1].id, drained: false, ahead: 3 });
    const second = await claimReady(t.database.claims, { queues: ['default'], limit: 10, leases: THIRTY_SECOND_LEASES, lockedBy: 'c', cursors });
    expect([...first, ...second].map((j) => j.key)).toEqual(['cursor-0', 'cursor-1', 'cursor-2', 'cursor-3', 'cursor-4']);
  });

  it('keeps a cursor, marked drained, after a claim that found no more rows, and continues from its next instant in one round trip', async () => {
    const base = Math.floor(Date.now() / 1000) * 1000;
    const at = (secondsAgo: number) => ({ runAt: new Date(base - secondsAgo * 1000) });
    await insertJobIfAbsent(t.database.db, row('drained-0', at(60)));
    const counting = countingClaims();
    const request = { queues: ['default'], limit: 10, leases: THIRTY_SECOND_LEASES, lockedBy: 'c', cursors: new Map() };
    expect((await claimReady(counting.pool, request)).map((j) => j.key)).toEqual(['drained-0']);
    const cursor = request.cursors.get('default');
    expect(cursor).toMatchObject({ drained: true });
    expect(await claimReady(counting.pool, request)).toEqual([]); // nothing after it: the cursor stays
    expect(request.cursors.get('default')).toEqual(cursor);
    // A row at the cursor's own instant that committed late is behind it, like any late
    // commit; a row at a later instant is claimed, its range read in the first round trip.
    await insertJobIfAbsent(t.database.db, row('drained-late', at(60)));
    await insertJobIfAbsent(t.database.db, row('drained-1', at(30)));
    counting.reset();
    expect((await claimReady(counting.pool, request)).map((j) => j.key)).toEqual(['drained-1']);
    // A plain read finds it, a locking read by key locks it, then UPDATE + COMMIT.
    expect(counting.roundTrips()).toBe(3);
    expect((await claim(10)).map((j) => j.key)).toEqual(['drained-late']); // a claim from the front finds it
  });

  it('claims a queue with rows enough ahead by one locking range read, and one that may run out by a plain read first, locking what it found by key', async () => {
    await insertJobsIfAbsent(t.database.db, Array.from({ length: 20 }, (_, i) => row(`ahead-${String(i).padStart(2, '0')}`)));
    const counting = countingClaims();
    const request = { queues: ['default'], limit: 2, leases: THIRTY_SECOND_LEASES, lockedBy: 'c', cursors: new Map() };
    const keys: string[] = [];
    const claimOnce = async (limit: number) => {
      counting.reset();
      keys.push(...(await claimReady(counting.pool, { ...request, limit })).map((j) => j.key));
      const [first, second] = counting.packets();
      return { trips: counting.roundTrips(), lockedInRange: /cronq_jobs_claim[\s\S]*FOR UPDATE SKIP LOCKED/.test(first), lockedByKey: /\(available_at, id\) IN \([\s\S]*FOR UPDATE SKIP LOCKED/.test(second ?? '') };
    };
    // No cursor: how many rows follow is not known.
    expect(await claimOnce(2)).toEqual({ trips: 3, lockedInRange: false, lockedByKey: true });
    expect(request.cursors.get('default').ahead).toBe(8); // counted up to four times the claim's size
    expect(await claimOnce(4)).toEqual({ trips: 2, lockedInRange: true, lockedByKey: false }); // 8 ahead: twice 4
    expect(request.cursors.get('default').ahead).toBe(14);
    expect(await claimOnce(10)).toEqual({ trips: 3, lockedInRange: false, lockedByKey: true }); // 14 ahead: under twice 10
    expect(request.cursors.get('default').ahead).toBe(4);
    expect(await claimOnce(10)).toEqual({ trips: 3, lockedInRange: false, lockedByKey: true });
    expect(request.cursors.get('default')).toMatchObject({ drained: true, ahead: 0 });
    expect(keys).toEqual(Array.from({ length: 20 }, (_, i) => `ahead-${String(i).padStart(2, '0')}`));
  });

  it('claims past the rows another claim holds, as a range read would, when it found them by a plain read', async () => {
    await insertJobsIfAbsent(t.database.db, Array.from({ length: 10 }, (_, i) => row(`held-${i}`)));
    const counting = countingClaims();
    await whileHeld(['held-0', 'held-1', 'held-2'], async () => {
      const got = await claimReady(counting.pool, { queues: ['default'], limit: 5, leases: THIRTY_SECOND_LEASES, lockedBy: 'c', cursors: new Map() });
      expect(got.map((j) => j.key)).toEqual(['held-3', 'held-4', 'held-5', 'held-6', 'held-7']);
    });
    // The rows after those held are found by a plain read again, locked by key: no locking
    // range read, which would walk on past the queue's last row.
    expect(rangeLocksIn(counting.packets())).toEqual([]);
    expect(counting.roundTrips()).toBe(5); // plain read, lock by key, twice; then UPDATE + COMMIT
    expect((await claim(10)).map((j) => j.key)).toEqual(['held-0', 'held-1', 'held-2', 'held-8', 'held-9']);
  });

  it('locks by range after two plain reads whose rows another claim held, so a queue held by others is still claimed past them', async () => {
    await insertJobsIfAbsent(t.database.db, Array.from({ length: 10 }, (_, i) => row(`busy-${i}`)));
    const counting = countingClaims();
    await whileHeld(['busy-0', 'busy-1', 'busy-3', 'busy-4'], async () => {
      const got = await claimReady(counting.pool, { queues: ['default'], limit: 2, leases: THIRTY_SECOND_LEASES, lockedBy: 'c', cursors: new Map() });
      // busy-0 and busy-1 found held; then busy-2 locked and busy-3 found held; the range read skips busy-4 and takes busy-5.
      expect(got.map((j) => j.key)).toEqual(['busy-2', 'busy-5']);
    });
    expect(rangeLocksIn(counting.packets())).toHaveLength(1);
  });

  it('reserves the rows it found by a plain read without waiting for a range read of another claim that passed them', async () => {
    await insertJobsIfAbsent(t.database.db, Array.from({ length: 10 }, (_, i) => row(`pass-${i}`)));
    const events: string[] = [];
    const xLocked = gate('xLocked');
    const yRead = gate('yRead');
    // X finds its rows by a plain read (no cursor) and locks them by key; before it reserves
    // them, Y reads the queue by range (a cursor with rows enough ahead) over them, then
    // holds its transaction open a while.
    const x = hookedClaims(async (statement, phase) => {
      if (phase === 'before' && /UPDATE cronq_jobs/.test(statement)) {
        xLocked.open();
        await yRead.promise;
      }
    });
    const y = hookedClaims(async (statement, phase) => {
      if (phase === 'after' && /FOR UPDATE SKIP LOCKED/.test(statement)) yRead.open();
      if (phase === 'before' && /UPDATE cronq_jobs/.test(statement)) {
        await sleep(300);
        events.push('y reserves');
      }
    });
    const xClaim = claimReady(x, { queues: ['default'], limit: 3, leases: THIRTY_SECOND_LEASES, lockedBy: 'x', cursors: new Map() }).then((jobs) => {
      events.push('x reserved');
      return jobs;
    });
    await xLocked.promise;
    const far = new Map([['default', { availableAt: '1970-01-01 00:00:00.000000', id: 0, drained: true, ahead: 100 }]]);
    const yClaim = claimReady(y, { queues: ['default'], limit: 10, leases: THIRTY_SECOND_LEASES, lockedBy: 'y', cursors: far });
    const [xs, ys] = await Promise.all([xClaim, yClaim]);
    expect(xs.map((j) => j.key)).toEqual(['pass-0', 'pass-1', 'pass-2']);
    expect(ys.map((j) => j.key)).toEqual(['pass-3', 'pass-4', 'pass-5', 'pass-6', 'pass-7', 'pass-8', 'pass-9']);
    expect(events).toEqual(['x reserved', 'y reserves']);
  });

  it('does not deadlock two claims that each lock one queue by key and read the other by range', async () => {
    await insertJobsIfAbsent(t.database.db, [
      ...Array.from({ length: 6 }, (_, i) => row(`cross-a-${i}`, { queue: 'a' })),
      ...Array.from({ length: 6 }, (_, i) => row(`cross-b-${i}`, { queue: 'b' })),
    ]);
    const xLockedA = gate('xLockedA');
    const yLockedB = gate('yLockedB');
    const xReadB = gate('xReadB');
    const far = { availableAt: '1970-01-01 00:00:00.000000', id: 0, drained: true, ahead: 100 };
    const rangeOf = (queue: string) => (statement: string) => new RegExp(`queue = '${queue}' AND available_at > '1970`).test(statement);
    const lockByKeyOf = (queue: string) => (statement: string) => /FOR UPDATE SKIP LOCKED/.test(statement) && new RegExp(`queue = '${queue}'`).test(statement);
    // X locks a's rows by key, then reads b by range once Y has locked b's rows by key;
    // Y reads a by range once X has locked a's rows, and reserves once X has read b.
    const x = hookedClaims(async (statement, phase) => {
      if (phase === 'after' && lockByKeyOf('a')(statement)) xLockedA.open();
      if (phase === 'before' && rangeOf('b')(statement)) await yLockedB.promise;
      if (phase === 'after' && rangeOf('b')(statement)) xReadB.open();
    });
    const y = hookedClaims(async (statement, phase) => {
      // Y's first locking read: b's rows, by key (b has no cursor).
      if (phase === 'after' && lockByKeyOf('b')(statement)) yLockedB.open();
      if (phase === 'before' && rangeOf('a')(statement)) await xLockedA.promise;
      if (phase === 'before' && /UPDATE cronq_jobs/.test(statement)) await xReadB.promise;
    });
    const [xs, ys] = await Promise.all([
      claimReady(x, { queues: ['a', 'b'], limit: 9, leases: THIRTY_SECOND_LEASES, lockedBy: 'x', cursors: new Map([['b', far]]) }),
      claimReady(y, { queues: ['b', 'a'], limit: 9, leases: THIRTY_SECOND_LEASES, lockedBy: 'y', cursors: new Map([['a', far]]) }),
    ]);
    expect(xs.map((j) => j.key)).toEqual(Array.from({ length: 6 }, (_, i) => `cross-a-${i}`));
    expect(ys.map((j) => j.key)).toEqual(Array.from({ length: 6 }, (_, i) => `cross-b-${i}`));
  });

  it('forgets the rows counted ahead of a cursor when a claim from it finds none, so the next claim reads plainly', async () => {
    await insertJobsIfAbsent(t.database.db, Array.from({ length: 20 }, (_, i) => row(`gone-${String(i).padStart(2, '0')}`)));
    const counting = countingClaims();
    const request = { queues: ['default'], limit: 2, leases: THIRTY_SECOND_LEASES, lockedBy: 'c', cursors: new Map() };
    await claimReady(counting.pool, request);
    expect(request.cursors.get('default').ahead).toBe(8);
    // Another daemon (its own cursors) takes every row that was counted.
    expect(await claim(100)).toHaveLength(18);
    expect(await claimReady(counting.pool, request)).toEqual([]);
    expect(request.cursors.get('default')).toMatchObject({ drained: true, ahead: 0 });
    // The next claim from the emptied queue is a plain read, not a locking read that runs out.
    counting.reset();
    expect(await claimReady(counting.pool, request)).toEqual([]);
    expect(counting.packets().some((p) => /FOR UPDATE SKIP LOCKED/.test(p))).toBe(false);
  });

  it('hands back the jobs it reserved when the count of rows ahead, sent after its COMMIT, fails', async () => {
    await t.sql("REPLACE INTO cronq_kind_limits (kind, max_running) VALUES ('capped', 5)");
    await insertJobsIfAbsent(t.database.db, Array.from({ length: 5 }, (_, i) => row(`count-fails-${i}`)));
    await insertJobsIfAbsent(t.database.db, [row('count-fails-capped', { queue: 'capped', kind: 'capped' })]);
    // The server refuses the count (as it would a statement timeout): the COMMIT before it
    // in the packet has run.
    const pool = interceptedClaims(t.database.claims, (sql, send) => send(sql.replace('SELECT COUNT(*) AS ahead FROM (', 'SELECT COUNT(*) AS ahead FROM no_such_table, (')));
    const cursors = new Map();
    // The limited queue first: its row is kept and read with the UPDATE, in the failed packet.
    const limits = new Map([['capped', { kind: 'capped', maxRunning: 5 }]]);
    const got = await claimReady(pool, { queues: ['capped', 'default'], limit: 3, leases: THIRTY_SECOND_LEASES, lockedBy: 'c', cursors, limits });
    expect(got.map((j) => [j.key, j.attempt, j.kind])).toEqual([
      ['count-fails-0', 1, 'test'],
      ['count-fails-1', 1, 'test'],
      ['count-fails-capped', 1, 'capped'],
    ]);
    expect(cursors.get('default')).toMatchObject({ id: got[1].id, drained: false });
    expect(await completeManyIfLeased(t.database.db, got.map(lease))).toEqual(new Set(got.map((j) => j.id)));
    expect((await claim(10)).map((j) => j.key)).toEqual(['count-fails-2', 'count-fails-3', 'count-fails-4']);
  });

  it('reserves nothing and reports the rows when the reserving UPDATE fails, the count after the COMMIT not reached', async () => {
    await insertJobsIfAbsent(t.database.db, Array.from({ length: 5 }, (_, i) => row(`update-fails-${i}`)));
    const pool = interceptedClaims(t.database.claims, (sql, send) => send(sql.replace('UPDATE cronq_jobs', 'UPDATE no_such_table')));
    const failed = await claimReady(pool, { queues: ['default'], limit: 2, leases: THIRTY_SECOND_LEASES, lockedBy: 'c', cursors: new Map() }).catch((e) => e);
    expect(failed).toBeInstanceOf(ClaimUpdateError);
    expect((failed as ClaimUpdateError).ids).toHaveLength(2);
    expect((await claim(10)).map((j) => j.attempt)).toEqual([1, 1, 1, 1, 1]);
  });

  it("continues a limited queue from a drained cursor reading only its later instants, in the limited claim's three round trips", async () => {
    await t.sql("REPLACE INTO cronq_kind_limits (kind, max_running) VALUES ('test', 5)");
    const base = Math.floor(Date.now() / 1000) * 1000;
    await insertJobIfAbsent(t.database.db, row('limited-0', { runAt: new Date(base - 60_000) }));
    const counting = countingClaims();
    const limits = new Map([['default', { kind: 'test', maxRunning: 5 }]]);
    const request = { queues: ['default'], limit: 10, leases: THIRTY_SECOND_LEASES, lockedBy: 'c', cursors: new Map(), limits };
    expect((await claimReady(counting.pool, request)).map((j) => j.key)).toEqual(['limited-0']);
    expect(request.cursors.get('default')).toMatchObject({ drained: true });
    await insertJobIfAbsent(t.database.db, row('limited-1', { runAt: new Date(base - 30_000) }));
    counting.reset();
    expect((await claimReady(counting.pool, request)).map((j) => j.key)).toEqual(['limited-1']);
    expect(counting.roundTrips()).toBe(3); // limit row, count and plain read; lock by key; then UPDATE + COMMIT
    expect(counting.packets()[0]).not.toMatch(/available_at = '/); // not the cursor's instant first
  });

  it("finds a limited queue's rows by a plain read under its limit row and locks only those it keeps, by key, so a queue with fewer rows than asked is not walked past", async () => {
    await t.sql("REPLACE INTO cronq_kind_limits (kind, max_running) VALUES ('test', 8)");
    await insertJobsIfAbsent(t.database.db, Array.from({ length: 3 }, (_, i) => row(`few-${i}`)));
    const counting = countingClaims();
    const limits = new Map([['default', { kind: 'test', maxRunning: 8 }]]);
    const got = await claimReady(counting.pool, { queues: ['default'], limit: 8, leases: THIRTY_SECOND_LEASES, lockedBy: 'c', cursors: new Map(), limits });
    expect(got.map((j) => [j.key, j.attempt])).toEqual([['few-0', 1], ['few-1', 1], ['few-2', 1]]);
    expect(counting.roundTrips()).toBe(3); // limit row, count and plain read; lock by key; then UPDATE + COMMIT
    const [first] = counting.packets();
    expect(first).toMatch(/cronq_kind_limits[\s\S]*FOR UPDATE/);
    expect(rangeLocksIn(counting.packets())).toEqual([]);
    expect(await t.sql("SELECT job_key, attempts, LEFT(lease_fence, 16) = ? AS fenced FROM cronq_jobs WHERE status = 'reserved' ORDER BY id", [got[0].lease.token.slice(0, 16)])).toEqual([
      { job_key: 'few-0', attempts: 1, fenced: 1 },
      { job_key: 'few-1', attempts: 1, fenced: 1 },
      { job_key: 'few-2', attempts: 1, fenced: 1 },
    ]);
  });

  it("leaves out a limited queue's row that was cancelled after the claim found it, reserving the others", async () => {
    await t.sql("REPLACE INTO cronq_kind_limits (kind, max_running) VALUES ('test', 8)");
    await insertJobsIfAbsent(t.database.db, Array.from({ length: 3 }, (_, i) => row(`gone-${i}`)));
    let cancelled: unknown;
    const pool = hookedClaims(async (statement, phase) => {
      // Between the claim's first packet (the plain read) and its UPDATE: a person cancels gone-1.
      if (phase === 'after' && /cronq_kind_limits/.test(statement)) cancelled = await cancelJob(t.database.db, { key: 'gone-1' }, { by: 'test', reason: 'not needed' });
    });
    const limits = new Map([['default', { kind: 'test', maxRunning: 8 }]]);
    const got = await claimReady(pool, { queues: ['default'], limit: 8, leases: THIRTY_SECOND_LEASES, lockedBy: 'c', cursors: new Map(), limits });
    expect(cancelled).toMatchObject({ status: 'cancelled' });
    expect(got.map((j) => j.key)).toEqual(['gone-0', 'gone-2']);
    expect(await t.sql('SELECT job_key, status, attempts FROM cronq_jobs ORDER BY id')).toEqual([
      { job_key: 'gone-0', status: 'reserved', attempts: 1 },
      { job_key: 'gone-1', status: 'cancelled', attempts: 0 },
      { job_key: 'gone-2', status: 'reserved', attempts: 1 },
    ]);
  });

  it("claims past a limited queue's row that a caller's transaction holds by enqueueing its key again, without waiting for it", async () => {
    await t.sql("REPLACE INTO cronq_kind_limits (kind, max_running) VALUES ('test', 8)");
    await insertJobsIfAbsent(t.database.db, Array.from({ length: 4 }, (_, i) => row(`again-${i}`)));
    const enqueued = gate('enqueued');
    const done = gate('done');
    // A caller's transaction enqueues again-1 (already there: the insert finds it and keeps its row locked) and stays open.
    const caller = t.database.db.transaction(async (tx) => {
      expect(await insertJobIfAbsent(tx, row('again-1'))).toMatchObject({ created: false });
      enqueued.open();
      await done.promise;
    });
    await enqueued.promise;
    try {
      const limits = new Map([['default', { kind: 'test', maxRunning: 8 }]]);
      const got = await claimReady(t.database.claims, { queues: ['default'], limit: 8, leases: THIRTY_SECOND_LEASES, lockedBy: 'c', cursors: new Map(), limits });
      expect(got.map((j) => j.key)).toEqual(['again-0', 'again-2', 'again-3']);
    } finally {
      done.open();
      await caller;
    }
    expect((await claim(8)).map((j) => j.key)).toEqual(['again-1']);
  });

  it("never deadlocks with a caller's transaction enqueueing existing keys of a limited queue and of an unlimited one the same claim reads", async () => {
    await t.sql("REPLACE INTO cronq_kind_limits (kind, max_running) VALUES ('capped', 8)");
    await insertJobsIfAbsent(t.database.db, [row('mixed-capped', { queue: 'capped', kind: 'capped' }), row('mixed-plain')]);
    let caller: Promise<number> | undefined;
    const pool = hookedClaims(async (statement, phase) => {
      if (phase !== 'after' || !/cronq_kind_limits/.test(statement)) return;
      // The claim holds mixed-plain and has found mixed-capped. Now a caller's transaction
      // enqueues both keys again: its insert locks mixed-capped, then waits for mixed-plain.
      const waiting = gate('waiting');
      caller = t.database.db.transaction(async (tx) => {
        const [{ thread }] = rows<{ thread: number }>(await tx.execute(sql`SELECT CONNECTION_ID() AS thread`));
        const insert = insertJobsIfAbsent(tx, [row('mixed-capped', { queue: 'capped', kind: 'capped' }), row('mixed-plain')]);
        // Bounded, as the gates are: a caller that never waits would otherwise poll on with its row locks held past the test.
        const deadline = Date.now() + 10_000;
        while ((await t.sql("SELECT 1 FROM information_schema.innodb_trx WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'", [thread])).length === 0) {
          if (Date.now() > deadline) throw new Error("the caller's insert never waited for the claim's row lock");
          // InnoDB refreshes what information_schema.innodb_trx shows only once it has gone
          // unread for 100 ms: polled faster, a first read made before the insert began to
          // wait showed it RUNNING for good (this test failed so on loaded machines).
          await sleep(150);
        }
        waiting.open();
        return insert;
      });
      await waiting.promise;
    });
    const limits = new Map([['capped', { kind: 'capped', maxRunning: 8 }]]);
    const got = await claimReady(pool, { queues: ['default', 'capped'], limit: 8, leases: THIRTY_SECOND_LEASES, lockedBy: 'c', cursors: new Map(), limits });
    expect(got.map((j) => j.key)).toEqual(['mixed-plain']);
    expect(await caller).toBe(0); // both keys were there: nothing inserted, and no deadlock
    expect(await t.sql('SELECT job_key, status FROM cronq_jobs ORDER BY id')).toEqual([
      { job_key: 'mixed-capped', status: 'ready' },
      { job_key: 'mixed-plain', status: 'reserved' },
    ]);
  });

  it('does not mark a limited queue drained when rows were left out for lack of room, so same-instant rows are claimed as room frees', async () => {
    await t.sql("REPLACE INTO cronq_kind_limits (kind, max_running) VALUES ('test', 5)");
    // One instant for every row, as enqueueMany and a tick's fan-out write them.
    const runAt = new Date(Math.floor(Date.now() / 1000) * 1000 - 60_000);
    await insertJobsIfAbsent(t.database.db, Array.from({ length: 20 }, (_, i) => row(`room-${String(i).padStart(2, '0')}`, { runAt })));
    const limits = new Map([['default', { kind: 'test', maxRunning: 5 }]]);
    const request = { queues: ['default'], limit: 10, leases: THIRTY_SECOND_LEASES, lockedBy: 'c', cursors: new Map(), limits, atLimit: new Set<string>() };
    const claimed: string[] = [];
    for (let round = 0; round < 4; round++) {
      const got = await claimReady(t.database.claims, request);
      expect(got, `round ${round}`).toHaveLength(5);
      expect(request.cursors.get('default')).toMatchObject({ drained: false });
      claimed.push(...got.map((j) => j.key));
      await t.sql("UPDATE cronq_jobs SET status = 'done' WHERE status = 'reserved'"); // the runs finish: room again
    }
    expect(claimed).toEqual(Array.from({ length: 20 }, (_, i) => `room-${String(i).padStart(2, '0')}`));
    expect(await claimReady(t.database.claims, request)).toEqual([]);
    expect(request.cursors.get('default')).toMatchObject({ drained: true });
  });

  it('does not mark a limited queue drained when it was at its limit and claimed nothing', async () => {
    await t.sql("REPLACE INTO cronq_kind_limits (kind, max_running) VALUES ('test', 1)");
    const runAt = new Date(Math.floor(Date.now() / 1000) * 1000 - 60_000);
    await insertJobsIfAbsent(t.database.db, Array.from({ length: 3 }, (_, i) => row(`full-${i}`, { runAt })));
    const limits = new Map([['default', { kind: 'test', maxRunning: 1 }]]);
    const request = { queues: ['default'], limit: 10, leases: THIRTY_SECOND_LEASES, lockedBy: 'c', cursors: new Map(), limits, atLimit: new Set<string>() };
    expect((await claimReady(t.database.claims, request)).map((j) => j.key)).toEqual(['full-0']);
    expect(await claimReady(t.database.claims, request)).toEqual([]); // at its limit
    expect(request.cursors.get('default')).toMatchObject({ drained: false });
    await t.sql("UPDATE cronq_jobs SET status = 'done' WHERE status = 'reserved'");
    expect((await claimReady(t.database.claims, request)).map((j) => j.key)).toEqual(['full-1']);
  });

  it('claims by id only the rows named that are still ready, due, in the queues asked for and not limited, reading no range and moving no cursor', async () => {
    const ids: Record<string, number> = {};
    for (const [key, options] of [
      ['by-id-plain', {}],
      ['by-id-other-queue', { queue: 'other' }],
      ['by-id-later', { runAt: new Date(Date.now() + 3_600_000) }],
      ['by-id-limited', { queue: 'capped' }],
      ['by-id-excluded', {}],
      ['by-id-taken', {}],
      ['by-id-not-named', {}],
    ] as const) {
      ids[key] = (await insertJobIfAbsent(t.database.db, row(key, options))).id;
    }
    await t.sql("UPDATE cronq_jobs SET status = 'reserved' WHERE job_key = 'by-id-taken'");
    const cursors = new Map([['default', { availableAt: '2000-01-01 00:00:00.000000', id: 1, drained: true }]]);
    const named = Object.entries(ids).filter(([key]) => key !== 'by-id-not-named').map(([, id]) => id);
    const got = await claimReady(t.database.claims, {
      queues: ['default', 'capped'],
      limit: 10,
      leases: THIRTY_SECOND_LEASES,
      lockedBy: 'c',
      ids: named,
      cursors,
      excludeIds: new Set([ids['by-id-excluded']]),
      limits: new Map([['capped', { kind: 'capped', maxRunning: 5 }]]),
    });
    expect(got.map((j) => j.key)).toEqual(['by-id-plain']);
    expect(got[0].lease.token).toMatch(/^[0-9a-f]{32}$/);
    expect(cursors.get('default')).toEqual({ availableAt: '2000-01-01 00:00:00.000000', id: 1, drained: true });
    const left = await t.sql("SELECT job_key FROM cronq_jobs WHERE status = 'ready' ORDER BY id");
    expect(left.map((r: { job_key: string }) => r.job_key)).toEqual(['by-id-other-queue', 'by-id-later', 'by-id-limited', 'by-id-excluded', 'by-id-not-named']);
  });

  it('gives each job in one claim the lease of its own kind', async () => {
    await insertJobIfAbsent(t.database.db, row('lease-short', { kind: 'short' }));
    await insertJobIfAbsent(t.database.db, row('lease-long', { kind: 'long' }));
    await insertJobIfAbsent(t.database.db, row('lease-other', { kind: 'other' }));
    const leases = { byKind: new Map([['short', 5_000], ['long', 600_000]]), defaultMs: 60_000 };
    expect(await claimReady(t.database.claims, { queues: ['default'], limit: 10, leases, lockedBy: 'l' })).toHaveLength(3);
    const got = await t.sql(
      "SELECT job_key, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), lease_until) AS us FROM cronq_jobs WHERE job_key LIKE 'lease-%' ORDER BY job_key",
    );
    // Each lease_until is its kind's lease from the claim, which was a moment ago.
    const left = Object.fromEntries(got.map((r) => [r.job_key, Number(r.us) / 1000]));
    for (const [key, ms] of [['lease-long', 600_000], ['lease-other', 60_000], ['lease-short', 5_000]] as const) {
      expect(left[key], key).toBeLessThanOrEqual(ms);
      expect(left[key], key).toBeGreaterThan(ms - 2_000);
    }
  });

  it('sets the lease deadline from the database clock', async () => {
    await insertJobIfAbsent(t.database.db, row('clock'));
    await claim(1);
    const [r] = await t.sql(
      "SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), lease_until) AS us, locked_by FROM cronq_jobs WHERE job_key = 'clock'",
    );
    expect(Number(r.us)).toBeGreaterThan(29_000_000);
    expect(Number(r.us)).toBeLessThanOrEqual(30_000_000);
    expect(r.locked_by).toBe('test:1');
  });

});

describe('claim connections', () => {
  it('opens every claim connection at once, session settings applied, so the first claims open none', async () => {
    const connections = async () =>
      Number((await t.sql('SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = DATABASE()'))[0].n);
    await t.sql('INSERT INTO cronq_jobs (queue, kind, job_key, payload) VALUES (?, ?, ?, ?), (?, ?, ?, ?)', [
      'default', 'k', 'warm:1', '{}', 'default', 'k', 'warm:2', '{}',
    ]);
    const database = connect(t.url);
    try {
      const before = await connections();
      await openClaimConnections(database.claims, CLAIM_CONNECTIONS);
      expect(await connections()).toBe(before + CLAIM_CONNECTIONS);
      const [[session]] = (await database.claims.query('SELECT @@session.time_zone AS tz, @@session.sql_mode AS mode')) as any;
      expect(session.tz).toBe('+00:00');
      expect(session.mode).toContain('STRICT_TRANS_TABLES');
      const claims = await Promise.all([1, 2].map(() => claimJobs(database, 1)));
      expect(claims.flat()).toHaveLength(2);
      expect(await connections()).toBe(before + CLAIM_CONNECTIONS);
    } finally {
      await database.close();
    }
  });
});

describe('fencing', () => {
  it('a stale worker cannot complete, fail, renew or release after its lease was recovered, and its effect is not applied', async () => {
    await insertJobIfAbsent(t.database.db, row('fenced'));
    const [stale] = await claim(1, 'stale:1');
    await expireLeases();
    expect(await recoverExpiredLeases(t.database.db, 100)).toEqual({ returned: 1, dead: 0 });
    const [fresh] = await claim(1, 'fresh:2');
    expect(fresh.id).toBe(stale.id);
    expect(fresh.attempt).toBe(2);

    let effectRan = false;
    expect(
      await completeIfLeased(t.database, lease(stale), async (tx) => {
        effectRan = true;
        await tx.execute(sql`INSERT INTO effects (job_key) VALUES ('fenced')`);
      }),
    ).toBe(false);
    expect(effectRan).toBe(false);
    expect([...(await completeManyIfLeased(t.database.db, [lease(stale)]))]).toEqual([]);
    expect(await failIfLeased(t.database.db, lease(stale), { error: 'x', permanent: true, retryInMs: 0 })).toEqual({ status: 'lease_lost' });
    expect(await renewIfLeased(t.database.db, lease(stale), 60_000)).toBe(false);
    expect(await renewIfUnrecovered(t.database.db, lease(stale), 60_000)).toBe(false);
    expect(await releaseIfLeased(t.database.db, lease(stale), 'x')).toBe(false);

    const [r] = await t.sql("SELECT status, locked_by, lease_token FROM cronq_jobs WHERE job_key = 'fenced'");
    expect(r).toMatchObject({ status: 'reserved', locked_by: 'fresh:2', lease_token: fresh.lease.token });
    expect(await t.sql('SELECT * FROM effects')).toHaveLength(0);
    expect(await t.sql('SELECT * FROM cronq_dead_letters')).toHaveLength(0);

    expect(
      await completeIfLeased(t.database, lease(fresh), async (tx) => {
        await tx.execute(sql`INSERT INTO effects (job_key) VALUES ('fenced')`);
      }),
    ).toBe(true);
    expect(await t.sql('SELECT * FROM effects')).toHaveLength(1);
  });

  it('refuses to complete with a lease that expired even before anyone recovered it', async () => {
    await insertJobIfAbsent(t.database.db, row('expired'));
    const [job] = await claim(1);
    await expireLeases();
    expect(await completeIfLeased(t.database, lease(job))).toBe(false);
    expect(await renewIfLeased(t.database.db, lease(job), 30_000)).toBe(false);
  });

  it('takes back a lease that expired while nobody recovered it, after which the worker completes, and recovery finds nothing', async () => {
    await insertJobIfAbsent(t.database.db, row('late'));
    const [job] = await claim(1);
    await expireLeases();
    expect(await renewIfUnrecovered(t.database.db, lease(job), 30_000)).toBe(true);
    expect(await recoverExpiredLeases(t.database.db, 100)).toEqual({ returned: 0, dead: 0 });
    expect(await completeIfLeased(t.database, lease(job))).toBe(true);
    // Done, it is not taken back again.
    expect(await renewIfUnrecovered(t.database.db, lease(job), 30_000)).toBe(false);
  });

  it('completes a batch per row: the rows whose lease is held, not the one that was lost', async () => {
    await insertJobsIfAbsent(t.database.db, [row('m-1'), row('m-2'), row('m-3')]);
    const got = await claim(3);
    const forged = { id: got[1].id, token: '0'.repeat(32) };
    const done = await completeManyIfLeased(t.database.db, [lease(got[0]), forged, lease(got[2])]);
    expect([...done].sort()).toEqual([got[0].id, got[2].id].sort());
    const statuses = await t.sql('SELECT job_key, status FROM cronq_jobs ORDER BY job_key');
    expect(statuses.map((s: any) => s.status)).toEqual(['done', 'reserved', 'done']);
  });

  it('rolls back "done" when the effect throws', async () => {
    await insertJobIfAbsent(t.database.db, row('effect-throws'));
    const [job] = await claim(1);
    await expect(
      completeIfLeased(t.database, lease(job), async (tx) => {
        await tx.execute(sql`INSERT INTO effects (job_key) VALUES ('effect-throws')`);
        throw new Error('effect failed');
      }),
    ).rejects.toThrow('effect failed');
    expect(await t.sql('SELECT * FROM effects')).toHaveLength(0);
    const [r] = await t.sql("SELECT status FROM cronq_jobs WHERE job_key = 'effect-throws'");
    expect(r.status).toBe('reserved');
  });

  it('renewal pushes the lease deadline forward while held', async () => {
    await insertJobIfAbsent(t.database.db, row('renew'));
    const [job] = await claim(1);
    expect(await renewIfLeased(t.database.db, lease(job), 120_000)).toBe(true);
    const [r] = await t.sql("SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(6), lease_until) AS s FROM cronq_jobs WHERE job_key = 'renew'");
    expect(Number(r.s)).toBeGreaterThanOrEqual(119);
  });
});

describe('failure and dead letters', () => {
  it('retries with the given delay, writing last_error, while attempts remain', async () => {
    await insertJobIfAbsent(t.database.db, row('retry'));
    const [job] = await claim(1);
    expect(await failIfLeased(t.database.db, lease(job), { error: 'Error: flaky', permanent: false, retryInMs: 5_000 })).toEqual({
      status: 'retry',
      retryInMs: 5_000,
    });
    const [r] = await t.sql(
      "SELECT status, attempts, last_error, lease_token, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), available_at) AS us FROM cronq_jobs WHERE job_key = 'retry'",
    );
    expect(r).toMatchObject({ status: 'ready', attempts: 1, last_error: 'Error: flaky', lease_token: null });
    expect(Number(r.us)).toBeGreaterThan(4_000_000);
    expect(await claim(1)).toHaveLength(0);
  });

  it('a permanent failure makes the job dead and writes its dead letter in the same transaction', async () => {
    await insertJobIfAbsent(t.database.db, row('permanent'));
    const [job] = await claim(1);
    expect(await failIfLeased(t.database.db, lease(job), { error: 'PermanentError: no such user', permanent: true, retryInMs: 0 })).toEqual({
      status: 'dead',
    });
    const [j] = await t.sql("SELECT id, status, attempts FROM cronq_jobs WHERE job_key = 'permanent'");
    expect(j).toMatchObject({ status: 'dead', attempts: 1 });
    const letters = await t.sql('SELECT * FROM cronq_dead_letters');
    expect(letters).toHaveLength(1);
    expect(letters[0]).toMatchObject({
      job_id: j.id,
      job_key: 'permanent',
      kind: 'test',
      queue: 'default',
      failure_reason: 'PermanentError: no such user',
      attempts: 1,
      reviewed_at: null,
      resolution: null,
    });
  });

  it('an exhausted job goes dead with its dead letter after its last attempt', async () => {
    await insertJobIfAbsent(t.database.db, row('exhausted', { maxAttempts: 2 }));
    for (let attempt = 1; attempt <= 2; attempt++) {
      const [job] = await claim(1);
      expect(job.attempt).toBe(attempt);
      const outcome = await failIfLeased(t.database.db, lease(job), { error: `fail ${attempt}`, permanent: false, retryInMs: 0 });
      expect(outcome.status).toBe(attempt < 2 ? 'retry' : 'dead');
    }
    const [j] = await t.sql("SELECT status, attempts FROM cronq_jobs WHERE job_key = 'exhausted'");
    expect(j).toMatchObject({ status: 'dead', attempts: 2 });
    const letters = await t.sql('SELECT failure_reason, attempts FROM cronq_dead_letters');
    expect(letters).toEqual([{ failure_reason: 'fail 2', attempts: 2 }]);
  });
});

describe('recovery and release', () => {
  it('returns expired leases to ready, and to dead with a dead letter when no attempts remain', async () => {
    await insertJobIfAbsent(t.database.db, row('r-again', { maxAttempts: 3 }));
    await insertJobIfAbsent(t.database.db, row('r-last', { maxAttempts: 1 }));
    await insertJobIfAbsent(t.database.db, row('r-live', { maxAttempts: 3 }));
    const got = await claim(3);
    // Only the first two expire; the third is still leased and must be left alone.
    await t.sql(
      "UPDATE cronq_jobs SET lease_deadline = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE job_key IN ('r-again', 'r-last')",
    );
    expect(got).toHaveLength(3);
    expect(await recoverExpiredLeases(t.database.db, 100)).toEqual({ returned: 1, dead: 1 });
    const rows = await t.sql('SELECT job_key, status, attempts, lease_token FROM cronq_jobs ORDER BY job_key');
    expect(rows).toEqual([
      { job_key: 'r-again', status: 'ready', attempts: 1, lease_token: null },
      { job_key: 'r-last', status: 'dead', attempts: 1, lease_token: expect.any(String) },
      { job_key: 'r-live', status: 'reserved', attempts: 1, lease_token: expect.any(String) },
    ]);
    const letters = await t.sql('SELECT job_key, failure_reason FROM cronq_dead_letters');
    expect(letters).toEqual([{ job_key: 'r-last', failure_reason: 'lease expired while held by test:1 after the final attempt' }]);
  });

  it('recovers in bounded batches', async () => {
    await insertJobsIfAbsent(t.database.db, Array.from({ length: 25 }, (_, i) => row(`bulk-${i}`)));
    await claim(25);
    await expireLeases();
    expect(await recoverExpiredLeases(t.database.db, 10)).toEqual({ returned: 10, dead: 0 });
    expect(await recoverExpiredLeases(t.database.db, 10)).toEqual({ returned: 10, dead: 0 });
    expect(await recoverExpiredLeases(t.database.db, 10)).toEqual({ returned: 5, dead: 0 });
  });

  it('recovers the expired leases after those another recovery holds, so daemons recovering at once split them', async () => {
    await insertJobsIfAbsent(t.database.db, Array.from({ length: 15 }, (_, i) => row(`split-${String(i).padStart(2, '0')}`)));
    await claim(15);
    await expireLeases();
    // Another daemon's recovery batch holds the first ten.
    const held = Array.from({ length: 10 }, (_, i) => `split-${String(i).padStart(2, '0')}`);
    await whileHeld(held, async () => {
      expect(await recoverExpiredLeases(t.database.db, 10)).toEqual({ returned: 5, dead: 0 });
    });
    const ready = await t.sql("SELECT job_key FROM cronq_jobs WHERE status = 'ready' ORDER BY job_key");
    expect(ready.map((r) => r.job_key)).toEqual(Array.from({ length: 5 }, (_, i) => `split-${10 + i}`));
  });

  it('release restores the attempt and makes the job available now', async () => {
    await insertJobIfAbsent(t.database.db, row('release'));
    const [job] = await claim(1);
    expect(await releaseIfLeased(t.database.db, lease(job), 'released during shutdown')).toBe(true);
    const [r] = await t.sql("SELECT status, attempts, lease_token FROM cronq_jobs WHERE job_key = 'release'");
    expect(r).toEqual({ status: 'ready', attempts: 0, lease_token: null });
    const [again] = await claim(1);
    expect(again.attempt).toBe(1);
  });

  it('releases many unstarted jobs in one transaction, each while still reserved under its own token, deadline passed or not', async () => {
    await insertJobsIfAbsent(t.database.db, ['many-a', 'many-b', 'many-c', 'many-d', 'many-e'].map((key) => row(key)));
    const claimed = await claim(5);
    const byKey = new Map(claimed.map((job) => [job.key, job]));
    await expireLeases(); // an outage held the releases back: their deadlines passed, nobody recovered them
    // many-c was recovered and claimed again by another worker (a new token); many-d was cancelled.
    await t.sql("UPDATE cronq_jobs SET lease_fence = CONCAT(REPEAT('f', 16), SUBSTRING(lease_fence, 17)) WHERE job_key = 'many-c'");
    await cancelJob(t.database.db, { key: 'many-d' }, { by: 'test', reason: 'not needed' });
    const released = await releaseUnstartedManyIfUnrecovered(t.database.db, claimed.map(lease), 'released during shutdown before processing');
    expect([...released].sort((a, b) => a - b)).toEqual(['many-a', 'many-b', 'many-e'].map((key) => byKey.get(key)!.id));
    expect(await t.sql('SELECT job_key, status, attempts, lease_token FROM cronq_jobs ORDER BY job_key')).toEqual([
      { job_key: 'many-a', status: 'ready', attempts: 0, lease_token: null },
      { job_key: 'many-b', status: 'ready', attempts: 0, lease_token: null },
      { job_key: 'many-c', status: 'reserved', attempts: 1, lease_token: expect.stringMatching(/^f{16}/) },
      { job_key: 'many-d', status: 'cancelled', attempts: 1, lease_token: expect.any(String) },
      { job_key: 'many-e', status: 'ready', attempts: 0, lease_token: null },
    ]);
    expect(await releaseUnstartedManyIfUnrecovered(t.database.db, claimed.map(lease), 'again')).toEqual(new Set());
  });
});

describe('lease storage', () => {
  /** Every row's stored holder width, in characters. */
  const widths = async () =>
    t.sql<{ job_key: string; holder: number }>(
      "SELECT job_key, CHAR_LENGTH(lease_holder) AS holder FROM cronq_jobs ORDER BY id",
    );

  it('keeps the holder at its padded width through claim, retry, release, recovery, completion, death and cancellation, and reads it trimmed', async () => {
    await insertJobsIfAbsent(t.database.db, [row('walk'), row('dies'), row('cancelled')]);
    const all = (n: number) => Array.from({ length: n }, () => 48);
    expect((await widths()).map((r) => r.holder)).toEqual(all(3));

    expect(await cancelJob(t.database.db, { key: 'cancelled' }, { by: 'test', reason: 'not needed' })).toMatchObject({ status: 'cancelled' });
    let [walk, dies] = await claim(2, 'host-b:77');
    expect((await widths()).map((r) => r.holder)).toEqual(all(3));
    expect(await t.sql("SELECT locked_by, lease_token = lease_fence AS same FROM cronq_jobs WHERE job_key = 'walk'")).toEqual([{ locked_by: 'host-b:77', same: 1 }]);

    expect(await failIfLeased(t.database.db, lease(walk), { error: 'boom', permanent: false, retryInMs: 0 })).toMatchObject({ status: 'retry' });
    expect(await failIfLeased(t.database.db, lease(dies), { error: 'fatal', permanent: true, retryInMs: 0 })).toEqual({ status: 'dead' });
    expect(await t.sql("SELECT job_key, status, locked_by, lease_token, lease_until FROM cronq_jobs WHERE job_key IN ('walk', 'dies') ORDER BY id")).toEqual([
      { job_key: 'walk', status: 'ready', locked_by: null, lease_token: null, lease_until: null },
      { job_key: 'dies', status: 'dead', locked_by: 'host-b:77', lease_token: expect.stringMatching(/^[0-9a-f]{32}$/), lease_until: null },
    ]);

    [walk] = await claim(1, 'host-b:77');
    expect(await releaseIfLeased(t.database.db, lease(walk), 'shutting down')).toBe(true);
    [walk] = await claim(1, 'host-b:77');
    await expireLeases();
    expect(await recoverExpiredLeases(t.database.db, 100, 3)).toMatchObject({ returned: 1 });
    expect(await t.sql("SELECT last_error FROM cronq_jobs WHERE job_key = 'walk'")).toEqual([{ last_error: 'lease expired while held by host-b:77; returned to the queue' }]);
    [walk] = await claim(1, 'host-b:77');
    expect(await completeManyIfLeased(t.database.db, [lease(walk)])).toEqual(new Set([walk.id]));

    expect((await widths()).map((r) => r.holder)).toEqual(all(3));
    expect(await t.sql('SELECT job_key, finished_at IS NOT NULL AS finished, lease_until FROM cronq_jobs ORDER BY id')).toEqual([
      { job_key: 'walk', finished: 1, lease_until: null },
      { job_key: 'dies', finished: 1, lease_until: null },
      { job_key: 'cancelled', finished: 1, lease_until: null },
    ]);
  });

  it("cronq/schema's jobs table reads the lease through the virtual columns and leaves the storage columns out", async () => {
    await insertJobsIfAbsent(t.database.db, [row('typed')]);
    const [claimed] = await claim(1, 'host-c:9');
    const [read] = await t.database.db.select().from(publicJobs);
    expect(read).toMatchObject({ jobKey: 'typed', status: 'reserved', leaseToken: claimed.lease.token, lockedBy: 'host-c:9', finishedAt: null });
    expect(read.leaseUntil).toBeInstanceOf(Date);
    expect(Object.keys(read).filter((key) => /^(leaseFence|leaseDeadline|leaseHolder|finishedTime)$/.test(key))).toEqual([]);
  });

  it('pads a holder name with multibyte characters to the stored bytes of the blank, so its claim rewrites the row in place', async () => {
    const names = ['wörker-ü:1', 'host-🙂:7', 'ホスト:42'];
    await insertJobsIfAbsent(t.database.db, names.map((_, i) => row(`wide-${i}`)));
    const blank = await t.sql<{ bytes: number }>('SELECT DISTINCT LENGTH(lease_holder) AS bytes FROM cronq_jobs');
    expect(blank).toEqual([{ bytes: 48 }]);
    for (const name of names) await claim(1, name);
    expect(await t.sql('SELECT locked_by, LENGTH(lease_holder) AS bytes FROM cronq_jobs ORDER BY id')).toEqual(
      names.map((name) => ({ locked_by: name, bytes: 48 })),
    );
  });

  it('stores a holder name longer than the padded width whole, and reads it back as given', async () => {
    await insertJobsIfAbsent(t.database.db, [row('long')]);
    const name = `${'h'.repeat(60)}:1`;
    await claim(1, name);
    expect(await t.sql('SELECT locked_by, CHAR_LENGTH(lease_holder) AS holder FROM cronq_jobs')).toEqual([{ locked_by: name, holder: name.length }]);
  });
});
