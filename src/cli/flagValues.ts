import type { ParseArgsConfig } from 'node:util';
import { UsageError } from '../errors.ts';
import { longerThanChars } from '../runtime/chars.ts';
import { shownInLine } from '../shownText.ts';

type Options = NonNullable<ParseArgsConfig['options']>;

/**
 * A word parseArgs would read as a flag of its own, where no flag starts with a digit: a
 * negative number (`-5`, `-1.5`, `-2h`), after a flag its value, elsewhere an argument.
 */
export const NEGATIVE_NUMBER = /^-[0-9]/;

/**
 * `argv` with the value of every flag that takes one settled before parseArgs reads it:
 *
 * - `--flag -5` is written `--flag=-5`: no flag starts with a digit, so it is the value,
 *   and meets the flag's own check (the range error `--limit=-5` gets) as typed;
 * - `--queue --limit 5` is refused (UsageError naming both, and `see`, the help to
 *   read): a flag's value is never another flag, which parseArgs would otherwise refuse
 *   in a long message, or, for a flag of its own name, not at all. A value that really
 *   starts with '-' is written `--queue=-x`; a lone `-` (standard input) is a value.
 *
 * Nothing after `--` is touched: there every word is an argument.
 */
export function settledFlagValues(options: Options, argv: readonly string[], see: string): string[] {
  const args: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--') return [...args, ...argv.slice(i)];
    const next = argv[i + 1];
    const takesValue = arg.startsWith('--') && options[arg.slice(2)]?.type === 'string';
    if (!takesValue || next === undefined || !next.startsWith('-') || next === '-') {
      args.push(arg);
      continue;
    }
    if (!NEGATIVE_NUMBER.test(next)) {
      throw new UsageError(
        `${arg} is followed by '${shownInLine(next)}', a flag, not its value; give ${arg} a value (one that really starts with '-' is written ${arg}=VALUE) (see ${see})`,
      );
    }
    args.push(`${arg}=${next}`);
    i++;
  }
  return args;
}

/** The longest kind and queue the tables hold, in characters (cronq_jobs.kind VARCHAR(128), queue VARCHAR(64)). */
const FILTER_MAX = { kind: 128, queue: 64 } as const;

/**
 * A `--kind` or `--queue` filter as typed, or a UsageError: empty or blank, or longer than
 * any kind or queue can be (it would match nothing, and be echoed whole in the lines that
 * name the filter).
 */
export function filterFlag(value: string, flag: keyof typeof FILTER_MAX): string {
  if (value.trim() === '') throw new UsageError(`--${flag} must not be empty or blank`);
  const most = FILTER_MAX[flag];
  if (longerThanChars(value, most)) throw new UsageError(`--${flag} is longer than ${most} characters, the longest a ${flag} can be: it would match nothing`);
  return value;
}
