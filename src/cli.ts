import { readFileSync, writeSync } from 'node:fs';
import { DatabaseBusyError, UsageError } from './errors.ts';
import { isLockConflict } from './runtime/dbHealth.ts';
import { boundedText, errorText, STACK_TEXT_MAX, shownError } from './runtime/errorText.ts';
import { cliLine } from './cli/cliLine.ts';
import { commandLabel, parseCommandArgs, type Command } from './cli/command.ts';
import { helpText, mainHelp, usageOf } from './cli/help.ts';
import { printable } from './cli/printable.ts';
import { shownInLine, shownText } from './shownText.ts';
import { parseLogLevel } from './logger.ts';
import { scheduleFileImporting } from './schedule/loader.ts';
import { enqueueCommand } from './cli/commands/enqueue.ts';
import { migrateCommand } from './cli/commands/migrate.ts';
import { startCommand } from './cli/commands/start.ts';
import { tickCommand } from './cli/commands/tick.ts';
import { schedulesCommand } from './cli/commands/schedules.ts';
import { importCrontabCommand } from './cli/commands/importCrontab.ts';
import { deadCommand } from './cli/commands/dead.ts';
import { statsCommand } from './cli/commands/stats.ts';
import { pruneCommand } from './cli/commands/prune.ts';
import { limitsCommand } from './cli/commands/limits.ts';
import { pauseCommand, resumeCommand } from './cli/commands/pause.ts';
import { cancelCommand } from './cli/commands/cancel.ts';

/** Exit code for bad usage (BSD sysexits EX_USAGE). */
export const EXIT_USAGE = 64;
/** Exit code for a database busy with other transactions' locks: the same command may run again (EX_TEMPFAIL). */
export const EXIT_TEMPFAIL = 75;
/** Exit code for a command ended with 0 by code not cronq's, before it finished (EX_SOFTWARE, as the daemon's). */
const EXIT_SOFTWARE = 70;

const COMMANDS: Command[] = [startCommand, migrateCommand, enqueueCommand, tickCommand, schedulesCommand, importCrontabCommand, deadCommand, cancelCommand, statsCommand, limitsCommand, pruneCommand, pauseCommand, resumeCommand];

/**
 * The version of the installed package, from its package.json: one folder above this
 * file both in the sources (src/cli.ts) and in the published build (dist/cli.js).
 */
export function packageVersion(): string {
  return (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}

/**
 * Runs the CLI on `argv` (without node and script). Returns the exit code; prints
 * one line on stderr for a failure, `cronq CMD: …` (import-crontab's refusal of bad
 * lines: one such line for each, then what to do), a stack trace only with LOG_LEVEL=debug.
 */
export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const out = (line: string) => process.stdout.write(`${printable(line)}\n`);
  const [name, ...rest] = argv;
  if (name === undefined) {
    // Nothing asked for: the usage, as the error it is.
    process.stderr.write(`${printable(mainHelp(COMMANDS))}\n`);
    return EXIT_USAGE;
  }
  if (name === '--version') {
    // Alone: `cronq --version start` most likely meant something else; say so rather than ignore it.
    if (rest.length > 0) return report(new UsageError(`--version takes nothing after it (got '${shownInLine(rest[0])}')`), env, undefined);
    out(packageVersion());
    return 0;
  }
  if (name === 'help' || ((name === '--help' || name === '-h') && rest.length > 0 && !rest[0].startsWith('-'))) {
    // `cronq help tick`, and `cronq --help tick` as git and npm read it.
    try {
      out(helpText(COMMANDS, rest));
      return 0;
    } catch (error) {
      return report(error, env, 'help');
    }
  }
  if (name === '--help' || name === '-h') {
    out(mainHelp(COMMANDS));
    return 0;
  }
  const command = COMMANDS.find((c) => c.name === name);
  // What the failure line names (cliLine): none for an unknown command, the subcommand too once known.
  let label: string | undefined;
  try {
    if (!command) throw new UsageError(`unknown command '${shownInLine(name)}' (see cronq --help)`);
    label = command.name;
    if (rest.includes('--help') || rest.includes('-h')) {
      out(command.help);
      return 0;
    }
    if (command.subcommands && rest.length === 0) {
      // A command group without its subcommand (`cronq dead`): its usage, as the error it is.
      process.stderr.write(`${printable(usageOf(command))}\n`);
      return EXIT_USAGE;
    }
    // A refusal by the parser names the subcommand too (`cronq dead list: Unknown option …`) when argv names one first.
    label = commandLabel(command, rest);
    const { values, positionals } = parseCommandArgs(command, rest);
    label = commandLabel(command, positionals);
    parseLogLevel(env.LOG_LEVEL); // every command logs or reports at it: refused before anything runs
    const stray = strayErrorReporter(label, env);
    const onForeignExit = foreignExitReporter(command, label, stray);
    process.on('exit', onForeignExit);
    process.on('uncaughtException', stray.onException);
    process.on('unhandledRejection', stray.onRejection);
    try {
      return await command.run({ values, positionals, env, out });
    } finally {
      process.off('exit', onForeignExit);
      process.off('uncaughtException', stray.onException);
      process.off('unhandledRejection', stray.onRejection);
    }
  } catch (error) {
    return report(error, env, label);
  }
}

