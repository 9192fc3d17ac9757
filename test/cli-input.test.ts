import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseIsoInstant } from '../src/cli/instant.ts';
import { parseDatabaseUrl } from '../src/db/url.ts';
import { parseCommandArgs, type Command } from '../src/cli/command.ts';
import { startCommand } from '../src/cli/commands/start.ts';
import { CRONQ_BIN, REPO_ROOT, runProcess } from './support/cli.ts';
import { runMain } from './support/runMain.ts';

// Usage errors end before the database is opened: no server is needed for these.
const env = { DATABASE_URL: 'mysql://root@127.0.0.1:3306/cli_input_unused', CRONQ_SCHEDULES: 'test/fixtures/schedules-daemon', LOG_LEVEL: 'info' };

/** Runs the CLI in process and expects one line on stderr, nothing on stdout, and exit 64. */
async function refused(args: string[], extraEnv: Record<string, string> = {}): Promise<string> {
  const r = await runMain(args, { ...env, ...extraEnv });
  expect(r.stdout, args.join(' ')).toBe('');
  expect(r.stderr.trim().split('\n'), args.join(' ')).toHaveLength(1);
  expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(64);
  return r.stderr.trim();
}

describe('flags the parser refuses', () => {
  it('a flag value starting with a dash is refused on one line that says how to pass it', async () => {
    expect(await refused(['dead', 'list', '--kind', '-x'])).toBe(
      "cronq dead list: --kind is followed by '-x', a flag, not its value; give --kind a value (one that really starts with '-' is written --kind=VALUE) (see cronq dead --help)",
    );
  });

  it('another flag where a value belongs is refused, never taken as the value', async () => {
    // No server there: were the flag taken as the value, the command would fail to connect instead.
    const nowhere = { DATABASE_URL: 'mysql://root@127.0.0.1:1/nowhere' };
    expect(await refused(['dead', 'list', '--queue', '--limit', '5'], nowhere)).toBe(
      "cronq dead list: --queue is followed by '--limit', a flag, not its value; give --queue a value (one that really starts with '-' is written --queue=VALUE) (see cronq dead --help)",
    );
    expect(await refused(['cancel', '--all-matching', '--reason', '--by', 'ann'], nowhere)).toMatch(/^cronq cancel: --reason is followed by '--by', a flag, not its value; /);
    expect(await refused(['enqueue', 'traced', '--key', '--key', 'k'], nowhere)).toMatch(/^cronq enqueue: --key is followed by '--key', a flag, not its value; /);
    expect(await refused(['cancel', '--all-matching', '--reason', '--'], nowhere)).toMatch(/^cronq cancel: --reason is followed by '--', a flag, not its value; /);
    // Written with '=', a value starting with a dash is the value; its own check then applies.
    expect(await refused(['dead', 'list', '--limit=--5'], nowhere)).toBe("cronq dead list: --limit must be a whole number from 1 to 1000 (got '--5')");
  });

  it('a negative number after a flag gets the range error the flag gives --flag=-N, not the parser\'s ambiguity', async () => {
    const cases: string[][] = [
      ['schedules', '--count', '-1'],
      ['start', '--prefetch', '-1'],
      ['dead', 'list', '--limit', '-5'],
      ['start', '--concurrency', '-2.5'],
      ['start', '--grace', '-5s'],
    ];
    for (const args of cases) {
      const joined = [...args.slice(0, -2), `${args.at(-2)}=${args.at(-1)}`];
      const message = await refused(args);
      expect(message, args.join(' ')).not.toMatch(/ambiguous/);
      expect(message, args.join(' ')).toBe(await refused(joined));
    }
    expect(await refused(['dead', 'list', '--limit', '-5'])).toBe("cronq dead list: --limit must be a whole number from 1 to 1000 (got '-5')");
    // After '--' nothing is a flag's value.
    expect(await refused(['tick', 'nightly', '--', '--at', '-1'])).toMatch(/^cronq tick: unexpected argument '--at'/);
  });
});

describe('a long unknown flag', () => {
  it('is refused at once, however many blanks it holds: its message is made one line in linear time', () => {
    // An argument may be 128 KiB long; collapsing the message's blanks backtracked over them (18 s).
    const flag = `--x${' '.repeat(100_000)}y`;
    const startedAt = performance.now();
    expect(() => parseCommandArgs(startCommand, [flag])).toThrow(/^Unknown option '--x {100000}y'/);
    expect(performance.now() - startedAt).toBeLessThan(500);
  });
});

