/**
 * The console's job and dead-letter pages read only the start of a payload from the
 * database: a job holding tens of megabytes must not make every view of its page fetch
 * and hold all of it. The cut is the store's (a bounded read), the note the page's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCronq, defineTask, type Cronq } from '../src/index.ts';
import type { JobRecord } from '../src/store/index.ts';
import { jobByIdOrKey } from '../src/store/console.ts';
import { getDeadLetter, type DeadLetterDetail } from '../src/store/deadLetters.ts';
import { ConsoleAuth } from '../src/http/console/auth.ts';
import { PAYLOAD_SHOWN_MAX } from '../src/http/console/payload.ts';
import { createConsole } from '../src/http/console/router.ts';
import { startHttpServer, type HttpServer } from '../src/http/server.ts';
import { silentLogger } from '../src/logger.ts';
import { useTestDatabase } from './support/db.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_dead_letters'] });
const TOKEN = 'ops:correct-horse-battery-staple';
const mail = defineTask({ name: 'send-mail', handle() {} });

/** Characters as the database counts them (code points), not UTF-16 units. */
const codePoints = (text: string) => [...text].length;

/** A payload of `n` astral characters (two UTF-16 units, four bytes each) and its JSON around them. */
function astralPayload(n: number): string {
  return `{"a":"${'😀'.repeat(n)}"}`;
}

async function insertJob(key: string, payload: string): Promise<void> {
  await t.sql(`INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, attempts, available_at) VALUES ('mail', 'send-mail', ?, ?, 'ready', 0, UTC_TIMESTAMP(6))`, [key, payload]);
}

describe('reading a job for the console', () => {
  it('returns at most the asked characters of a larger payload, with the whole size in bytes and characters', async () => {
    const payload = astralPayload(PAYLOAD_SHOWN_MAX * 2);
    await insertJob('big:1', payload);
    const job = await jobByIdOrKey(t.database.db, { key: 'big:1' }, { payloadCharsMax: PAYLOAD_SHOWN_MAX });
    expect(codePoints(job!.payloadText!)).toBe(PAYLOAD_SHOWN_MAX);
    expect(payload.startsWith(job!.payloadText!)).toBe(true);
    expect(job).toMatchObject({ payloadBytes: Buffer.byteLength(payload), payloadChars: codePoints(payload) });
  });

  it('returns a payload no longer than the bound whole, and every payload whole when not bounded', async () => {
    await insertJob('small:1', '{"a":1}');
    await insertJob('big:1', astralPayload(PAYLOAD_SHOWN_MAX));
    expect(await jobByIdOrKey(t.database.db, { key: 'small:1' }, { payloadCharsMax: 7 })).toMatchObject({ payloadText: '{"a":1}', payloadBytes: 7, payloadChars: 7 });
    expect((await jobByIdOrKey(t.database.db, { key: 'big:1' }))!.payloadText).toBe(astralPayload(PAYLOAD_SHOWN_MAX));
  });

  it('returns none of the payload, nor its size, when asked for no payload', async () => {
    await insertJob('big:1', astralPayload(PAYLOAD_SHOWN_MAX));
    const job = await jobByIdOrKey(t.database.db, { key: 'big:1' }, { payload: false });
    expect(job).toMatchObject({ key: 'big:1', status: 'ready' });
    expect(Object.keys(job!).filter((name) => name.startsWith('payload'))).toEqual([]);
  });

  it('refuses a bound that is no whole number of 1 or more, and a payload option but false or beside a bound, naming it', async () => {
    const cronq = createCronq({ databaseUrl: t.url, tasks: [mail], workers: false, scheduler: false, logger: false });
    try {
      for (const bad of [0, 1.5, -1, '10', Number.NaN]) {
        await expect(cronq.admin.job({ key: 'x' }, { payloadCharsMax: bad as number })).rejects.toThrow(/^job: payloadCharsMax must be a whole number from 1 to /);
      }
      await expect(cronq.admin.job({ key: 'x' }, { payloadMax: 10 } as any)).rejects.toThrow(/payloadMax/);
      await expect(cronq.admin.deadLetters.get(1, { payloadCharsMax: 0 })).rejects.toThrow(/^deadLetters\.get: payloadCharsMax must be a whole number from 1 to /);
      await expect(cronq.admin.job({ key: 'x' }, { payload: true as any })).rejects.toThrow(/^job: payload must be false \(read none of it\) or left out \(got true\)$/);
      await expect(cronq.admin.deadLetters.get(1, { payload: false, payloadCharsMax: 10 } as any)).rejects.toThrow(/^deadLetters\.get: payload: false reads none of the payload; leave out payloadCharsMax$/);
    } finally {
      await cronq.stop({ graceMs: 0 });
    }
  });
});

