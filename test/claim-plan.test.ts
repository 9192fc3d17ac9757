/**
 * The query plans the queue depends on, each on a table with current statistics and no
 * history from other tests (purge lag from earlier rows inflates range estimates, and the
 * optimizer may then prefer a ref that walks the queue from the front: see claimSelectSql).
 * Every test here starts from its own fresh table.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { MySqlDialect } from 'drizzle-orm/mysql-core';
import { claimByIdSql, claimReady, claimSelectSql, limitSql, READY_QUEUES_SQL, readyQueues } from '../src/store/claims.ts';
import { recentDoneSql } from '../src/store/console.ts';
import { expiredLeasesSql } from '../src/store/recovery.ts';
import { insertJobsIfAbsent } from '../src/store/jobs.ts';
import { idsCondition, rows } from '../src/store/sql.ts';
import { interceptedClaims } from './support/claimsPool.ts';
import { useTestDatabase } from './support/db.ts';
import { claimJobs, jobRow, THIRTY_SECOND_LEASES } from './support/jobs.ts';

const t = useTestDatabase();
beforeEach(async () => {
  await t.sql('DROP TABLE IF EXISTS cronq_jobs_fresh');
  await t.sql('CREATE TABLE cronq_jobs_fresh LIKE cronq_jobs');
  await t.sql('DROP TABLE cronq_jobs');
  await t.sql('RENAME TABLE cronq_jobs_fresh TO cronq_jobs');
});

const row = jobRow;
const claim = (limit: number, lockedBy?: string, queues?: string[]) => claimJobs(t.database, limit, lockedBy, queues);

describe('query plans', () => {
  it('uses the claim index, without a filesort, for the claim query', async () => {
    const [plan] = await t.sql(`EXPLAIN ${claimSelectSql('a', 50, null, undefined, [])}`);
    expect(plan.key).toBe('cronq_jobs_claim');
    expect(plan.type).toBe('range');
    expect(String(plan.Extra ?? '')).not.toMatch(/filesort/i);
  });

  it('claims by id through the primary key, never the claim index', async () => {
    await insertJobsIfAbsent(t.database.db, Array.from({ length: 300 }, (_, i) => row(`by-id-${i}`)));
    await t.sql('ANALYZE TABLE cronq_jobs');
    const [plan] = await t.sql(`EXPLAIN ${claimByIdSql([7, 9], ['default', 'other'], 10, [3])}`);
    expect(plan.key).toBe('PRIMARY');
    expect(plan.type).toBe('range');
  });

  it('finds the rows of a claim or a completion batch written as id ranges through the primary key, with many rows reserved', async () => {
    await insertJobsIfAbsent(t.database.db, Array.from({ length: 300 }, (_, i) => row(`ranges-${i}`)));
    await t.sql("UPDATE cronq_jobs SET status = 'reserved'");
    await t.sql('ANALYZE TABLE cronq_jobs');
    const where = idsCondition([...Array.from({ length: 100 }, (_, i) => i + 1), 150, 152]);
    const [plan] = await t.sql(
      `EXPLAIN UPDATE cronq_jobs SET status = 'done' WHERE ${where} AND status = 'reserved' AND lease_deadline > UTC_TIMESTAMP(6) AND lease_fence IN ('a', 'b')`,
    );
    expect(plan.key).toBe('PRIMARY');
    expect(plan.type).toBe('range');
  });

  it('locks the rows a claim of more than a thousand found by a plain read through exact keys of the claim index, never by a scan', async () => {
    await insertJobsIfAbsent(t.database.db, Array.from({ length: 1500 }, (_, i) => row(`big-${i}`)));
    await t.sql('ANALYZE TABLE cronq_jobs');
    const sent: string[] = [];
    const pool = interceptedClaims(t.database.claims, (sql, send) => {
      sent.push(sql);
      return send(sql);
    });
    // No cursor: a plain read finds the rows, then they are locked by key.
    const got = await claimReady(pool, { queues: ['default'], limit: 1200, leases: THIRTY_SECOND_LEASES, lockedBy: 'c', cursors: new Map() });
    expect(got).toHaveLength(1200);
    await t.sql("UPDATE cronq_jobs SET status = 'ready'");
    await t.sql('ANALYZE TABLE cronq_jobs');
    const locking = sent.flatMap((packet) => packet.split(';\n')).filter((statement) => /FOR UPDATE SKIP LOCKED/.test(statement));
    expect(locking.length).toBeGreaterThan(0);
    for (const statement of locking) {
      const plans = await t.sql(`EXPLAIN ${statement}`);
      expect(plans).toHaveLength(1); // no IN list turned into a join
      expect(plans[0]).toMatchObject({ key: 'cronq_jobs_claim', type: 'range' });
      expect(String(plans[0].Extra ?? '')).not.toMatch(/filesort/i);
    }
  });

  it('finds the queues with ready jobs due now by a loose scan of the claim index, one dive per queue, leaving out queues whose jobs are all due later', async () => {
    await insertJobsIfAbsent(t.database.db, Array.from({ length: 300 }, (_, i) => row(`loose-${i}`, { queue: `q${i % 3}` })));
    const tomorrow = new Date(Date.now() + 86_400_000);
    await insertJobsIfAbsent(t.database.db, Array.from({ length: 50 }, (_, i) => row(`later-${i}`, { queue: `later${i}`, runAt: tomorrow })));
    await t.sql('ANALYZE TABLE cronq_jobs');
    const [plan] = await t.sql(`EXPLAIN ${READY_QUEUES_SQL}`);
    expect(plan.key).toBe('cronq_jobs_claim');
    expect(String(plan.Extra ?? '')).toMatch(/Using index for group-by/);
    expect((await readyQueues(t.database.claims)).sort()).toEqual(['q0', 'q1', 'q2']);
    await claim(300, 'x', ['q0', 'q1']);
    expect(await readyQueues(t.database.claims)).toEqual(['q2']);
  });

  it('finds expired leases for recovery in the reserved part of the claim index, in index order, without a filesort or a lock', async () => {
    const found = expiredLeasesSql(100);
    const [plan] = rows<Record<string, unknown>>(await t.database.db.execute(sql`EXPLAIN ${found}`));
    expect(plan.key).toBe('cronq_jobs_claim');
    expect(String(plan.Extra ?? '')).not.toMatch(/filesort/i);
    expect(new MySqlDialect().sqlToQuery(found).sql).not.toMatch(/FOR UPDATE/i);
  });

  it("counts a limited queue's live reservations within the reserved part of the claim index, and locks its limit row by primary key", async () => {
    await insertJobsIfAbsent(t.database.db, Array.from({ length: 300 }, (_, i) => row(`limited-${i}`, { queue: i % 10 === 0 ? 'capped' : 'default' })));
    await claim(300, 'x', ['default', 'capped']);
    await t.sql('ANALYZE TABLE cronq_jobs');
    const [lock, count] = limitSql('capped', { kind: 'capped', maxRunning: 2 });
    const [countPlan] = await t.sql(`EXPLAIN ${count}`);
    expect(countPlan.key).toBe('cronq_jobs_claim');
    expect(['ref', 'range']).toContain(countPlan.type); // the (status, queue) prefix
    expect(Number(countPlan.rows)).toBeLessThanOrEqual(40); // the queue's 30 reservations, not the table
    await t.sql("REPLACE INTO cronq_kind_limits (kind, max_running) VALUES ('capped', 2), ('other', 1)");
    const [lockPlan] = await t.sql(`EXPLAIN ${lock}`);
    expect(['const', 'eq_ref']).toContain(lockPlan.type);
  });

  it('moves only the claim index when a job is claimed and completed (no other index holds status or lease columns)', async () => {
    const indexed = await t.sql<{ INDEX_NAME: string; COLUMN_NAME: string }>(
      "SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'cronq_jobs' ORDER BY INDEX_NAME, SEQ_IN_INDEX",
    );
    const written = ['status', 'attempts', 'lease_fence', 'lease_deadline', 'lease_holder', 'last_error', 'updated_at', 'finished_time'];
    const touched = new Set(indexed.filter((c) => written.includes(c.COLUMN_NAME)).map((c) => c.INDEX_NAME));
    expect([...touched]).toEqual(['cronq_jobs_claim']);
    expect(indexed.filter((c) => c.INDEX_NAME === 'cronq_jobs_claim').map((c) => c.COLUMN_NAME)).toEqual(['status', 'queue', 'available_at', 'id', 'finished_time']);
  });

  it('continues a claim from its cursor by two exact ranges of the claim index, even with claimed rows behind it', async () => {
    // Rows at distinct instants, as enqueues over time leave them (a table whose rows all
    // share one instant may get a ref on that instant instead: bounded by those rows).
    await insertJobsIfAbsent(t.database.db, Array.from({ length: 300 }, (_, i) => row(`plan-${i}`, { runAt: new Date(Date.now() - 600_000 + i * 1000) })));
    await claim(100); // leaves claimed rows (and their index history) in front of the cursor
    await t.sql('ANALYZE TABLE cronq_jobs');
    const [{ at, id }] = await t.sql(
      "SELECT DATE_FORMAT(available_at, '%Y-%m-%d %H:%i:%s.%f') AS at, id FROM cronq_jobs WHERE status = 'reserved' ORDER BY available_at DESC, id DESC LIMIT 1",
    );
    for (const after of ['same-instant', 'later'] as const) {
      const [plan] = await t.sql(`EXPLAIN ${claimSelectSql('default', 16, after, { availableAt: at, id }, [])}`);
      expect(plan.key, after).toBe('cronq_jobs_claim');
      expect(plan.type, after).toBe('range');
      expect(String(plan.Extra ?? ''), after).not.toMatch(/filesort/i);
    }
  });

  it("reads the completions chart's done jobs from the claim index alone, without a row lookup each", async () => {
    await insertJobsIfAbsent(t.database.db, Array.from({ length: 50 }, (_, i) => row(`done-${i}`)));
    await t.sql("UPDATE cronq_jobs SET status = 'done', finished_time = UTC_TIMESTAMP(6)");
    const [plan] = rows<Record<string, unknown>>(await t.database.db.execute(sql`EXPLAIN ${recentDoneSql('default')}`));
    expect(plan.key).toBe('cronq_jobs_claim');
    expect(String(plan.Extra)).toMatch(/Using index/);
  });
});
