import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { transformSync } from 'esbuild';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { UsageError } from '../src/errors.ts';
import { generateScheduleFile, IMPORTED_CATCH_UP } from '../src/crontab/generate.ts';
import { importCrontab } from '../src/crontab/import.ts';
import { loadSchedulesDir } from '../src/schedule/loader.ts';
import { TaskRegistry } from '../src/tasks/registry.ts';
import { fireTimesBetween } from '../src/schedule/period.ts';
import {
  parseCrontab,
  REBOOT_REASON,
  scheduleNameFor,
  splitCronCommand,
  type CrontabEntry,
} from '../src/crontab/parse.ts';

const parse = (text: string, system = false) => parseCrontab(text, { system, defaultTimezone: 'Europe/Berlin' });

/** Parses text that must be valid and returns its entries. */
function entriesOf(text: string, system = false): CrontabEntry[] {
  const { entries, errors } = parse(text, system);
  expect(errors).toEqual([]);
  return entries;
}

/**
 * Transpiles a generated schedule file with esbuild and runs it with `cronq` stubbed, so
 * the test sees the very object the file passes to defineSchedule.
 */
function evaluateSchedule(source: string): Record<string, unknown> {
  const { code } = transformSync(source, { loader: 'ts', format: 'cjs' });
  const module = { exports: {} as { default?: Record<string, unknown> } };
  const require = (id: string) => {
    if (id !== 'cronq') throw new Error(`unexpected import ${id}`);
    return { defineSchedule: (schedule: Record<string, unknown>) => schedule };
  };
  new Function('require', 'module', 'exports', code)(require, module, module.exports);
  return module.exports.default!;
}

const days = (dates: Date[]) => dates.map((date) => date.toISOString().slice(0, 10));