describe('a negative number where an argument belongs', () => {
  it("is refused by that argument's own check, naming it and its rule, not as an unknown flag", async () => {
    const nowhere = { DATABASE_URL: 'mysql://root@127.0.0.1:1/nowhere' };
    expect(await refused(['dead', 'show', '-1'], nowhere)).toBe("cronq dead show: ID must be a dead letter id, a whole number from 1 as 'cronq dead list' prints it (got '-1')");
    expect(await refused(['dead', 'requeue', '-3', '--reason', 'x'], nowhere)).toMatch(/^cronq dead requeue: ID must be a dead letter id, a whole number from 1 .*\(got '-3'\)$/);
    expect(await refused(['cancel', '-5', '--reason', 'x'], nowhere)).toBe("cronq cancel: ID must be a job id (cronq_jobs.id), a whole number from 1 (got '-5')");
    // Where no argument belongs, it is the unexpected argument it is.
    expect(await refused(['stats', '-1'], nowhere)).toBe("cronq stats: unexpected argument '-1' (see cronq stats --help)");
  });

  it('keeps its place among the arguments, and a real unknown flag keeps its message', async () => {
    const nowhere = { DATABASE_URL: 'mysql://root@127.0.0.1:1/nowhere' };
    expect(await refused(['dead', '-1', 'show'], nowhere)).toBe("cronq dead: unknown subcommand '-1' (list, show, requeue or discard; see cronq dead --help)");
    expect(await refused(['dead', 'show', '-x'], nowhere)).toBe("cronq dead show: Unknown option '-x' (see cronq dead --help)");
    expect(await refused(['cancel', '-', '--reason', 'x'], nowhere)).toBe("cronq cancel: ID must be a job id (cronq_jobs.id), a whole number from 1 (got '-')");
    expect(await refused(['dead', '-1', 'show\uFFFD'], nowhere)).toMatch(/^cronq dead: argument 2 \('show\uFFFD'\) holds U\+FFFD/);
  });
});

describe('a subcommand (dead list)', () => {
  it("the parser's refusals name the subcommand, as the subcommand's own refusals do", async () => {
    const nowhere = { DATABASE_URL: 'mysql://root@127.0.0.1:1/nowhere' };
    expect(await refused(['dead', 'list', '--bogus'], nowhere)).toBe("cronq dead list: Unknown option '--bogus' (see cronq dead --help)");
    expect(await refused(['dead', 'list', '--limit', '5', '--limit', '6'], nowhere)).toBe(
      'cronq dead list: --limit is given more than once; give it once (see cronq dead --help)',
    );
    expect(await refused(['dead', 'discard', '1', '--reason'], nowhere)).toBe("cronq dead discard: Option '--reason <value>' argument missing (see cronq dead --help)");
    expect(await refused(['dead', 'list', '--limit', '0'], nowhere)).toBe("cronq dead list: --limit must be a whole number from 1 to 1000 (got '0')");
    // No subcommand named: the group's name alone.
    expect(await refused(['dead', '--bogus'], nowhere)).toBe("cronq dead: Unknown option '--bogus' (see cronq dead --help)");
  });
});

describe('arguments that were not UTF-8', () => {
  it('are refused naming the flag or the argument, before anything is stored changed', async () => {
    const nowhere = { DATABASE_URL: 'mysql://root@127.0.0.1:1/nowhere' };
    const why = 'holds U+FFFD, what bytes that are not UTF-8 become on a command line: it would be stored changed; pass it as UTF-8 text';
    expect(await refused(['enqueue', 'traced', '--key', 'caf\uFFFD'], nowhere)).toBe(`cronq enqueue: --key ${why}`);
    expect(await refused(['cancel', '--all-matching', '--reason=d\uFFFDj\uFFFD vu'], nowhere)).toBe(`cronq cancel: --reason ${why}`);
    expect(await refused(['enqueue', 'trac\uFFFDd', '--key', 'k'], nowhere)).toBe(`cronq enqueue: argument 1 ('trac\uFFFDd') ${why}`);
    expect(await refused(['dead', 'show', '1\uFFFD'], nowhere)).toBe(`cronq dead show: argument 2 ('1\uFFFD') ${why}`);
  });

  it('as the real CLI receives them: a key typed in a Latin-1 terminal', async () => {
    // 'café' in Latin-1 ends in the byte 0xe9, which is no UTF-8; only a shell can put it in argv as it is.
    const script = `exec "$0" "$1" enqueue traced --key "$(printf 'caf\\351')"`;
    const r = await runProcess('sh', ['-c', script, process.execPath, CRONQ_BIN], { cwd: REPO_ROOT, env: { ...env, DATABASE_URL: 'mysql://root@127.0.0.1:1/nowhere' }, timeoutMs: 30_000 });
    expect(r).toEqual({ code: 64, stdout: '', stderr: "cronq enqueue: --key holds U+FFFD, what bytes that are not UTF-8 become on a command line: it would be stored changed; pass it as UTF-8 text\n" });
  });
});

