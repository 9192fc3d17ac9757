import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadSchedulesDir } from '../src/schedule/loader.ts';
import { TaskRegistry } from '../src/tasks/registry.ts';
import { isSchedule, schedulesOf } from '../src/schedule/define.ts';
import { readFileSync } from 'node:fs';
import { REPO_ROOT, runCli } from './support/cli.ts';
import { runMain } from './support/runMain.ts';

const root = join(REPO_ROOT, 'test', '.tmp');
mkdirSync(root, { recursive: true });
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function workdir(crontab: string) {
  const dir = mkdtempSync(join(root, 'crontab-'));
  dirs.push(dir);
  writeFileSync(join(dir, 'crontab'), crontab);
  return { file: join(dir, 'crontab'), out: join(dir, 'schedules') };
}

const CRONTAB = `# nightly jobs
SHELL=/bin/sh
MAILTO=ops@example.com
CRON_TZ=Europe/Berlin
30 2 * * * php /srv/app/bin/report.php --daily >> /var/log/report.log 2>&1
*/15 * * * 1-5 /usr/local/bin/sync-inventory
@weekly cd /srv/app && ./bin/cleanup % weekly run
`;

describe('cronq import-crontab', () => {
  it('writes one command schedule per line that the loader accepts, keeping command, zone and environment', async () => {
    const { file, out } = workdir(CRONTAB);
    const r = await runMain(['import-crontab', file, '--out', out]);
    expect(r.code).toBe(0);
    expect(r.stdout.trim().split('\n')).toHaveLength(3);
    expect(r.stdout).toMatch(/^wrote .*\.ts$/m);
    const registry = new TaskRegistry();
    await loadSchedulesDir(out, registry);
    const schedules = schedulesOf(registry);
    expect(schedules).toHaveLength(3);
    expect(schedules.every(isSchedule)).toBe(true);
    const report = schedules.find((s) => s.command?.includes('report.php'))!;
    expect(report).toMatchObject({
      cron: '30 2 * * *',
      timezone: 'Europe/Berlin',
      period: 'tick',
      command: 'php /srv/app/bin/report.php --daily >> /var/log/report.log 2>&1',
    });
    expect(report.catchUp).toEqual({ mode: 'latest', windowMs: 86_400_000, max: 1000 });
    const source = readdirSync(out).map((f) => f).join(' ');
    expect(source).toMatch(/\.ts/);
  });

  it('writes to CRONQ_SCHEDULES when --out is not given, whatever the working directory', async () => {
    const { file, out } = workdir(CRONTAB);
    const r = await runMain(['import-crontab', file], { CRONQ_SCHEDULES: out });
    expect(r.code).toBe(0);
    expect(readdirSync(out)).toHaveLength(3);
    expect(r.stdout.trim().split('\n').every((line) => line.startsWith(`wrote ${out}`))).toBe(true);
  });

  it('refuses @reboot and a bad line with their line numbers, writes nothing, and exits 64', async () => {
    const { file, out } = workdir(`${CRONTAB}@reboot /usr/bin/warmup\n61 * * * * /bin/true\n`);
    const r = await runMain(['import-crontab', file, '--out', out]);
    expect(r.code).toBe(64);
    expect(r.stderr).toMatch(/crontab:8: @reboot has no cronq equivalent/);
    expect(r.stderr).toMatch(/crontab:9: .61 \* \* \* \*. is not a valid cron expression/);
    expect(existsSync(out)).toBe(false);
  });

  it('names the command on every line of a refusal, each bad line and the closing one, as --skip-invalid names it on each', async () => {
    const { file, out } = workdir(`${CRONTAB}@reboot /usr/bin/warmup\n61 * * * * /bin/true\n`);
    const r = await runMain(['import-crontab', file, '--out', out]);
    expect(r.code).toBe(64);
    const lines = r.stderr.trimEnd().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines.filter((line) => !line.startsWith('cronq import-crontab: '))).toEqual([]);
    expect(lines[2]).toBe('cronq import-crontab: nothing written: fix those lines, or pass --skip-invalid to import the others');
  });

  it('says so when the crontab holds no job line (an empty crontab -l), writing nothing, exit 0', async () => {
    const { file, out } = workdir('# only a comment\nMAILTO=ops@example.com\n\n');
    const r = await runMain(['import-crontab', file, '--out', out]);
    expect(r).toMatchObject({ code: 0, stdout: '' });
    expect(r.stderr).toBe(`cronq import-crontab: nothing written: ${file} holds no job lines\n`);
    expect(existsSync(out) ? readdirSync(out) : []).toEqual([]);
  });

  it('with --skip-invalid writes the good lines and reports the others', async () => {
    const { file, out } = workdir(`${CRONTAB}@reboot /usr/bin/warmup\n`);
    const r = await runMain(['import-crontab', file, '--out', out, '--skip-invalid']);
    expect(r.code).toBe(0);
    expect(readdirSync(out)).toHaveLength(3);
    expect(r.stderr).toMatch(/skipped .*crontab:8: @reboot/);
  });

  it('refuses an unknown --timezone and a missing file with one line, exit 64', async () => {
    const { file, out } = workdir(CRONTAB);
    expect((await runMain(['import-crontab', file, '--out', out, '--timezone', 'Nowhere/City'])).code).toBe(64);
    const missing = await runMain(['import-crontab', join(root, 'no-such-crontab')]);
    expect(missing.code).toBe(64);
    expect(missing.stderr.trim().split('\n')).toHaveLength(1);
  });
});

