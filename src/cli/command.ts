import { parseArgs, type ParseArgsConfig } from 'node:util';
import { UsageError } from '../errors.ts';
import { shownInLine } from '../shownText.ts';
import { NEGATIVE_NUMBER, settledFlagValues } from './flagValues.ts';
import { refuseUnreadableText } from './unreadableText.ts';

type Options = NonNullable<ParseArgsConfig['options']>;

/** One CLI command: its help text, its flags, and what it does. */
export interface Command {
  name: string;
  summary: string;
  /** Full `cronq NAME --help` text. */
  help: string;
  options: Options;
  /** How many positional arguments it takes. */
  positionals: { min: number; max: number; names: string };
  /** The subcommands its first positional names (`dead list`): its lines then name the subcommand too (commandLabel). */
  subcommands?: readonly string[];
  /** Returns the exit code. */
  run(args: ParsedArgs): Promise<number>;
}

export interface ParsedArgs {
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
  env: NodeJS.ProcessEnv;
  out: (line: string) => void;
}

/**
 * Parses argv for `command` strictly: an unknown flag, a missing value, a flag where a
 * value belongs (settledFlagValues), a value holding bytes that were not UTF-8
 * (refuseUnreadableText), or a flag given twice (parseArgs would keep the last silently:
 * `--concurrency 4 --concurrency 8`) is a UsageError. Only a flag declared
 * `multiple: true` may repeat. A negative number where no flag's value is (`dead show -1`)
 * is an argument in its place, refused by the command's own check of it (`ID must be …`),
 * never parseArgs' `Unknown option '-1'`.
 */
export function parseCommandArgs(command: Command, argv: string[]): { values: ParsedArgs['values']; positionals: string[] } {
  const args = settledFlagValues(command.options, argv, `cronq ${command.name} --help`);
  let parsed;
  try {
    parsed = parsedKeepingNegatives(command.options, args);
  } catch (error) {
    const message = (error as Error).message
      .replace(/\. To specify a positional argument.*$/s, '')
      .replace(/\.$/, '')
      // Some of node's messages run over several lines (a value starting with '-'): one line.
      // Each run of white space holding a line break becomes one space; `\s*\n\s*` would
      // backtrack over every blank of an argument's long run (quadratic).
      .replace(/\.\n(\w)/, (_, first: string) => `: ${first.toLowerCase()}`)
      .replace(/\s+/g, (run) => (run.includes('\n') ? ' ' : run));
    throw new UsageError(`${message} (see cronq ${command.name} --help)`);
  }
  refuseUnreadableText(parsed.tokens);
  const seen = new Set<string>();
  for (const token of parsed.tokens) {
    if (token.kind !== 'option' || command.options[token.name]?.multiple) continue;
    if (seen.has(token.name)) throw new UsageError(`--${token.name} is given more than once; give it once (see cronq ${command.name} --help)`);
    seen.add(token.name);
  }
  const { min, max, names } = command.positionals;
  if (parsed.positionals.length < min) throw new UsageError(`missing ${names} (see cronq ${command.name} --help)`);
  if (parsed.positionals.length > max) {
    throw new UsageError(`unexpected argument '${shownInLine(parsed.positionals[max])}' (see cronq ${command.name} --help)`);
  }
  return { values: parsed.values as ParsedArgs['values'], positionals: parsed.positionals };
}

/**
 * parseArgs(args) with every negative number before `--` read as a positional in its
 * place: set aside before parseArgs (which would refuse it as an unknown short flag) and
 * put back among the positionals and tokens by where it stood in `args`.
 */
function parsedKeepingNegatives(options: Options, args: readonly string[]) {
  const end = args.indexOf('--');
  const kept: string[] = [];
  const keptAt: number[] = [];
  const setAside: Array<{ kind: 'positional'; index: number; value: string }> = [];
  args.forEach((arg, index) => {
    if ((end === -1 || index < end) && NEGATIVE_NUMBER.test(arg)) {
      setAside.push({ kind: 'positional', index, value: arg });
    } else {
      kept.push(arg);
      keptAt.push(index);
    }
  });
  const parsed = parseArgs({ args: kept, options, allowPositionals: true, strict: true, tokens: true });
  if (setAside.length === 0) return parsed;
  const tokens = [...parsed.tokens.map((token) => ({ ...token, index: keptAt[token.index] })), ...setAside].sort((a, b) => a.index - b.index);
  const positionals = tokens.flatMap((token) => (token.kind === 'positional' ? [token.value] : []));
  return { values: parsed.values, positionals, tokens };
}

/**
 * What names `command` in its lines (cliLine): its name, and the subcommand its first
 * positional names when it has subcommands (`dead list`); the name alone otherwise.
 */
export function commandLabel(command: Command, positionals: readonly string[] = []): string {
  const [first] = positionals;
  return first !== undefined && command.subcommands?.includes(first) ? `${command.name} ${first}` : command.name;
}

/** The flags every command that touches the database accepts. */
export const COMMON_OPTIONS = {
  schedules: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies Options;

const DATABASE_URL_HELP = `  DATABASE_URL      mysql://user:pass@host:port/db (default mysql://root@127.0.0.1:3306/cronq)`;
const LOG_LEVEL_HELP = `  LOG_LEVEL         fatal|error|warn|info|debug|trace|silent (default info; debug also prints stack traces; anything else exits 64)`;

/** The environment of a command that loads the schedules folder (it takes COMMON_OPTIONS). */
export const COMMON_HELP = `Environment:
${DATABASE_URL_HELP}
  CRONQ_SCHEDULES   the schedules folder (default ./schedules); --schedules DIR overrides
  CRONQ_IMPORT_TIMEOUT  how long importing one schedule file may take (default 10s, at most 24h)
${LOG_LEVEL_HELP}`;

/** The environment of a command that reads the database only, never the schedules folder. */
export const DATABASE_ONLY_HELP = `Environment:
${DATABASE_URL_HELP}
${LOG_LEVEL_HELP}`;
