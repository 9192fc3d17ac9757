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
import { formatDuration } from '../duration.ts';
import { JobTimeoutError, PermanentError, UsageError } from '../errors.ts';
import { within } from '../runtime/wakeup.ts';
import { shownText, shownValue } from '../shownText.ts';
import { WORK_DONE, type Handler, type Job, type JobContext, type WorkDoneMark } from '../tasks/job.ts';
import { watchOutput } from './output.ts';
import { killGroup, type Exit } from './processGroup.ts';
import { trackGroup } from './runningGroups.ts';

export { KILL_GRACE_MS } from './processGroup.ts';
export { STDERR_TAIL_BYTES } from './output.ts';

/** The shell every command runs through, as cron does. */
export const COMMAND_SHELL = '/bin/sh';

/**
 * After the shell exits, how long to keep reading output still in the pipes. A background
 * process the command left running may hold the pipes open forever; we stop waiting for it.
 */
export const OUTPUT_DRAIN_MS = 500;

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

/**
 * Most bytes of one string exec takes on Linux, its terminating NUL included (MAX_ARG_STRLEN):
 * a longer command, or `NAME=value` environment entry, fails every run with E2BIG.
 */
export const EXEC_STRING_MAX = 131_072;

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
 *   (the end of stderr: at most its last STDERR_SHOWN_CHARS characters, trimmed); death by
 *   a signal nobody in cronq sent rejects with `command killed by SIGNAL`. Both are retryable. The rejection text is stored
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
 *   environment too large for exec (E2BIG, a PermanentError: a payload that big never fits),
 *   or a job key holding a NUL character (a PermanentError: no environment variable can hold one).
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
  if (tooLongForExec(spec.command)) {
    throw new UsageError(`command is ${Buffer.byteLength(spec.command)} bytes long; exec takes at most ${EXEC_STRING_MAX - 1} (put a longer script in a file and run that)`);
  }
  if (spec.stdin !== undefined && typeof spec.stdin !== 'string') throw new UsageError('command stdin must be a string');
  if (spec.cwd !== undefined && (typeof spec.cwd !== 'string' || spec.cwd === '')) throw new UsageError('command cwd must be a non-empty string');
  if (spec.cwd?.includes('\0')) throw new UsageError('command cwd must not contain NUL characters');
  if (spec.timeoutMs !== undefined && !(typeof spec.timeoutMs === 'number' && Number.isFinite(spec.timeoutMs) && spec.timeoutMs > 0)) {
    throw new UsageError(`command timeoutMs must be a positive number of milliseconds (got ${shownValue(spec.timeoutMs)})`);
  }
  if (spec.env !== undefined) {
    if (typeof spec.env !== 'object' || spec.env === null) throw new UsageError('command env must map names to strings');
    for (const [name, value] of Object.entries(spec.env)) {
      if (name === '' || name.includes('=') || name.includes('\0')) throw new UsageError(`command env: invalid variable name ${JSON.stringify(name)}`);
      if (typeof value !== 'string' || value.includes('\0')) throw new UsageError(`command env: ${name} must be a string without NUL characters`);
      if ((JOB_ENV as readonly string[]).includes(name)) throw new UsageError(`command env: ${name} is set by cronq for every job`);
      if (tooLongForExec(`${name}=${value}`)) throw new UsageError(`command env: ${JSON.stringify(shownText(name, 40))} is too long for exec (its NAME=value at most ${EXEC_STRING_MAX - 1} bytes)`);
    }
  }
  return { ...spec, env: spec.env ? { ...spec.env } : undefined };
}

/** Whether exec refuses `text` as one argument or environment entry (Linux's limit; elsewhere the whole exec's). */
function tooLongForExec(text: string): boolean {
  return process.platform === 'linux' && text.length >= EXEC_STRING_MAX / 3 && Buffer.byteLength(text) >= EXEC_STRING_MAX;
}

/** Why we are stopping the command: the error the attempt will reject with. */
type StopReason = Error;

async function runCommand(spec: CommandSpec, job: Job, ctx: JobContext): Promise<void> {
  if (ctx.signal.aborted) throw abortedError(ctx.signal.reason);
  const child = start(spec, job);
  const exited = waitForExit(child, spec);
  // No pid: the spawn failed and an 'error' event is on its way (ENOENT); `exited` rejects with it.
  if (child.pid === undefined) await exited;
  // Until the shell exits by itself, or the abort's kill is done, the group dies with this process.
  const untrack = trackGroup(child.pid!);
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
    untrack();
    stop.cancel();
    const { exit } = first;
    // The command ran whole: an abort while its output drains (a background child holding
    // stdout, up to OUTPUT_DRAIN_MS) must not hand the job back to run it a second time.
    if (exit.code === 0) (ctx as JobContext & WorkDoneMark)[WORK_DONE]?.();
    await within(output.closed, OUTPUT_DRAIN_MS);
    output.detach();
    log.debug({ event: 'command_exited', code: exit.code, signal: exit.signal, elapsed_ms: Math.round(performance.now() - startedAt) }, 'command exited');
    if (exit.code === 0) return;
    throw exitError(exit, output.stderrTail());
  } finally {
    untrack();
    stop.cancel();
  }
}

/** Spawns the shell; a synchronous spawn failure (E2BIG, ...) becomes a clear start error. */
function start(spec: CommandSpec, job: Job): ChildProcess {
  const env = jobEnv(job);
  // No environment variable can hold a NUL (a key may): every attempt would fail the same way.
  const unfit = Object.keys(env).find((name) => env[name as keyof typeof env].includes('\0'));
  if (unfit) throw new PermanentError(`command could not start: ${unfit} would hold a NUL character, which no environment variable can`);
  try {
    return spawn(COMMAND_SHELL, ['-c', spec.command], {
      detached: true,
      cwd: spec.cwd,
      env: { ...inheritedEnv(), ...spec.env, ...env },
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

function exitError(exit: Exit, tail: string): Error {
  const shown = tail === '' ? '(stderr was empty)' : tail;
  if (exit.code !== null) return new Error(`command exited with code ${exit.code}: ${shown}`);
  return new Error(`command killed by ${exit.signal}${tail === '' ? '' : `: ${tail}`}`);
}

