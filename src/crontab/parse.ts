import { shownCron } from '../schedule/dialect.ts';
import { validateCron } from '../schedule/period.ts';
import { shownText } from '../shownText.ts';

/**
 * Reads a crontab the way Vixie cron (and cronie, its descendant) reads one, into entries
 * that map one-to-one onto cronq command schedules. cronq's cron dialect is cron's, so the time
 * fields are copied as written. Pure: no file system, no clock.
 */

/** One crontab line that translates into a cronq schedule. */
export interface CrontabEntry {
  /** 1-based line number in the crontab. */
  line: number;
  /** The line as written (without its line break). */
  text: string;
  /** Unique within the crontab, derived from the command (see `scheduleNameFor`). */
  name: string;
  /** The time fields exactly as written (a nickname lowercased): cronq reads them as cron does. */
  cron: string;
  /**
   * Set when both day fields are restricted. `either`: cron runs when the day of the month
   * OR the weekday matches. `both`: one field starts with `*` (such as `*\/2`), so both must.
   * Only for the comment the generated file carries: the text itself means the same in cronq.
   */
  days?: 'either' | 'both';
  /** IANA zone the schedule is read in. */
  timezone: string;
  /**
   * Where `timezone` came from: `CRON_TZ=`, or `defaultTimezone` when none was set (or it was
   * set empty). As in cronie, `TZ=` is only the command's environment, never the schedule's zone.
   */
  timezoneFrom: 'CRON_TZ' | 'default';
  /** The command as cron hands it to the shell: the text before the first unescaped `%`, `\%` → `%`. */
  command: string;
  /** Standard input from the text after the first `%` (each further `%` a newline, and one at the end); absent when none. */
  stdin?: string;
  /** Every NAME=value line above this one (later wins), except the cron directives CRON_TZ, MAILTO and MAILFROM. */
  env: Record<string, string>;
  /** `SHELL=` in effect when it is not `/bin/sh` (cronq itself runs commands with `/bin/sh -c`). */
  shell?: string;
  /** `MAILTO=` in effect when non-empty: cron mailed output there; cronq has no equivalent. */
  mailto?: string;
  /** The user column of a system crontab (`system: true`). */
  user?: string;
}

/** A line that cannot be translated. */
export interface CrontabError {
  line: number;
  reason: string;
}

/** How to read the crontab. */
export interface ParseCrontabOptions {
  /** `/etc/crontab` style: a user column follows the time fields. */
  system?: boolean;
  /** The zone cron would have used without CRON_TZ: its host's local zone; `unknown` (why) refuses each line that needs it. */
  defaultTimezone: string | { unknown: string };
  /** Names defined already (by the schedules folder's files): entries avoid them as they avoid each other's. */
  taken?: Iterable<string>;
}

/** The longest name `scheduleNameFor` derives, leaving room for `-2`… within cronq's 64. */
export const MAX_DERIVED_NAME = 48;

/** Why an `@reboot` line is refused. */
export const REBOOT_REASON =
  '@reboot has no cronq equivalent: cronq runs schedules, not start-up hooks; run it from the service manager (systemd ExecStartPre)';

const NICKNAMES = new Set(['@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly']);

// Cron directives rather than environment for the command; translated or reported instead.
const DIRECTIVES = new Set(['CRON_TZ', 'MAILTO', 'MAILFROM']);

// NAME=value, the name optionally quoted, blanks around '=' allowed (cron's load_env). The name
// must start like an identifier, so no schedule line (digits, '*', '@') is ever taken for one.
// Flag s throughout: only '\n' ends a crontab line, while '.' alone would stop at U+2028.
// The value's trailing blanks are cut by trimBlanksEnd: `(.*?)[ \t]*$` backtracks over
// every run of blanks inside it, quadratic in a long line.
const ENV_LINE = /^[ \t]*(?:"([A-Za-z_][^"=]*)"|'([A-Za-z_][^'=]*)'|([A-Za-z_][^\s="']*))[ \t]*=[ \t]*(.*)$/s;

