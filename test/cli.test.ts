import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseIsoInstant } from '../src/cli/instant.ts';
import { CRONQ_BIN, runCli, runProcess, REPO_ROOT } from './support/cli.ts';
import { useTestDatabase } from './support/db.ts';
import { whileLocked } from './support/rowLock.ts';
import { runMain } from './support/runMain.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs'] });
const env = () => ({ DATABASE_URL: t.url, CRONQ_SCHEDULES: 'test/fixtures/schedules-daemon', LOG_LEVEL: 'info' });

// Inside the repo, so `import ... from 'cronq'` resolves for the CLI as it does for users.
const root = join(REPO_ROOT, 'test', '.tmp');
mkdirSync(root, { recursive: true });
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
function tempDir(): string {
  const dir = mkdtempSync(join(root, 'cli-'));
  dirs.push(dir);
  return dir;
}

describe('cronq tick --at', () => {
  it('refuses an instant later than now in one line, exit 64, enqueueing nothing (the period must still run when it comes)', async () => {
    const r = await runMain(['tick', 'nightly', '--at', '2999-12-31T23:59:59Z'], env());
    expect(r).toMatchObject({ code: 64, stdout: '' });
    expect(r.stderr).toMatch(/^cronq tick: --at must not be later than now \(\S+Z by this host's clock, 5s of clock skew allowed\): .* \(got 2999-12-31T23:59:59\.000Z\)\n$/);
    expect(await t.sql('SELECT job_key FROM cronq_jobs')).toEqual([]);
    expect((await runMain(['tick', '--help'], env())).stdout).toContain('a later --at is refused (exit 64)');
  });
});

describe("cronq enqueue of a schedule's key", () => {
  it("refuses a key under a loaded schedule's prefix in one line naming the key, the schedule and cronq tick, exit 64, enqueueing nothing", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'daily.ts'), "import { defineSchedule } from 'cronq';\nexport const daily = defineSchedule({ name: 'daily', cron: '0 2 * * *', timezone: 'UTC', period: 'day', handle() {} });\n");
    const r = await runCli(['enqueue', 'daily', '--key', 'daily:2026-12-04', '--schedules', dir], env());
    expect(r).toMatchObject({ code: 64, stdout: '' });
    expect(r.stderr).toMatch(/^cronq enqueue: job key "daily:2026-12-04" is a key of schedule 'daily' \(its name, then a day period key\): a schedule's keys are written by its ticks; .*`cronq tick daily --at ISO`/m);
    expect(await t.sql('SELECT job_key FROM cronq_jobs')).toEqual([]);
    const byHand = await runCli(['enqueue', 'daily', '--key', 'by-hand:1', '--schedules', dir], env());
    expect(byHand.code).toBe(0);
  });
});

describe('cronq tick of a paused schedule', () => {
  it('is refused in one line naming the pause and both ways on, exit 64, enqueueing nothing; --force runs it and the pause stays', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'nightly.ts'), "import { defineSchedule } from 'cronq';\nexport const nightly = defineSchedule({ name: 'nightly', cron: '0 2 * * *', handle() {} });\n");
    const withIt = { ...env(), CRONQ_SCHEDULES: dir };
    await t.sql("INSERT INTO cronq_pauses (target, name, reason, paused_by) VALUES ('schedule', 'nightly', 'quarter close', 'ann')");
    try {
      const r = await runMain(['tick', 'nightly'], withIt);
      expect(r).toMatchObject({ code: 64, stdout: '' });
      expect(r.stderr).toMatch(/^cronq tick: schedule 'nightly' is paused by ann since \S+Z: quarter close; --force runs it anyway, or 'cronq resume nightly' first\n$/);
      expect(await t.sql('SELECT job_key FROM cronq_jobs')).toEqual([]);
      const forced = await runMain(['tick', 'nightly', '--force'], withIt);
      expect(forced).toMatchObject({ code: 0, stderr: '' });
      expect(forced.stdout).toMatch(/^nightly tick \S+Z \(period \S+\): 1 enqueued, 0 already present\n$/);
      expect(await t.sql("SELECT name FROM cronq_pauses WHERE target = 'schedule'")).toEqual([{ name: 'nightly' }]);
    } finally {
      await t.sql('DELETE FROM cronq_pauses');
    }
  });
});

