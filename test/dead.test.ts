import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { connect } from '../src/db/client.ts';
import { UsageError } from '../src/errors.ts';
import {
  getDeadLetter,
  groupDeadLetters,
  listDeadLetters,
  resolveDeadLetter,
  resolveMatching,
} from '../src/store/deadLetters.ts';
import { firstLine } from '../src/runtime/errorText.ts';
import { normaliseReason } from '../src/store/failureReason.ts';
import { claimReady } from '../src/store/claims.ts';
import { failIfLeased } from '../src/store/fenced.ts';
import { recoverExpiredLeases } from '../src/store/recovery.ts';
import { insertJobIfAbsent } from '../src/store/jobs.ts';
import { THIRTY_SECOND_LEASES } from './support/jobs.ts';
import { runCli } from './support/cli.ts';
import { runMain } from './support/runMain.ts';
import { useTestDatabase } from './support/db.ts';
import { whileLocked } from './support/rowLock.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_dead_letters'] });
let env: Record<string, string>;

beforeAll(() => {
  env = { DATABASE_URL: t.url, CRONQ_SCHEDULES: '', LOG_LEVEL: 'info' };
});

const db = () => t.database.db;

interface Crafted {
  key: string;
  kind?: string;
  queue?: string;
  reason?: string;
  /** How long ago it died, by the database clock (orders the list). */
  agoSeconds?: number;
  jobStatus?: 'ready' | 'reserved' | 'done' | 'dead';
  reviewed?: string;
}

/** A dead job and its dead letter, inserted by SQL. */
async function crafted(o: Crafted): Promise<{ jobId: number; letterId: number }> {
  const kind = o.kind ?? 'report';
  const queue = o.queue ?? 'default';
  const reason = o.reason ?? 'Error: boom';
  const payload = JSON.stringify({ key: o.key });
  const job: any = await t.sql(
    `INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, attempts, max_attempts, last_error, lease_fence, lease_holder, finished_time)
     VALUES (?, ?, ?, ?, ?, 3, 3, ?, REPEAT('a', 32), 'host:1', UTC_TIMESTAMP(6))`,
    [queue, kind, o.key, payload, o.jobStatus ?? 'dead', reason],
  );
  const letter: any = await t.sql(
    `INSERT INTO cronq_dead_letters (job_id, queue, kind, job_key, payload, failure_reason, attempts, dead_at, reviewed_at, resolution)
     VALUES (?, ?, ?, ?, ?, ?, 3, UTC_TIMESTAMP(6) - INTERVAL ? SECOND, IF(? IS NULL, NULL, UTC_TIMESTAMP(6)), ?)`,
    [job.insertId, queue, kind, o.key, payload, reason, o.agoSeconds ?? 60, o.reviewed ?? null, o.reviewed ?? null],
  );
  return { jobId: job.insertId, letterId: letter.insertId };
}

/** A job that really died: enqueued, claimed, failed permanently through the store. */
async function diedForReal(key: string, error: string): Promise<{ jobId: number; letterId: number }> {
  await insertJobIfAbsent(db(), { queue: 'default', kind: 'report', key, payloadJson: JSON.stringify({ month: '2026-11' }), maxAttempts: 3, runAt: null });
  const [job] = await claimReady(t.database.claims, { queues: ['default'], limit: 1, leases: THIRTY_SECOND_LEASES, lockedBy: 'test:1' });
  expect(await failIfLeased(db(), job.lease, { error, permanent: true, retryInMs: 0 })).toEqual({ status: 'dead' });
  const [letter] = await t.sql('SELECT id FROM cronq_dead_letters WHERE job_id = ?', [job.id]);
  return { jobId: job.id, letterId: letter.id };
}

const letterRow = async (id: number) => (await t.sql('SELECT reviewed_at, resolution FROM cronq_dead_letters WHERE id = ?', [id]))[0];
const jobRow = async (id: number) =>
  (await t.sql('SELECT id, job_key, status, attempts, lease_token, lease_until, locked_by, last_error, finished_at FROM cronq_jobs WHERE id = ?', [id]))[0];