describe('whole-number flags', () => {
  it.each(['1e3', '0x10', ' 5', '5 ', '+5', '5.0', '1_000', '٥'])('take digits only: %j is refused naming the flag', async (value) => {
    expect(await refused(['dead', 'list', '--limit', value])).toBe(`cronq dead list: --limit must be a whole number from 1 to 1000 (got '${value}')`);
    expect(await refused(['schedules', '--count', value])).toMatch(/^cronq schedules: --count must be a whole number from 1 to 1000/);
    expect(await refused(['start', '--concurrency', value])).toMatch(/^cronq start: --concurrency must be a whole number/);
    expect(await refused(['enqueue', 'traced', '--key', 'k', '--max-attempts', value])).toMatch(/^cronq enqueue: --max-attempts must be a whole number from 1 to 1000/);
  });

  it('quote a long refused value cut', async () => {
    expect(await refused(['dead', 'list', '--limit', '9'.repeat(5000)])).toBe(`cronq dead list: --limit must be a whole number from 1 to 1000 (got '${'9'.repeat(64)}…')`);
  });
});

describe('a flag given twice', () => {
  it('is refused on one line naming it, whatever its form, instead of the last one silently winning', async () => {
    const cases: Array<[string[], string]> = [
      [['start', '--concurrency', '4', '--concurrency', '8'], 'start: --concurrency'],
      [['start', '--concurrency=4', '--concurrency', '4'], 'start: --concurrency'],
      [['start', '--no-migrate', '--queues', 'a', '--no-migrate'], 'start: --no-migrate'],
      [['enqueue', 'report', '--key', 'a', '--key', 'b'], 'enqueue: --key'],
      [['dead', 'list', '--kind', 'a', '--kind=b'], 'dead list: --kind'],
      [['cancel', '--all-matching', '--reason', 'x', '--reason', 'y'], 'cancel: --reason'],
      [['pause', 'nightly', '--by', 'ann', '--by', 'bob'], 'pause: --by'],
      [['stats', '--json', '--json'], 'stats: --json'],
      [['schedules', '--schedules', 'a', '--schedules', 'b'], 'schedules: --schedules'],
    ];
    for (const [args, named] of cases) {
      const [command, flag] = named.split(': ');
      // No server there: were the flag taken, the command would fail to connect rather than run.
      expect(await refused(args, { DATABASE_URL: 'mysql://root@127.0.0.1:1/nowhere' })).toBe(`cronq ${command}: ${flag} is given more than once; give it once (see cronq ${command.split(' ')[0]} --help)`);
    }
  });

  it('is taken when the flag is declared to repeat, and each flag still once', () => {
    const command = { ...startCommand, options: { ...startCommand.options, tag: { type: 'string', multiple: true } } } as Command;
    expect(parseCommandArgs(command, ['--tag', 'a', '--concurrency', '2', '--tag', 'b']).values).toMatchObject({ tag: ['a', 'b'], concurrency: '2' });
  });
});