async function insertDeadLetter(id: number, payload: string): Promise<void> {
  await t.sql(`INSERT INTO cronq_dead_letters (id, job_id, queue, kind, job_key, payload, failure_reason, reason_group, attempts) VALUES (?, ?, 'mail', 'send-mail', ?, ?, 'Error: x', 'Error: x', 5)`, [id, 100 + id, `dead:${id}`, payload]);
}

describe('reading a dead letter for the console', () => {
  it('returns at most the asked characters of a larger payload, with the whole size in bytes and characters, and all of it unbounded', async () => {
    const payload = astralPayload(PAYLOAD_SHOWN_MAX * 2);
    await insertDeadLetter(3, payload);
    const letter = await getDeadLetter(t.database.db, 3, { payloadCharsMax: PAYLOAD_SHOWN_MAX });
    expect(codePoints(letter!.payloadText!)).toBe(PAYLOAD_SHOWN_MAX);
    expect(payload.startsWith(letter!.payloadText!)).toBe(true);
    expect(letter).toMatchObject({ payloadBytes: Buffer.byteLength(payload), payloadChars: codePoints(payload) });
    expect((await getDeadLetter(t.database.db, 3))!.payloadText).toBe(payload);
  });

  it('returns none of the payload, nor its size, when asked for no payload', async () => {
    await insertDeadLetter(3, astralPayload(PAYLOAD_SHOWN_MAX));
    const letter = await getDeadLetter(t.database.db, 3, { payload: false });
    expect(letter).toMatchObject({ id: 3, key: 'dead:3', failureReason: 'Error: x', job: null });
    expect(Object.keys(letter!).filter((name) => name.startsWith('payload'))).toEqual([]);
  });
});

