import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadSchedulesDir } from '../src/schedule/loader.ts';
import { schedulesOf } from '../src/schedule/define.ts';
import { TaskRegistry } from '../src/tasks/registry.ts';
import { thrownText } from '../src/runtime/errorText.ts';
import { DaemonProcess, runCli, REPO_ROOT } from './support/cli.ts';
import { createCronq, UsageError } from '../src/index.ts';

// Inside the repo, so `import ... from 'cronq'` resolves for the CLI as it does for users.
const root = join(REPO_ROOT, 'test', '.tmp');
mkdirSync(root, { recursive: true });
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function folder(files: Record<string, string>): string {
  const dir = mkdtempSync(join(root, 'schedules-'));
  dirs.push(dir);
  for (const [name, source] of Object.entries(files)) writeFileSync(join(dir, name), source);
  return dir;
}

const good = (name: string, extra = '') =>
  `import { defineSchedule } from 'cronq';\nexport default defineSchedule({ name: '${name}', cron: '0 2 * * *', handle() {}${extra} });\n`;

async function loadError(files: Record<string, string>): Promise<string> {
  const dir = folder(files);
  try {
    await loadSchedulesDir(dir, new TaskRegistry());
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error('expected the folder to be refused');
}

describe('loading schedule files', () => {
  it('registers every task and schedule a folder exports', async () => {
    const dir = folder({
      'a.ts': good('alpha'),
      'b.ts': `import { defineTask } from 'cronq';\nexport const t = defineTask({ name: 'beta', handle() {} });\n`,
      '_shared.ts': 'export const helper = 1;\n',
      'types.d.ts': 'export {};\n',
    });
    const registry = new TaskRegistry();
    await loadSchedulesDir(dir, registry);
    expect(registry.list().map((t) => t.name).sort()).toEqual(['alpha', 'beta']);
    expect(schedulesOf(registry).map((s) => s.name)).toEqual(['alpha']);
  });

  it.each([
    ['an invalid cron', { 'bad.ts': good('x').replace("'0 2 * * *'", "'61 * * * *'") }, /bad\.ts: schedule 'x': invalid cron expression '61 \* \* \* \*': minute field '61': 61 is out of range \(0-59\)$/m],
    ['an unknown time zone', { 'tz.ts': good('x', ", timezone: 'Mars/Olympus'") }, /tz\.ts: schedule 'x': unknown time zone 'Mars\/Olympus'/],
    ['a bad period', { 'p.ts': good('x', ", period: 'fortnight'") }, /p\.ts: schedule 'x': period must be one of minute, hour, day, week, month, year, tick/],
    ['both handle and command', { 'both.ts': good('x', ", command: 'true'") }, /both\.ts: schedule 'x': give exactly one of handle and command/],
    [
      'neither handle nor command',
      { 'none.ts': `import { defineSchedule } from 'cronq';\nexport default defineSchedule({ name: 'x', cron: '* * * * *' } as any);\n` },
      /none\.ts: schedule 'x': give exactly one of handle and command/,
    ],
    ['a module that throws on import', { 'boom.ts': "throw new Error('config missing');\n" }, /boom\.ts: config missing/],
    ['maxAttempts out of range', { 'm.ts': good('x', ', maxAttempts: 0') }, /m\.ts: schedule 'x': maxAttempts must be a whole number from 1 to 1000/],
    ['a catch-up cap out of range', { 'c.ts': good('x', ", catchUp: { mode: 'all', max: -1 }") }, /c\.ts: schedule 'x': catchUp\.max must be/],
    ['a bad catch-up window', { 'w.ts': good('x', ", catchUp: { window: 'forever' }") }, /w\.ts: schedule 'x': catchUp\.window: 'forever' is not a duration/],
    ['a bad name', { 'n.ts': good('has space') }, /n\.ts: schedule name must be 1-64 letters/],
    ['a file exporting nothing usable', { 'empty.ts': 'export const x = 1;\n' }, /empty\.ts: exports no task or schedule/],
  ])('refuses %s, naming the file and the problem', async (_what, files, message) => {
    expect(await loadError(files)).toMatch(message);
  });

  it.each([['an upper-case extension', 'Report.TS'], ['a mixed-case extension', 'report.Mjs'], ['an upper-case .js', 'REPORT.JS']])(
    'refuses %s that would be skipped, so its schedules never run silently',
    async (_what, name) => {
      expect(await loadError({ 'a.ts': good('alpha'), [name]: good('report') })).toMatch(
        new RegExp(`${name.replace('.', '\\.')}: not loaded: schedule files end in \\.ts, \\.mts, \\.js or \\.mjs in lower case; rename it, or start its name with _`),
      );
    },
  );

  it('leaves unloaded what is not meant as a schedule file: CommonJS helpers it imports, _-prefixed files, tests, declarations and folders', async () => {
    const dir = folder({
      'a.ts': `import legacy from './legacy.cjs';\nimport { defineSchedule } from 'cronq';\nexport default defineSchedule({ name: 'alpha', cron: '0 2 * * *', handle() { return legacy; } });\n`,
      'legacy.cjs': 'module.exports = 1;\n',
      'prettier.config.cjs': 'module.exports = {};\n',
      'helper.cts': 'export = 1;\n',
      '_helper.TS': '',
      'a.test.TS': '',
      'types.D.TS': '',
      'notes.txt': 'hi',
    });
    mkdirSync(join(dir, 'lib.JS'));
    mkdirSync(join(dir, 'lib.ts')); // a folder, even one named as a schedule file is
    mkdirSync(join(dir, 'shared'));
    symlinkSync(join(dir, 'shared'), join(dir, 'linked.ts')); // and a link to one
    const registry = new TaskRegistry();
    await loadSchedulesDir(dir, registry);
    expect(registry.list().map((t) => t.name)).toEqual(['alpha']);
  });

  it('loads a schedule file through a symbolic link to it', async () => {
    const dir = folder({});
    const elsewhere = folder({ 'real.ts': good('linked') });
    symlinkSync(join(elsewhere, 'real.ts'), join(dir, 'linked.ts'));
    const registry = new TaskRegistry();
    await loadSchedulesDir(dir, registry);
    expect(registry.list().map((t) => t.name)).toEqual(['linked']);
  });

  it('refuses a FIFO named like a schedule file in one line, exit 64, rather than hanging on its read (the process never exited)', async () => {
    const dir = folder({ 'ok.ts': good('ok') });
    execFileSync('mkfifo', [join(dir, 'pipe.ts')]);
    const r = await runCli(['schedules', '--schedules', dir], {}, 20_000);
    expect(r.code).toBe(64);
    expect(r.stderr).toBe(`cronq schedules: ${relative(REPO_ROOT, join(dir, 'pipe.ts'))}: not a regular file (a FIFO, socket or device), which no import reads at once: remove it, or start its name with _ to keep it in the folder unloaded\n`);
  });

  it('refuses a name used twice, naming both files', async () => {
    const message = await loadError({ 'one.ts': good('dup'), 'two.ts': good('dup') });
    expect(message).toMatch(/duplicate name 'dup': defined in .*one\.ts and in .*two\.ts/);
  });

  it('refuses a name used twice in one file, naming the file once', async () => {
    const source = `import { defineSchedule } from 'cronq';\nexport const a = defineSchedule({ name: 'dup', cron: '0 2 * * *', handle() {} });\nexport const b = defineSchedule({ name: 'dup', cron: '0 3 * * *', handle() {} });\n`;
    expect(await loadError({ 'both.ts': source })).toMatch(/^duplicate name 'dup': defined twice in .*both\.ts$/);
  });

  it('refuses a missing folder given explicitly', async () => {
    await expect(loadSchedulesDir(join(root, 'nope'), new TaskRegistry())).rejects.toThrow(/does not exist/);
  });

  it('cronq start refuses a bad schedule file with one line and exit 64', async () => {
    const dir = folder({ 'bad.ts': good('x').replace("'0 2 * * *'", "'not a cron'") });
    const r = await runCli(['start', '--schedules', dir], { DATABASE_URL: 'mysql://root@127.0.0.1:1/unused' });
    expect(r.code).toBe(64);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/bad\.ts: schedule 'x': invalid cron expression 'not a cron': expected 5 fields/);
  });
});

