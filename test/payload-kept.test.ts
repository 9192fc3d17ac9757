/**
 * On MariaDB the payload column is LONGTEXT with a json_valid() CHECK, which the server
 * evaluates on every row an UPDATE changes, whichever columns it sets: each claim,
 * renewal and completion read and parsed every payload again. cronq's writes that leave
 * the payload as stored turn that CHECK off for their one statement (PAYLOAD_KEPT).
 *
 * The tests make that visible without timing anything: a row whose stored payload breaks
 * the CHECK (written with the CHECK off, as a damaged row or a by-hand write would be)
 * fails every write evaluated under it with ER_CONSTRAINT_FAILED, so each write below
 * succeeds only if it does not re-check the payload. MySQL's JSON type is validated only
 * when written and cannot hold such a row: these tests are MariaDB's.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { cancelJob } from '../src/store/cancel.ts';
import { claimReady } from '../src/store/claims.ts';
import { getDeadLetter, listDeadLetters, resolveDeadLetter } from '../src/store/deadLetters.ts';
import { completeIfLeased, completeManyIfLeased, failIfLeased, releaseIfLeased, renewIfLeased } from '../src/store/fenced.ts';
import { insertJobsIfAbsent } from '../src/store/jobs.ts';
import { recoverExpiredLeases } from '../src/store/recovery.ts';
import { createCronq, defineTask } from '../src/index.ts';
import { useTestDatabase } from './support/db.ts';
import { EventLog } from './support/events.ts';
import { claimJobs, jobRow, THIRTY_SECOND_LEASES } from './support/jobs.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_dead_letters'] });
let mariadb = false;
beforeAll(async () => {
  const [{ v }] = await t.sql('SELECT VERSION() AS v');
  mariadb = /mariadb/i.test(String(v));
});

/** Makes the stored payload of `keys` text that is not JSON, past the CHECK. */
async function breakPayloads(...keys: string[]): Promise<void> {
  await t.sql(`SET STATEMENT check_constraint_checks=0 FOR UPDATE cronq_jobs SET payload = 'not json {' WHERE job_key IN (${keys.map((k) => `'${k}'`).join(', ')})`);
}

async function statusOf(key: string) {
  const [row] = await t.sql(`SELECT status, attempts, CAST(payload AS CHAR) AS payload FROM cronq_jobs WHERE job_key = '${key}'`);
  return row;
}

const claim = (limit: number) => claimJobs(t.database, limit);