describe('the console job page and a large payload', () => {
  let cronq: Cronq;
  let server: HttpServer;
  // Payload fields absent: read with { payload: false }.
  const read: Partial<JobRecord>[] = [];
  const lettersRead: Partial<DeadLetterDetail>[] = [];

  beforeAll(async () => {
    cronq = createCronq({ databaseUrl: t.url, tasks: [mail], workers: false, scheduler: false, logger: false });
    // The page's reads, recorded: what came from the database for it.
    const admin: Cronq['admin'] = {
      ...cronq.admin,
      job: (async (...args: Parameters<Cronq['admin']['job']>) => {
        const job = await cronq.admin.job(...args);
        if (job) read.push(job);
        return job;
      }) as Cronq['admin']['job'],
      deadLetters: {
        ...cronq.admin.deadLetters,
        get: (async (...args: Parameters<Cronq['admin']['deadLetters']['get']>) => {
          const letter = await cronq.admin.deadLetters.get(...args);
          if (letter) lettersRead.push(letter);
          return letter;
        }) as Cronq['admin']['deadLetters']['get'],
      },
    };
    server = await startHttpServer(
      { host: '127.0.0.1', port: 0 },
      {
        health: async () => ({ status: 'ok' }) as any,
        metrics: async () => ({ contentType: 'text/plain', body: '' }),
        console: createConsole({ admin, auth: new ConsoleAuth({ name: 'ops', secret: TOKEN.slice(4) }), log: silentLogger() }),
      },
      silentLogger(),
    );
  });

  afterAll(async () => {
    await server?.close();
    await cronq?.stop({ graceMs: 0 });
  });

  it('reads only the start it shows from the database and says the payload is cut and how large it is', async () => {
    const payload = astralPayload(PAYLOAD_SHOWN_MAX * 4);
    await insertJob('big:1', payload);
    const res = await fetch(`http://127.0.0.1:${server.port}/jobs/big:1`, { headers: { Authorization: `Bearer ${TOKEN}` } });
    const body = await res.text();
    expect(res.status).toBe(200);
    expect(read.map((job) => codePoints(job.payloadText!))).toEqual([PAYLOAD_SHOWN_MAX]);
    // The page shows PAYLOAD_SHOWN_MAX UTF-16 units: half as many of these two-unit characters.
    expect(body).toContain(`<pre id="payload">{&quot;a&quot;:&quot;😀😀`);
    expect(body).toContain(
      `Only its first ${PAYLOAD_SHOWN_MAX} characters are shown: the payload holds ${Buffer.byteLength(payload)} bytes (read it whole with <code>admin.job()</code>)`,
    );
  });

  it("reads only the start of a dead letter's payload it shows, saying it is cut and how large it is", async () => {
    const payload = astralPayload(PAYLOAD_SHOWN_MAX * 4);
    await insertDeadLetter(4, payload);
    const body = await (await fetch(`http://127.0.0.1:${server.port}/dead/4`, { headers: { Authorization: `Bearer ${TOKEN}` } })).text();
    expect(lettersRead.map((letter) => codePoints(letter.payloadText!))).toEqual([PAYLOAD_SHOWN_MAX]);
    expect(body).toContain(
      `Only its first ${PAYLOAD_SHOWN_MAX} characters are shown: the payload holds ${Buffer.byteLength(payload)} bytes (read it whole with <code>cronq dead show 4 --json</code>)`,
    );
  });

  it('reads none of a payload for a viewer without the token, who is not shown it, on the job and dead-letter pages', async () => {
    await insertJob('big:2', astralPayload(PAYLOAD_SHOWN_MAX * 4));
    await insertDeadLetter(5, astralPayload(PAYLOAD_SHOWN_MAX * 4));
    const [jobsBefore, lettersBefore] = [read.length, lettersRead.length];
    for (const path of ['/jobs/big:2', '/dead/5']) {
      const res = await fetch(`http://127.0.0.1:${server.port}${path}`);
      expect(res.status, path).toBe(200);
      expect(await res.text(), path).toContain('Payloads are shown to token holders only.');
    }
    const payloadFields = (row: object) => Object.keys(row).filter((name) => name.startsWith('payload'));
    expect(read.slice(jobsBefore).map(payloadFields)).toEqual([[]]);
    expect(lettersRead.slice(lettersBefore).map(payloadFields)).toEqual([[]]);
  });

  it('shows a payload exactly as long as the page shows whole, with no note', async () => {
    const payload = `{"a":"${'x'.repeat(PAYLOAD_SHOWN_MAX - 8)}"}`;
    await insertJob('edge:1', payload);
    const body = await (await fetch(`http://127.0.0.1:${server.port}/jobs/edge:1`, { headers: { Authorization: `Bearer ${TOKEN}` } })).text();
    expect(body).toContain(`<pre id="payload">${payload.replaceAll('"', '&quot;')}</pre>`);
    expect(body).not.toContain('Only its first');
  });

  it('says a payload one character longer than it shows is cut, though the start read holds no more than it shows', async () => {
    const payload = `{"a":"${'x'.repeat(PAYLOAD_SHOWN_MAX - 7)}"}`;
    await insertJob('edge:2', payload);
    const body = await (await fetch(`http://127.0.0.1:${server.port}/jobs/edge:2`, { headers: { Authorization: `Bearer ${TOKEN}` } })).text();
    expect(body).toContain(`Only its first ${PAYLOAD_SHOWN_MAX} characters are shown: the payload holds ${payload.length} bytes`);
  });
});