/**
 * An `exit` listener for the time a command runs, when code other than cronq's ends the
 * process (`process.exit()`; cronq itself exits only after main returns). A schedule file
 * doing so as it imports is refused as one that throws is: one line naming it, exit 64.
 * Any other time (a schedule's jobs() during `cronq tick`) it is said in one line, and an
 * exit code of 0 becomes 70 (EX_SOFTWARE), so a script never reads success for a command
 * that did not finish. `cronq start` reports its own (daemon_exit_unexpected) after
 * loading. Writes synchronously: the process ends when the listener returns.
 */
function foreignExitReporter(command: Command, label: string | undefined, stray: StrayErrorReporter): (code: number | string | undefined) => void {
  return (code) => {
    if (stray.reported) return; // the exit that reporter made, having said why
    const called = `process.exit(${shownText(String(code ?? ''), 20)})`;
    const file = scheduleFileImporting();
    let line: string;
    if (file !== null) {
      process.exitCode = EXIT_USAGE;
      line = `${file}: called ${called} while being imported: a schedule file must not end the process`;
    } else if (command.name !== 'start') {
      const status = Number(code ?? 0) & 0xff;
      process.exitCode = status === 0 ? EXIT_SOFTWARE : status;
      line = `${called} was called before the command finished (by a schedule's jobs() or a handler?): exiting with ${process.exitCode}`;
    } else {
      return;
    }
    writeSync(2, `${printable(cliLine(label, line))}\n`);
  };
}

/** Listeners for an uncaught exception or unhandled rejection while a command runs; `reported` once one ended it. */
interface StrayErrorReporter {
  onException: (error: unknown) => void;
  onRejection: (reason: unknown) => void;
  reported: boolean;
}

/**
 * While a command runs, an error no code awaits (a schedule file's stray timer or promise,
 * a callback a handler left behind) ends it as Node would, exit 1, but in one line
 * (`cronq schedules: uncaught exception: Error: …`) instead of a stack trace, which only
 * LOG_LEVEL=debug adds. Where another listener handles it (`cronq start` once its engine
 * runs: it logs and keeps running), this one leaves it to that.
 */
function strayErrorReporter(label: string | undefined, env: NodeJS.ProcessEnv): StrayErrorReporter {
  const level = env.LOG_LEVEL?.toLowerCase();
  const reporter: StrayErrorReporter = {
    reported: false,
    onException: (error) => end('uncaughtException', 'uncaught exception', error),
    onRejection: (reason) => end('unhandledRejection', 'unhandled promise rejection', reason),
  };
  function end(event: 'uncaughtException' | 'unhandledRejection', what: string, error: unknown): void {
    if (process.listenerCount(event) > 1 || reporter.reported) return;
    reporter.reported = true;
    try {
      const said = errorText(error).split('\n')[0];
      writeSync(2, `${printable(cliLine(label, `${what}: ${boundedText(said, 300)} (from a schedule file, or a callback a handler left behind)`))}\n`);
      const stack = (error as { stack?: unknown } | null)?.stack;
      if ((level === 'debug' || level === 'trace') && typeof stack === 'string') writeSync(2, `${printable(boundedText(stack, STACK_TEXT_MAX))}\n`);
    } finally {
      process.exit(1);
    }
  }
  return reporter;
}

/**
 * What the lines of `cronq ARGV` name (cliLine): `dead list`, `stats`, `help`, or undefined when
 * `argv` names no command (`cronq --help`). For the entry point's own last line.
 */
export function commandOf(argv: string[]): string | undefined {
  if (argv[0] === 'help') return 'help';
  const command = COMMANDS.find((c) => c.name === argv[0]);
  if (!command) return undefined;
  try {
    return commandLabel(command, parseCommandArgs(command, argv.slice(1)).positionals);
  } catch {
    return commandLabel(command, argv.slice(1));
  }
}

export { cliLine };

function report(error: unknown, env: NodeJS.ProcessEnv, label: string | undefined): number {
  const level = env.LOG_LEVEL?.toLowerCase();
  const debug = level === 'debug' || level === 'trace';
  // Drizzle wraps driver errors in a message carrying the SQL and its parameters
  // (payloads included): show the driver's own error instead.
  const shown = shownError(error);
  const code = (shown as { code?: unknown })?.code;
  const text = shown instanceof Error ? shown.message : String(shown);
  // Messages quote what the database holds (who paused, and why) and what was typed: shown, never acted on by the terminal.
  const said = typeof code === 'string' && !text.includes(code) ? `${code}: ${text}` : text;
  // A lock wait or deadlock lost (an admin call's DatabaseBusyError, or an enqueue's): nothing changed, worth running again.
  const busy = error instanceof DatabaseBusyError ? error.reason : isLockConflict(error) ? said : null;
  const message = printable(boundedText(busy === null ? said : `the database is busy (${busy}); try again`));
  // A refusal of several lines (import-crontab's bad lines, then what to do) names the command on each.
  process.stderr.write(`${message.split('\n').map((line) => cliLine(label, line)).join('\n')}\n`);
  if (debug && shown instanceof Error && shown.stack) process.stderr.write(`${printable(boundedText(shown.stack, STACK_TEXT_MAX))}\n`); // the driver's stack: no SQL, no params
  if (error instanceof UsageError) return EXIT_USAGE;
  if (busy !== null) return EXIT_TEMPFAIL;
  return 1;
}
