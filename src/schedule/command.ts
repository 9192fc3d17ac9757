/**
 * Shell-command handlers: what a schedule with `command: '...'` runs instead of a `handle`.
 *
 * Each attempt is one `/bin/sh -c <command>` child, spawned `detached` so it leads a process
 * group of its own: the command and everything it starts can be killed together with one
 * signal to `-pid`, and a Ctrl-C on the daemon's terminal does not reach it (shutdown grace
 * decides when a running command is interrupted, not the terminal).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import { formatDuration } from '../duration.ts';
import { JobTimeoutError, PermanentError, UsageError } from '../errors.ts';
import { maskUrl } from '../db/url.ts';
import type { Logger } from '../logger.ts';
import type { Handler, Job, JobContext } from '../tasks/job.ts';

/** The shell every command runs through, as cron does. */
export const COMMAND_SHELL = '/bin/sh';

/** How long a stopped command's process group has between SIGTERM and SIGKILL. */
export const KILL_GRACE_MS = 2_000;

/** How much of the end of stderr a failure keeps (it becomes the job's last_error). */
export const STDERR_TAIL_BYTES = 4_096;

/**
 * After the shell exits, how long to keep reading output still in the pipes. A background
 * process the command left running may hold the pipes open forever; we stop waiting for it.
 */
export const OUTPUT_DRAIN_MS = 500;

/** Longer output lines are logged in pieces of this many characters, so a line never buffers unboundedly. */
const MAX_LINE_CHARS = 8_192;

/** How often to look whether a signalled process group has emptied. */
const GROUP_POLL_MS = 50;

/** Names cronq sets for every attempt; a spec's `env` may not set them. */
const JOB_ENV = [
  'CRONQ_JOB_ID',
  'CRONQ_JOB_KEY',
  'CRONQ_KIND',
  'CRONQ_QUEUE',
  'CRONQ_PERIOD_KEY',
  'CRONQ_SCHEDULED_AT',
  'CRONQ_ATTEMPT',
  'CRONQ_MAX_ATTEMPTS',
  'CRONQ_PAYLOAD',
] as const;

/** One shell command and how to run it. */
export interface CommandSpec {
  /** Run through `/bin/sh -c`, exactly as written (no quoting or `%` processing here). */
  command: string;
  /** Added to the daemon's environment (the job's CRONQ_* variables are set after, and cannot be overridden). */
  env?: Record<string, string>;
  /** Written to the child's stdin, which is then closed (cron's `%` lines). Without it stdin is /dev/null. */
  stdin?: string;
  /** Stop the command (SIGTERM, then SIGKILL) after this many milliseconds: a retryable failure. */
  timeoutMs?: number;
  /** Working directory (default: the daemon's). */
  cwd?: string;
}

/** cronq's own credentials: a command gets them only if its schedule's `env` sets them. */
const WITHHELD_ENV = ['DATABASE_URL', 'MIGRATION_DATABASE_URL'];

/** The daemon's environment minus cronq's own credentials. */
function inheritedEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of WITHHELD_ENV) delete env[name];
  return env;
}

/**
 * Builds the handler that runs `spec.command` once per attempt. Validates the spec at once and
 * throws a UsageError for a bad one, so a schedule file is refused at start, not at first run.
 *
 * Per attempt:
 * - The environment is the daemon's (without DATABASE_URL and MIGRATION_DATABASE_URL, cronq's
 *   own credentials), plus `spec.env`, plus the job: CRONQ_JOB_ID, CRONQ_JOB_KEY,
 *   CRONQ_KIND, CRONQ_QUEUE, CRONQ_PERIOD_KEY and CRONQ_SCHEDULED_AT (ISO UTC; both '' for ad-hoc
 *   jobs), CRONQ_ATTEMPT, CRONQ_MAX_ATTEMPTS and CRONQ_PAYLOAD (the payload as JSON).
 * - Exit 0 resolves. Any other exit rejects with `command exited with code N: <stderr tail>`
 *   (the last STDERR_TAIL_BYTES of stderr, trimmed); death by a signal nobody in cronq sent
 *   rejects with `command killed by SIGNAL`. Both are retryable. The rejection text is stored
 *   as the job's last_error, so **a command must not print secrets to stderr**; the payload
 *   itself is never put in the error.
 * - When `ctx.signal` aborts (lease lost, shutdown grace over) or `timeoutMs` passes, the
 *   whole process group gets SIGTERM, then SIGKILL after KILL_GRACE_MS if any member is left,
 *   even if the shell itself already exited: a background child cannot outlive an abort. The
 *   promise settles only once that is done (at most about 2 × KILL_GRACE_MS), rejecting with
 *   `command timed out after 10m` or `command aborted: <reason>`. An already-aborted signal
 *   rejects without starting anything.
 * - After a normal exit the group is NOT killed: a command may deliberately leave a process
 *   running, as under cron. Its output after the shell's exit (plus OUTPUT_DRAIN_MS) is read
 *   and discarded, so it neither blocks the job nor dies of SIGPIPE.
 * - Every stdout and stderr line is logged at debug level as
 *   `{ event: 'command_output', stream, line }` (URL passwords masked, long lines in
 *   pieces); nothing else of stdout is kept. Memory per
 *   attempt is bounded (a partial line and the stderr tail).
 * - A start failure rejects clearly: /bin/sh or the cwd missing (ENOENT, retryable), or an
 *   environment too large for exec (E2BIG, a PermanentError: a payload that big never fits).
 *
 * The handler keeps no state between calls, so concurrent attempts (of this or other jobs)
 * are independent processes that share nothing but the spec.
 */