describe('a database busy with another transaction\'s locks', () => {
  const busy = /^cronq (cancel|dead requeue): the database is busy \(ER_LOCK_WAIT_TIMEOUT Lock wait timeout exceeded; try restarting transaction\); try again\n$/;

  it('cronq cancel prints one line saying so and to try again, exit 75 (EX_TEMPFAIL), changing nothing', async () => {
    const id = Number((await runMain(['enqueue', 'traced', '--key', 'held:1'], env())).stdout);
    const r = await whileLocked(t.url, { sql: 'SELECT id FROM cronq_jobs WHERE id = ? FOR UPDATE', values: [id] }, () => runMain(['cancel', String(id), '--reason', 'not needed'], env()));
    expect(r).toMatchObject({ code: 75, stdout: '' });
    expect(r.stderr).toMatch(busy);
    expect(r.stderr).toMatch(/^cronq cancel: /);
    expect(await t.sql('SELECT status FROM cronq_jobs WHERE id = ?', [id])).toEqual([{ status: 'ready' }]);
    // Once the lock is gone, the same command does it.
    expect((await runMain(['cancel', String(id), '--reason', 'not needed'], env())).code).toBe(0);
  });

  it('cronq dead requeue too, leaving the dead letter unreviewed', async () => {
    await t.sql("INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, attempts) VALUES ('default', 'traced', 'dead:held', '{}', 'dead', 5)");
    const [{ id: jobId }] = await t.sql("SELECT id FROM cronq_jobs WHERE job_key = 'dead:held'");
    await t.sql("INSERT INTO cronq_dead_letters (job_id, queue, kind, job_key, payload, failure_reason, attempts) VALUES (?, 'default', 'traced', 'dead:held', '{}', 'Error: boom', 5)", [jobId]);
    const [{ id: letterId }] = await t.sql('SELECT MAX(id) AS id FROM cronq_dead_letters');
    try {
      const lock = { sql: 'SELECT id FROM cronq_dead_letters WHERE id = ? FOR UPDATE', values: [letterId] };
      const r = await whileLocked(t.url, lock, () => runMain(['dead', 'requeue', String(letterId), '--reason', 'fixed'], env()));
      expect(r).toMatchObject({ code: 75, stdout: '' });
      expect(r.stderr).toMatch(busy);
      expect(r.stderr).toMatch(/^cronq dead requeue: /);
      expect(await t.sql('SELECT reviewed_at FROM cronq_dead_letters WHERE id = ?', [letterId])).toEqual([{ reviewed_at: null }]);
    } finally {
      await t.sql('DELETE FROM cronq_dead_letters');
    }
  });
});

describe('output through a pipe', () => {
  it('cronq schedules --json writes more than 1 MB whole before it exits', async () => {
    const dir = tempDir();
    const schedules = Array.from({ length: 40 }, (_, i) => `export const s${i} = defineSchedule({ name: 'many${i}', cron: '* * * * *', handle() {} });`);
    writeFileSync(join(dir, 'many.ts'), `import { defineSchedule } from 'cronq';\n${schedules.join('\n')}\n`);
    const r = await runCli(['schedules', '--json', '--count', '1000', '--schedules', dir], env());
    expect(r.code).toBe(0);
    expect(r.stdout.length).toBeGreaterThan(1024 * 1024);
    const listed = JSON.parse(r.stdout);
    expect(listed).toHaveLength(40);
    expect(listed.every((s: { next: string[] }) => s.next.length === 1000)).toBe(true);
  });

  it('a reader that goes away (| head) ends the command quietly with its own exit code', async () => {
    const dir = tempDir();
    const schedules = Array.from({ length: 40 }, (_, i) => `export const s${i} = defineSchedule({ name: 'many${i}', cron: '* * * * *', handle() {} });`);
    writeFileSync(join(dir, 'many.ts'), `import { defineSchedule } from 'cronq';\n${schedules.join('\n')}\n`);
    const child = spawn(process.execPath, [CRONQ_BIN, 'schedules', '--json', '--count', '1000', '--schedules', dir], { cwd: REPO_ROOT, env: { ...process.env, ...env() } });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    child.stdout.once('data', () => child.stdout.destroy()); // as head does once it has its lines
    const code = await new Promise((resolve) => child.on('close', resolve));
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
  });

  it.skipIf(!existsSync('/dev/full'))('output that cannot be written (a full disk) is one line on stderr and exit 74, not a silent success', async () => {
    const full = openSync('/dev/full', 'w');
    try {
      const commands: Array<[string[], string]> = [[['--help'], 'cronq'], [['dead', 'list', '--json'], 'cronq dead list'], [['stats'], 'cronq stats']];
      for (const [args, named] of commands) {
        const r = await runProcess(process.execPath, [CRONQ_BIN, ...args], { cwd: REPO_ROOT, env: env(), timeoutMs: 30_000, stdoutFd: full });
        expect(r.stderr, args.join(' ')).toBe(`${named}: cannot write output: ENOSPC: no space left on device, write\n`);
        expect(r.code, args.join(' ')).toBe(74);
      }
    } finally {
      closeSync(full);
    }
  });
});