describe('DATABASE_URL', () => {
  it('a broken percent-escape in the password or database name is refused naming DATABASE_URL, password masked', async () => {
    expect(await refused(['stats'], { DATABASE_URL: 'mysql://root:se%zzcret@127.0.0.1:3306/cronq' })).toBe(
      "cronq stats: DATABASE_URL has a '%' not followed by two hex digits: percent-encode '%' itself as %25: mysql://root:***@127.0.0.1:3306/cronq",
    );
    expect(await refused(['stats'], { DATABASE_URL: 'mysql://root@127.0.0.1:3306/cron%zz' })).toMatch(/^cronq stats: DATABASE_URL has a '%' not followed by two hex digits/);
  });

  it("a password holding '/', '?' or '#' is refused saying to percent-encode them, password masked", async () => {
    // Whatever follows the character (a letter that is no port, a number that is one), the line says why.
    for (const password of ['p/w', 'p?w', 'p#w', '1234/x', 'a?b#c']) {
      expect(await refused(['stats'], { DATABASE_URL: `mysql://root:${password}@127.0.0.1:3306/cronq` }), password).toBe(
        "cronq stats: DATABASE_URL has '/', '?' or '#' before its last '@': percent-encode them in the password (%2F, %3F, %23): mysql://root:***@127.0.0.1:3306/cronq",
      );
    }
  });

  it('a URL mistyped around its scheme (a slash short, or three) is refused with its password masked all the same', async () => {
    for (const url of ['mysql:/root:s3cret@127.0.0.1:3306/cronq', 'mysql:root:s3cret@127.0.0.1:3306/cronq', 'mysql//root:s3cret@127.0.0.1:3306/cronq', 'mysql:///root:s3cret@127.0.0.1:3306/cronq', 'mysql:/root:s3/cret@127.0.0.1:3306/cronq']) {
      const line = await refused(['stats'], { DATABASE_URL: url });
      expect(line, url).toMatch(/^cronq stats: DATABASE_URL /);
      expect(line, url).not.toMatch(/s3|cret/);
    }
  });

  it('parameters after the database name (?ssl=true) are refused, naming them, never read as TLS or silently dropped', async () => {
    expect(await refused(['stats'], { DATABASE_URL: 'mysql://root:secret@127.0.0.1:1/cronq?ssl=true&ssl-mode=REQUIRED' })).toBe(
      "cronq stats: DATABASE_URL takes no parameters after the database name (got 'ssl', 'ssl-mode'): cronq reads the user, password, host, port and database alone, and does not configure TLS to the database (docs/deploy.md): mysql://root:***@127.0.0.1:1/cronq?ssl=true&ssl-mode=REQUIRED",
    );
    expect(await refused(['stats'], { DATABASE_URL: 'mysql://root@127.0.0.1:1/cronq#x' })).toMatch(/^cronq stats: DATABASE_URL takes no parameters after the database name \(got '#x'\)/);
    expect(parseDatabaseUrl('mysql://root@127.0.0.1:3306/cronq').database).toBe('cronq');
  });

  it('an IPv6 host in brackets is connected to without its brackets', async () => {
    expect(parseDatabaseUrl('mysql://root@[::1]:3306/cronq').host).toBe('::1');
    expect(parseDatabaseUrl('mysql://root@127.0.0.1:3306/cronq').host).toBe('127.0.0.1');
  });
});

describe('durations', () => {
  it('a --poll outside 10ms to 60s is refused saying what was given, as the other duration flags do', async () => {
    expect(await refused(['start', '--poll', '5ms'])).toBe("cronq start: --poll must be between 10ms and 60s (got '5ms')");
    expect(await refused(['start', '--poll', '2m'])).toBe("cronq start: --poll must be between 10ms and 60s (got '2m')");
  });

  it('a duration longer than 100 years is refused naming the flag, before anything runs', async () => {
    const digits = '9'.repeat(400); // Infinity as a number
    expect(await refused(['prune', '--done-older-than', `${digits}d`, '--dry-run'])).toBe(
      `cronq prune: --done-older-than: '${digits.slice(0, 64)}…' is longer than 36500d (100 years)`,
    );
    expect(await refused(['prune', '--done-older-than', '100000000d', '--dry-run'])).toBe("cronq prune: --done-older-than: '100000000d' is longer than 36500d (100 years)");
    expect(await refused(['start', '--unknown-kind-grace', '36501d'])).toBe("cronq start: --unknown-kind-grace: '36501d' is longer than 36500d (100 years)");
  });

  it('a duration with a space before, after or inside it is refused as malformed, flags and environment alike', async () => {
    expect(await refused(['prune', '--done-older-than', '1h ', '--dry-run'])).toBe("cronq prune: --done-older-than: '1h ' is not a duration (use e.g. 100ms, 2s, 5m, 1h, 40d)");
    expect(await refused(['start', '--grace', ' 2s'])).toBe("cronq start: --grace: ' 2s' is not a duration (use e.g. 100ms, 2s, 5m, 1h, 40d)");
    expect(await refused(['start', '--poll', '1 s'])).toBe("cronq start: --poll: '1 s' is not a duration (use e.g. 100ms, 2s, 5m, 1h, 40d)");
    expect(await refused(['schedules'], { CRONQ_IMPORT_TIMEOUT: '10s ' })).toMatch(/^cronq schedules: CRONQ_IMPORT_TIMEOUT: '10s ' is not a duration/);
  });

  it('a duration that is not one is quoted at most 64 characters long', async () => {
    expect(await refused(['start', '--grace', 'x'.repeat(10_000)])).toBe(`cronq start: --grace: '${'x'.repeat(64)}…' is not a duration (use e.g. 100ms, 2s, 5m, 1h, 40d)`);
  });
});

