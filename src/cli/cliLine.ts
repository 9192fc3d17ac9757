/**
 * The one form of every line cronq writes on stderr about a command, refusals, failures
 * and notes alike: `cronq CMD: text` (`cronq stats: …`, `cronq dead list: …`), or
 * `cronq: text` when no command is known (`cronq --help`, an unknown command). Commands
 * throw and note their text alone; this is the only place the prefix is written.
 */
export function cliLine(command: string | undefined, text: string): string {
  return `cronq${command ? ` ${command}` : ''}: ${text}`;
}