export function commandHandler(spec: CommandSpec): Handler {
  const checked = validateSpec(spec);
  return (job: Job, ctx: JobContext) => runCommand(checked, job, ctx);
}

function validateSpec(spec: CommandSpec): CommandSpec {
  if (typeof spec !== 'object' || spec === null) throw new UsageError('commandHandler needs a spec object');
  if (typeof spec.command !== 'string' || spec.command.trim() === '') throw new UsageError('command must be a non-empty string');
  if (spec.command.includes('\0')) throw new UsageError('command must not contain NUL characters');
  if (spec.stdin !== undefined && typeof spec.stdin !== 'string') throw new UsageError('command stdin must be a string');
  if (spec.cwd !== undefined && (typeof spec.cwd !== 'string' || spec.cwd === '')) throw new UsageError('command cwd must be a non-empty string');
  if (spec.timeoutMs !== undefined && !(typeof spec.timeoutMs === 'number' && Number.isFinite(spec.timeoutMs) && spec.timeoutMs > 0)) {
    throw new UsageError(`command timeoutMs must be a positive number of milliseconds (got ${JSON.stringify(spec.timeoutMs)})`);
  }
  if (spec.env !== undefined) {
    if (typeof spec.env !== 'object' || spec.env === null) throw new UsageError('command env must map names to strings');
    for (const [name, value] of Object.entries(spec.env)) {
      if (name === '' || name.includes('=') || name.includes('\0')) throw new UsageError(`command env: invalid variable name ${JSON.stringify(name)}`);
      if (typeof value !== 'string' || value.includes('\0')) throw new UsageError(`command env: ${name} must be a string without NUL characters`);
      if ((JOB_ENV as readonly string[]).includes(name)) throw new UsageError(`command env: ${name} is set by cronq for every job`);
    }
  }
  return { ...spec, env: spec.env ? { ...spec.env } : undefined };
}

/** Why we are stopping the command: the error the attempt will reject with. */
type StopReason = Error;

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

async function runCommand(spec: CommandSpec, job: Job, ctx: JobContext): Promise<void> {
  if (ctx.signal.aborted) throw abortedError(ctx.signal.reason);
  const child = start(spec, job);
  const exited = waitForExit(child, spec);
  // No pid: the spawn failed and an 'error' event is on its way (ENOENT); `exited` rejects with it.
  if (child.pid === undefined) await exited;
  const startedAt = performance.now();
  const log = ctx.log;
  const output = watchOutput(child, log);
  const stop = stopTrigger(ctx.signal, spec.timeoutMs);
  log.debug({ event: 'command_started', command_pid: child.pid }, 'command started');
  try {
    const first = await Promise.race([exited.then((exit) => ({ exit })), stop.reason.then((reason) => ({ reason }))]);
    if ('reason' in first) {
      await killGroup(child.pid!, exited, log);
      output.detach();
      throw first.reason;
    }
    stop.cancel();
    const { exit } = first;
    await within(output.closed, OUTPUT_DRAIN_MS);
    output.detach();
    log.debug({ event: 'command_exited', code: exit.code, signal: exit.signal, elapsed_ms: Math.round(performance.now() - startedAt) }, 'command exited');
    if (exit.code === 0) return;
    throw exitError(exit, output.stderrTail());
  } finally {
    stop.cancel();
  }
}

