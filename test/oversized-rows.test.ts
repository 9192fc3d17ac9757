/**
 * A job row larger than the server's max_allowed_packet (written before an operator
 * lowered it, or by a client allowed larger packets): the claim's read of its payload
 * comes back NULL (warning 1301). It must go dead in that claim with a reason saying what
 * to raise, not stall every claim that picks it; the jobs claimed beside it run. These run
 * on a private server (SET GLOBAL max_allowed_packet changes the whole server), skipped as
 * outage.test.ts is without a server binary and with DATABASE_URL pointing elsewhere.
 * The last test has no database: a claim the pool fails to take is released at once.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createCronq, type Cronq } from '../src/cronq.ts';
import type { Lease } from '../src/store/index.ts';
import { defineTask } from '../src/tasks/define.ts';
import { TaskRegistry } from '../src/tasks/registry.ts';
import { eventually, EventLog } from './support/events.ts';
import { claimedJob } from './support/jobs.ts';
import { findServerBinary, PrivateServer, queryOnce } from './support/privateServer.ts';
import { scriptedStore, withPool } from './support/scriptedStore.ts';

const haveBinary = findServerBinary() !== null;
const skip = !haveBinary && Boolean(process.env.DATABASE_URL);

/** The packet limit the tests lower the server to, and a payload well past it. */
const LOWERED_PACKET = 1024 * 1024;
const BIG_PAYLOAD_CHARS = 3 * 1024 * 1024;

let server: PrivateServer;
let url: string;
let engine: Cronq | undefined;
let defaultPacket: number;

/** One statement on a connection of its own (queryOnce). */
const query = <T = any>(statement: string, values: unknown[] = []) => queryOnce<T>(url, statement, values);

const done: string[] = [];
const small = defineTask({ name: 'small', handle: (job) => void done.push(job.key) });
const big = defineTask({ name: 'big', maxAttempts: 3, handle: () => undefined });

/** Writes a job whose payload is BIG_PAYLOAD_CHARS long (the server still allows it), then a small one; returns their ids. */
async function enqueueBigAndSmall(): Promise<{ bigId: number; smallId: number }> {
  const writer = createCronq({ databaseUrl: url, logger: false, tasks: [small, big] });
  try {
    const { id: bigId } = await writer.enqueue(big, { key: 'big:1', payload: { blob: 'x'.repeat(BIG_PAYLOAD_CHARS) } });
    const { id: smallId } = await writer.enqueue(small, { key: 'small:1', payload: {} });
    return { bigId, smallId };
  } finally {
    await writer.stop();
  }
}

/** Starts a worker for both kinds; its connections are new, so they see the lowered limit. */
async function startWorker(log: EventLog): Promise<Cronq> {
  engine = createCronq({ databaseUrl: url, tasks: [small, big], logger: log.logger, pollInterval: '50ms' });
  await engine.start();
  return engine;
}

