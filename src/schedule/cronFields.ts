/**
 * The time fields of a cron expression read the way cronie's entry.c reads them (get_list,
 * get_range, get_number), into the values each field selects; croner is then handed
 * those values and nothing else, so no syntax of croner's own (`?`, `L`, `W`, `#`, `+`)
 * ever reaches it and a name never means what croner's tables say instead of cron's.
 * Pure, and linear in the text (which the caller bounds).
 *
 * A field is a comma list of ranges; a range is `*`, `*\/step`, a number, `a-b` or
 * `a-b/step`. Numbers are decimal; the month and day-of-week fields also take the
 * three-letter English names in any case (`jan`, `Mon`), anywhere a number may stand,
 * `sun` being 0. A range selects low, low+step, … up to its end, each of which must lie
 * in the field's bounds (so `*\/90` in the minute field is minute 0, as cron reads it:
 * cron warns about such a step and uses it). Day of week runs 0-7, 0 and 7 both Sunday.
 *
 * Where cronq refuses what cron accepts, it is text cron reads as nothing: a reversed
 * range (`22-2`, which cron selects no hour for, though people mean 22-2 across
 * midnight). cron's one exception is kept: a range ending in 0 without a step, `5-0` or
 * `fri-sun`, ends at 7 (Friday to Sunday); in the day-of-week field alone, where 7 is
 * Sunday too (cron extends every field so, but `5-0` hours are then 5, 6 and 7).
 */
import { shownInLine, shownText } from '../shownText.ts';

/** One field's bounds and names. */
interface FieldSpec {
  /** The field's name in messages. */
  name: string;
  low: number;
  high: number;
  /** Names for low, low+1, … (case-insensitive), where the field has them. */
  names?: readonly string[];
}