describe('waits that a timer bounds', () => {
  it('a --grace longer than a day is refused: past 24.8 days node fires its timer at once, giving no grace at all', async () => {
    expect(await refused(['start', '--grace', '30d'])).toBe("cronq start: --grace must be at most 24h, the longest lease (got '30d')");
  });

  it('a CRONQ_IMPORT_TIMEOUT longer than a day is refused instead of refusing every schedule file at once', async () => {
    expect(await refused(['schedules'], { CRONQ_IMPORT_TIMEOUT: '30d' })).toBe("cronq schedules: CRONQ_IMPORT_TIMEOUT must be between 100ms and 24h (got '30d')");
  });
});

describe('instants past what the database holds', () => {
  it('an instant in the year 10000 (UTC) is refused for every instant flag, so --since can never widen a bulk requeue to everything', async () => {
    for (const value of ['9999-12-31T23:00:00-05:00', '9999-12-31T20:00:00-04:00']) {
      for (const args of [
        ['dead', 'requeue', '--all-matching', '--since', value, '--reason', 'r'],
        ['dead', 'list', '--since', value],
        ['enqueue', 'traced', '--key', 'k', '--run-at', value],
        ['tick', 'nightly', '--at', value],
        ['schedules', '--from', value],
      ]) {
        const named = args[0] === 'dead' ? `dead ${args[1]}` : args[0];
        expect(await refused(args)).toMatch(new RegExp(`^cronq ${named}: --[a-z-]+ must be before the year 10000 \\(UTC\\) \\(got '${value.replace(/[.+]/g, '\\$&')}'\\)$`));
      }
    }
    expect(parseIsoInstant('9999-12-31T23:59:59.999999Z', '--at').toISOString()).toBe('9999-12-31T23:59:59.999Z');
  });
});

describe('--kind and --queue filters longer than any kind or queue', () => {
  it('are refused in one bounded line naming the flag, before the database is opened, never echoed whole', async () => {
    const kind = 'k'.repeat(100_000);
    const cases: Array<[string[], string]> = [
      [['dead', 'list', '--kind', kind], 'dead list: --kind'],
      [['dead', 'requeue', '--all-matching', '--kind', kind, '--reason', 'r'], 'dead requeue: --kind'],
      [['dead', 'discard', '--all-matching', '--queue', 'q'.repeat(65), '--reason', 'r'], 'dead discard: --queue'],
      [['cancel', '--all-matching', '--kind', kind, '--reason', 'r'], 'cancel: --kind'],
      [['cancel', '--all-matching', '--queue', 'q'.repeat(65), '--reason', 'r'], 'cancel: --queue'],
    ];
    for (const [args, named] of cases) {
      const [command, flag] = named.split(': ');
      const most = flag === '--kind' ? 128 : 64;
      // No server there: a refusal after connecting would be a connection error instead.
      expect(await refused(args, { DATABASE_URL: 'mysql://root@127.0.0.1:1/nowhere' }), named).toBe(
        `cronq ${command}: ${flag} is longer than ${most} characters, the longest a ${flag.slice(2)} can be: it would match nothing`,
      );
    }
  });
});