describe.skipIf(skip)(skip ? 'a row larger than max_allowed_packet (skipped: no mariadbd/mysqld binary here)' : 'a row larger than max_allowed_packet', () => {
  beforeAll(async () => {
    server = await PrivateServer.create();
    url = `${server.url}/cronq_oversized`;
    const setup = createCronq({ databaseUrl: url, logger: false });
    await setup.migrate();
    await setup.stop();
    [{ bytes: defaultPacket }] = await query<{ bytes: number }>('SELECT @@GLOBAL.max_allowed_packet AS bytes');
  });

  beforeEach(() => {
    done.length = 0;
  });

  afterEach(async () => {
    await engine?.stop({ graceMs: 0 }).catch(() => undefined);
    engine = undefined;
    await query('SET GLOBAL max_allowed_packet = ?', [defaultPacket]);
    await query('RENAME TABLE cronq_dead_letters_away TO cronq_dead_letters').catch(() => undefined);
    await query('DELETE FROM cronq_jobs');
    await query('DELETE FROM cronq_dead_letters');
  });

  afterAll(async () => {
    await server?.destroy();
  });

  it('goes dead in the claim that finds it, attempts unchanged, with a dead letter saying what to raise, while the job beside it runs', async () => {
    const { bigId, smallId } = await enqueueBigAndSmall();
    await query('SET GLOBAL max_allowed_packet = ?', [LOWERED_PACKET]);
    const log = new EventLog('info');
    await startWorker(log);
    await log.waitFor('job_completed', 1, 15_000, (e) => e.job_id === smallId);
    const row = await eventually(async () => {
      const [found] = await query("SELECT status, attempts, last_error FROM cronq_jobs WHERE id = ? AND status = 'dead'", [bigId]);
      return found;
    }, 15_000, 'the oversized job to go dead');
    const payloadBytes = BIG_PAYLOAD_CHARS + '{"blob":""}'.length;
    const reason =
      `row is larger than the server's max_allowed_packet (${LOWERED_PACKET} bytes): its payload is ${payloadBytes} bytes; ` +
      'raise max_allowed_packet to at least 4194304 bytes (4M), then requeue it';
    expect(row).toEqual({ status: 'dead', attempts: 0, last_error: reason });
    const letters = await query('SELECT job_id, failure_reason, attempts, LENGTH(payload) AS bytes FROM cronq_dead_letters');
    expect(letters).toEqual([{ job_id: bigId, failure_reason: reason, attempts: 0, bytes: payloadBytes }]);
    expect(done).toEqual(['small:1']);
    expect(log.named('db_error')).toEqual([]);
    expect(log.named('claim_handoff_failed')).toEqual([]);
    expect(log.named('job_claimed').map((e) => e.job_id)).toEqual([smallId]);
    // Read back while the limit is still low: shown as not readable, with its size, never as a null payload.
    const [{ id: letterId }] = await query('SELECT id FROM cronq_dead_letters');
    expect(await engine!.admin.deadLetters.get(Number(letterId))).toMatchObject({ payloadText: null, payloadBytes });
    expect(await engine!.admin.job({ id: bigId })).toMatchObject({ payloadText: null, payloadBytes });
    // The console's bounded reads too: not readable, not a start of it.
    expect(await engine!.admin.deadLetters.get(Number(letterId), { payloadCharsMax: 100 })).toMatchObject({ payloadText: null, payloadBytes });
    expect(await engine!.admin.job({ id: bigId }, { payloadCharsMax: 100 })).toMatchObject({ payloadText: null, payloadBytes });
  });

  it('is skipped with one job_unclaimable line when its dead letter is refused too, and the job beside it runs', async () => {
    const { bigId, smallId } = await enqueueBigAndSmall();
    await query('RENAME TABLE cronq_dead_letters TO cronq_dead_letters_away');
    await query('SET GLOBAL max_allowed_packet = ?', [LOWERED_PACKET]);
    const log = new EventLog('info');
    await startWorker(log);
    await log.waitFor('job_completed', 1, 15_000, (e) => e.job_id === smallId);
    const [unclaimable] = await log.waitFor('job_unclaimable');
    expect(unclaimable).toMatchObject({ job_ids: [bigId], jobs: 1 });
    expect(unclaimable.error).toMatch(/cronq_dead_letters/);
    // Claims go on, none of them picking the row again: a job enqueued elsewhere is found
    // by a poll's claim by range, which passes the row by.
    const claimsBefore = log.named('job_claimed').length;
    const writer = createCronq({ databaseUrl: url, logger: false, tasks: [small] });
    await writer.enqueue(small, { key: 'small:2', payload: {} });
    await writer.stop();
    await log.waitFor('job_completed', 2);
    expect(log.named('job_claimed')).toHaveLength(claimsBefore + 1);
    expect(log.named('job_unclaimable')).toHaveLength(1);
    expect(log.named('db_error')).toEqual([]);
    expect(await query('SELECT status, attempts FROM cronq_jobs WHERE id = ?', [bigId])).toEqual([{ status: 'ready', attempts: 0 }]);
  });
});

describe('jobs a claim reserved that the pool fails to take', () => {
  it('are released by their lease tokens at once, logged as claim_handoff_failed, not left to their leases', async () => {
    const log = new EventLog();
    const released: Array<{ lease: Lease; reason: string }> = [];
    const fake = scriptedStore({ writes: { releaseUnstarted: async (lease: Lease, reason: string) => (released.push({ lease, reason }), true) } });
    // A job the pool cannot take: its payload is no text (what a claim of an oversized row once handed out).
    const broken = { ...claimedJob(1, 'k'), payloadText: null as unknown as string };
    const fine = claimedJob(2, 'k');
    const started: number[] = [];
    const tasks = new TaskRegistry([defineTask({ name: 'k', handle: (job) => void started.push(job.id) })]);
    await withPool(fake, { tasks, log }, async () => {
      (await fake.claim(1)).answer([broken, fine]);
      const [failed] = await log.waitFor('claim_handoff_failed');
      expect(failed).toMatchObject({ jobs: 2, job_ids: [1, 2] });
      expect(failed.error).toMatch(/^TypeError: /);
      await log.waitFor('claim_released_unstarted', 2);
      expect(released.map((r) => r.lease)).toEqual([broken.lease, fine.lease]);
      expect(released[0].reason).toMatch(/failed to take it/);
      expect(log.named('db_error')).toEqual([]);
      expect(started).toEqual([]);
    });
  });
});