describe('instants on the command line', () => {
  it('accepts the days a month has, leap days included, and no other', () => {
    expect(parseIsoInstant('2028-02-29T00:00:00Z', '--at').toISOString()).toBe('2028-02-29T00:00:00.000Z');
    expect(() => parseIsoInstant('2028-02-30T00:00:00Z', '--at')).toThrow("--at is not a date that exists (got '2028-02-30T00:00:00Z')");
    expect(parseIsoInstant('2026-12-01', '--at').toISOString()).toBe('2026-12-01T00:00:00.000Z');
    expect(parseIsoInstant('2026-12-01T03:00+01:00', '--at').toISOString()).toBe('2026-12-01T02:00:00.000Z');
    expect(parseIsoInstant('1970-01-01T00:00:00Z', '--at').getTime()).toBe(0);
  });

  it.each([
    ['2026-02-30T00:00:00Z', /is not a date that exists/],
    ['2027-02-29T00:00:00Z', /is not a date that exists/],
    ['2026-13-01T00:00:00Z', /is not a date that exists/],
    ['2026-04-31', /is not a date that exists/],
    ['2026-01-01T24:00:00Z', /is not a time that exists/],
    ['2026-06-30T23:59:60Z', /is not a time that exists/],
    ['0000-01-01T00:00:00Z', /must be in 1970 or later/],
    ['1969-12-31T23:59:59Z', /must be in 1970 or later/],
    ['1970-01-01T00:30:00+01:00', /must be in 1970 or later/],
  ])('refuses %s for every instant flag with one line and exit 64', async (value, why) => {
    for (const args of [
      ['enqueue', 'traced', '--key', 'k', '--run-at', value],
      ['tick', 'nightly', '--at', value],
      ['schedules', '--from', value],
      ['dead', 'list', '--since', value],
    ]) {
      const r = await runMain(args, env());
      expect(r.code, args.join(' ')).toBe(64);
      expect(r.stdout).toBe('');
      expect(r.stderr, args.join(' ')).toMatch(why);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
    }
  });

  it('cronq enqueue --run-at 2026-02-30 stores nothing', async () => {
    const r = await runMain(['enqueue', 'traced', '--key', 'feb:30', '--run-at', '2026-02-30T00:00:00Z'], env());
    expect(r).toMatchObject({ code: 64, stdout: '' });
    expect(r.stderr).toBe("cronq enqueue: --run-at is not a date that exists (got '2026-02-30T00:00:00Z')\n");
    expect(await t.sql('SELECT id FROM cronq_jobs')).toEqual([]);
  });
});

