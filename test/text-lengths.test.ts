/**
 * A user string checked against a column counts characters as the column does: code
 * points (VARCHAR(n) utf8mb4 holds n of them), not UTF-16 units, so a key of 255 emoji
 * (510 units) fits the 255 of job_key. And a refusal of a too-long value never quotes it.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createCronq, defineTask, UsageError, type Cronq } from '../src/index.ts';
import { charLength, longerThanChars } from '../src/runtime/chars.ts';
import { runAction } from '../src/http/console/actions.ts';
import { runMain } from './support/runMain.ts';
import { useTestDatabase } from './support/db.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_dead_letters', 'cronq_pauses', 'cronq_daemons'] });
let env: Record<string, string>;
let cronq: Cronq | null = null;

beforeAll(() => {
  env = { DATABASE_URL: t.url, CRONQ_SCHEDULES: '', LOG_LEVEL: 'info' };
});

afterEach(async () => {
  await cronq?.stop({ graceMs: 1_000 });
  cronq = null;
});

/** `n` characters outside the BMP: 2·n UTF-16 units, n code points, 4·n bytes. */
const emoji = (n: number) => '😀'.repeat(n);
const MEGABYTE = 'x'.repeat(1 << 20);

/** The UsageError `run` throws or rejects with. */
async function refusal(run: () => unknown): Promise<UsageError> {
  try {
    await run();
  } catch (error) {
    expect(error).toBeInstanceOf(UsageError);
    return error as UsageError;
  }
  throw new Error('not refused');
}

/** Inserts a dead job and its dead letter by SQL; returns the letter's id. */
async function deadLetter(key: string): Promise<number> {
  const job: any = await t.sql(
    `INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, attempts, max_attempts, finished_time)
     VALUES ('default', 'report', ?, '{}', 'dead', 3, 3, UTC_TIMESTAMP(6))`,
    [key],
  );
  const letter: any = await t.sql(
    `INSERT INTO cronq_dead_letters (job_id, queue, kind, job_key, payload, failure_reason, attempts)
     VALUES (?, 'default', 'report', ?, '{}', 'Error: boom', 3)`,
    [job.insertId, key],
  );
  return letter.insertId;
}