describe('cronq import-crontab into a folder with schedules', () => {
  it('names a generated schedule around one another file defines (fan becomes fan-2), so every command still loads the folder', async () => {
    const { file, out } = workdir('0 1 * * * fan\n');
    mkdirSync(out);
    writeFileSync(join(out, 'mine.ts'), "import { defineSchedule } from 'cronq';\nexport default defineSchedule({ name: 'fan', cron: '0 5 * * *', timezone: 'UTC', handle() {} });\n");
    const r = await runMain(['import-crontab', file, '--out', out]);
    expect(r).toMatchObject({ code: 0, stdout: `wrote ${join(out, 'fan-2.ts')}\n`, stderr: '' });
    const registry = new TaskRegistry();
    await loadSchedulesDir(out, registry);
    expect(registry.list().map((t) => t.name).sort()).toEqual(['fan', 'fan-2']);
  });

  it('refuses a folder that does not load with one line giving the reason, exit 64, nothing written', async () => {
    const { file, out } = workdir('0 1 * * * fan\n');
    mkdirSync(out);
    const duplicate = "import { defineSchedule } from 'cronq';\nexport default defineSchedule({ name: 'dup', cron: '0 5 * * *', timezone: 'UTC', handle() {} });\n";
    writeFileSync(join(out, 'a.ts'), duplicate);
    writeFileSync(join(out, 'b.ts'), duplicate);
    const r = await runMain(['import-crontab', file, '--out', out]);
    expect(r).toMatchObject({ code: 64, stdout: '' });
    expect(r.stderr).toMatch(/^cronq import-crontab: nothing written: schedules folder \S+ does not load, so its names cannot be avoided: duplicate name 'dup': defined in \S+a\.ts and in \S+b\.ts\n$/);
    expect(readdirSync(out).sort()).toEqual(['a.ts', 'b.ts']);
  });
});