describe('cronq enqueue --payload-file', () => {
  it('reads a 1 MB payload from standard input', async () => {
    const payload = { blob: 'x'.repeat(1024 * 1024), n: 1 };
    const r = await runCli(['enqueue', 'traced', '--key', 'big:1', '--payload-file', '-'], env(), 30_000, JSON.stringify(payload));
    expect(r).toMatchObject({ code: 0, stderr: '' });
    const [row] = await t.sql('SELECT id, payload FROM cronq_jobs');
    expect(r.stdout).toBe(`${row.id}\n`);
    expect(JSON.parse(typeof row.payload === 'string' ? row.payload : JSON.stringify(row.payload))).toEqual(payload);
  });

  it('reads the payload from a file', async () => {
    const file = join(tempDir(), 'payload.json');
    writeFileSync(file, '{"userId": 42}\n');
    const r = await runMain(['enqueue', 'traced', '--key', 'file:1', '--payload-file', file], env());
    expect(r.code).toBe(0);
    const [row] = await t.sql('SELECT payload FROM cronq_jobs');
    expect(JSON.parse(typeof row.payload === 'string' ? row.payload : JSON.stringify(row.payload))).toEqual({ userId: 42 });
  });

  it.each([
    ['both flags', ['--payload', '{}', '--payload-file', 'x.json'], /^cronq enqueue: give --payload or --payload-file, not both$/],
    ['a missing file', ['--payload-file', 'test/.tmp/no-such-file.json'], /^cronq enqueue: --payload-file: cannot read test\/\.tmp\/no-such-file\.json: no such file$/],
    ['a folder', ['--payload-file', 'test'], /^cronq enqueue: --payload-file: cannot read test: EISDIR$/],
    ['text that is not JSON', ['--payload-file', 'not.json'], /^cronq enqueue: --payload-file is not valid JSON: /],
    ['text that is not UTF-8', ['--payload-file', 'latin1.json'], /^cronq enqueue: --payload-file: \S+latin1\.json is not UTF-8 text$/],
    // JSON.parse would make it Infinity, stored as null.
    ['a number out of range', ['--payload', '{"amount":1e400}'], /^cronq enqueue: --payload: the number 1e400 at character 11 is out of range \(JSON numbers are read as doubles\)$/],
    ['an integer too large to keep', ['--payload', '{"id":9007199254740993}'], /^cronq enqueue: --payload: the number 9007199254740993 at character 7 would be stored as 9007199254740992 \(JSON numbers are read as doubles; pass it as a string\)$/],
    ['a decimal a double rounds', ['--payload', '{"price":19.999999999999999,"big":123456789012345678901234567890.5}'], /^cronq enqueue: --payload: the number 19\.999999999999999 at character 10 would be stored as 20 \(/],
    ['a decimal a double rounds, from a file', ['--payload-file', 'rounded.json'], /^cronq enqueue: --payload-file: the number 1\.0000000000000001 at character 7 would be stored as 1 \(/],
    ['negative zero', ['--payload', '{"t":-0}'], /^cronq enqueue: --payload: the number -0 at character 6 would be stored as 0 \(JSON text is written without negative zero; write 0\)$/],
    ['a bare number out of range', ['--payload', '[1,-1e999]'], /^cronq enqueue: --payload: the number -1e999 at character 4 is out of range/],
  ])('refuses %s with one line, exit 64, and writes nothing', async (_what, flags, message) => {
    const dir = tempDir();
    writeFileSync(join(dir, 'not.json'), '{"a": ');
    writeFileSync(join(dir, 'latin1.json'), Buffer.from([0x22, 0xe9, 0x22]));
    writeFileSync(join(dir, 'rounded.json'), '{"a": 1.0000000000000001}\n');
    const args = flags.map((f) => (f.endsWith('.json') && !f.includes('/') && f !== 'x.json' ? join(dir, f) : f));
    const r = await runMain(['enqueue', 'traced', '--key', 'bad:1', ...args], env());
    expect(r).toMatchObject({ code: 64, stdout: '' });
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr.trim()).toMatch(message);
    expect(await t.sql('SELECT id FROM cronq_jobs')).toEqual([]);
  });
});

describe('cronq enqueue payload numbers', () => {
  it('keeps numbers a double holds, and never reads a number inside a string', async () => {
    const payload = '{"id":9007199254740992,"note":"1e400 and 9007199254740993","x":[-0.5,1e300,"\\"9007199254740993"],"y":[1.50,1.5e0,15e-1,0.1]}';
    const r = await runMain(['enqueue', 'traced', '--key', 'exact:1', '--payload', payload], env());
    expect(r).toMatchObject({ code: 0, stderr: '' });
    const [job] = await t.sql('SELECT CAST(payload AS CHAR) AS payload FROM cronq_jobs WHERE job_key = ?', ['exact:1']);
    expect(JSON.parse(job.payload)).toEqual(JSON.parse(payload));
  });
});

describe('cronq enqueue of a key already present', () => {
  it('prints the existing id alone on stdout, and on stderr one line naming the key, the job and its status, exit 0', async () => {
    const first = await runMain(['enqueue', 'traced', '--key', 'sp'], env());
    expect(first).toMatchObject({ code: 0, stderr: '' });
    const id = first.stdout.trim();
    expect((await runMain(['cancel', id, '--reason', 'not needed'], env())).code).toBe(0);
    const again = await runMain(['enqueue', 'traced', '--key', 'sp', '--payload', '{"other":1}'], env());
    expect(again).toEqual({ code: 0, stdout: `${id}\n`, stderr: `cronq enqueue: key 'sp' already present (job ${id}, cancelled): nothing enqueued\n` });
    expect(await t.sql('SELECT id, status FROM cronq_jobs')).toEqual([{ id: Number(id), status: 'cancelled' }]);
  });

  it('shows a long key cut and its control characters escaped', async () => {
    const key = `k\x1b[2J${'x'.repeat(300)}`.slice(0, 255);
    const first = await runMain(['enqueue', 'traced', '--key', key], env());
    const again = await runMain(['enqueue', 'traced', '--key', key], env());
    expect(again.stderr).toBe(`cronq enqueue: key 'k\\x1b[2J${'x'.repeat(59)}…' already present (job ${first.stdout.trim()}, ready): nothing enqueued\n`);
  });
});

describe('a database that is missing or not migrated', () => {
  const urlFor = (name: string) => t.url.replace(/\/[^/]+$/, `/${name}`);

  it('cronq stats on a database without the tables says to run cronq migrate, exit 1', async () => {
    const name = `${t.name}_bare`;
    await t.sql(`CREATE DATABASE \`${name}\``);
    try {
      const commands: Array<[string, string[]]> = [['stats', ['stats']], ['dead list', ['dead', 'list']], ['enqueue', ['enqueue', 'traced', '--key', 'k']]];
      for (const [named, args] of commands) {
        // The real CLI once; in process for the others (the same code path, much faster).
        const r = args[0] === 'stats' ? await runCli(args, { ...env(), DATABASE_URL: urlFor(name) }) : await runMain(args, { ...env(), DATABASE_URL: urlFor(name) });
        expect(r.code, args.join(' ')).toBe(1);
        expect(r.stderr, args.join(' ')).not.toMatch(/ER_NO_SUCH_TABLE/);
        expect(r.stderr.trim(), args.join(' ')).toMatch(new RegExp(`^cronq ${named}: the database schema is not up to date \\(\\d+ migrations pending\\): run 'cronq migrate'`));
        expect(r.stderr.trim().split('\n')).toHaveLength(1);
      }
    } finally {
      await t.sql(`DROP DATABASE \`${name}\``);
    }
  });

  it('names a database that does not exist, with the hint, instead of "cannot reach"', async () => {
    const name = `${t.name}_nope`;
    const r = await runCli(['stats'], { ...env(), DATABASE_URL: urlFor(name) });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`cronq stats: database '${name}' does not exist on 127.0.0.1:3306: run 'cronq migrate' to create it\n`);
  });
});