describe('failure reason normalisation', () => {
  it('groups reasons that differ only in numbers, uuids and hex ids', () => {
    expect(normaliseReason('user 42 not found')).toBe('user # not found');
    expect(normaliseReason('user 43 not found\n    at lookup (users.ts:10:3)')).toBe('user # not found');
    expect(normaliseReason('order 550e8400-e29b-41d4-a716-446655440000 missing')).toBe('order <uuid> missing');
    expect(normaliseReason('lease 0123456789abcdef0123456789abcdef lost')).toBe('lease <hex> lost');
    expect(normaliseReason('bad pointer 0xDEADBEEF')).toBe('bad pointer <hex>');
    expect(normaliseReason('timeout after 2.5s to 10.0.0.1:5432')).toBe('timeout after #s to #');
    expect(normaliseReason('  two   spaces\r\nsecond line')).toBe('two spaces');
  });

  it('keeps words and quoted text, so different causes stay apart', () => {
    expect(normaliseReason("column 'email' cannot be null")).not.toBe(normaliseReason("column 'name' cannot be null"));
    expect(normaliseReason('deadbeef cafe facade')).toBe('deadbeef cafe facade');
  });

  it('takes the first line without its carriage return', () => {
    expect(firstLine('Error: boom\r\n  at x')).toBe('Error: boom');
    expect(firstLine('single')).toBe('single');
  });
});

describe('listing dead letters', () => {
  it('lists unreviewed dead letters oldest first with the first line of the reason', async () => {
    const newer = await crafted({ key: 'b', agoSeconds: 10, reason: 'Error: second\n  at stack' });
    const older = await crafted({ key: 'a', agoSeconds: 100, reason: 'Error: first' });
    await crafted({ key: 'c', agoSeconds: 50, reviewed: 'discarded: old' });
    const { letters, more } = await listDeadLetters(db(), { limit: 100 });
    expect(more).toBe(false);
    expect(letters.map((l) => [l.id, l.key, l.reason])).toEqual([
      [older.letterId, 'a', 'Error: first'],
      [newer.letterId, 'b', 'Error: second'],
    ]);
    expect(letters[0]).toMatchObject({ jobId: older.jobId, kind: 'report', queue: 'default', attempts: 3, reviewedAt: null });
    expect(letters[0].deadAt).toBeInstanceOf(Date);
  });

  it('includes reviewed ones with --all, and narrows by queue, kind and since', async () => {
    await crafted({ key: 'a', kind: 'report', queue: 'q1', agoSeconds: 3600 });
    await crafted({ key: 'b', kind: 'mail', queue: 'q1', agoSeconds: 10 });
    await crafted({ key: 'c', kind: 'report', queue: 'q2', agoSeconds: 10, reviewed: 'requeued: x' });
    const keys = async (o: Parameters<typeof listDeadLetters>[1]) => (await listDeadLetters(db(), o)).letters.map((l) => l.key);
    expect(await keys({ limit: 10, includeReviewed: true })).toEqual(['a', 'b', 'c']);
    expect(await keys({ limit: 10, kind: 'report' })).toEqual(['a']);
    expect(await keys({ limit: 10, kind: 'report', includeReviewed: true })).toEqual(['a', 'c']);
    expect(await keys({ limit: 10, queue: 'q1' })).toEqual(['a', 'b']);
    expect(await keys({ limit: 10, since: new Date(Date.now() - 600_000), includeReviewed: true })).toEqual(['b', 'c']);
  });

  it('carries at most 1,000 characters of a reason written by hand as one huge line, and dead list prints it cut to one short row', async () => {
    const { letterId } = await crafted({ key: 'huge', reason: `Error: ${'x'.repeat(60_000)}\nsecond line` });
    const { letters } = await listDeadLetters(db(), { limit: 10 });
    expect(letters.map((l) => l.reason.length)).toEqual([1_000]);
    expect(letters[0].reason.startsWith('Error: xxx')).toBe(true);
    const shown = await runCli(['dead', 'list'], env);
    expect(shown.code).toBe(0);
    const row = shown.stdout.split('\n').find((line) => line.trimStart().startsWith(String(letterId)));
    expect(row).toMatch(/Error: x+…$/);
    expect(row!.length).toBeLessThan(500);
    // The whole reason is still there to read.
    const full = await runCli(['dead', 'show', String(letterId), '--json'], env);
    expect(JSON.parse(full.stdout).failureReason).toHaveLength('Error: '.length + 60_000 + '\nsecond line'.length);
  });

  it('says when more rows match than the limit', async () => {
    for (let i = 0; i < 3; i++) await crafted({ key: `k${i}`, agoSeconds: 100 - i });
    const { letters, more } = await listDeadLetters(db(), { limit: 2 });
    expect(letters.map((l) => l.key)).toEqual(['k0', 'k1']);
    expect(more).toBe(true);
  });

  it('groups fifty failures with one cause into one row per kind', async () => {
    for (let i = 0; i < 50; i++) await crafted({ key: `u${i}`, reason: `Error: user ${1000 + i} not found\n  at line ${i}`, agoSeconds: 100 + i });
    await crafted({ key: 'm1', kind: 'mail', reason: 'Error: user 7 not found' });
    await crafted({ key: 'x1', reason: 'Error: disk full' });
    await crafted({ key: 'r1', reason: 'Error: user 9 not found', reviewed: 'discarded: x' });
    const groups = await groupDeadLetters(db(), {});
    expect(groups.map((g) => [g.count, g.kind, g.reason])).toEqual([
      [50, 'report', 'Error: user # not found'],
      [1, 'mail', 'Error: user # not found'],
      [1, 'report', 'Error: disk full'],
    ]);
    const [first] = await t.sql("SELECT MIN(id) AS id FROM cronq_dead_letters WHERE job_key LIKE 'u%'");
    expect(groups[0].exampleId).toBe(first.id);
    expect(groups[0].firstDeadAt.getTime()).toBeLessThan(groups[0].lastDeadAt.getTime());
    expect((await groupDeadLetters(db(), { includeReviewed: true }))[0].count).toBe(51);
    expect(await groupDeadLetters(db(), { kind: 'mail' })).toHaveLength(1);
  });
});