describe('cronq import-crontab refusals', () => {
  it('an --out that is a file is refused with one line naming it, exit 64, nothing written', async () => {
    const { file, out } = workdir(CRONTAB);
    writeFileSync(out, 'not a folder');
    const r = await runMain(['import-crontab', file, '--out', out]);
    expect(r).toMatchObject({ code: 64, stdout: '' });
    expect(r.stderr).toBe(`cronq import-crontab: schedules folder ${out}: not a directory\n`);
  });

  it('an --out that cannot be made (under /proc) is refused with one line, not a hang', async () => {
    const { file } = workdir(CRONTAB);
    // Node 20's recursive mkdir spins for ever there.
    const r = await runMain(['import-crontab', file, '--out', '/proc/cronq-no-such/schedules']);
    expect(r).toMatchObject({ code: 64, stdout: '' });
    expect(r.stderr).toBe('cronq import-crontab: schedules folder /proc/cronq-no-such/schedules: cannot write /proc/cronq-no-such (ENOENT)\n');
  });

  it('a crontab over 1 MiB, or /dev/zero, is refused with one line, reading no more than that', async () => {
    const { file, out } = workdir(`${'# padding\n'.repeat(110_000)}0 0 * * * true\n`);
    for (const crontab of [file, '/dev/zero']) {
      const r = await runMain(['import-crontab', crontab, '--out', out]);
      expect(r).toMatchObject({ code: 64, stdout: '' });
      expect(r.stderr).toBe(`cronq import-crontab: cannot read crontab ${crontab}: larger than 1 MiB, not a crontab?\n`);
    }
    expect(existsSync(out)).toBe(false);
  });

  it('a crontab that is not UTF-8 is refused naming its first such line, nothing written (its text would be stored changed)', async () => {
    const { file, out } = workdir('');
    writeFileSync(file, Buffer.concat([Buffer.from('# ok\n0 2 * * * echo fine\n0 3 * * * echo caf'), Buffer.from([0xe9]), Buffer.from('\n')]));
    const r = await runMain(['import-crontab', file, '--out', out]);
    expect(r.code).toBe(64);
    expect(r.stderr).toMatch(new RegExp(`^cronq import-crontab: ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:3: not UTF-8 text: what the line holds would be stored changed; convert the file first \\(iconv -f LATIN1 -t UTF-8, say\\)\\n$`));
    expect(existsSync(out)).toBe(false);
  });

  it("refuses a line without CRON_TZ when this host's TZ has no IANA name (JST-9, a POSIX rule, a file path), saying to pass --timezone, rather than writing UTC", async () => {
    // cron's C library reads each of these (JST-9 is UTC+9); Node's Intl names no zone for them, or UTC.
    for (const tz of ['JST-9', 'EST5EDT,M3.2.0,M11.1.0', '/usr/share/zoneinfo/Asia/Tokyo']) {
      const { file, out } = workdir('0 1 * * * echo hi\n');
      const r = await runCli(['import-crontab', file, '--out', out], { TZ: tz });
      expect(r.code, tz).toBe(64);
      expect(r.stderr, tz).toContain(`${file}:1: this host's time zone has no IANA name (TZ '${tz}'): pass --timezone Area/City (the zone this crontab ran in), or set CRON_TZ`);
      expect(existsSync(out), tz).toBe(false);
    }
    // --timezone, or CRON_TZ, says what the host cannot.
    const { file, out } = workdir('0 1 * * * echo hi\nCRON_TZ=Asia/Tokyo\n0 2 * * * echo there\n');
    expect(await runCli(['import-crontab', file, '--out', out, '--timezone', 'Asia/Tokyo'], { TZ: 'JST-9' })).toMatchObject({ code: 0 });
    const named = workdir('0 1 * * * echo hi\n');
    expect(await runCli(['import-crontab', named.file, '--out', named.out], { TZ: 'Asia/Tokyo' })).toMatchObject({ code: 0 });
    expect(readFileSync(join(named.out, 'echo-hi.ts'), 'utf8')).toContain('timezone: "Asia/Tokyo"');
  });

  it("reads the crontab from standard input when FILE is '-'", async () => {
    const { out } = workdir('');
    const r = await runCli(['import-crontab', '-', '--out', out, '--timezone', 'UTC'], {}, 30_000, '0 2 * * * echo from-stdin\n');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const registry = new TaskRegistry();
    await loadSchedulesDir(out, registry);
    expect(schedulesOf(registry).map((s) => s.command)).toEqual(['echo from-stdin']);
  });

  it('writes invisible characters (a right-to-left override) as escapes, so the file reads as the command runs', async () => {
    // A right-to-left override, a zero-width space, tag characters (ASCII smuggling), a
    // Hangul filler, a no-break space, DEL and a variation selector.
    const command = 'echo \u202egnp.exe\u200b \u{e0041}\u{e0042}\u3164\u00a0\u007f\ufe0f done';
    const { file, out } = workdir(`0 2 * * * ${command}\n`);
    const r = await runMain(['import-crontab', file, '--out', out, '--timezone', 'UTC']);
    expect(r.code).toBe(0);
    const [name] = readdirSync(out);
    const source = readFileSync(join(out, name), 'utf8');
    expect(source).not.toMatch(/[\u202e\u200b\u3164\u00a0\u007f\ufe0f]|\u{e0041}/u);
    expect(source).toContain('\\u202e');
    expect(source).toContain('\\udb40\\udc41');
    const registry = new TaskRegistry();
    await loadSchedulesDir(out, registry);
    expect(schedulesOf(registry)[0].command).toBe(command);
  });
});