describe('counting characters as the database does', () => {
  it('counts a surrogate pair as one character and a lone surrogate as one', () => {
    expect(charLength('')).toBe(0);
    expect(charLength('abc')).toBe(3);
    expect(charLength(emoji(3))).toBe(3);
    expect(charLength(`a${emoji(2)}b`)).toBe(4);
    expect(charLength('\ud83d')).toBe(1);
    expect(charLength('a\ude00\ud83d')).toBe(3);
    expect(charLength('\ud83d\ud83d\ude00')).toBe(2);
    expect([longerThanChars(emoji(255), 255), longerThanChars(emoji(256), 255), longerThanChars('x'.repeat(256), 255)]).toEqual([false, true, true]);
  });

  it('a job key as long as its column in emoji is enqueued whole, and a kind as long as a task name; one character more is refused', async () => {
    cronq = createCronq({ databaseUrl: t.url, logger: false, allowUnknownKind: true });
    expect((await cronq.enqueue({ kind: 'k'.repeat(64), key: emoji(255) })).created).toBe(true);
    expect(await cronq.enqueueMany([{ kind: 'k', key: `${emoji(254)}b` }])).toEqual({ inserted: 1, existing: 0 });
    const rows = await t.sql('SELECT CHAR_LENGTH(job_key) AS key_chars, CHAR_LENGTH(kind) AS kind_chars FROM cronq_jobs ORDER BY id');
    expect(rows.map((r) => [Number(r.key_chars), Number(r.kind_chars)])).toEqual([[255, 64], [255, 1]]);

    expect((await refusal(() => cronq!.enqueue({ kind: 'k', key: emoji(256) }))).message).toBe('job key is 256 characters long; at most 255 are allowed');
    expect((await refusal(() => cronq!.enqueueMany([{ kind: 'k', key: emoji(256) }]))).message).toMatch(/job key is 256 characters long; at most 255/);
    expect((await refusal(() => cronq!.enqueue({ kind: 'k'.repeat(65), key: 'k' }))).message).toBe(`job kind (a task's name) must be 1-64 letters, digits, '.', '_' or '-' (got "${'k'.repeat(64)}…")`);
    for (const job of [{ kind: MEGABYTE, key: 'k' }, { kind: 'k', key: MEGABYTE }, { kind: 'k', key: 'k', queue: MEGABYTE }]) {
      const { message } = await refusal(() => cronq!.enqueue(job));
      expect(message.length, message.slice(0, 100)).toBeLessThan(150);
    }
    expect((await refusal(() => cronq!.enqueue({ kind: 'k', key: 'k', queue: emoji(100) }))).message).toBe(`queue must be 1-64 letters, digits, '.', '_' or '-' (got "${emoji(32)}…")`);
    expect((await refusal(() => defineTask({ name: MEGABYTE, handle() {} }))).message).toBe(`name must be 1-64 letters, digits, '.', '_' or '-' (got "${'x'.repeat(64)}…")`);
  });

  it('lockedBy of 255 emoji is taken and recorded whole; 256 are refused', async () => {
    let ran!: () => void;
    const done = new Promise<void>((resolve) => (ran = resolve));
    const task = defineTask({ name: 'claimed', handle: () => ran() });
    cronq = createCronq({ databaseUrl: t.url, logger: false, tasks: [task], scheduler: false, pollInterval: '20ms', lockedBy: emoji(255) });
    await cronq.start();
    const { id } = await cronq.enqueue(task, { key: 'claimed:1', payload: {} });
    await done;
    expect((await t.sql('SELECT CHAR_LENGTH(id) AS n FROM cronq_daemons')).map((r) => Number(r.n))).toEqual([255]);
    expect((await t.sql('SELECT CHAR_LENGTH(locked_by) AS n FROM cronq_jobs WHERE id = ?', [id])).map((r) => Number(r.n))).toEqual([255]);
    for (const lockedBy of [emoji(256), MEGABYTE]) {
      const { message } = await refusal(() => createCronq({ databaseUrl: t.url, logger: false, lockedBy }));
      expect(message).toMatch(/^lockedBy must be a string of 1 to 255 characters \(got \d+ characters\)$/);
    }
  });

  it('a pause, a cancel and a dead-letter review take reasons and names as long as their columns in emoji (a pause names a queue as enqueue does); one more is refused', async () => {
    cronq = createCronq({ databaseUrl: t.url, logger: false, workers: false, scheduler: false });
    const pauses = cronq.admin.pauses;
    // A pause's name is a queue name, as enqueue takes it (ASCII, at most 64); its reason and who are free text.
    expect((await pauses.pause('queue', 'q'.repeat(64), { by: emoji(255), reason: emoji(255) })).status).toBe('paused');
    expect((await t.sql('SELECT CHAR_LENGTH(name) AS a, CHAR_LENGTH(paused_by) AS b, CHAR_LENGTH(reason) AS c FROM cronq_pauses'))[0]).toEqual({ a: 64, b: 255, c: 255 });
    expect((await refusal(() => pauses.pause('queue', emoji(1)))).message).toMatch(/^the queue name must be 1-64 letters/);
    expect((await refusal(() => pauses.pause('queue', MEGABYTE))).message.length).toBeLessThan(200);
    expect((await refusal(() => pauses.pause('queue', 'q', { reason: emoji(256) }))).message).toBe('the reason is longer than 255 characters (256)');
    expect((await refusal(() => pauses.pause('queue', 'q', { reason: MEGABYTE }))).message.length).toBeLessThan(100);

    const job: any = await t.sql("INSERT INTO cronq_jobs (queue, kind, job_key, payload) VALUES ('default', 'report', 'to-cancel', '{}')");
    const id = Number(job.insertId);
    expect((await refusal(() => cronq!.admin.cancel({ id }, { by: 'ann', reason: emoji(256) }))).message).toBe('the reason is 256 characters long; at most 255');
    expect((await refusal(() => cronq!.admin.cancel({ id }, { by: emoji(256), reason: 'r' }))).message).toBe('the canceller name is 256 characters long; at most 255');
    expect((await cronq.admin.cancel({ id }, { by: emoji(255), reason: emoji(255) })).status).toBe('cancelled');
    expect((await t.sql('SELECT CHAR_LENGTH(cancelled_by) AS a, CHAR_LENGTH(cancel_reason) AS b FROM cronq_jobs WHERE id = ?', [id]))[0]).toEqual({ a: 255, b: 255 });

    const letter = await deadLetter('dead:1');
    expect((await refusal(() => cronq!.admin.deadLetters.discard(letter, emoji(1001)))).message).toBe('the reason is 1001 characters long; at most 1000');
    expect((await cronq.admin.deadLetters.discard(letter, emoji(1000))).status).toBe('done');
  });

  it('cronq cancel and cronq dead take a reason of as many emoji as they allow characters', async () => {
    const job: any = await t.sql("INSERT INTO cronq_jobs (queue, kind, job_key, payload) VALUES ('default', 'report', 'cli-cancel', '{}')");
    const cancelled = await runMain(['cancel', String(job.insertId), '--reason', emoji(255), '--by', emoji(255)], env);
    expect([cancelled.code, cancelled.stderr]).toEqual([0, '']);
    const tooLong = await runMain(['cancel', String(job.insertId), '--reason', emoji(256)], env);
    expect([tooLong.code, tooLong.stderr]).toEqual([64, 'cronq cancel: --reason is longer than 255 characters\n']);

    const letter = await deadLetter('dead:cli');
    const tooLongDead = await runMain(['dead', 'discard', String(letter), '--reason', emoji(1001)], env);
    expect([tooLongDead.code, tooLongDead.stderr]).toEqual([64, 'cronq dead discard: --reason is longer than 1000 characters\n']);
    const discarded = await runMain(['dead', 'discard', String(letter), '--reason', emoji(1000)], env);
    expect([discarded.code, discarded.stderr]).toEqual([0, '']);
  });
});

describe('the console recording a reason', () => {
  it('cuts it to the reason limit without splitting an emoji into a lone surrogate', async () => {
    const given: string[] = [];
    const admin = { deadLetters: { requeue: async (id: number, reason: string) => (given.push(reason), { status: 'done' }) } } as never;
    // '[console:ops] ' is 14 units: the emoji starts at unit 999, where a 1,000-unit cut fell.
    await runAction(admin, '/dead/7/requeue', new URLSearchParams({ reason: `${'x'.repeat(985)}${emoji(10)}` }), 'ops');
    expect(given).toEqual([`[console:ops] ${'x'.repeat(985)}`]);
  });
});