// Through the real CLI: tsx (not vitest's transform) is what imports schedule files there.
describe.concurrent('schedule files that cannot be imported (cronq start)', () => {
  const unreachable = { DATABASE_URL: 'mysql://root@127.0.0.1:1/unused' };

  async function refusal(files: Record<string, string>, env: Record<string, string> = {}) {
    const dir = folder(files);
    // A process that never exits is killed here and fails the test on its exit code.
    const r = await runCli(['start', '--schedules', dir], { ...unreachable, ...env }, 50_000);
    return { ...r, dir: relative(REPO_ROOT, dir) };
  }

  it.each([
    ['a .ts file', { 'bad.ts': good('x').replace("'0 2 * * *',", "'0 2 * * *'") }, (dir: string) => `${dir}/bad.ts:2:62: Expected "}" but found "handle"`],
    ['a .js file', { 'bad.js': good('x').replace("'0 2 * * *',", "'0 2 * * *'") }, (dir: string) => `${dir}/bad.js:2:62: Expected "}" but found "handle"`],
    [
      'a helper a schedule file imports',
      { 'a.ts': `import './_helper.ts';\n${good('x')}`, '_helper.ts': 'export const n = 1;\nconst broken = ;\n' },
      (dir: string) => `${dir}/_helper.ts:2:16: Unexpected ";" (imported by ${dir}/a.ts)`,
    ],
  ])('refuses a syntax error in %s as file:line:col and the message, on one line, exit 64', async (_what, files, line) => {
    const r = await refusal(files);
    expect(r.code).toBe(64);
    expect(r.stderr).toBe(`cronq start: ${line(r.dir)}\n`);
  });

  it.each([
    ['a top-level await that never settles', 'await new Promise(() => {});\n'],
    ['an endless loop at import', 'while (true) {}\n'],
  ])('refuses %s within the bound, naming the file, exit 64', async (_what, source) => {
    const r = await refusal({ 'ok.ts': good('fine'), 'stuck.ts': source }, { CRONQ_IMPORT_TIMEOUT: '1s' });
    expect(r.code).toBe(64);
    expect(r.stderr).toBe(
      `cronq start: ${r.dir}/stuck.ts: not imported within 1s: a top-level await that never settles, or an endless loop? (CRONQ_IMPORT_TIMEOUT sets the bound)\n`,
    );
  }, 60_000);

  it('refuses a file that throws a non-Error value, showing the value', async () => {
    const r = await refusal({ 'weird.ts': 'throw { weird: true };\n' });
    expect(r.code).toBe(64);
    expect(r.stderr).toBe(`cronq start: ${r.dir}/weird.ts: threw a non-Error value: {"weird":true}\n`);
  });
});

