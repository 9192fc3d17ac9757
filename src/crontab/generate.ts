import type { CrontabEntry } from './parse.ts';

/**
 * Renders a crontab entry as a cronq schedule file. Pure. Every value is written with
 * JSON.stringify, invisible characters escaped (INVISIBLE), so the command, environment
 * and standard input reach cronq byte for byte and read in the file as they run.
 */

/** A schedule file to write: `fileName` is `<name>.ts`, `source` its full text. */
export interface ScheduleFile {
  name: string;
  fileName: string;
  source: string;
}

/**
 * The catch-up every imported line gets. Cron drops a tick missed while it is down; cronq's
 * promise is that missed ticks are caught up, not silently dropped. A crontab command was
 * written for "at most once per tick, on time", so the import catches up the most recent
 * missed tick only (no burst of back runs), and only while it is under a day late.
 */
export const IMPORTED_CATCH_UP = { mode: 'latest', window: '1d' } as const;

/**
 * The schedule file for one entry: `import { defineSchedule } from 'cronq'; export default
 * defineSchedule({ name, cron, timezone, period: 'tick', catchUp, command, env?, stdin? })`,
 * headed by comments quoting the crontab line and explaining each translation choice.
 */
export function generateScheduleFile(entry: CrontabEntry): ScheduleFile {
  const header = [
    `// Imported by \`cronq import-crontab\` from crontab line ${entry.line}:`,
    `//   ${commentSafe(entry.text)}`,
  ];
  if (entry.user !== undefined) {
    header.push(`// crontab user: ${commentSafe(entry.user)} — cronq runs this as the daemon's own user`);
  }
  if (entry.mailto !== undefined) {
    header.push(
      `// MAILTO=${commentSafe(entry.mailto)} has no cronq equivalent: cronq sends no mail. A run that`,
      '// fails for good (retries used up) becomes a dead letter instead: see `cronq dead list`.',
    );
  }

  const body: string[] = [`  name: ${literal(entry.name)},`];
  if (entry.days === 'either') {
    body.push(
      '  // Both day fields are restricted, so this runs when EITHER the day of the month OR the',
      '  // weekday matches, in cron and in cronq alike.',
    );
  } else if (entry.days === 'both') {
    body.push(
      '  // A day field starting with `*` means BOTH day fields must match, in cron and in cronq alike.',
    );
  }
  body.push(`  cron: ${literal(entry.cron)},`);
  if (entry.timezoneFrom === 'default') {
    body.push(
      '  // No CRON_TZ in the crontab: cron used its machine\'s local zone (a TZ= line sets only the',
      '  // command\'s clock). This is the zone the import assumed (the importing machine\'s, or',
      '  // --timezone); change it if the crontab ran elsewhere.',
    );
  } else {
    body.push(`  // From ${entry.timezoneFrom}= in the crontab.`);
  }
  body.push(
    `  timezone: ${literal(entry.timezone)},`,
    '  // One run per cron tick. cron skips ticks missed while it is down; cronq runs the most recent',
    '  // missed tick once, if it is under a day late. Widen the window (or use mode \'all\') when late',
    '  // or repeated runs are safe for this command; use catchUp: false for cron\'s behaviour.',
    `  period: ${literal('tick')},`,
    `  catchUp: { mode: ${literal(IMPORTED_CATCH_UP.mode)}, window: ${literal(IMPORTED_CATCH_UP.window)} },`,
  );
  if (entry.shell !== undefined) {
    body.push(
      `  // SHELL=${commentSafe(entry.shell)}: cronq runs commands with /bin/sh -c, so this hands the`,
      '  // original command to that shell, as cron did.',
      `  command: ${literal(`exec ${shellWord(entry.shell)} -c ${shellQuote(entry.command)}`)},`,
    );
  } else {
    body.push(`  command: ${literal(entry.command)},`);
  }
  const env = Object.entries(entry.env);
  if (env.length > 0) {
    body.push(`  env: { ${env.map(([key, value]) => `${propertyKey(key)}: ${literal(value)}`).join(', ')} },`);
  }
  if (entry.stdin !== undefined) {
    body.push("  // The text after the command's first % in the crontab, each further % a newline.");
    body.push(`  stdin: ${literal(entry.stdin)},`);
  }

  const source = [
    ...header,
    '',
    "import { defineSchedule } from 'cronq';",
    '',
    'export default defineSchedule({',
    ...body,
    '});',
    '',
  ].join('\n');
  return { name: entry.name, fileName: `${entry.name}.ts`, source };
}

/** A TypeScript string literal for `value`, exact for any string. */
function literal(value: string): string {
  return JSON.stringify(value).replace(INVISIBLE, escapeChar);
}

/**
 * Characters that change how source reads without showing themselves, or show as
 * something they are not: controls (what JSON.stringify leaves raw: DEL and C1), format
 * characters (the soft hyphen, zero-width and bidirectional marks, overrides and
 * isolates, tag characters, the byte-order mark: a U+202E in a command would make the
 * file show another command than the one it runs, "Trojan source"), private-use
 * characters, the line and paragraph separators, spaces other than U+0020, variation
 * selectors and the blank letters (U+3164 Hangul filler, U+2800 braille blank, ...).
 * Written as \u escapes (an astral one as its two UTF-16 halves), in string literals and
 * comments alike: the value is the same, and what a reviewer sees is what runs.
 */
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Co}\p{Zl}\p{Zp}\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u2800\u3164\uffa0\ufe00-\ufe0f\u{e0100}-\u{e01ef}]/gu;

/** `ch` as \u escapes, one per UTF-16 unit; a tab stays as it is (it reads as what it is). */
function escapeChar(ch: string): string {
  if (ch === '\t') return ch;
  let escaped = '';
  for (let i = 0; i < ch.length; i++) escaped += `\\u${ch.charCodeAt(i).toString(16).padStart(4, '0')}`;
  return escaped;
}

function propertyKey(key: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(key) ? key : literal(key);
}

/** One POSIX shell word that is exactly `value`: single quotes, with `'` as `'\''`. */
export function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

function shellWord(value: string): string {
  return /^[\w/.+-]+$/.test(value) ? value : shellQuote(value);
}

// A crontab line may hold characters that end a `//` comment (U+2028, U+2029) or
// are invisible; show them escaped so the quoted line can neither break nor mislead.
function commentSafe(text: string): string {
  return text.replace(INVISIBLE, escapeChar);
}
