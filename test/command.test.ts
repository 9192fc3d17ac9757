import { mkdtempSync, readFileSync, existsSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_TEXT_MAX } from '../src/runtime/errorText.ts';
import { commandHandler, EXEC_STRING_MAX, KILL_GRACE_MS, STDERR_TAIL_BYTES, type CommandSpec } from '../src/shell/handler.ts';
import type { Job, JobContext } from '../src/tasks/job.ts';
import { isGone } from './support/process.ts';
import { EventLog, eventually } from './support/events.ts';

// No database: the handler is called directly, as JobRun would call it.

let dir: string;
/** Processes a test left running on purpose; killed afterwards so nothing outlives the run. */
const leftovers: number[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'cronq-command-'));
});
afterEach(() => {
  for (const pid of leftovers.splice(0)) {
    if (isGone(pid)) continue; // dead already; its pid may even belong to someone else by now
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // exited meanwhile
    }
  }
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

function fakeJob(overrides: Partial<Job> = {}): Job {
  return {
    id: 42,
    kind: 'nightly-report',
    key: 'nightly-report:2024-03-05',
    queue: 'reports',
    payload: { region: 'eu', note: "it's \"quoted\"" },
    attempt: 2,
    maxAttempts: 5,
    periodKey: '2024-03-05',
    scheduledAt: new Date('2024-03-05T02:30:00Z'),
    ...overrides,
  };
}

function context(options: { signal?: AbortSignal; log?: EventLog } = {}): JobContext {
  return {
    signal: options.signal ?? new AbortController().signal,
    log: options.log?.logger ?? pino({ level: 'silent' }),
    effect: () => {},
  };
}

function run(spec: CommandSpec, job = fakeJob(), ctx = context()): Promise<unknown> {
  return Promise.resolve(commandHandler(spec)(job, ctx));
}

/** Where PID 1 does not reap orphans (a container without an init), a killed orphan stays a zombie: dead all the same. */
async function firstStdoutLine(log: EventLog): Promise<string> {
  const [event] = await log.waitFor('command_output', 1, 10_000, (e) => e.stream === 'stdout');
  return event.line;
}

describe('commandHandler', () => {
  it('resolves when the command exits 0', async () => {
    await expect(run({ command: 'true' })).resolves.toBeUndefined();
  });

  it('gives the command the job, the spec env and the daemon env as environment variables', async () => {
    const out = join(dir, 'env.txt');
    const vars = ['CRONQ_JOB_ID', 'CRONQ_JOB_KEY', 'CRONQ_KIND', 'CRONQ_QUEUE', 'CRONQ_PERIOD_KEY', 'CRONQ_SCHEDULED_AT', 'CRONQ_ATTEMPT', 'CRONQ_MAX_ATTEMPTS', 'CRONQ_PAYLOAD', 'EXTRA', 'PATH'];
    const command = `for v in ${vars.join(' ')}; do printf '%s=%s\\n' "$v" "$(printenv "$v")"; done > "$OUT"`;
    await run({ command, env: { OUT: out, EXTRA: 'from spec' } });
    const lines = readFileSync(out, 'utf8').trimEnd().split('\n');
    expect(lines).toEqual([
      'CRONQ_JOB_ID=42',
      'CRONQ_JOB_KEY=nightly-report:2024-03-05',
      'CRONQ_KIND=nightly-report',
      'CRONQ_QUEUE=reports',
      'CRONQ_PERIOD_KEY=2024-03-05',
      'CRONQ_SCHEDULED_AT=2024-03-05T02:30:00.000Z',
      'CRONQ_ATTEMPT=2',
      'CRONQ_MAX_ATTEMPTS=5',
      `CRONQ_PAYLOAD=${JSON.stringify({ region: 'eu', note: "it's \"quoted\"" })}`,
      'EXTRA=from spec',
      `PATH=${process.env.PATH}`,
    ]);
  });

  it("withholds cronq's own database credentials unless the schedule's env sets them", async () => {
    const out = join(dir, 'creds.txt');
    const saved = { url: process.env.DATABASE_URL, migration: process.env.MIGRATION_DATABASE_URL };
    process.env.DATABASE_URL = 'mysql://cronq:s3cret@db/cronq';
    process.env.MIGRATION_DATABASE_URL = 'mysql://admin:s3cret@db/cronq';
    try {
      const command = `printf '%s|%s' "\${DATABASE_URL-unset}" "\${MIGRATION_DATABASE_URL-unset}" > "$OUT"`;
      await run({ command, env: { OUT: out } });
      expect(readFileSync(out, 'utf8')).toBe('unset|unset');
      await run({ command, env: { OUT: out, DATABASE_URL: 'mysql://app@db/app' } });
      expect(readFileSync(out, 'utf8')).toBe('mysql://app@db/app|unset');
    } finally {
      for (const [name, value] of [['DATABASE_URL', saved.url], ['MIGRATION_DATABASE_URL', saved.migration]] as const) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });

  it('sets CRONQ_PERIOD_KEY and CRONQ_SCHEDULED_AT to empty strings for an ad-hoc job', async () => {
    const out = join(dir, 'adhoc.txt');
    await run(
      { command: 'printf "[%s][%s][%s]" "${CRONQ_PERIOD_KEY-unset}" "${CRONQ_SCHEDULED_AT-unset}" "$CRONQ_PAYLOAD" > "$OUT"', env: { OUT: out } },
      fakeJob({ periodKey: null, scheduledAt: null, payload: undefined }),
    );
    expect(readFileSync(out, 'utf8')).toBe('[][][null]');
  });

  it('writes the stdin text to the command and closes it', async () => {
    const out = join(dir, 'stdin.txt');
    await run({ command: 'cat > "$OUT"', env: { OUT: out }, stdin: 'first line\nsecond % line\n' });
    expect(readFileSync(out, 'utf8')).toBe('first line\nsecond % line\n');
  });

  it('gives a command without stdin text /dev/null, so a reader sees end of input at once', async () => {
    const out = join(dir, 'nostdin.txt');
    await run({ command: 'cat > "$OUT"', env: { OUT: out } });
    expect(readFileSync(out, 'utf8')).toBe('');
  });

  it('does not fail when the command exits without reading its stdin', async () => {
    await expect(run({ command: 'true', stdin: 'x'.repeat(1 << 20) })).resolves.toBeUndefined();
  });

  it('fails a non-zero exit with the code and the end of stderr', async () => {
    await expect(run({ command: 'echo starting; echo "cannot reach host" >&2; exit 3' })).rejects.toThrow(
      /^command exited with code 3: cannot reach host$/,
    );
  });

  it('says so when a failing command printed nothing to stderr', async () => {
    await expect(run({ command: 'exit 4' })).rejects.toThrow('command exited with code 4: (stderr was empty)');
  });

  it('keeps only the end of a long stderr in the error, short enough for last_error to keep whole', async () => {
    const error = await run({ command: "head -c 12000 /dev/zero | tr '\\0' x >&2; echo ' THE END' >&2; exit 1" }).catch((e: Error) => e);
    const message = (error as Error).message;
    expect(message.startsWith('command exited with code 1: …x')).toBe(true);
    expect(message.endsWith('x THE END')).toBe(true);
    expect(`Error: ${message}`.length).toBeLessThanOrEqual(ERROR_TEXT_MAX);
    expect(STDERR_TAIL_BYTES).toBeGreaterThanOrEqual(ERROR_TEXT_MAX);
  });

  it('never puts the payload in the error', async () => {
    const error = await run({ command: 'exit 2' }, fakeJob({ payload: { password: 'hunter2' } })).catch((e: Error) => e);
    expect((error as Error).message).not.toContain('hunter2');
  });

  it('fails a command that dies of a signal with the signal name', async () => {
    await expect(run({ command: 'kill -KILL $$' })).rejects.toThrow(/^command killed by SIGKILL$/);
  });

  it('logs each output line at debug level, naming the stream', async () => {
    const log = new EventLog('debug');
    await run({ command: 'echo out one; echo err one >&2; printf "no newline"' }, fakeJob(), context({ log }));
    const lines = log.named('command_output').map((e) => `${e.stream}:${e.line}`);
    expect(lines).toEqual(expect.arrayContaining(['stdout:out one', 'stderr:err one', 'stdout:no newline']));
    expect(log.named('command_output').every((e) => e.level === 20)).toBe(true);
  });

  it('logs a line longer than a piece cut at a space, so a URL near the cut is masked whole, and never splits a character', async () => {
    const log = new EventLog('debug');
    // The URL starts 20 characters before the 8,192nd: a cut there would leave its password split over two pieces, unmasked.
    const url = 'mysql://app:hunter2secret@db.internal:3306/app';
    const line = `${'w '.repeat((8_192 - 20) / 2)}${url} ${'y'.repeat(3_000)}`;
    const emoji = `${'e'.repeat(8_191)}😀${'z'.repeat(10)}`; // no space: the pair straddles the 8,192nd character
    const file = join(mkdtempSync(join(tmpdir(), 'cronq-lines-')), 'out.txt');
    writeFileSync(file, `${line}\n${emoji}\n`);
    await run({ command: `cat '${file}'` }, fakeJob(), context({ log }));
    rmSync(join(file, '..'), { recursive: true, force: true });
    const pieces = log.named('command_output').map((e) => e.line as string);
    expect(pieces.join('')).not.toContain('hunter2secret');
    expect(pieces.some((p) => p.includes('mysql://app:***@db.internal:3306/app'))).toBe(true);
    expect(pieces.every((p) => p.length <= 8_192)).toBe(true);
    expect(pieces.some((p) => /[\ud800-\udbff]$/.test(p) || /^[\udc00-\udfff]/.test(p))).toBe(false);
    expect(pieces.join('')).toContain('😀');
  });

  it('kills a command that runs past its timeout and says it timed out', async () => {
    const startedAt = Date.now();
    await expect(run({ command: 'sleep 30', timeoutMs: 200 })).rejects.toThrow('command timed out after 200ms');
    expect(Date.now() - startedAt).toBeLessThan(200 + 2 * KILL_GRACE_MS + 1_000);
  });

  it('kills the whole process group, background grandchild included, when the signal aborts', async () => {
    const log = new EventLog('debug');
    const abort = new AbortController();
    const running = run({ command: 'sleep 30 & echo "$!"; wait' }, fakeJob(), context({ signal: abort.signal, log }));
    const grandchild = Number(await firstStdoutLine(log));
    leftovers.push(grandchild);
    expect(isGone(grandchild)).toBe(false);
    abort.abort(new Error('lease lost: another worker owns this job now'));
    await expect(running).rejects.toThrow('command aborted: lease lost: another worker owns this job now');
    await eventually(async () => isGone(grandchild), 2_000, 'the grandchild to die');
  });

  it('escalates to SIGKILL for a child that ignores SIGTERM, even after the shell has exited', async () => {
    const log = new EventLog('debug');
    const abort = new AbortController();
    const running = run({ command: `sh -c 'trap "" TERM; echo $$; exec sleep 30' & wait` }, fakeJob(), context({ signal: abort.signal, log }));
    // It prints its pid only once SIGTERM is ignored, so the abort cannot overtake the trap.
    const stubborn = Number(await firstStdoutLine(log));
    leftovers.push(stubborn);
    const abortedAt = Date.now();
    abort.abort(new Error('shutdown grace period ran out'));
    await expect(running).rejects.toThrow('command aborted: shutdown grace period ran out');
    expect(Date.now() - abortedAt).toBeGreaterThanOrEqual(KILL_GRACE_MS - 100);
    expect(log.named('command_sigkill')).toHaveLength(1);
    await eventually(async () => isGone(stubborn), 2_000, 'the SIGTERM-ignoring child to die');
  });

  it('does not start the command when the signal is already aborted', async () => {
    const out = join(dir, 'never.txt');
    const abort = new AbortController();
    abort.abort(new Error('lease lost'));
    await expect(run({ command: 'touch "$OUT"', env: { OUT: out } }, fakeJob(), context({ signal: abort.signal }))).rejects.toThrow(
      'command aborted: lease lost',
    );
    expect(existsSync(out)).toBe(false);
  });

  it('finishes at the shell exit, leaving alone a background process that still holds the output pipes', async () => {
    const log = new EventLog('debug');
    const startedAt = Date.now();
    await run({ command: 'sleep 30 & echo "$!"' }, fakeJob(), context({ log }));
    const daemonised = Number(log.named('command_output')[0]?.line);
    leftovers.push(daemonised);
    expect(Date.now() - startedAt).toBeLessThan(KILL_GRACE_MS);
    expect(isGone(daemonised)).toBe(false);
  });

  it('names a missing working directory when the command cannot start', async () => {
    await expect(run({ command: 'true', cwd: join(dir, 'no-such-dir') })).rejects.toThrow(
      /^command could not start: working directory .*no-such-dir does not exist \(ENOENT\)$/,
    );
  });

  it('fails permanently when the payload is too large for the environment', async () => {
    const error = await run({ command: 'true' }, fakeJob({ payload: 'x'.repeat(200_000) })).catch((e: Error) => e);
    expect((error as Error).name).toBe('PermanentError');
    expect((error as Error).message).toMatch(/E2BIG/);
  });

  it('fails permanently, naming the variable, for a job key holding a NUL character, which no environment can carry', async () => {
    const error = await run({ command: 'true' }, fakeJob({ key: 'report:a\0b' })).catch((e: Error) => e);
    expect((error as Error).name).toBe('PermanentError');
    expect((error as Error).message).toBe('command could not start: CRONQ_JOB_KEY would hold a NUL character, which no environment variable can');
  });

  it('refuses, when built, a command or an env entry too long for exec, which would fail every run with E2BIG', async () => {
    expect(() => commandHandler({ command: `true # ${'x'.repeat(EXEC_STRING_MAX)}` })).toThrow(
      `command is ${EXEC_STRING_MAX + 7} bytes long; exec takes at most ${EXEC_STRING_MAX - 1} (put a longer script in a file and run that)`,
    );
    expect(() => commandHandler({ command: 'true', env: { REPORT: 'é'.repeat(EXEC_STRING_MAX / 2) } })).toThrow(
      `command env: "REPORT" is too long for exec (its NAME=value at most ${EXEC_STRING_MAX - 1} bytes)`,
    );
    // Just short enough: runs.
    await expect(run({ command: `true #${'x'.repeat(EXEC_STRING_MAX - 7)}` })).resolves.toBeUndefined();
  });

  it('refuses a bad spec when the handler is built, not when it runs', () => {
    expect(() => commandHandler({ command: '  ' })).toThrow('command must be a non-empty string');
    expect(() => commandHandler({ command: 'true', timeoutMs: 0 })).toThrow(/timeoutMs must be a positive number/);
    expect(() => commandHandler({ command: 'true', env: { CRONQ_JOB_ID: '1' } })).toThrow('CRONQ_JOB_ID is set by cronq');
    // No run could start there: spawn refuses it every time.
    expect(() => commandHandler({ command: 'true', cwd: '/tmp\0/reports' })).toThrow('command cwd must not contain NUL characters');
  });
});