describe('reason groups stored with each dead letter', () => {
  it('stores the normalised first line when a job dies, and groups those rows with rows from before reason groups existed', async () => {
    const a = await diedForReal('g1', 'Error: upstream 503 for request 1001\n    at fetch (api.ts:3:1)');
    const b = await diedForReal('g2', 'Error: upstream 503 for request 1002');
    await crafted({ key: 'legacy', reason: 'Error: upstream 502 for request 7' });
    const stored = await t.sql('SELECT id, reason_group FROM cronq_dead_letters ORDER BY id');
    expect(stored).toEqual([
      { id: a.letterId, reason_group: 'Error: upstream # for request #' },
      { id: b.letterId, reason_group: 'Error: upstream # for request #' },
      { id: expect.any(Number), reason_group: null },
    ]);
    const groups = await groupDeadLetters(db(), {});
    expect(groups.map((g) => [g.count, g.kind, g.reason, g.exampleId])).toEqual([[3, 'report', 'Error: upstream # for request #', a.letterId]]);
  });

  it('cuts a stored reason group to 512 characters without splitting a surrogate pair', async () => {
    await diedForReal('long', `Error: ${'x'.repeat(504)}😀 and more`);
    const [row] = await t.sql('SELECT reason_group FROM cronq_dead_letters');
    expect(row.reason_group).toBe(`Error: ${'x'.repeat(504)}`);
  });

  it('gives a dead letter written by lease recovery the group of the reason the server composed', async () => {
    for (const [key, holder] of [['r1', 'host-a:4242'], ['r2', 'host-b:77']]) {
      await t.sql(
        `INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, attempts, max_attempts, lease_fence, lease_deadline, lease_holder)
         VALUES ('default', 'report', ?, '{}', 'reserved', 3, 3, 'tok', UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, ?)`,
        [key, holder],
      );
    }
    expect(await recoverExpiredLeases(db(), 100, 3)).toEqual({ returned: 0, dead: 2 });
    const stored = await t.sql('SELECT job_key, reason_group FROM cronq_dead_letters ORDER BY job_key');
    expect(stored).toEqual([
      { job_key: 'r1', reason_group: 'lease expired while held by host-a:# after the final attempt' },
      { job_key: 'r2', reason_group: 'lease expired while held by host-b:# after the final attempt' },
    ]);
  });
});