describe('text output and the terminal', () => {
  it('dead list and dead show print control characters of keys and reasons as visible escapes, never raw to the terminal', async () => {
    await t.sql(
      "INSERT INTO cronq_dead_letters (job_id, queue, kind, job_key, payload, failure_reason, attempts) VALUES (1, 'default', 'traced', CONCAT('esc', CHAR(27), '[2Jkey'), '{}', CONCAT('Error: boom ', CHAR(27), ']0;pwned', CHAR(7), CHAR(13), 'hidden'), 5)",
    );
    try {
      for (const args of [['dead', 'list'], ['dead', 'list', '--group'], ['dead', 'show', String((await t.sql('SELECT MAX(id) AS id FROM cronq_dead_letters'))[0].id)]]) {
        const r = await runMain(args, env());
        expect(r.code, args.join(' ')).toBe(0);
        expect(r.stdout, args.join(' ')).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f]/);
        expect(r.stdout, args.join(' ')).toMatch(/\\x1b\](0|#);pwned\\x07/);
      }
      expect((await runMain(['dead', 'list'], env())).stdout).toContain('esc\\x1b[2Jkey');
    } finally {
      await t.sql('DELETE FROM cronq_dead_letters');
    }
  });

  it('prints characters that show as nothing (zero-width space, word joiner, BOM, soft hyphen) as escapes, keeping emoji joiners; --json still parses to the stored text', async () => {
    const key = 'user:\u200b42';
    const reason = 'Error: \ufeffcharge\u2060d \xadx 👩\u200d💻';
    await t.sql("INSERT INTO cronq_dead_letters (job_id, queue, kind, job_key, payload, failure_reason, attempts) VALUES (1, 'default', 'traced', ?, '{}', ?, 5)", [key, reason]);
    try {
      const shown = await runMain(['dead', 'list'], env());
      expect(shown.stdout).not.toMatch(/[\u200b\u2060\ufeff\xad]/);
      expect(shown.stdout).toContain('user:\\u200b42');
      expect(shown.stdout).toContain('Error: \\ufeffcharge\\u2060d \\xadx 👩\u200d💻');
      const json = await runMain(['dead', 'list', '--json'], env());
      expect(json.stdout).not.toMatch(/[\u200b\u2060\ufeff\xad]/);
      const [letter] = JSON.parse(json.stdout);
      expect([letter.key, letter.reason]).toEqual([key, reason]);
    } finally {
      await t.sql('DELETE FROM cronq_dead_letters');
    }
  });

  it('prints bidirectional controls as escapes, so a key or reason cannot read as something it does not say; --json still parses to the stored text', async () => {
    const reason = 'Error: paid \u202e0001$ \u2066x\u2069';
    await t.sql("INSERT INTO cronq_dead_letters (job_id, queue, kind, job_key, payload, failure_reason, attempts) VALUES (1, 'default', 'traced', 'bidi:1', '{}', ?, 5)", [reason]);
    try {
      const shown = await runMain(['dead', 'list'], env());
      expect(shown.stdout).not.toMatch(/[\u202e\u2066\u2069]/);
      expect(shown.stdout).toContain('paid \\u202e0001$');
      const json = await runMain(['dead', 'list', '--json'], env());
      expect(json.stdout).not.toMatch(/[\u202e\u2066\u2069]/);
      expect(JSON.stringify(JSON.parse(json.stdout))).toContain(JSON.stringify(reason).slice(1, -1));
    } finally {
      await t.sql('DELETE FROM cronq_dead_letters');
    }
  });
});