/**
 * Parses crontab text. Returns the translatable lines as entries (names already unique, and
 * none of `options.taken`: a clash gets `-2`, `-3`…) and
 * every other non-blank, non-comment line as an error with its line number and reason.
 */
export function parseCrontab(
  text: string,
  options: ParseCrontabOptions,
): { entries: CrontabEntry[]; errors: CrontabError[] } {
  const entries: CrontabEntry[] = [];
  const errors: CrontabError[] = [];
  const env: Record<string, string> = {};
  let cronTz: { value: string; line: number } | null = null;
  let mailto = '';
  const taken = new Set<string>(options.taken);

  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  lines.forEach((raw, index) => {
    const line = index + 1;
    const lineText = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (/^[ \t]*(#|$)/.test(lineText)) return;

    const assignment = ENV_LINE.exec(lineText);
    if (assignment) {
      const name = assignment[1] ?? assignment[2] ?? assignment[3];
      const value = unquote(trimBlanksEnd(assignment[4]));
      // No environment can hold one (execve's strings end at it), so no schedule could.
      if (`${name}${value}`.includes('\0')) return void errors.push({ line, reason: `the environment line ${shownText(name)}= holds a NUL character, which no environment can` });
      // An empty CRON_TZ= puts the host's zone back, as cronie does.
      if (name === 'CRON_TZ') cronTz = value === '' ? null : { value, line };
      if (name === 'MAILTO') mailto = value;
      if (!DIRECTIVES.has(name)) env[name] = value;
      return;
    }

    const fail = (reason: string) => errors.push({ line, reason });
    const split = splitScheduleLine(lineText, options.system ?? false);
    if ('reason' in split) return fail(split.reason);

    const zone = cronTz;
    const timezoneFrom = zone ? 'CRON_TZ' : 'default';
    // POSIX allows TZ=:Area/City; the colon only says "a file name follows".
    const fallback = options.defaultTimezone;
    if (!zone && typeof fallback !== 'string') return fail(fallback.unknown);
    const timezone = zone ? zone.value.replace(/^:/, '') : (fallback as string);
    if (!isTimeZone(timezone)) {
      return fail(
        zone
          ? `CRON_TZ '${zone.value}' (line ${zone.line}) is not an IANA time zone`
          : `default time zone '${timezone}' is not an IANA time zone`,
      );
    }

    const cron = split.when;
    const days = dayRule(cron);
    const problem = validateCron(cron, timezone);
    if (problem) {
      const shown = shownCron(cron);
      const prefix = `invalid cron expression ${shown}: `;
      return fail(problem.endsWith(' never fires') ? `${shown} never fires (no date matches it)` : `${shown} is not a valid cron expression: ${problem.startsWith(prefix) ? problem.slice(prefix.length) : problem}`);
    }

    const { command, stdin } = splitCronCommand(split.command);
    if (command.trim() === '') return fail(stdin === undefined ? 'no command' : 'no command before the first %');
    if (command.includes('\0')) return fail('the command holds a NUL character, which no shell command can');
    if (stdin?.includes('\0')) return fail('the standard input after % holds a NUL character');

    const name = uniqueName(scheduleNameFor(command, line), taken);
    const shell = env.SHELL !== undefined && env.SHELL !== '/bin/sh' ? env.SHELL : undefined;
    entries.push({
      line,
      text: lineText,
      name,
      cron,
      ...(days && { days }),
      timezone,
      timezoneFrom,
      command,
      ...(stdin !== undefined && { stdin }),
      env: { ...env },
      ...(shell !== undefined && { shell }),
      ...(mailto !== '' && { mailto }),
      ...(split.user !== undefined && { user: split.user }),
    });
  });
  return { entries, errors };
}

/**
 * A schedule line cut into its time specification, optional user, and raw command text, as
 * cronie's load_entry cuts it: a leading `-` (cronie's "do not syslog this job") is dropped,
 * as is the command's one `-n` option (cronie's "mail only on error": cronq mails nothing);
 * a command, or a system crontab's user, starting with `*` is refused, as cron refuses it
 * (almost always a sixth time field).
 */
function splitScheduleLine(
  text: string,
  system: boolean,
): { when: string; user?: string; command: string } | { reason: string } {
  // Only blanks and tabs separate cron fields; the command is the rest of the line, as written.
  const field = '([^ \\t]+)[ \\t]+';
  const what = system ? 'a user and a command' : 'a command';
  // cronie's '-' is followed by the time fields themselves, no blank between.
  if (/^[ \t]*-[ \t]/.test(text)) return { reason: "a '-' before the time fields (cronie's no-syslog mark) must touch them, as in -0 5 * * * cmd" };
  const line = text.replace(/^[ \t]*-/, '');
  // Nicknames compare case for case, as in cron.
  const nickname = /^[ \t]*(@[^ \t]*)/.exec(line)?.[1];
  const fields = nickname === undefined ? 5 : 1;
  if (nickname === '@reboot') return { reason: REBOOT_REASON };
  if (nickname !== undefined && !NICKNAMES.has(nickname)) {
    const lower = NICKNAMES.has(nickname.toLowerCase()) ? `; cron reads nicknames in lowercase only: ${nickname.toLowerCase()}` : '';
    return { reason: `unknown '${nickname}' (cron knows @hourly, @daily, @midnight, @weekly, @monthly, @yearly, @annually, @reboot${lower})` };
  }

  const match = new RegExp(`^[ \\t]*${field.repeat(fields + (system ? 1 : 0))}(.*)$`, 's').exec(line);
  if (!match) {
    return { reason: nickname ? `expected ${what} after ${nickname}` : `expected five time fields followed by ${what}` };
  }
  const when = nickname ?? match.slice(1, 6).join(' ');
  const user = system ? match[fields + 1] : undefined;
  const next = user ?? match.at(-1)!;
  if (next.startsWith('*')) {
    return { reason: `the ${system ? 'user' : 'command'} starts with '*', which cron refuses: is it a sixth time field? (cronq's six fields, seconds first, are not crontab's)` };
  }
  // cronie's one option, once, then blanks: -n (mail only on error; cronq mails nothing).
  const rest = match.at(-1)!;
  const option = /^-n(?:[ \t]+|$)/.exec(rest)?.[0] ?? '';
  const command = rest.slice(option.length);
  if (option !== '' && command === '') return { reason: 'no command after -n' };
  if (command.startsWith('-')) {
    const word = shownText(command.split(/[ \t]/)[0], 16);
    return { reason: word === '-n' ? 'cronie takes -n once' : `the command starts with '${word}', which cronie reads as an option; it knows only -n` };
  }
  return { when, ...(user !== undefined && { user }), command };
}

/** How the two day fields of five cron fields combine, when both carry a restriction. */
function dayRule(when: string): 'either' | 'both' | undefined {
  if (when.startsWith('@')) return undefined;
  const [, , dom, , dow] = when.split(' ');
  const bare = (field: string) => field === '*';
  if (bare(dom) || bare(dow)) return undefined;
  return dom.startsWith('*') || dow.startsWith('*') ? 'both' : 'either';
}

function isTimeZone(zone: string): boolean {
  if (zone === '') return false;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

/** `text` without the blanks and tabs it ends with; linear, where a regex anchored at `$` backtracks over each run of them. */
function trimBlanksEnd(text: string): string {
  let end = text.length;
  while (end > 0 && (text[end - 1] === ' ' || text[end - 1] === '\t')) end--;
  return text.slice(0, end);
}

function unquote(value: string): string {
  const quoted = /^"(.*)"$|^'(.*)'$/s.exec(value);
  return quoted ? (quoted[1] ?? quoted[2]) : value;
}

/**
 * Applies cron's `%` rule to a command field, exactly as Vixie cron's do_command does: the
 * first unescaped `%` ends the command; `\%` before it is a literal `%` (the backslash dropped),
 * any other backslash stays. After it, each unescaped `%` is a newline, `\%` a `%`, and other
 * backslashes stay; a newline ends the input when the text does not end with one. No text
 * after the `%` means no standard input.
 */
export function splitCronCommand(field: string): { command: string; stdin?: string } {
  // Characters in an array: taking back the `\` of a `\%` off a string copied all of it (quadratic).
  const chars: string[] = [];
  let escaped = false;
  let cut = -1;
  for (let i = 0; i < field.length; i++) {
    const ch = field[i];
    if (escaped) {
      escaped = false;
      if (ch === '%') chars[chars.length - 1] = '%';
      else chars.push(ch);
    } else if (ch === '%') {
      cut = i;
      break;
    } else {
      escaped = ch === '\\';
      chars.push(ch);
    }
  }
  const command = chars.join('');
  const rest = cut < 0 ? '' : field.slice(cut + 1);
  if (rest === '') return { command };

  let stdin = '';
  escaped = false;
  for (const char of rest) {
    let ch = char;
    if (escaped) {
      if (ch !== '%') stdin += '\\';
    } else if (ch === '%') {
      ch = '\n';
    }
    escaped = ch === '\\';
    if (!escaped) stdin += ch;
  }
  if (escaped) stdin += '\\';
  // cron ends the input with a newline when the text does not (do_command's need_newline).
  if (!stdin.endsWith('\n')) stdin += '\n';
  return { command, stdin };
}

// Commands that only wrap the real one; naming a schedule after them says nothing.
const WRAPPERS = new Set(['exec', 'nohup', 'env', 'time', 'nice', 'ionice', 'chronic']);

/**
 * A schedule name for a command: the base names of its words (script extensions dropped),
 * lowercased, runs of anything but [a-z0-9] as one `-`, trimmed, at most MAX_DERIVED_NAME
 * characters. `php bin/report.php --daily` → `php-report-daily`. Only the first simple
 * command counts (a leading `cd DIR &&` is skipped); redirections and `VAR=value` prefixes
 * are ignored. Falls back to `crontab-line-N`.
 */
export function scheduleNameFor(command: string, line: number): string {
  // `2>&1` and friends first, so their `&` is not taken for a command separator. A digit
  // run is tried from its start only: `\d*[<>]` tried at each of its digits is quadratic.
  const segments = command.replace(/(?<!\d)\d+[<>]&\d*-?|[<>]&\d*-?/g, ' ').split(/&&|\|\||[;|&]/).map((segment) => segment.trim().split(/\s+/).filter(Boolean));
  const words = segments.find((segment) => segment.length > 0 && segment[0] !== 'cd') ?? segments[0] ?? [];

  const kept: string[] = [];
  for (let i = 0; i < words.length; i++) {
    const word = words[i];
    if (/^\d*[<>]/.test(word)) {
      if (/^\d*[<>]+&?$/.test(word)) i++; // `> file`: the target is the next word
      continue;
    }
    if (kept.length === 0 && (WRAPPERS.has(word) || /^[A-Za-z_]\w*=/.test(word))) continue;
    const base = word.replace(/["'`]/g, '').replace(/(?<!\/)\/+$/, '').split('/').at(-1)!;
    kept.push(base.startsWith('-') ? base : base.replace(/\.[A-Za-z][A-Za-z0-9]{0,3}$/, ''));
  }

  let name = kept.join('-').toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '');
  if (name.length > MAX_DERIVED_NAME) {
    const cut = name.slice(0, MAX_DERIVED_NAME);
    // Prefer ending at a word boundary when one is not too far back.
    const boundary = cut.lastIndexOf('-');
    name = (boundary >= MAX_DERIVED_NAME / 2 ? cut.slice(0, boundary) : cut).replace(/-+$/, '');
  }
  return name === '' ? `crontab-line-${line}` : name;
}

/** `base`, or `base-2`, `base-3`… whichever is not in `taken`; records the result in `taken`. */
function uniqueName(base: string, taken: Set<string>): string {
  let name = base;
  for (let n = 2; taken.has(name); n++) name = `${base}-${n}`;
  taken.add(name);
  return name;
}