describe('showing a dead letter', () => {
  it('returns the payload, the whole reason and the job row as it is now', async () => {
    const { jobId, letterId } = await diedForReal('show:1', 'Error: user 42 not found\n    at lookup (users.ts:1:1)');
    const letter = await getDeadLetter(db(), letterId);
    expect(letter).toMatchObject({
      id: letterId,
      jobId,
      key: 'show:1',
      reason: 'Error: user 42 not found',
      failureReason: 'Error: user 42 not found\n    at lookup (users.ts:1:1)',
      job: { id: jobId, status: 'dead', attempts: 1, maxAttempts: 3 },
    });
    expect(JSON.parse(letter!.payloadText!)).toEqual({ month: '2026-11' });
  });

  it('returns null for an unknown id, and a null job when the row is gone', async () => {
    expect(await getDeadLetter(db(), 999_999)).toBeNull();
    const { jobId, letterId } = await crafted({ key: 'gone' });
    await t.sql('DELETE FROM cronq_jobs WHERE id = ?', [jobId]);
    expect((await getDeadLetter(db(), letterId))!.job).toBeNull();
  });
});

describe('requeue and discard by id', () => {
  it('requeue makes the same job claimable again with attempts 0, keeping its id, key and last error', async () => {
    const { jobId, letterId } = await diedForReal('requeue:1', 'Error: upstream 503');
    const outcome = await resolveDeadLetter(db(), letterId, 'requeue', 'upstream fixed');
    expect(outcome).toEqual({ status: 'done', action: 'requeue', deadLetterId: letterId, jobId, key: 'requeue:1' });
    expect(await jobRow(jobId)).toMatchObject({
      status: 'ready',
      attempts: 0,
      lease_token: null,
      lease_until: null,
      locked_by: null,
      finished_at: null,
      last_error: 'Error: upstream 503',
    });
    const letter = await letterRow(letterId);
    expect(letter.resolution).toBe('requeued: upstream fixed');
    expect(letter.reviewed_at).toBeInstanceOf(Date);
    const [claimed] = await claimReady(t.database.claims, { queues: ['default'], limit: 5, leases: THIRTY_SECOND_LEASES, lockedBy: 'test:2' });
    expect(claimed).toMatchObject({ id: jobId, key: 'requeue:1', attempt: 1 });
    expect(await t.sql('SELECT id FROM cronq_jobs WHERE job_key = ?', ['requeue:1'])).toHaveLength(1);
  });

  it('requeue starts the lease-expiry count over: a job that died of expiries is not sent back dead by its next one', async () => {
    const expire = () => t.sql("UPDATE cronq_jobs SET lease_deadline = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE job_key = 'crashy:1'");
    const claim = (holder: string) => claimReady(t.database.claims, { queues: ['default'], limit: 1, leases: THIRTY_SECOND_LEASES, lockedBy: holder });
    await insertJobIfAbsent(db(), { queue: 'default', kind: 'report', key: 'crashy:1', payloadJson: '{}', maxAttempts: 10, runAt: null });
    // Its process dies mid-job twice; at two expiries (the limit) recovery sends it dead.
    for (const holder of ['host-a:1', 'host-b:2']) {
      expect(await claim(holder)).toHaveLength(1);
      await expire();
      await recoverExpiredLeases(db(), 100, 2);
    }
    const [letter] = await t.sql("SELECT id FROM cronq_dead_letters WHERE job_key = 'crashy:1'");
    expect(letter).toBeDefined();
    await resolveDeadLetter(db(), letter.id, 'requeue', 'fixed the crash');
    expect((await t.sql("SELECT status, attempts, lease_expiries FROM cronq_jobs WHERE job_key = 'crashy:1'"))[0]).toEqual({ status: 'ready', attempts: 0, lease_expiries: 0 });
    // One more expiry after the fix: returned to the queue, not dead.
    const [again] = await claim('host-c:3');
    expect(again).toMatchObject({ key: 'crashy:1', attempt: 1, leaseExpiries: 0 });
    await expire();
    expect(await recoverExpiredLeases(db(), 100, 2)).toEqual({ returned: 1, dead: 0 });
  });

  it('discard leaves the job dead and records the reason', async () => {
    const { jobId, letterId } = await crafted({ key: 'discard:1' });
    expect(await resolveDeadLetter(db(), letterId, 'discard', '  customer deleted  ')).toMatchObject({ status: 'done', action: 'discard' });
    expect((await jobRow(jobId)).status).toBe('dead');
    expect((await letterRow(letterId)).resolution).toBe('discarded: customer deleted');
  });

  it('refuses an unknown id, and an already reviewed dead letter, changing nothing', async () => {
    expect(await resolveDeadLetter(db(), 424242, 'requeue', 'x')).toEqual({ status: 'not_found', deadLetterId: 424242 });
    const { jobId, letterId } = await crafted({ key: 'twice' });
    await resolveDeadLetter(db(), letterId, 'discard', 'first');
    const before = await letterRow(letterId);
    const again = await resolveDeadLetter(db(), letterId, 'requeue', 'second');
    expect(again).toMatchObject({ status: 'already_reviewed', deadLetterId: letterId, resolution: 'discarded: first' });
    expect(await letterRow(letterId)).toEqual(before);
    expect((await jobRow(jobId)).status).toBe('dead');
  });

  it('refuses to requeue when the job was changed by SQL, changing nothing', async () => {
    const { jobId, letterId } = await crafted({ key: 'by-sql' });
    await t.sql("UPDATE cronq_jobs SET status = 'ready' WHERE id = ?", [jobId]);
    expect(await resolveDeadLetter(db(), letterId, 'requeue', 'x')).toEqual({ status: 'job_not_dead', deadLetterId: letterId, jobId, jobStatus: 'ready' });
    expect(await letterRow(letterId)).toEqual({ reviewed_at: null, resolution: null });
    // Discarding it is still allowed: it closes the dead letter and leaves the job alone.
    expect(await resolveDeadLetter(db(), letterId, 'discard', 'requeued by hand')).toMatchObject({ status: 'done' });
    expect((await jobRow(jobId)).status).toBe('ready');
  });

  it('refuses to requeue through an older dead letter once the job died again', async () => {
    const { jobId, letterId: older } = await crafted({ key: 'again', agoSeconds: 100 });
    const newer: any = await t.sql(
      "INSERT INTO cronq_dead_letters (job_id, queue, kind, job_key, payload, failure_reason, attempts) VALUES (?, 'default', 'report', 'again', '{}', 'Error: again', 3)",
      [jobId],
    );
    expect(await resolveDeadLetter(db(), older, 'requeue', 'x')).toEqual({ status: 'superseded', deadLetterId: older, jobId, latestDeadLetterId: newer.insertId });
    expect(await letterRow(older)).toEqual({ reviewed_at: null, resolution: null });
    expect(await resolveDeadLetter(db(), newer.insertId, 'requeue', 'x')).toMatchObject({ status: 'done' });
  });

  it('requires a reason', async () => {
    const { letterId } = await crafted({ key: 'no-reason' });
    await expect(resolveDeadLetter(db(), letterId, 'requeue', '  ')).rejects.toBeInstanceOf(UsageError);
    expect(await letterRow(letterId)).toEqual({ reviewed_at: null, resolution: null });
  });

  it('lets exactly one of two operators requeueing the same dead letter at once act', async () => {
    const other = connect(t.url, { poolSize: 2 });
    try {
      for (let round = 0; round < 10; round++) {
        const { jobId, letterId } = await crafted({ key: `race:${round}` });
        const outcomes = await Promise.all([
          resolveDeadLetter(db(), letterId, 'requeue', 'operator A'),
          resolveDeadLetter(other.db, letterId, round % 2 ? 'requeue' : 'discard', 'operator B'),
        ]);
        expect(outcomes.map((o) => o.status).sort()).toEqual(['already_reviewed', 'done']);
        const winner = outcomes.find((o) => o.status === 'done')!;
        const resolution = (await letterRow(letterId)).resolution;
        expect(resolution).toBe(winner === outcomes[0] ? 'requeued: operator A' : `${round % 2 ? 'requeued' : 'discarded'}: operator B`);
        expect((await jobRow(jobId)).status).toBe(resolution.startsWith('requeued') ? 'ready' : 'dead');
      }
    } finally {
      await other.close();
    }
  });
});