describe('writes that leave the payload as stored (MariaDB)', () => {
  it('a write under the CHECK fails on such a row: the premise of these tests', async (ctx) => {
    if (!mariadb) ctx.skip();
    await insertJobsIfAbsent(t.database.db, [jobRow('premise')]);
    await breakPayloads('premise');
    await expect(t.sql("UPDATE cronq_jobs SET updated_at = UTC_TIMESTAMP(6) WHERE job_key = 'premise'")).rejects.toThrow(/CONSTRAINT `cronq_jobs.payload` failed/);
  });

  it('claims such rows, handing their payload over as stored', async (ctx) => {
    if (!mariadb) ctx.skip();
    await insertJobsIfAbsent(t.database.db, [jobRow('one'), jobRow('two')]);
    await breakPayloads('one', 'two');
    const claimed = await claim(2);
    expect(claimed.map((j) => [j.key, j.payloadText])).toEqual([
      ['one', 'not json {'],
      ['two', 'not json {'],
    ]);
  });

  // From here on the payloads break after the claim: each write below is the first under the CHECK.

  it('renews and completes such rows, alone and batched, leaving their payload untouched', async (ctx) => {
    if (!mariadb) ctx.skip();
    await insertJobsIfAbsent(t.database.db, [jobRow('one'), jobRow('two'), jobRow('three')]);
    const claimed = await claim(3);
    await breakPayloads('one', 'two', 'three');
    expect(await renewIfLeased(t.database.db, claimed[0].lease, 30_000)).toBe(true);
    expect(await completeIfLeased(t.database, claimed[0].lease)).toBe(true);
    expect(await completeManyIfLeased(t.database.db, [claimed[1].lease, claimed[2].lease])).toEqual(new Set([claimed[1].id, claimed[2].id]));
    for (const key of ['one', 'two', 'three']) expect(await statusOf(key)).toEqual({ status: 'done', attempts: 1, payload: 'not json {' });
  });

  it('retries, releases and recovers such rows', async (ctx) => {
    if (!mariadb) ctx.skip();
    await insertJobsIfAbsent(t.database.db, [jobRow('retried'), jobRow('released'), jobRow('expired')]);
    const [retried, released, expired] = await claim(3);
    await breakPayloads('retried', 'released', 'expired');
    expect(await failIfLeased(t.database.db, retried.lease, { error: 'boom', permanent: false, retryInMs: 0 })).toMatchObject({ status: 'retry' });
    expect(await releaseIfLeased(t.database.db, released.lease, 'shutting down')).toBe(true);
    await t.sql(`SET STATEMENT check_constraint_checks=0 FOR UPDATE cronq_jobs SET lease_deadline = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE id = ${expired.id}`);
    expect(await recoverExpiredLeases(t.database.db, 10)).toEqual({ returned: 1, dead: 0 });
    expect(await statusOf('retried')).toMatchObject({ status: 'ready', attempts: 1 });
    expect(await statusOf('released')).toMatchObject({ status: 'ready', attempts: 0 });
    expect(await statusOf('expired')).toMatchObject({ status: 'ready', attempts: 1 });
  });

  it('moves such a row to the dead letters with its payload as stored, shows and requeues the letter, and cancels such a row', async (ctx) => {
    if (!mariadb) ctx.skip();
    await insertJobsIfAbsent(t.database.db, [jobRow('dead'), jobRow('cancelled')]);
    const [dead] = await claimReady(t.database.claims, { queues: ['default'], limit: 1, leases: THIRTY_SECOND_LEASES, lockedBy: 'test:1' });
    await breakPayloads('dead', 'cancelled');
    expect(await failIfLeased(t.database.db, dead.lease, { error: 'payload is not valid JSON', permanent: true, retryInMs: 0 })).toEqual({ status: 'dead' });
    const [letter] = await t.sql("SELECT id, CAST(payload AS CHAR) AS payload FROM cronq_dead_letters WHERE job_key = 'dead'");
    expect(letter.payload).toBe('not json {');
    const { letters } = await listDeadLetters(t.database.db, { limit: 10 });
    expect(letters.map((l) => l.key)).toEqual(['dead']);
    expect(await getDeadLetter(t.database.db, Number(letter.id))).toMatchObject({ payloadText: 'not json {' });
    expect(await resolveDeadLetter(t.database.db, Number(letter.id), 'requeue', 'repaired by hand')).toMatchObject({ status: 'done' });
    expect(await statusOf('dead')).toMatchObject({ status: 'ready', attempts: 0 });
    expect(await cancelJob(t.database.db, { key: 'cancelled' }, { by: 'test', reason: 'not needed' })).toMatchObject({ status: 'cancelled' });
  });

  it('a worker sends a stored payload that is not JSON to the dead letters, naming why, and goes on with the others', async (ctx) => {
    if (!mariadb) ctx.skip();
    const log = new EventLog();
    const cronq = createCronq({ databaseUrl: t.url, logger: log.logger, concurrency: 4, pollInterval: '50ms', tasks: [defineTask({ name: 'test', handle: () => undefined })] });
    try {
      await insertJobsIfAbsent(t.database.db, [jobRow('broken'), ...Array.from({ length: 5 }, (_, i) => jobRow(`fine:${i}`))]);
      await breakPayloads('broken');
      await cronq.start();
      await log.waitFor('job_completed', 5);
      const [dead] = await log.waitFor('job_dead');
      expect(dead.error).toBe('PermanentError: payload is not valid JSON');
      expect(await t.sql("SELECT failure_reason, CAST(payload AS CHAR) AS payload FROM cronq_dead_letters WHERE job_key = 'broken'")).toEqual([
        { failure_reason: 'PermanentError: payload is not valid JSON', payload: 'not json {' },
      ]);
      expect(log.events.filter((e) => e.event === 'job_unclaimable')).toEqual([]);
    } finally {
      await cronq.stop();
    }
  });
});