/** Spawns the shell; a synchronous spawn failure (E2BIG, ...) becomes a clear start error. */
function start(spec: CommandSpec, job: Job): ChildProcess {
  try {
    return spawn(COMMAND_SHELL, ['-c', spec.command], {
      detached: true,
      cwd: spec.cwd,
      env: { ...inheritedEnv(), ...spec.env, ...jobEnv(job) },
      stdio: [spec.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
  } catch (error) {
    throw startError(error, spec);
  }
}

function jobEnv(job: Job): Record<(typeof JOB_ENV)[number], string> {
  return {
    CRONQ_JOB_ID: String(job.id),
    CRONQ_JOB_KEY: job.key,
    CRONQ_KIND: job.kind,
    CRONQ_QUEUE: job.queue,
    CRONQ_PERIOD_KEY: job.periodKey ?? '',
    CRONQ_SCHEDULED_AT: job.scheduledAt ? job.scheduledAt.toISOString() : '',
    CRONQ_ATTEMPT: String(job.attempt),
    CRONQ_MAX_ATTEMPTS: String(job.maxAttempts),
    CRONQ_PAYLOAD: JSON.stringify(job.payload) ?? 'null',
  };
}

function startError(error: unknown, spec: CommandSpec): Error {
  const code = (error as NodeJS.ErrnoException)?.code;
  if (code === 'ENOENT') {
    // Node reports a missing cwd as the shell being missing; tell them apart for the operator.
    const what = spec.cwd !== undefined && !existsSync(spec.cwd) ? `working directory ${spec.cwd} does not exist` : `${COMMAND_SHELL} not found`;
    return new Error(`command could not start: ${what} (ENOENT)`, { cause: error });
  }
  if (code === 'E2BIG') {
    return new PermanentError('command could not start: its environment or command line is too large for exec (E2BIG); keep CRONQ_PAYLOAD under 128 KiB', { cause: error });
  }
  return new Error(`command could not start: ${(error as Error)?.message ?? String(error)}`, { cause: error });
}

/** Resolves with the shell's exit; rejects if it never started (the 'error' event of a failed spawn). */
function waitForExit(child: ChildProcess, spec: CommandSpec): Promise<Exit> {
  return new Promise((resolve, reject) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
    child.once('error', (error) => {
      // 'error' also covers failed kill()/send(), which we never call; a started child is unaffected.
      if (child.pid === undefined) reject(startError(error, spec));
    });
    if (child.stdin) {
      // A command that ignores its stdin may exit before reading it: EPIPE is expected, not a failure.
      child.stdin.on('error', () => {});
      child.stdin.end(spec.stdin);
    }
  });
}

/** Resolves with the reason to stop (abort or timeout), unless cancelled first. */
function stopTrigger(signal: AbortSignal, timeoutMs: number | undefined): { reason: Promise<StopReason>; cancel: () => void } {
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const reason = new Promise<StopReason>((resolve) => {
    onAbort = () => resolve(abortedError(signal.reason));
    signal.addEventListener('abort', onAbort, { once: true });
    if (timeoutMs !== undefined) timer = setTimeout(() => resolve(new JobTimeoutError(`command timed out after ${formatDuration(timeoutMs)}`)), timeoutMs);
  });
  return {
    reason,
    cancel: () => {
      clearTimeout(timer);
      if (onAbort) signal.removeEventListener('abort', onAbort);
    },
  };
}

function abortedError(reason: unknown): Error {
  const message = reason instanceof Error ? reason.message : String(reason ?? 'aborted');
  return new Error(`command aborted: ${message}`, { cause: reason });
}

/**
 * SIGTERM to the whole group; once the group is empty we are done, otherwise SIGKILL after
 * KILL_GRACE_MS. Kept going after the shell exits, because a background child that ignores
 * SIGTERM is still in the group. Then waits (bounded) for the shell to be reaped.
 *
 * Polling the group id is safe from reuse: Linux never hands out a pid that is still some
 * live process's group id, and the shell (our child) is not reaped before 'exit' fires.
 * Zombies still count as members, so where PID 1 reaps orphans late or never (a container
 * without a proper init) the group looks alive until then, and at worst the full grace
 * passes before a harmless SIGKILL.
 */
async function killGroup(pid: number, exited: Promise<Exit>, log: Logger): Promise<void> {
  signalGroup(pid, 'SIGTERM');
  const deadline = Date.now() + KILL_GRACE_MS;
  // The shell usually dies of the SIGTERM at once; until it is reaped the group is never empty.
  await within(exited, KILL_GRACE_MS);
  while (groupAlive(pid) && Date.now() < deadline) await delay(Math.min(GROUP_POLL_MS, deadline - Date.now()));
  if (!groupAlive(pid)) return;
  log.warn({ event: 'command_sigkill', command_pid: pid, grace_ms: KILL_GRACE_MS }, 'command still running after SIGTERM; sending SIGKILL to its process group');
  signalGroup(pid, 'SIGKILL');
  const reaped = (await within(exited.then(() => true), KILL_GRACE_MS)) === true;
  if (!reaped) {
    // Uninterruptible sleep (a hung NFS mount, say): nothing more we can do; do not hold the worker slot.
    log.warn({ event: 'command_unkillable', command_pid: pid }, 'command did not exit after SIGKILL; giving up on it');
  }
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error; // already gone: fine
  }
}

function groupAlive(pid: number): boolean {
  try {
    process.kill(-pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function exitError(exit: Exit, tail: string): Error {
  const shown = tail === '' ? '(stderr was empty)' : tail;
  if (exit.code !== null) return new Error(`command exited with code ${exit.code}: ${shown}`);
  return new Error(`command killed by ${exit.signal}${tail === '' ? '' : `: ${tail}`}`);
}

interface Output {
  /** Resolves when both pipes have closed (every writer, background children included, is done). */
  closed: Promise<void>;
  /** Flushes partial lines, then keeps the pipes drained without logging and lets them not hold the event loop. */
  detach(): void;
  stderrTail(): string;
}

/** Logs stdout and stderr line by line at debug level and keeps stderr's tail. */
function watchOutput(child: ChildProcess, log: Logger): Output {
  const tail = new ByteTail(STDERR_TAIL_BYTES);
  // Lines are at most MAX_LINE_CHARS, so masking them is cheap; skipped when debug is off.
  const emit = (stream: 'stdout' | 'stderr') => (line: string) => {
    if (log.isLevelEnabled('debug')) log.debug({ event: 'command_output', stream, line: maskUrl(line) }, 'command output');
  };
  const stdout = new LineSplitter(emit('stdout'));
  const stderr = new LineSplitter(emit('stderr'));
  const onStdout = (chunk: Buffer) => stdout.write(chunk);
  const onStderr = (chunk: Buffer) => {
    tail.push(chunk);
    stderr.write(chunk);
  };
  child.stdout?.on('data', onStdout);
  child.stderr?.on('data', onStderr);
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  let detached = false;
  return {
    closed,
    detach() {
      if (detached) return;
      detached = true;
      stdout.end();
      stderr.end();
      for (const [pipe, listener] of [
        [child.stdout, onStdout],
        [child.stderr, onStderr],
      ] as const) {
        if (!pipe) continue;
        pipe.off('data', listener);
        // Destroying the pipe would SIGPIPE a process the command left running; discard instead.
        pipe.resume();
        (pipe as unknown as { unref?: () => void }).unref?.();
      }
    },
    stderrTail: () => tail.text(),
  };
}

/** Splits a byte stream into UTF-8 lines; a line longer than MAX_LINE_CHARS comes out in pieces. */
class LineSplitter {
  private readonly decoder = new StringDecoder('utf8');
  private pending = '';

  constructor(private readonly emit: (line: string) => void) {}

  write(chunk: Buffer): void {
    this.pending += this.decoder.write(chunk);
    let newline: number;
    while ((newline = this.pending.indexOf('\n')) !== -1) {
      this.emitLine(this.pending.slice(0, newline));
      this.pending = this.pending.slice(newline + 1);
    }
    while (this.pending.length > MAX_LINE_CHARS) {
      this.emit(this.pending.slice(0, MAX_LINE_CHARS));
      this.pending = this.pending.slice(MAX_LINE_CHARS);
    }
  }

  end(): void {
    this.pending += this.decoder.end();
    if (this.pending !== '') this.emitLine(this.pending);
    this.pending = '';
  }

  private emitLine(line: string): void {
    this.emit(line.endsWith('\r') ? line.slice(0, -1) : line);
  }
}

/** The last `limit` bytes of a stream, held in at most about twice that. */
class ByteTail {
  private chunks: Buffer[] = [];
  private size = 0;
  private truncated = false;

  constructor(private readonly limit: number) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    if (this.size > 2 * this.limit) this.compact();
  }

  /** The tail as trimmed text, starting with `…` when earlier output was dropped. */
  text(): string {
    this.compact();
    let bytes = this.chunks[0] ?? Buffer.alloc(0);
    // The cut may land inside a UTF-8 character: skip its continuation bytes rather than show U+FFFD.
    let start = 0;
    if (this.truncated) while (start < bytes.length && (bytes[start] & 0xc0) === 0x80) start++;
    bytes = bytes.subarray(start);
    const text = bytes.toString('utf8').trim();
    return this.truncated && text !== '' ? `…${text}` : text;
  }

  private compact(): void {
    const all = Buffer.concat(this.chunks);
    if (all.length > this.limit) this.truncated = true;
    // A copy, so the (possibly 64 KiB) chunk the tail was cut from can be collected.
    const kept = Buffer.from(all.subarray(Math.max(0, all.length - this.limit)));
    this.chunks = [kept];
    this.size = kept.length;
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}

/** `promise`'s value, or undefined after `ms`; the timer is cleared either way so it never holds the process. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