const SECOND: FieldSpec = { name: 'second', low: 0, high: 59 };
const MINUTE: FieldSpec = { name: 'minute', low: 0, high: 59 };
const HOUR: FieldSpec = { name: 'hour', low: 0, high: 23 };
const DAY_OF_MONTH: FieldSpec = { name: 'day-of-month', low: 1, high: 31 };
const MONTH: FieldSpec = {
  name: 'month',
  low: 1,
  high: 12,
  names: ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'],
};
const DAY_OF_WEEK: FieldSpec = { name: 'day-of-week', low: 0, high: 7, names: ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'] };

/** The fields of a five-field expression, and of a six-field one (seconds first: cronq's own). */
const FIVE = [MINUTE, HOUR, DAY_OF_MONTH, MONTH, DAY_OF_WEEK];
const SIX = [SECOND, ...FIVE];

/** Why a field cannot be read: one line, naming the field and what in it is wrong. */
class FieldProblem extends Error {}

/** Characters of other cron dialects (Quartz, croner, cronie) that cronq does not read, and what they are there. */
const FOREIGN: Record<string, string> = {
  '?': "'?' (any) is Quartz syntax, not cron's: write *",
  '#': "'#' (nth weekday of the month) is Quartz syntax, not cron's",
  '+': "'+' is croner syntax, not cron's",
  '~': "'~' (a random value) is cronie's own, not supported: pick a value",
};

/** A number with Quartz's L (last) or W (nearest weekday): `L`, `5L`, `15W`, `LW`. */
const QUARTZ_LETTERS = /^[0-9]*(?:L|W|LW)$/i;

/**
 * The values the fields select, in field order (day of week as 0-6, Sunday 0), or a problem:
 * one line naming the field. `fields` are five (minute first) or six (seconds first).
 */
export function readCronFields(fields: readonly string[]): { values: number[][] } | { problem: string } {
  const specs = fields.length === 6 ? SIX : FIVE;
  try {
    return { values: fields.map((text, i) => readField(text, specs[i])) };
  } catch (error) {
    if (error instanceof FieldProblem) return { problem: error.message };
    throw error;
  }
}

function readField(text: string, spec: FieldSpec): number[] {
  const selected = new Set<number>();
  const where = `${spec.name} field '${shownInLine(text)}'`;
  for (const range of text.split(',')) {
    if (range === '') throw new FieldProblem(`${where}: a list element is empty`);
    readRange(range, spec, where, selected);
  }
  const values = [...selected].map((v) => (spec === DAY_OF_WEEK && v === 7 ? 0 : v));
  return [...new Set(values)].sort((a, b) => a - b);
}

function readRange(range: string, spec: FieldSpec, where: string, into: Set<number>): void {
  const foreign = [...range].find((ch) => FOREIGN[ch] !== undefined);
  if (foreign !== undefined) throw new FieldProblem(`${where}: ${FOREIGN[foreign]}`);
  const slash = range.indexOf('/');
  const span = slash < 0 ? range : range.slice(0, slash);
  const step = slash < 0 ? 1 : stepOf(range.slice(slash + 1), where);
  let low: number;
  let high: number;
  if (span === '*') {
    [low, high] = [spec.low, spec.high];
  } else {
    const dash = span.indexOf('-', 1);
    if (dash < 0) {
      const stepText = shownText(range.slice(slash + 1), 16);
      if (slash >= 0) throw new FieldProblem(`${where}: a step needs a range before it ('*/${stepText}' or 'a-b/${stepText}'), as in cron`);
      low = high = numberOf(span, spec, where);
    } else {
      low = numberOf(span.slice(0, dash), spec, where);
      high = numberOf(span.slice(dash + 1), spec, where);
      // cron's one reading of a reversed range: `5-0` ends at 7, Sunday again.
      if (spec === DAY_OF_WEEK && low > high && high === 0 && slash < 0) high = 7;
      if (low > high) {
        const shownSpan = shownText(span, 24);
        if (spec === DAY_OF_WEEK && high === 0) throw new FieldProblem(`${where}: the range ${shownSpan} is reversed, and cron selects nothing for it with a step (write ${low}-7/${step})`);
        // Without a step cron ends such a range at 7 in every field: hours 5-0 are 5, 6 and 7 there, surely not what is meant.
        if (high === 0 && slash < 0) throw new FieldProblem(`${where}: the range ${shownSpan} is reversed; cron reads it as ${low}-7, which cronq refuses (write ${wrapped(low, high, 1, spec)} to wrap around)`);
        throw new FieldProblem(`${where}: the range ${shownSpan} is reversed, and cron selects nothing for it (write ${wrapped(low, high, step, spec)} to wrap around)`);
      }
    }
  }
  for (let value = low; value <= high; value += step) {
    if (value < spec.low || value > spec.high) throw new FieldProblem(`${where}: ${value} is out of range (${spec.low}-${spec.high})`);
    into.add(value);
  }
}

/**
 * The list a reversed range `low-high/step` seems to mean, each value named once: low,
 * low+step, … counting on past the field's top from its bottom, through `high`. So `22-2` is
 * `22-23,0-2`, `22-2/2` `22,0-2/2` (22, 0 and 2), `dec-jan` `12,1`, and in the day-of-week
 * field `thu-mon` `4-6,0-1` (its 0 is Sunday already, so the top part stops at 6; `7-fri` is `0-5`).
 */
function wrapped(low: number, high: number, step: number, spec: FieldSpec): string {
  const top = spec === DAY_OF_WEEK ? 6 : spec.high;
  const size = top - spec.low + 1;
  const [before, after]: number[][] = [[], []];
  for (let value = low; value <= top || value - size <= high; value += step) {
    if (value <= top) before.push(value);
    else after.push(value - size);
  }
  const run = (values: number[]) => {
    const [first, last] = [values[0], values.at(-1)];
    return values.length === 1 ? `${first}` : `${first}-${last}${step === 1 ? '' : `/${step}`}`;
  };
  return [before, after].filter((values) => values.length > 0).map(run).join(',');
}

/** A range's end: decimal digits, or a name where the field has names. */
function numberOf(text: string, spec: FieldSpec, where: string): number {
  if (/^[0-9]+$/.test(text)) {
    // Past 9 digits after any leading zeros (cron reads `007` as 7), it is out of range.
    const digits = text.replace(/^0+(?=.)/, '');
    const value = digits.length > 9 ? Number.MAX_SAFE_INTEGER : Number(digits);
    if (value < spec.low || value > spec.high) throw new FieldProblem(`${where}: ${digits.length > 9 ? `${digits.slice(0, 9)}…` : value} is out of range (${spec.low}-${spec.high})`);
    return value;
  }
  const index = spec.names?.indexOf(text.toLowerCase()) ?? -1;
  if (index >= 0) return spec.low + index;
  if (QUARTZ_LETTERS.test(text)) throw new FieldProblem(`${where}: '${text}' (last day, nearest weekday) is Quartz syntax, not cron's`);
  const expected = spec.names ? `a number or a name (${spec.names[0]}-${spec.names.at(-1)})` : 'a number';
  throw new FieldProblem(`${where}: expected ${expected}${text === '' ? '' : `, got '${shownInLine(text)}'`}`);
}

function stepOf(text: string, where: string): number {
  if (!/^[0-9]+$/.test(text)) throw new FieldProblem(`${where}: a step must be a whole number${text === '' ? '' : `, got '${shownInLine(text)}'`}`);
  // Leading zeros count for nothing, as in cron (`*\/0000000005` is every five minutes).
  const digits = text.replace(/^0+(?=.)/, '');
  if (digits === '0') throw new FieldProblem(`${where}: a step must be 1 or more`);
  // cron keeps a step in a C int: 4294967297 wraps to 1 (every minute), 2147483648 to a
  // negative step it refuses. Nine digits are far past any field and never wrap.
  if (digits.length > 9) throw new FieldProblem(`${where}: a step must be at most 999999999 (cron cuts a longer number to 32 bits)`);
  return Number(digits);
}