// A file that ends the process as it loads would otherwise end a command with its code and
// no word: `cronq enqueue` exiting 0 without an id, a script reading success.
describe.concurrent('a schedule file that calls process.exit() while it imports', () => {
  const unreachable = { DATABASE_URL: 'mysql://root@127.0.0.1:1/unused' };

  it.each([
    ['start', '0', []],
    ['schedules', '0', []],
    ['tick', '0', ['fine']],
    ['enqueue', '0', ['fine', '--key', 'by-hand:1']],
    ['schedules', '3', []],
  ])('cronq %s is refused in one line naming the file, exit 64 (process.exit(%s))', async (command, code, args) => {
    const dir = folder({ 'a.ts': good('fine'), 'exits.ts': `process.exit(${code});\n` });
    const r = await runCli([command, ...args, '--schedules', dir], unreachable, 50_000);
    expect({ code: r.code, stdout: r.stdout }).toEqual({ code: 64, stdout: '' });
    expect(r.stderr).toBe(
      `cronq ${command}: ${relative(REPO_ROOT, dir)}/exits.ts: called process.exit(${code}) while being imported: a schedule file must not end the process\n`,
    );
  });
});

// Node's default for these is a stack trace on stderr; every command gives one line instead.
describe.concurrent('a schedule file whose stray callback throws or promise rejects as it loads', () => {
  const unreachable = { DATABASE_URL: 'mysql://root@127.0.0.1:1/unused' };

  it.each([
    ['start', 'queueMicrotask(() => { throw new Error("stray throw"); });', 'uncaught exception: Error: stray throw'],
    ['schedules', 'queueMicrotask(() => { throw new Error("stray throw"); });', 'uncaught exception: Error: stray throw'],
    ['schedules', 'Promise.reject(new Error("stray rejection"));', 'unhandled promise rejection: Error: stray rejection'],
  ])('cronq %s ends in one line, no stack trace, exit 1 (%s)', async (command, stray, said) => {
    const dir = folder({ 'a.ts': `${stray}\n${good('fine')}` });
    const r = await runCli([command, '--schedules', dir], unreachable, 50_000);
    expect({ code: r.code, stdout: r.stdout }).toEqual({ code: 1, stdout: '' });
    expect(r.stderr).toBe(`cronq ${command}: ${said} (from a schedule file, or a callback a handler left behind)\n`);
  });
});

