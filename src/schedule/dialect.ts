/**
 * cronq's cron dialect: what an expression's text means, decided the way Vixie cron and cronie
 * decide it (cronie's entry.c and cron.c), before croner is asked to parse and walk it. Pure.
 *
 * - Day of month and day of week: a field whose first character is `*` (`*`, `*\/2`) is
 *   unrestricted. When both day fields are restricted the day matches if EITHER does
 *   (`0 0 13 * 5`: the 13th and every Friday); otherwise BOTH must (`0 0 *\/2 * 1`: Mondays
 *   that are odd days). Croner ORs unless a field IS `*`, so this module sets its `domAndDow`.
 * - Interval jobs: an expression whose minute or hour field (or seconds field, in 6-field
 *   form) starts with `*` is an interval job (`0 * * * *`, `*\/15 2 * * *`, `@hourly`); any
 *   other is a fixed-time job, lists, ranges and steps included (`0 0-23/2 * * *`). The DST
 *   rules in period.ts treat the two differently.
 * - The fields themselves are read as cron reads them (cronFields.ts), and croner is given
 *   the values they select, never the text: its own syntax (`?`, `L`, `#`) and its own
 *   reading of names (`-sun` as 7) never apply. Nicknames are lowercase, as cron has them.
 */
import { Cron } from 'croner';
import { shownText } from '../shownText.ts';
import { readCronFields } from './cronFields.ts';

/** A usable expression: croner's wall-clock walker plus the dialect's decisions about it. */
export interface CompiledCron {
  /** Walks wall-clock matches (UTC offset 0): a returned Date's UTC fields are local fields. */
  walker: Cron;
  /** An interval job fires at every real matching instant; a fixed-time job once per wall time. */
  interval: boolean;
}

/** The nicknames cronq accepts, each with the five fields cron gives it: lowercase, as cron compares them. */
const NICKNAMES: Record<string, string> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};

/** A field cron counts as unrestricted (its DOM_STAR, DOW_STAR, MIN_STAR and HR_STAR flags): its text starts with `*`. */
const unrestricted = (field: string): boolean => field.startsWith('*');

/** Longest expression read, in UTF-16 units: a list of every minute, `0,1,…,59`, is 169. */
export const CRON_TEXT_MAX = 1000;

const MAX_COMPILED = 1_000;
const compiledCache = new Map<string, CompiledCron | string>();

/**
 * The compiled expression, or why it cannot be used (one line): 5 fields (minute first), 6
 * (seconds first) or a nickname. Results are cached per expression text.
 */
export function compileCron(expr: string): CompiledCron | string {
  if (typeof expr !== 'string') return 'cron expression must be a string';
  const cached = compiledCache.get(expr);
  if (cached !== undefined) return cached;
  const result = compileUncached(expr);
  if (compiledCache.size >= MAX_COMPILED) compiledCache.clear();
  compiledCache.set(expr, result);
  return result;
}

/** `expr` as a message quotes it: as written when short and plain, else JSON-escaped and cut. */
export function shownCron(expr: string): string {
  return expr.length <= 100 && /^[\x20-\x7e]*$/.test(expr) ? `'${expr}'` : JSON.stringify(shownText(expr, 100));
}

function compileUncached(expr: string): CompiledCron | string {
  const invalid = (why: string) => `invalid cron expression ${shownCron(expr)}: ${why}`;
  if (expr.length > CRON_TEXT_MAX) return invalid(`longer than ${CRON_TEXT_MAX} characters`);
  // Only blanks and tabs separate cron's fields, and nothing but printable ASCII is in them.
  const odd = /[^\x20-\x7e\t]/.exec(expr);
  if (odd) return invalid(`holds U+${odd[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}, which cron does not read (only blanks and tabs separate fields)`);
  const trimmed = expr.replace(/^[ \t]+|[ \t]+$/g, '');
  let fields = trimmed === '' ? [] : trimmed.split(/[ \t]+/);
  if (fields.length === 1 && trimmed.startsWith('@')) {
    const expansion = NICKNAMES[trimmed];
    if (expansion === undefined) {
      const lower = NICKNAMES[trimmed.toLowerCase()] === undefined ? '' : ` (cron reads nicknames in lowercase only: ${trimmed.toLowerCase()})`;
      return invalid(`unknown nickname${lower || ` (use one of ${Object.keys(NICKNAMES).join(', ')})`}`);
    }
    fields = expansion.split(' ');
  }
  if (fields.length !== 5 && fields.length !== 6) {
    return invalid(`expected 5 fields (minute hour day-of-month month day-of-week) or 6 (seconds first), got ${fields.length}`);
  }
  const read = readCronFields(fields);
  if ('problem' in read) return invalid(read.problem);
  const [dom, dow] = [fields.at(-3)!, fields.at(-1)!];
  const times = fields.slice(0, -3);
  // Croner gets the values alone, so only cron's reading of the text counts.
  const pattern = read.values.map((values, i) => (fields[i] === '*' ? '*' : values.join(','))).join(' ');
  const walker = new Cron(pattern, {
    mode: '5-or-6-parts',
    utcOffset: 0,
    paused: true,
    domAndDow: unrestricted(dom) || unrestricted(dow),
  });
  // Feb 30 parses fine but would make every search run to croner's year-3000 limit.
  if (walker.nextRun(new Date(0)) === null) return `cron expression ${shownCron(expr)} never fires`;
  return { walker, interval: times.some(unrestricted) };
}