describe('text tables and the terminal', () => {
  it('dead list shows keys ending in a CR, LF or tab apart from one ending in a space, each control as the escape dead show prints', async () => {
    const keys = ['a\r', 'a\n', 'a\t', 'a '];
    for (const key of keys) {
      await t.sql("INSERT INTO cronq_dead_letters (job_id, queue, kind, job_key, payload, failure_reason, attempts) VALUES (1, 'default', 'tra\tced', ?, '{}', 'Error: boom', 5)", [key]);
    }
    try {
      const r = await runMain(['dead', 'list'], env());
      expect(r.code).toBe(0);
      const rows = r.stdout.trimEnd().split('\n').slice(1);
      expect(rows).toHaveLength(keys.length);
      expect(rows.map((row) => row.split(/\s{2,}/)[3])).toEqual(['a\\x0d', 'a\\x0a', 'a\\x09', 'a']);
      expect(rows.every((row) => row.includes('tra\\x09ced'))).toBe(true);
      expect(r.stdout).not.toMatch(/[\x00-\x08\x0b-\x1f\t\x7f]/);
    } finally {
      await t.sql('DELETE FROM cronq_dead_letters');
    }
  });
});

describe('error lines and the terminal', () => {
  it('a refusal quoting what the database holds (who paused, and why) shows its control characters as visible escapes', async () => {
    await t.sql("INSERT INTO cronq_pauses (target, name, reason, paused_by) VALUES ('queue', 'esc-queue', CONCAT('smtp', CHAR(27), '[2J down'), 'ops')");
    try {
      const r = await runMain(['pause', '--queue', 'esc-queue'], env());
      expect(r.code).toBe(64);
      expect(r.stderr).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f]/);
      expect(r.stderr).toContain('smtp\\x1b[2J down');
    } finally {
      await t.sql("DELETE FROM cronq_pauses WHERE name = 'esc-queue'");
    }
  });
});