describe('a stop while schedule files are still importing', () => {
  // Marks that its import began, then never settles; its interval would keep a process alive.
  const stuck = (mark: string, keepAlive = '') =>
    `import { writeFileSync } from 'node:fs';\nwriteFileSync(${JSON.stringify(mark)}, 'x');\n${keepAlive}await new Promise(() => {});\n`;

  it('SIGTERM stops the daemon at once, not after CRONQ_IMPORT_TIMEOUT: exit 0, nothing started', async () => {
    const mark = join(mkdtempSync(join(root, 'mark-')), 'began');
    dirs.push(mark.slice(0, -'/began'.length));
    const dir = folder({ 'stuck.ts': stuck(mark, 'setInterval(() => undefined, 1_000);\n') });
    const d = new DaemonProcess(['--schedules', dir], { DATABASE_URL: 'mysql://root@127.0.0.1:1/unused', CRONQ_IMPORT_TIMEOUT: '2m', LOG_LEVEL: 'info' });
    try {
      const deadline = Date.now() + 30_000;
      while (!existsSync(mark) && Date.now() < deadline && d.child.exitCode === null) await new Promise((r) => setTimeout(r, 20));
      expect(existsSync(mark)).toBe(true);
      const began = Date.now();
      d.signal('SIGTERM');
      expect(await d.exited).toBe(0);
      expect(Date.now() - began).toBeLessThan(10_000);
      expect(d.events('shutdown_requested')).toHaveLength(1);
      expect(d.events('daemon_started')).toEqual([]);
      expect(d.stderr).toBe('');
    } finally {
      await d.kill();
    }
  }, 60_000);

  it('stop() does not wait for the import; the start in flight rejects with a UsageError saying so, and nothing starts', async () => {
    const mark = join(mkdtempSync(join(root, 'mark-')), 'began');
    dirs.push(mark.slice(0, -'/began'.length));
    const dir = folder({ 'stuck.ts': stuck(mark) });
    const cronq = createCronq({ databaseUrl: 'mysql://root@127.0.0.1:1/unused', schedulesDir: dir, importTimeoutMs: 120_000, logger: false });
    const starting = cronq.start().then(() => null, (e: unknown) => e);
    const deadline = Date.now() + 30_000;
    while (!existsSync(mark) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const began = Date.now();
    await cronq.stop({ graceMs: 0 });
    expect(Date.now() - began).toBeLessThan(5_000);
    const error = await starting;
    expect(error).toBeInstanceOf(UsageError);
    expect((error as Error).message).toBe('start() interrupted by stop() while schedule files were still importing: nothing was started');
    expect(cronq.health().workers).toBe(null);
  }, 60_000);
});

describe('thrownText', () => {
  it('gives one bounded, readable line for any thrown value, and never throws', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const hostile = new Error('x');
    Object.defineProperty(hostile, 'message', { get: () => { throw new Error('no'); } });
    expect(thrownText({ weird: true })).toBe('threw a non-Error value: {"weird":true}');
    expect(thrownText(Object.create(null))).toBe('threw a non-Error value: {}');
    expect(thrownText(cyclic)).toBe('threw a non-Error value: [object Object]');
    expect(thrownText(10n)).toBe('threw a non-Error value: 10');
    expect(thrownText(undefined)).toBe('threw a non-Error value: undefined');
    expect(thrownText(hostile)).toBe('Error');
    const revoked = Proxy.revocable({}, {});
    revoked.revoke();
    expect(thrownText(revoked.proxy)).toBe('threw a non-Error value: an object that cannot be read');
    expect(thrownText(new Error('first\nsecond'))).toBe('first');
    const long = thrownText({ blob: 'x'.repeat(1_000_000) });
    expect(long).toHaveLength(300);
    expect(long.endsWith('…')).toBe(true);
  });

  it('reads no more of a thrown value than its line shows: a long array, a typed array, a huge bigint', () => {
    // JSON.stringify wrote all of each: new Array(1e7) took 3 s (1e8, 74 s), a 1e7-byte Uint8Array 12 s.
    const cases: Array<[unknown, string | RegExp]> = [
      [new Array(10_000_000), /^threw a non-Error value: \[null,null,.*…$/],
      [new Uint8Array(10_000_000), /^threw a non-Error value: \{"0":0,"1":0,.*…$/],
      [{ a: new Uint8Array(10_000_000) }, /^threw a non-Error value: \{"a":\{"0":0,.*…$/],
      [2n ** 10_000_000n, 'threw a non-Error value: a bigint of 10000001 bits'],
      [Array.from({ length: 1_000 }, (_, i) => i), /^threw a non-Error value: \[0,1,2,.*…$/],
      [{ blob: 'x'.repeat(1_000_000), more: 1 }, /^threw a non-Error value: \{"blob":"x+…$/],
      [Object.assign(new Array(10_000_000), { 0: 'a' }), /^threw a non-Error value: \["a",null,.*…$/],
      [{ a: [1, 2], b: 'two' }, 'threw a non-Error value: {"a":[1,2],"b":"two"}'],
      [new Proxy(new Uint8Array(10_000_000), {}), 'threw a non-Error value: an object behind a Proxy'],
      [{ a: new Proxy(new Uint8Array(10_000_000), {}) }, 'threw a non-Error value: {"a":"an object behind a Proxy"}'],
      [Object.defineProperty(new Uint8Array(10_000_000), 'length', { value: 0 }), /^threw a non-Error value: \{"0":0,"1":0,.*…$/],
      [[new String('x'.repeat(10_000_000))], /^threw a non-Error value: \["x+…$/],
    ];
    for (const [thrown, expected] of cases) {
      const startedAt = performance.now();
      const text = thrownText(thrown);
      expect(performance.now() - startedAt).toBeLessThan(200);
      expect(text).toMatch(expected);
      expect(text.length).toBeLessThanOrEqual(300);
    }
  });
});