describe('cronq schedules --from in the year 3000 or later', () => {
  it('is refused naming --from, before the database is opened', async () => {
    // No server there: a refusal after connecting would be a connection error instead.
    expect(await refused(['schedules', '--from', '3000-01-01'], { DATABASE_URL: 'mysql://root@127.0.0.1:1/nowhere' })).toBe(
      "cronq schedules: --from must be before the year 3000: cron fire times are computed up to the end of 2999 (got '3000-01-01')",
    );
  });
});

describe('cronq enqueue --queue', () => {
  it('a bad queue name is refused naming --queue, before the database is opened', async () => {
    // No server there: a refusal after connecting would be a connection error instead.
    expect(await refused(['enqueue', 'report', '--key', 'k', '--queue', 'a b'], { DATABASE_URL: 'mysql://root@127.0.0.1:1/nowhere' })).toBe(
      `cronq enqueue: --queue must be 1-64 letters, digits, '.', '_' or '-' (got "a b")`,
    );
  });
});

describe('cronq enqueue KIND', () => {
  it("a kind no task can be named is refused as such, with or without --allow-unknown-kind, before the database is opened", async () => {
    // No server there: a refusal after connecting would be a connection error instead.
    const nowhere = { DATABASE_URL: 'mysql://root@127.0.0.1:1/nowhere' };
    const why = `cronq enqueue: job kind (a task's name) must be 1-64 letters, digits, '.', '_' or '-' (got "send invoice")`;
    expect(await refused(['enqueue', 'send invoice', '--key', 'k'], nowhere)).toBe(why);
    expect(await refused(['enqueue', 'send invoice', '--key', 'k', '--allow-unknown-kind'], nowhere)).toBe(why);
    expect(await refused(['enqueue', 'x'.repeat(100_000), '--key', 'k'], nowhere)).toMatch(/^cronq enqueue: job kind \(a task's name\) must be .{0,120}…"\)$/);
  });
});

describe('cronq start --queues', () => {
  it('a queue named twice is refused naming it, before anything runs', async () => {
    expect(await refused(['start', '--queues', 'a,b, a'], { DATABASE_URL: 'mysql://root@127.0.0.1:1/nowhere' })).toBe("cronq start: --queues names queue 'a' more than once; name each queue once");
  });
});

describe('DATABASE_URL ports and names', () => {
  it('refuses a port that is no number from 1 to 65535, and port 0 (which the driver reads as 3306), naming it', async () => {
    expect(await refused(['stats'], { DATABASE_URL: 'mysql://root@127.0.0.1:0/cronq' })).toBe(
      'cronq stats: DATABASE_URL has port 0; give a port from 1 to 65535, or none for 3306: mysql://root@127.0.0.1:0/cronq',
    );
    expect(await refused(['stats'], { DATABASE_URL: 'mysql://root@127.0.0.1:99999/cronq' })).toMatch(/^cronq stats: DATABASE_URL has a port that is not a number from 1 to 65535: mysql:\/\/root@127\.0\.0\.1:99999\/cronq$/);
    // A password with '/' and ':' in it is never read as the port, nor shown.
    expect(await refused(['stats'], { DATABASE_URL: 'mysql://u:p/ss:w@127.0.0.1:99999/cronq' })).not.toMatch(/p\/ss/);
    expect(await refused(['stats'], { DATABASE_URL: 'mysql://root:secret@127.0.0.1:abc/cronq' })).toBe(
      'cronq stats: DATABASE_URL has a port that is not a number from 1 to 65535: mysql://root:***@127.0.0.1:abc/cronq',
    );
  });

  it("a URL naming one of the server's own databases (mysql, sys, information_schema, performance_schema) is refused on one line before connecting", async () => {
    // Port 1: were it not refused first, the command would fail to connect instead (or, on a server, migrate into `mysql`).
    for (const name of ['mysql', 'sys', 'information_schema', 'performance_schema', 'INFORMATION_SCHEMA', 'MySQL']) {
      for (const args of [['stats'], ['migrate'], ['start'], ['dead', 'list']]) {
        expect(await refused(args, { DATABASE_URL: `mysql://root:s3cret@127.0.0.1:1/${name}` }), `${name} ${args.join(' ')}`).toBe(
          `cronq ${args.join(' ')}: DATABASE_URL names '${name}', one of the server's own databases: cronq needs a database of its own, such as mysql://root@127.0.0.1:3306/cronq (created by 'cronq migrate'): mysql://root:***@127.0.0.1:1/${name}`,
        );
      }
    }
    expect(await refused(['migrate'], { MIGRATION_DATABASE_URL: 'mysql://root@127.0.0.1:1/sys' })).toMatch(/^cronq migrate: MIGRATION_DATABASE_URL names 'sys', one of the server's own databases: /);
    expect(parseDatabaseUrl('mysql://root@127.0.0.1:3306/mysql_app').database).toBe('mysql_app');
  });

  it('says a database name is too long when it is', async () => {
    expect(await refused(['stats'], { DATABASE_URL: `mysql://root@127.0.0.1:3306/${'d'.repeat(70)}` })).toMatch(/^cronq stats: DATABASE_URL names a database of 70 characters; MySQL allows at most 64: /);
  });
});

describe('MIGRATION_DATABASE_URL', () => {
  it('a malformed MIGRATION_DATABASE_URL is refused under its own name, not as DATABASE_URL', async () => {
    expect(await refused(['migrate'], { MIGRATION_DATABASE_URL: 'postgres://root@127.0.0.1/cronq' })).toBe('cronq migrate: MIGRATION_DATABASE_URL must start with mysql:// (got postgres://)');
    expect(await refused(['migrate'], { MIGRATION_DATABASE_URL: 'mysql://root@127.0.0.1:3306/' })).toMatch(/^cronq migrate: MIGRATION_DATABASE_URL must name a database/);
  });
});

describe('--help tells the truth', () => {
  it.each(['start', 'migrate', 'enqueue', 'tick', 'schedules', 'dead', 'cancel', 'stats', 'limits', 'prune', 'pause', 'resume'])(
    'cronq %s --help mentions --schedules only if the command accepts it',
    async (command) => {
      const help = (await runMain([command, '--help'], env)).stdout;
      const r = await runMain([command, '--schedules', 'test/fixtures/does-not-exist', ...(command === 'dead' ? ['list'] : [])], env);
      const accepted = !/Unknown option '--schedules'/.test(r.stderr);
      expect(help.includes('--schedules') || help.includes('CRONQ_SCHEDULES'), r.stderr).toBe(accepted);
    },
  );
});

describe('help', () => {
  it('cronq --help, -h and help print the list of commands on stdout, exit 0', async () => {
    const help = await runMain(['--help'], env);
    expect(help).toMatchObject({ code: 0, stderr: '' });
    expect(help.stdout).toMatch(/^Usage: cronq COMMAND/);
    for (const args of [['-h'], ['help'], ['help', '--help'], ['--help', '--json'], ['-h', '--version']]) expect(await runMain(args, env), args.join(' ')).toEqual(help);
  });

  it('cronq help CMD and cronq CMD --help print that command\'s help on stdout, exit 0', async () => {
    for (const command of ['start', 'tick', 'dead', 'cancel', 'import-crontab']) {
      const help = await runMain([command, '--help'], env);
      expect(help, command).toMatchObject({ code: 0, stderr: '' });
      expect(help.stdout, command).toMatch(new RegExp(`^Usage: cronq ${command}`));
      expect(await runMain(['help', command], env), command).toEqual(help);
      expect(await runMain([command, '-h'], env), command).toEqual(help);
      expect(await runMain(['--help', command], env), command).toEqual(help);
    }
    expect(await runMain(['help', 'dead', 'requeue'], env)).toEqual(await runMain(['dead', '--help'], env));
  });

  it('an empty value given with = is refused as empty, not as missing', async () => {
    expect(await refused(['cancel', '--key=', '--reason', 'x'])).toBe('cronq cancel: --key must not be empty (a job key is 1 to 255 characters)');
    expect(await refused(['dead', 'list', '--kind='])).toBe('cronq dead list: --kind must not be empty or blank');
  });

  it('cronq help of something that is no command is refused in one line, exit 64', async () => {
    expect(await refused(['help', 'frobnicate'])).toBe("cronq help: unknown command 'frobnicate' (see cronq --help)");
    expect(await refused(['help', 'tick', 'nightly'])).toBe("cronq help: unexpected argument 'nightly' (give one command: cronq help tick)");
  });

  it('bare cronq prints the usage on stderr, nothing on stdout, exit 64', async () => {
    const r = await runMain([], env);
    expect(r).toMatchObject({ code: 64, stdout: '' });
    expect(r.stderr).toBe((await runMain(['--help'], env)).stdout);
  });

  it('a command group without its subcommand (cronq dead) prints its usage on stderr, exit 64, and opens no database', async () => {
    const r = await runMain(['dead'], { ...env, DATABASE_URL: 'mysql://root@127.0.0.1:1/nowhere' });
    expect(r).toMatchObject({ code: 64, stdout: '' });
    expect(r.stderr).toMatch(/^Usage: cronq dead list .*\n(.*\n)*\nRun 'cronq dead --help' for what each does and its flags\.\n$/);
    expect(r.stderr).not.toContain('--all-matching    ');
  });
});

describe('cronq --version', () => {
  it("prints the package's version alone, exit 0, and the help says so", async () => {
    const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
    expect(await runMain(['--version'], env)).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
    expect((await runMain(['--help'], env)).stdout).toContain("'cronq --version' prints cronq's version");
  });

  it('refuses anything after it in one line, exit 64, rather than ignoring it', async () => {
    expect(await runMain(['--version', 'extra'], env)).toEqual({ code: 64, stdout: '', stderr: "cronq: --version takes nothing after it (got 'extra')\n" });
  });
});

describe('LOG_LEVEL', () => {
  const refusal = "LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent (got 'verbose')";

  it('an unknown level is refused on one line naming LOG_LEVEL and the accepted values, exit 64, whatever the command', async () => {
    for (const args of [['start'], ['stats'], ['migrate'], ['schedules'], ['dead', 'list']]) {
      expect(await refused(args, { LOG_LEVEL: 'verbose' }), args.join(' ')).toBe(`cronq ${args.join(' ')}: ${refusal}`);
    }
  });

  it('a level holding a line break is refused on one line, the break shown as an escape, as is an --http address (each read as two lines)', async () => {
    expect(await runMain(['stats'], { ...env, LOG_LEVEL: 'info\nwarn' })).toMatchObject({
      code: 64,
      stderr: "cronq stats: LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent (got 'info\\x0awarn')\n",
    });
    const http = await runMain(['start', '--http', 'a\nb:80'], env);
    expect(http.code).toBe(64);
    expect(http.stderr).toBe("cronq start: --http must be HOST:PORT, e.g. 127.0.0.1:9464 (got 'a\\x0ab:80': 'a\\x0ab' is not a host)\n");
  });

  it('any value a refusal quotes is shown on its one line, its line breaks as escapes: an id, an instant, a duration, an environment variable', async () => {
    // c50a510 escaped LOG_LEVEL's and --http's; every other quote printed the value's second line as a refusal of its own.
    const cases: Array<[string[], NodeJS.ProcessEnv, string]> = [
      [['dead', 'show', '1\nwarn: x'], env, "cronq dead show: ID must be a dead letter id, a whole number from 1 as 'cronq dead list' prints it (got '1\\x0awarn: x')\n"],
      [['schedules', '--from', 'now\nzz'], env, "cronq schedules: --from must be an ISO 8601 instant with a zone, such as 2026-12-01T02:00:00Z (got 'now\\x0azz')\n"],
      [['start', '--poll', '1ms\r\n'], env, "cronq start: --poll: '1ms\\x0d\\x0a' is not a duration (use e.g. 100ms, 2s, 5m, 1h, 40d)\n"],
      [['schedules'], { ...env, CRONQ_IMPORT_TIMEOUT: '5ms\n' }, "cronq schedules: CRONQ_IMPORT_TIMEOUT: '5ms\\x0a' is not a duration (use e.g. 100ms, 2s, 5m, 1h, 40d)\n"],
    ];
    for (const [argv, given, stderr] of cases) expect(await runMain(argv, given)).toMatchObject({ code: 64, stderr });
  });

  it('accepts every level in any case, and an empty value as unset', async () => {
    // Each run gets past the level to the command's own check of its flags (no database needed).
    for (const level of ['fatal', 'ERROR', 'Warn', 'info', 'debug', 'trace', 'silent', '']) {
      const r = await runMain(['schedules', '--count', '0'], { ...env, LOG_LEVEL: level });
      expect([r.code, r.stderr.split('\n')[0]], `LOG_LEVEL=${level}`).toEqual([64, "cronq schedules: --count must be a whole number from 1 to 1000 (got '0')"]);
    }
  });
});
