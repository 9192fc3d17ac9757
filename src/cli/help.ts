import { UsageError } from '../errors.ts';
import { shownInLine } from '../shownText.ts';
import type { Command } from './command.ts';

/** `cronq --help`: what cronq is, and every command with its one-line summary. */
export function mainHelp(commands: readonly Command[]): string {
  const width = Math.max(...commands.map((c) => c.name.length));
  return `Usage: cronq COMMAND [options]

cronq runs recurring and ad-hoc jobs from a MySQL/MariaDB queue: leased, fenced,
retried with backoff, dead-lettered when they cannot succeed.

Commands:
${commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`).join('\n')}

Run 'cronq COMMAND --help' (or 'cronq help COMMAND') for a command's flags; each flag
is given at most once. 'cronq --version' prints cronq's version.`;
}

/**
 * The synopsis of a command: its help's Usage lines (up to the first blank line), and
 * where the rest is. What a command group run bare (`cronq dead`) prints on stderr.
 */
export function usageOf(command: Command): string {
  return `${command.help.split('\n\n', 1)[0]}\n\nRun 'cronq ${command.name} --help' for what each does and its flags.`;
}

/**
 * The text `cronq help [COMMAND [SUBCOMMAND]]` prints: cronq's help, or the command's
 * (a subcommand's help is its command's). A name that is no command, or words past
 * them, are a UsageError.
 */
export function helpText(commands: readonly Command[], args: readonly string[]): string {
  const [name, sub, ...extra] = args;
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') return mainHelp(commands);
  const command = commands.find((c) => c.name === name);
  if (!command) throw new UsageError(`unknown command '${shownInLine(name)}' (see cronq --help)`);
  const unexpected = sub !== undefined && !command.subcommands?.includes(sub) ? sub : extra[0];
  if (unexpected !== undefined) throw new UsageError(`unexpected argument '${shownInLine(unexpected)}' (give one command: cronq help ${command.name})`);
  return command.help;
}