describe('parseCrontab: schedule syntax', () => {
  it('reads five-field lines with steps, ranges, lists and month/day names', () => {
    const entries = entriesOf(
      [
        '*/15 * * * * /usr/bin/a',
        '0 9-17 * * 1-5 /usr/bin/b',
        '0 0 1,15 * * /usr/bin/c',
        '30 4 * jan,jul sun /usr/bin/d',
        '0 0 * * mon-fri /usr/bin/e',
        '\t5\t4 * * *\t/usr/bin/f',
      ].join('\n'),
    );
    expect(entries.map((e) => e.cron)).toEqual([
      '*/15 * * * *',
      '0 9-17 * * 1-5',
      '0 0 1,15 * *',
      '30 4 * jan,jul sun',
      '0 0 * * mon-fri',
      '5 4 * * *',
    ]);
    expect(entries.map((e) => e.line)).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('reads every nickname cron knows except @reboot', () => {
    const nicknames = ['@hourly', '@daily', '@weekly', '@monthly', '@yearly', '@annually', '@midnight'];
    const entries = entriesOf(nicknames.map((n, i) => `${n} job${i}`).join('\n'));
    expect(entries.map((e) => e.cron)).toEqual(nicknames);
  });

  it('refuses a nickname in capitals, as cron compares them case for case, and says so', () => {
    expect(parse('@DAILY job\n').errors).toEqual([
      { line: 1, reason: "unknown '@DAILY' (cron knows @hourly, @daily, @midnight, @weekly, @monthly, @yearly, @annually, @reboot; cron reads nicknames in lowercase only: @daily)" },
    ]);
  });

  it('reads the fields as cron does: sun-sun is Sundays alone, 5-0 is Friday to Sunday, Quartz syntax is refused', () => {
    const { entries, errors } = parse('0 0 * * sun-sun a\n0 0 * * 5-0 b\n0 0 L * * c\n0 0 * * mon-sun/2 d\n');
    expect(entries.map((e) => e.cron)).toEqual(['0 0 * * sun-sun', '0 0 * * 5-0']);
    expect(errors.map((e) => [e.line, e.reason.replace(/:.*/, '')])).toEqual([
      [3, "'0 0 L * *' is not a valid cron expression"],
      [4, "'0 0 * * mon-sun/2' is not a valid cron expression"],
    ]);
  });

  it('names a bad cron text once, JSON-quoted when it is not plain ASCII, and cut', () => {
    expect(parse('0 0 * * 1\u00e9 echo\n').errors[0].reason).toBe(
      '"0 0 * * 1\u00e9" is not a valid cron expression: holds U+00E9, which cron does not read (only blanks and tabs separate fields)',
    );
    const long = parse(`${'1,'.repeat(600)}1 * * * * echo\n`).errors[0].reason;
    expect(long.length).toBeLessThan(300);
    expect(long).toMatch(/^"1,1,.*…" is not a valid cron expression: longer than 1000 characters$/);
  });

  it("refuses a command starting with '*' (a sixth time field, most likely), as cron does", () => {
    expect(parse('0 0 * * * * /bin/six-fields\n').errors).toEqual([
      { line: 1, reason: "the command starts with '*', which cron refuses: is it a sixth time field? (cronq's six fields, seconds first, are not crontab's)" },
    ]);
    expect(parse('0 0 * * * * root /bin/x\n', true).errors[0].reason).toMatch(/^the user starts with '\*'/);
    // In a system crontab the command after the user may start with it, as in cron.
    expect(entriesOf('0 0 * * * root *.sh\n', true)[0].command).toBe('*.sh');
  });

  it('refuses a line whose command or environment holds a NUL, which no schedule could run', () => {
    const { entries, errors } = parse('0 3 * * * /usr/local/bin/backup.sh\n5 3 * * * echo a\0b\nFOO=a\0b\n6 3 * * * cat%x\0y\n');
    expect(entries.map((e) => e.command)).toEqual(['/usr/local/bin/backup.sh']);
    expect(errors).toEqual([
      { line: 2, reason: 'the command holds a NUL character, which no shell command can' },
      { line: 3, reason: 'the environment line FOO= holds a NUL character, which no environment can' },
      { line: 4, reason: 'the standard input after % holds a NUL character' },
    ]);
  });

  it("drops cronie's no-syslog '-' before a line and its -n option before a command, and refuses other options", () => {
    const entries = entriesOf('-0 5 * * * /bin/quiet\n0 6 * * * -n /bin/mail-on-error\n0 7 * * * -n \t/bin/tabbed\n0 8 * * * echo -n hi\n');
    expect(entries.map((e) => [e.cron, e.command])).toEqual([
      ['0 5 * * *', '/bin/quiet'],
      ['0 6 * * *', '/bin/mail-on-error'],
      ['0 7 * * *', '/bin/tabbed'],
      ['0 8 * * *', 'echo -n hi'],
    ]);
    expect(parse('0 8 * * * -x /bin/y\n').errors[0].reason).toBe("the command starts with '-x', which cronie reads as an option; it knows only -n");
    expect(parse('0 8 * * * -n -n /bin/y\n').errors[0].reason).toBe('cronie takes -n once');
    expect(parse('0 8 * * * -n\n').errors[0].reason).toBe('no command after -n');
    expect(parse('- 0 8 * * * /bin/y\n').errors[0].reason).toMatch(/^a '-' before the time fields .* must touch them/);
  });

  it('skips comments and blank lines, and reads CRLF files', () => {
    const entries = entriesOf('# m h dom mon dow command\r\n\r\n   \r\n  # indented comment\r\n0 1 * * * backup\r\n');
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ line: 5, text: '0 1 * * * backup', command: 'backup' });
  });

  it('keeps the command exactly, inner spacing, quotes and trailing # included', () => {
    const [entry] = entriesOf(`0 1 * * *   cd /srv && php  bin/x.php "a  b" > /dev/null 2>&1 # not a comment`);
    expect(entry.command).toBe(`cd /srv && php  bin/x.php "a  b" > /dev/null 2>&1 # not a comment`);
  });

  it('refuses @reboot with its line number and the reason', () => {
    const { entries, errors } = parse('0 1 * * * ok\n@reboot /usr/bin/start-thing\n');
    expect(entries.map((e) => e.line)).toEqual([1]);
    expect(errors).toEqual([{ line: 2, reason: REBOOT_REASON }]);
    expect(REBOOT_REASON).toMatch(/cronq runs schedules, not start-up hooks.*systemd ExecStartPre/);
  });

  it('refuses unknown nicknames, wrong field counts and bad expressions with their line numbers', () => {
    const { entries, errors } = parse(
      [
        '@fortnightly job', // 1
        '* * * *', // 2: four fields, no command
        '0 25 * * * job', // 3: hour 25
        '5/10 * * * * job', // 4: croner wants */10 or 5-59/10
        '* * * * * ', // 5: no command
        '0 0 31 2 * job', // 6: never fires
        '0 0 * * * %only stdin', // 7
        'MAILTO', // 8: neither an assignment nor a schedule
      ].join('\n'),
    );
    expect(entries).toEqual([]);
    expect(errors.map((e) => e.line)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(errors[0].reason).toMatch(/unknown '@fortnightly'/);
    expect(errors[1].reason).toBe('expected five time fields followed by a command');
    expect(errors[2].reason).toMatch(/^'0 25 \* \* \*' is not a valid cron expression: .*hour/);
    expect(errors[3].reason).toMatch(/^'5\/10 \* \* \* \*' is not a valid cron expression/);
    expect(errors[4].reason).toBe('no command');
    expect(errors[5].reason).toMatch(/never fires/);
    expect(errors[6].reason).toBe('no command before the first %');
    expect(errors[7].reason).toBe('expected five time fields followed by a command');
  });
});

describe('parseCrontab: long lines', () => {
  // A crontab may hold MAX_CRONTAB_BYTES (1 MB) on one line: a regex backtracking over it took
  // 5 s for 100,000 characters, and some 8 minutes for the megabyte.
  it.each([
    ['an environment value with a long run of blanks inside', `A=x${' '.repeat(100_000)}y`, (p: ReturnType<typeof parse>) => expect(p.errors).toEqual([])],
    ['an environment value ending in a long run of blanks', `A=x${' '.repeat(100_000)}`, (p: ReturnType<typeof parse>) => expect(p.errors).toEqual([])],
    ['a command of digits', `* * * * * ${'1'.repeat(100_000)}`, (p: ReturnType<typeof parse>) => expect(p.entries[0].name).toBe('1'.repeat(48))],
    ['a command of slashes', `* * * * * ${'/'.repeat(100_000)}x`, (p: ReturnType<typeof parse>) => expect(p.entries[0].name).toBe('x')],
    // 200,000: at 100,000 the quadratic copy (memcpy) still took only 250 ms; 500,000 took 9 minutes.
    ['a command of escaped percent signs', `* * * * * x${'\\%'.repeat(200_000)}`, (p: ReturnType<typeof parse>) => expect(p.entries[0].command).toBe(`x${'%'.repeat(200_000)}`)],
  ])('reads %s in linear time', (_, line, check) => {
    const startedAt = performance.now();
    const parsed = parse(`${line}\n0 1 * * * next`);
    expect(performance.now() - startedAt).toBeLessThan(500);
    check(parsed);
    expect(parsed.entries.at(-1)?.command).toBe('next');
  });

  it('keeps what the long environment value holds, its trailing blanks cut as before', () => {
    const [entry] = entriesOf(`A = x${' '.repeat(10)}y \t \n0 1 * * * next`);
    expect(entry.env).toEqual({ A: `x${' '.repeat(10)}y` });
  });
});

describe('parseCrontab: day-of-month and day-of-week (cron OR semantics)', () => {
  const from = new Date('2025-01-01T00:00:00Z');
  /** The next run dates of a generated schedule, as cronq lists them. */
  const nextDays = (line: string, count: number) => {
    const schedule = evaluateSchedule(generateScheduleFile(entriesOf(`CRON_TZ=UTC\n${line}`)[0]).source);
    return days(fireTimesBetween(schedule.cron as string, schedule.timezone as string, from, new Date('2100-01-01T00:00:00Z'), count));
  };

  it('runs when EITHER restricted day field matches, as cron does', () => {
    // The 13th of each month, and every Friday.
    expect(entriesOf('0 0 13 * 5 job')[0]).toMatchObject({ cron: '0 0 13 * 5', days: 'either' });
    expect(nextDays('0 0 13 * 5 job', 6)).toEqual([
      '2025-01-03', '2025-01-10', '2025-01-13', '2025-01-17', '2025-01-24', '2025-01-31',
    ]);
  });

  it('requires BOTH when a day field starts with * but is not a bare *, copying the line unchanged', () => {
    // Cron: odd days of the month that are Mondays. cronq reads the same text the same way.
    expect(entriesOf('0 0 */2 * 1 job')[0]).toMatchObject({ cron: '0 0 */2 * 1', days: 'both' });
    expect(generateScheduleFile(entriesOf('0 0 */2 * 1 job')[0]).source).toContain('cron: "0 0 */2 * 1"');
    expect(nextDays('0 0 */2 * 1 job', 4)).toEqual(['2025-01-13', '2025-01-27', '2025-02-03', '2025-02-17']);
    // Cron: the 1st of the month when it is a Sunday, Tuesday, Thursday or Saturday.
    expect(nextDays('0 0 1 * */2 job', 3)).toEqual(['2025-02-01', '2025-03-01', '2025-04-01']);
  });

  it('leaves a bare * alone: the other day field decides', () => {
    expect(entriesOf('0 0 * * 1 job')[0]).not.toHaveProperty('days');
    expect(nextDays('0 0 * * 1 job', 2)).toEqual(['2025-01-06', '2025-01-13']);
    expect(nextDays('0 0 15 * * job', 2)).toEqual(['2025-01-15', '2025-02-15']);
  });
});

describe('splitCronCommand: % as cron defines it', () => {
  it('ends the command at the first % and feeds the rest as standard input, % as newline', () => {
    expect(splitCronCommand('mail -s hi root%line one%line two%')).toEqual({
      command: 'mail -s hi root',
      stdin: 'line one\nline two\n',
    });
  });

  it('turns \\% into a literal % in the command and in the input', () => {
    expect(splitCronCommand('date +\\%Y-\\%m-\\%d')).toEqual({ command: 'date +%Y-%m-%d' });
    expect(splitCronCommand('cat%100\\% sure%')).toEqual({ command: 'cat', stdin: '100% sure\n' });
  });

  it('keeps other backslashes, as cron does', () => {
    expect(splitCronCommand('echo a\\tb \\\\%in\\put\\')).toEqual({ command: 'echo a\\tb \\\\', stdin: 'in\\put\\\n' });
  });

  it('ends standard input with a newline when the text does not, as cron does', () => {
    expect(splitCronCommand('cat%a%b')).toEqual({ command: 'cat', stdin: 'a\nb\n' });
    expect(splitCronCommand('cat%a%')).toEqual({ command: 'cat', stdin: 'a\n' });
  });

  it('gives no standard input for a trailing % or none at all', () => {
    expect(splitCronCommand('backup %')).toEqual({ command: 'backup ' });
    expect(splitCronCommand('backup')).toEqual({ command: 'backup' });
  });

  it('is applied to every parsed line', () => {
    const [entry] = entriesOf('0 6 * * * wall%Backups done at \\%H%');
    expect(entry).toMatchObject({ command: 'wall', stdin: 'Backups done at %H\n' });
  });
});

describe('parseCrontab: environment lines', () => {
  it('applies each assignment to the lines after it only, capturing a copy per entry', () => {
    const entries = entriesOf(
      [
        '0 1 * * * first',
        'PATH=/usr/bin:/bin',
        'GREETING = "hello world"',
        "QUOTED='it is'",
        '0 2 * * * second',
        'PATH=/opt/bin',
        'EMPTY=',
        '"ODD NAME"=x',
        '0 3 * * * third',
      ].join('\n'),
    );
    expect(entries.map((e) => e.env)).toEqual([
      {},
      { PATH: '/usr/bin:/bin', GREETING: 'hello world', QUOTED: 'it is' },
      { PATH: '/opt/bin', GREETING: 'hello world', QUOTED: 'it is', EMPTY: '', 'ODD NAME': 'x' },
    ]);
  });

  it('reads CRON_TZ as the time zone, never TZ (the command\'s alone, as in cronie), defaulting to the given zone', () => {
    const entries = entriesOf(
      ['0 1 * * * a', 'TZ=:America/New_York', '0 2 * * * b', 'CRON_TZ=Asia/Tokyo', '0 3 * * * c', 'CRON_TZ=', '0 4 * * * d'].join('\n'),
    );
    expect(entries.map((e) => [e.timezone, e.timezoneFrom])).toEqual([
      ['Europe/Berlin', 'default'],
      ['Europe/Berlin', 'default'],
      ['Asia/Tokyo', 'CRON_TZ'],
      ['Europe/Berlin', 'default'], // an empty CRON_TZ= puts the host's zone back
    ]);
    // TZ shapes the command's own clock, so it stays in the environment; CRON_TZ is cron's alone.
    expect(entries[1].env).toEqual({ TZ: ':America/New_York' });
  });

  it('refuses the lines under a time zone that is not an IANA zone', () => {
    const { errors } = parse('CRON_TZ=Mars/Olympus\n0 1 * * * a\n');
    expect(errors).toEqual([{ line: 2, reason: "CRON_TZ 'Mars/Olympus' (line 1) is not an IANA time zone" }]);
  });

  it('keeps SHELL in the environment and notes a shell other than /bin/sh', () => {
    const entries = entriesOf('0 1 * * * a\nSHELL=/bin/sh\n0 2 * * * b\nSHELL=/bin/bash\n0 3 * * * c');
    expect(entries.map((e) => e.shell)).toEqual([undefined, undefined, '/bin/bash']);
    expect(entries[2].env).toEqual({ SHELL: '/bin/bash' });
  });

  it('takes MAILTO (and MAILFROM) out of the environment and notes a non-empty MAILTO', () => {
    const entries = entriesOf('MAILTO=ops@example.com\nMAILFROM=cron@example.com\n0 1 * * * a\nMAILTO=""\n0 2 * * * b');
    expect(entries[0]).toMatchObject({ mailto: 'ops@example.com', env: {} });
    expect(entries[1]).not.toHaveProperty('mailto');
  });
});

describe('parseCrontab: system crontab (--system)', () => {
  it('reads the sixth field as the user and the rest as the command', () => {
    const entries = entriesOf('17 * * * * root cd / && run-parts --report /etc/cron.hourly\n@daily www-data php x.php', true);
    expect(entries.map((e) => [e.user, e.command])).toEqual([
      ['root', 'cd / && run-parts --report /etc/cron.hourly'],
      ['www-data', 'php x.php'],
    ]);
  });

  it('refuses a line without a user and command', () => {
    expect(parse('0 1 * * * root', true).errors).toEqual([
      { line: 1, reason: 'expected five time fields followed by a user and a command' },
    ]);
  });

  it('leaves the user column alone in a user crontab', () => {
    expect(entriesOf('0 1 * * * root backup')[0]).toMatchObject({ command: 'root backup' });
    expect(entriesOf('0 1 * * * root backup')[0]).not.toHaveProperty('user');
  });
});

describe('schedule names', () => {
  it('are built from the base names of the command words', () => {
    expect(scheduleNameFor('php bin/report.php --daily', 1)).toBe('php-report-daily');
    expect(scheduleNameFor('/usr/local/bin/backup.sh', 1)).toBe('backup');
    expect(scheduleNameFor('/usr/bin/Sync_Mail.py --All', 1)).toBe('sync-mail-all');
  });

  it('skip a leading cd, wrappers, assignments and redirections', () => {
    expect(scheduleNameFor('cd /srv/app && php artisan schedule:run >> /dev/null 2>&1', 1)).toBe(
      'php-artisan-schedule-run',
    );
    expect(scheduleNameFor('nohup env LANG=C /opt/cleanup.sh >/var/log/c.log', 1)).toBe('cleanup');
  });

  it('are cut to at most 48 characters, at a word boundary when possible', () => {
    const name = scheduleNameFor('run-something-long alpha bravo charlie delta echo foxtrot golf hotel', 1);
    expect(name.length).toBeLessThanOrEqual(48);
    expect(name).toBe('run-something-long-alpha-bravo-charlie-delta');
  });

  it('fall back to the line number when the command has nothing usable', () => {
    expect(scheduleNameFor('>/dev/null', 7)).toBe('crontab-line-7');
  });

  it('are made unique with -2, -3 in crontab order', () => {
    const entries = entriesOf('0 1 * * * backup.sh\n0 2 * * * backup.sh\n0 3 * * * /x/backup.sh\n0 4 * * * backup-2');
    expect(entries.map((e) => e.name)).toEqual(['backup', 'backup-2', 'backup-3', 'backup-2-2']);
  });

  it('are valid cronq names', () => {
    for (const command of ['Ä weird ☃ command', '../../x', '"quoted thing"', 'a'.repeat(100)]) {
      expect(scheduleNameFor(command, 3)).toMatch(/^[a-z0-9][a-z0-9._-]{0,63}$/);
    }
  });
});

describe('generateScheduleFile', () => {
  it('writes a TypeScript module that evaluates to the translated schedule', () => {
    const [entry] = entriesOf(
      'PATH=/usr/bin:/bin\nMAILTO=ops@example.com\nCRON_TZ=Europe/Berlin\n0 2 1 * * php bin/report.php "a\\"b" \'$HOME\'%to stdin%',
    );
    const file = generateScheduleFile(entry);
    expect(file).toMatchObject({ name: 'php-report-a-b-home', fileName: 'php-report-a-b-home.ts' });
    expect(file.source).toMatch(/^\/\/ Imported by `cronq import-crontab` from crontab line 4:\n\/\/   0 2 1 \* \* php/);
    expect(file.source).toContain("import { defineSchedule } from 'cronq';\n\nexport default defineSchedule({\n");
    expect(file.source).toMatch(/MAILTO=ops@example\.com has no cronq equivalent.*\n.*`cronq dead list`/);
    expect(evaluateSchedule(file.source)).toEqual({
      name: 'php-report-a-b-home',
      cron: '0 2 1 * *',
      timezone: 'Europe/Berlin',
      period: 'tick',
      catchUp: { mode: 'latest', window: '1d' },
      command: `php bin/report.php "a\\"b" '$HOME'`,
      env: { PATH: '/usr/bin:/bin' },
      stdin: 'to stdin\n',
    });
    expect(IMPORTED_CATCH_UP).toEqual({ mode: 'latest', window: '1d' });
  });

  it('says where the time zone came from', () => {
    const [host, fromCronTz] = entriesOf('0 1 * * * a\nCRON_TZ=UTC\n0 1 * * * b');
    expect(generateScheduleFile(host).source).toMatch(/No CRON_TZ in the crontab: cron used its machine's local zone \(a TZ= line sets only the/);
    expect(generateScheduleFile(fromCronTz).source).toContain('// From CRON_TZ= in the crontab.');
  });

  it('omits env and stdin when there are none', () => {
    const schedule = evaluateSchedule(generateScheduleFile(entriesOf('@hourly true')[0]).source);
    expect(Object.keys(schedule)).toEqual(['name', 'cron', 'timezone', 'period', 'catchUp', 'command']);
  });

  it('hands the command to a SHELL other than /bin/sh, quoted exactly', () => {
    const [entry] = entriesOf(`SHELL=/bin/bash\n0 1 * * * [[ -f x ]] && echo "it's $HOME"`);
    const source = generateScheduleFile(entry).source;
    const schedule = evaluateSchedule(source);
    expect(schedule.command).toBe(`exec /bin/bash -c '[[ -f x ]] && echo "it'\\''s $HOME"'`);
    expect(schedule.env).toEqual({ SHELL: '/bin/bash' });
    expect(source).toContain('SHELL=/bin/bash: cronq runs commands with /bin/sh -c');
  });

  it('keeps the crontab user as a comment', () => {
    const [entry] = entriesOf('0 1 * * * root backup', true);
    expect(generateScheduleFile(entry).source).toContain(
      "// crontab user: root — cronq runs this as the daemon's own user",
    );
  });

  it('documents the day-field semantics it relies on', () => {
    expect(generateScheduleFile(entriesOf('0 0 13 * 5 a')[0]).source).toMatch(/EITHER the day of the month OR the\n.*weekday/);
    expect(generateScheduleFile(entriesOf('0 0 */2 * 1 a')[0]).source).toMatch(/BOTH day fields must match, in cron and in cronq alike/);
  });

  it('stays valid TypeScript whatever the line holds', () => {
    const hostile = '0 1 * * * echo "*/ \u2028 \u2029 `${x}` \\\\u0041 </script>" \'\'\' \u0001';
    const [entry] = entriesOf(hostile);
    const schedule = evaluateSchedule(generateScheduleFile(entry).source);
    expect(schedule.command).toBe(hostile.slice('0 1 * * * '.length));
  });
});

/** A schedule file named `name` that the loader takes, wherever it is written. */
const scheduleFile = (name: string) =>
  `import { defineSchedule } from '${join(process.cwd(), 'src/index.ts')}';\nexport default defineSchedule({ name: '${name}', cron: '0 5 * * *', timezone: 'UTC', handle() {} });\n`;

describe('importCrontab', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cronq-crontab-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const crontab = async (text: string) => {
    const path = join(dir, 'crontab');
    await writeFile(path, text);
    return path;
  };

  it('writes one schedule file per line into a new directory', async () => {
    const path = await crontab('0 1 * * * backup.sh\n@weekly report.sh\n');
    const outDir = join(dir, 'out', 'schedules');
    const result = await importCrontab(path, { outDir, defaultTimezone: 'UTC' });
    expect(result).toEqual({ written: [join(outDir, 'backup.ts'), join(outDir, 'report.ts')], errors: [] });
    expect((await readdir(outDir)).sort()).toEqual(['backup.ts', 'report.ts']);
    expect(evaluateSchedule(await readFile(join(outDir, 'report.ts'), 'utf8'))).toMatchObject({
      cron: '@weekly',
      command: 'report.sh',
      timezone: 'UTC',
    });
  });

  it('refuses with every bad line as FILE:LINE: reason and writes nothing', async () => {
    const path = await crontab('0 1 * * * good\n@reboot start\n0 99 * * * bad\n');
    const outDir = join(dir, 'out');
    const error = await importCrontab(path, { outDir }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UsageError);
    const lines = (error as Error).message.split('\n');
    expect(lines[0]).toBe(`${path}:2: ${REBOOT_REASON}`);
    expect(lines[1]).toMatch(new RegExp(`^${path}:3: '0 99 \\* \\* \\*' is not a valid cron expression`));
    expect(lines[2]).toMatch(/nothing written/);
    await expect(readdir(outDir)).rejects.toThrow(/ENOENT/);
  });

  it('with skipInvalid, writes the good lines and returns the bad ones', async () => {
    const path = await crontab('0 1 * * * good\n@reboot start\n');
    const result = await importCrontab(path, { outDir: dir, skipInvalid: true });
    expect(result.written).toEqual([join(dir, 'good.ts')]);
    expect(result.errors).toEqual([{ line: 2, reason: REBOOT_REASON }]);
  });

  it('refuses to overwrite an existing schedule file unless forced, writing nothing', async () => {
    const path = await crontab('0 1 * * * alpha\n0 2 * * * beta\n');
    await writeFile(join(dir, 'beta.ts'), scheduleFile('mine'));
    await expect(importCrontab(path, { outDir: dir })).rejects.toThrow(
      new UsageError(`${join(dir, 'beta.ts')} already exists: nothing written (pass --force to overwrite)`),
    );
    expect((await readdir(dir)).sort()).toEqual(['beta.ts', 'crontab']);

    await importCrontab(path, { outDir: dir, force: true });
    expect(await readFile(join(dir, 'beta.ts'), 'utf8')).toContain("command: \"beta\"");
  });

  it('avoids the names the folder\'s files define already, as it avoids its own, so the folder still loads', async () => {
    const path = await crontab('0 1 * * * fan\n0 2 * * * fan\n');
    await writeFile(join(dir, 'jobs.ts'), scheduleFile('fan'));
    const { written } = await importCrontab(path, { outDir: dir });
    expect(written).toEqual([join(dir, 'fan-2.ts'), join(dir, 'fan-3.ts')]);
    const registry = new TaskRegistry();
    await loadSchedulesDir(dir, registry);
    expect(registry.list().map((t) => t.name).sort()).toEqual(['fan', 'fan-2', 'fan-3']);
  });

  it('with force, takes back the name of a file it overwrites, and refuses a folder that does not load, writing nothing', async () => {
    const path = await crontab('0 1 * * * fan\n');
    await writeFile(join(dir, 'fan.ts'), scheduleFile('fan'));
    expect((await importCrontab(path, { outDir: dir, force: true })).written).toEqual([join(dir, 'fan.ts')]);
    expect(await readFile(join(dir, 'fan.ts'), 'utf8')).toContain('command: "fan"');

    await writeFile(join(dir, 'broken.ts'), 'export default 42;\n');
    const error = await importCrontab(await crontab('0 3 * * * other\n'), { outDir: dir }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UsageError);
    expect((error as Error).message).toMatch(/^nothing written: schedules folder \S+ does not load, so its names cannot be avoided: \S*broken\.ts: exports no task or schedule/);
    expect((await readdir(dir)).sort()).toEqual(['broken.ts', 'crontab', 'fan.ts']);
  });

  it('reads a system crontab with its user column', async () => {
    const path = await crontab('SHELL=/bin/sh\n25 6 * * * root test -x /usr/sbin/anacron || run-parts /etc/cron.daily\n');
    const { written } = await importCrontab(path, { outDir: dir, system: true });
    const source = await readFile(written[0], 'utf8');
    expect(source).toContain('// crontab user: root');
    expect(evaluateSchedule(source).command).toBe('test -x /usr/sbin/anacron || run-parts /etc/cron.daily');
  });

  it('refuses a file it cannot read', async () => {
    await expect(importCrontab(join(dir, 'missing'), { outDir: dir })).rejects.toThrow(UsageError);
  });
});