describe('bulk requeue and discard', () => {
  it('requeues exactly the unreviewed dead letters of one kind, in batches, and counts them', async () => {
    const matching = await Promise.all(Array.from({ length: 7 }, (_, i) => crafted({ key: `rep:${i}`, kind: 'report', agoSeconds: 100 + i })));
    const otherKind = await crafted({ key: 'mail:1', kind: 'mail' });
    const reviewed = await crafted({ key: 'rep:reviewed', kind: 'report', reviewed: 'discarded: earlier' });
    const notDead = await crafted({ key: 'rep:ready', kind: 'report', jobStatus: 'ready' });
    const result = await resolveMatching(db(), { kind: 'report' }, 'requeue', 'report server back', { batchSize: 3 });
    expect(result).toEqual({ touched: 7, skippedJobNotDead: 1, skippedSuperseded: 0, skippedHeld: 0 });
    const requeued = await t.sql("SELECT id FROM cronq_jobs WHERE status = 'ready' AND attempts = 0 ORDER BY id");
    expect(requeued.map((r: any) => r.id)).toEqual(matching.map((m) => m.jobId).sort((x, y) => x - y));
    expect(await jobRow(notDead.jobId)).toMatchObject({ status: 'ready', attempts: 3 });
    const resolved = await t.sql("SELECT id FROM cronq_dead_letters WHERE resolution = 'requeued: report server back'");
    expect(resolved.map((r: any) => r.id).sort((x: number, y: number) => x - y)).toEqual(matching.map((m) => m.letterId).sort((x, y) => x - y));
    expect((await jobRow(otherKind.jobId)).status).toBe('dead');
    expect(await letterRow(otherKind.letterId)).toEqual({ reviewed_at: null, resolution: null });
    expect((await letterRow(reviewed.letterId)).resolution).toBe('discarded: earlier');
    expect(await letterRow(notDead.letterId)).toEqual({ reviewed_at: null, resolution: null });
  });

  it('discards by queue and since, and with no filter takes every unreviewed one', async () => {
    await crafted({ key: 'old', queue: 'night', agoSeconds: 7200 });
    await crafted({ key: 'new', queue: 'night', agoSeconds: 10 });
    await crafted({ key: 'day', queue: 'day', agoSeconds: 10 });
    expect(await resolveMatching(db(), { queue: 'night', since: new Date(Date.now() - 600_000) }, 'discard', 'noise')).toMatchObject({ touched: 1 });
    expect(await t.sql("SELECT job_key FROM cronq_dead_letters WHERE reviewed_at IS NOT NULL")).toEqual([{ job_key: 'new' }]);
    expect(await resolveMatching(db(), {}, 'discard', 'all of it')).toMatchObject({ touched: 2 });
    expect(await t.sql('SELECT id FROM cronq_dead_letters WHERE reviewed_at IS NULL')).toEqual([]);
    expect(await t.sql("SELECT id FROM cronq_jobs WHERE status <> 'dead'")).toEqual([]);
  });

  it('two operators requeueing the same set at once resolve each dead letter exactly once', async () => {
    await Promise.all(Array.from({ length: 60 }, (_, i) => crafted({ key: `set:${i}`, agoSeconds: i })));
    const other = connect(t.url, { poolSize: 2 });
    try {
      const [a, b] = await Promise.all([
        resolveMatching(db(), {}, 'requeue', 'A', { batchSize: 7 }),
        resolveMatching(other.db, {}, 'requeue', 'B', { batchSize: 7 }),
      ]);
      expect(a.touched + b.touched).toBe(60);
      const [{ n }] = await t.sql("SELECT COUNT(*) AS n FROM cronq_dead_letters WHERE reviewed_at IS NOT NULL AND resolution IN ('requeued: A', 'requeued: B')");
      expect(Number(n)).toBe(60);
      const [{ ready }] = await t.sql("SELECT COUNT(*) AS ready FROM cronq_jobs WHERE status = 'ready' AND attempts = 0");
      expect(Number(ready)).toBe(60);
    } finally {
      await other.close();
    }
  });

  it('says how many it passed over because another transaction held them and then left them unreviewed', async () => {
    const letters = await Promise.all(Array.from({ length: 5 }, (_, i) => crafted({ key: `held:${i}`, agoSeconds: 10 + i })));
    const held = letters[2].letterId;
    const result = await whileLocked(t.url, { sql: 'SELECT id FROM cronq_dead_letters WHERE id = ? FOR UPDATE', values: [held] }, () =>
      resolveMatching(db(), {}, 'discard', 'bulk', { batchSize: 2 }),
    );
    expect(result).toEqual({ touched: 4, skippedJobNotDead: 0, skippedSuperseded: 0, skippedHeld: 1 });
    expect(await letterRow(held)).toEqual({ reviewed_at: null, resolution: null });
    const cli = await runCli(['dead', 'discard', '--all-matching', '--reason', 'again'], env);
    expect(cli).toMatchObject({ code: 0, stderr: '' });
    expect(cli.stdout.trim()).toBe('discarded 1 dead letter');
  });

  it('skips an older dead letter of a job that died again, and requeues through the newer one', async () => {
    const { jobId, letterId: older } = await crafted({ key: 'twice-dead', agoSeconds: 100 });
    await t.sql(
      "INSERT INTO cronq_dead_letters (job_id, queue, kind, job_key, payload, failure_reason, attempts, dead_at) VALUES (?, 'default', 'report', 'twice-dead', '{}', 'Error: again', 3, UTC_TIMESTAMP(6) - INTERVAL 5 SECOND)",
      [jobId],
    );
    expect(await resolveMatching(db(), {}, 'requeue', 'x')).toEqual({ touched: 1, skippedJobNotDead: 0, skippedSuperseded: 1, skippedHeld: 0 });
    expect(await letterRow(older)).toEqual({ reviewed_at: null, resolution: null });
    expect((await jobRow(jobId)).status).toBe('ready');
  });
});