describe('a pause reason holding a tab', () => {
  it("shows it as \\x09, as the tables do, in cronq tick's refusal and in the pause and resume lines, each one line", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'nightly.ts'), "import { defineSchedule } from 'cronq';\nexport const nightly = defineSchedule({ name: 'nightly', cron: '0 2 * * *', handle() {} });\n");
    const withIt = { ...env(), CRONQ_SCHEDULES: dir };
    await t.sql("INSERT INTO cronq_pauses (target, name, reason, paused_by) VALUES ('schedule', 'nightly', 'quarter\tclose', 'ann\tb')");
    try {
      const tick = await runMain(['tick', 'nightly'], withIt);
      expect(tick).toMatchObject({ code: 64, stdout: '' });
      expect(tick.stderr).toMatch(/^cronq tick: schedule 'nightly' is paused by ann\\x09b since \S+Z: quarter\\x09close; --force runs it anyway, or 'cronq resume nightly' first\n$/);
      const again = await runMain(['pause', 'nightly'], withIt);
      expect(again).toMatchObject({ code: 64, stdout: '' });
      expect(again.stderr).toMatch(/^cronq pause: schedule 'nightly' is already paused by ann\\x09b since \S+Z: quarter\\x09close\n$/);
      const resumed = await runMain(['resume', 'nightly'], withIt);
      expect(resumed).toMatchObject({ code: 0, stderr: '' });
      expect(resumed.stdout).toMatch(/^schedule nightly resumed \(was paused by ann\\x09b since \S+Z: quarter\\x09close\)\n$/);
      const paused = await runMain(['pause', '--queue', 'mail', '--reason', 'smtp\tdown', '--by', 'ops'], withIt);
      expect(paused).toMatchObject({ code: 0, stderr: '' });
      expect(paused.stdout).toMatch(/^queue mail paused by ops since \S+Z: smtp\\x09down\n$/);
      expect(await t.sql("SELECT reason FROM cronq_pauses WHERE name = 'mail'")).toEqual([{ reason: 'smtp\tdown' }]);
    } finally {
      await t.sql('DELETE FROM cronq_pauses');
    }
  });
});

describe('json output and the terminal', () => {
  it('dead list and dead show --json stay valid JSON, holding the same text, when a key, reason or payload has DEL or C1 controls', async () => {
    const odd = 'a\u007fb\u0085c\u009b2Jd';
    await t.sql("INSERT INTO cronq_dead_letters (job_id, queue, kind, job_key, payload, failure_reason, attempts) VALUES (1, 'default', 'traced', ?, ?, ?, 5)", [
      `key-${odd}`,
      JSON.stringify({ note: odd }),
      `Error: ${odd}`,
    ]);
    try {
      const id = String((await t.sql('SELECT MAX(id) AS id FROM cronq_dead_letters'))[0].id);
      for (const args of [['dead', 'list', '--json'], ['dead', 'list', '--group', '--json'], ['dead', 'show', id, '--json']]) {
        const r = await runMain(args, env());
        expect(r.code, args.join(' ')).toBe(0);
        expect(r.stdout, args.join(' ')).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f-\x9f]/);
        const parsed = JSON.stringify(JSON.parse(r.stdout));
        if (!args.includes('--group')) expect(parsed, args.join(' ')).toContain(odd); // groups show reasons normalised
      }
    } finally {
      await t.sql('DELETE FROM cronq_dead_letters');
    }
  });
});

describe('settings a command never reads', () => {
  it('migrate, dead, cancel and limits run whatever CRONQ_IMPORT_TIMEOUT holds: they load no schedule file', async () => {
    for (const value of ['30d', 'soon']) {
      const withIt = { ...env(), CRONQ_IMPORT_TIMEOUT: value };
      for (const args of [['migrate'], ['dead', 'list'], ['limits']]) {
        const r = await runMain(args, withIt);
        expect([r.code, r.stderr], `${args.join(' ')} with ${value}`).toEqual([0, '']);
      }
      const cancel = await runMain(['cancel', '--key', 'no-such-job', '--reason', 'test'], withIt);
      expect(cancel.stderr).toBe("cronq cancel: no job with key 'no-such-job'; nothing changed\n");
    }
  });
});