describe('cronq dead (CLI)', () => {
  it('lists as a table and as JSON, with ISO UTC times', async () => {
    const a = await crafted({ key: 'report:2026-11', reason: 'Error: user 42 not found\n  at stack', agoSeconds: 100 });
    await crafted({ key: 'report:2026-12', reason: 'Error: user 43 not found', agoSeconds: 50 });
    const table = await runCli(['dead', 'list'], env);
    expect(table).toMatchObject({ code: 0, stderr: '' });
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^\s*ID\s+DEAD AT\s+KIND\s+KEY\s+ATTEMPTS\s+REASON$/);
    expect(lines[1]).toMatch(new RegExp(`^\\s*${a.letterId}\\s+\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z\\s+report\\s+report:2026-11\\s+3\\s+Error: user 42 not found$`));
    expect(lines).toHaveLength(3);
    const json = await runCli(['dead', 'list', '--json', '--group'], env);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual([
      { kind: 'report', reason: 'Error: user # not found', count: 2, firstDeadAt: expect.stringMatching(/Z$/), lastDeadAt: expect.stringMatching(/Z$/), exampleId: a.letterId },
    ]);
  });

  it('shows one dead letter in full, and refuses an unknown id with exit 64', async () => {
    const { jobId, letterId } = await crafted({ key: 'show:cli', reason: 'Error: boom\n    at handler (x.ts:1:1)' });
    const shown = await runCli(['dead', 'show', String(letterId)], env);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain(`dead letter ${letterId}`);
    expect(shown.stdout).toContain(`job:       ${jobId} (now dead, attempts 3/3`);
    expect(shown.stdout).toContain('"key": "show:cli"');
    expect(shown.stdout).toContain('        at handler (x.ts:1:1)');
    const missing = await runCli(['dead', 'show', String(letterId + 1000)], env);
    expect(missing).toMatchObject({ code: 64, stdout: '' });
    expect(missing.stderr.trim()).toBe(`cronq dead show: no dead letter with id ${letterId + 1000} (ids are the ones 'cronq dead list' prints)`);
  });

  it('requeue needs a reason, acts once, then refuses the reviewed dead letter with exit 64', async () => {
    const { jobId, letterId } = await crafted({ key: 'cli:requeue' });
    const noReason = await runMain(['dead', 'requeue', String(letterId)], env);
    expect(noReason.code).toBe(64);
    expect(noReason.stderr.trim()).toBe('cronq dead requeue: --reason R is required (it is recorded in the resolution)');
    expect(await letterRow(letterId)).toEqual({ reviewed_at: null, resolution: null });
    const done = await runCli(['dead', 'requeue', String(letterId), '--reason', 'fixed'], env);
    expect(done).toMatchObject({ code: 0, stderr: '' });
    expect(done.stdout.trim()).toBe(`requeued dead letter ${letterId}: job ${jobId} (key cli:requeue) is ready again with attempts 0`);
    const again = await runCli(['dead', 'discard', String(letterId), '--reason', 'late'], env);
    expect(again.code).toBe(64);
    expect(again.stderr).toMatch(new RegExp(`dead letter ${letterId} was already reviewed at \\S+Z \\(requeued: fixed\\); nothing changed`));
    expect(again.stderr.trim().split('\n')).toHaveLength(1);
    expect((await letterRow(letterId)).resolution).toBe('requeued: fixed');
  });

  it('bulk requeue by kind prints how many it touched', async () => {
    await crafted({ key: 'k1', kind: 'report' });
    await crafted({ key: 'k2', kind: 'report' });
    await crafted({ key: 'k3', kind: 'mail' });
    const r = await runCli(['dead', 'requeue', '--all-matching', '--kind', 'report', '--reason', 'back up'], env);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout.trim()).toBe('requeued 2 dead letters (kind report)');
    expect(await t.sql("SELECT job_key FROM cronq_jobs WHERE status = 'ready' ORDER BY job_key")).toEqual([{ job_key: 'k1' }, { job_key: 'k2' }]);
  });

  it.each([
    [['dead', '--json'], /missing SUBCOMMAND/],
    [['dead', 'purge'], /unknown subcommand 'purge'/],
    [['dead', 'requeue', '1', '--all-matching', '--reason', 'x'], /give an ID or --all-matching, not both/],
    [['dead', 'requeue', '--reason', 'x'], /give a dead letter ID, or --all-matching/],
    [['dead', 'discard', '1', '--kind', 'report', '--reason', 'x'], /select dead letters only with --all-matching/],
    [['dead', 'show', 'abc'], /ID must be a dead letter id/],
    [['dead', 'list', '--reason', 'x'], /--reason does not apply here/],
    [['dead', 'list', '--since', 'yesterday'], /--since must be an ISO 8601 instant/],
  ])('refuses %j with one line and exit 64, changing nothing', async (args, message) => {
    const { letterId } = await crafted({ key: 'untouched' });
    const r = await runMain(args, env);
    expect(r.code).toBe(64);
    expect(r.stderr).toMatch(message);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(await letterRow(letterId)).toEqual({ reviewed_at: null, resolution: null });
  });
});

describe('docs/dead-letters.md', () => {
  it('every SQL statement in it runs, and the by-hand requeue requeues', async () => {
    const { jobId } = await crafted({ key: 'doc:42' });
    await t.sql('UPDATE cronq_dead_letters SET id = 42 WHERE job_id = ?', [jobId]);
    const doc = readFileSync(new URL('../docs/dead-letters.md', import.meta.url), 'utf8');
    const blocks = [...doc.matchAll(/```sql\n([\s\S]*?)```/g)].map((m) => m[1]);
    expect(blocks.length).toBeGreaterThanOrEqual(6);
    const statements = blocks.flatMap((block) =>
      block
        .split('\n')
        .filter((line) => !line.trim().startsWith('--'))
        .join('\n')
        .split(/;\s*(?:\n|$)/)
        .map((s) => s.trim())
        .filter(Boolean),
    );
    for (const statement of statements) await t.sql(statement);
    expect(await jobRow(jobId)).toMatchObject({ status: 'ready', attempts: 0, lease_token: null, locked_by: null });
    expect((await letterRow(42)).resolution).toBe('requeued: upstream fixed (by hand)');
  });
});
