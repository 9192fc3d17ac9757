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
 */
import { Cron } from 'croner';

/** A usable expression: croner's wall-clock walker plus the dialect's decisions about it. */
export interface CompiledCron {
  /** Walks wall-clock matches (UTC offset 0): a returned Date's UTC fields are local fields. */
  walker: Cron;
  /** An interval job fires at every real matching instant; a fixed-time job once per wall time. */
  interval: boolean;
}

/** The nicknames cronq accepts, each with the five fields cron gives it. */
const NICKNAMES: Record<string, string> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};

// Croner reads `?` as `*`; so does the dialect.
const unrestricted = (field: string): boolean => field.startsWith('*') || field.startsWith('?');

const MAX_COMPILED = 1_000;
const compiledCache = new Map<string, CompiledCron | string>();

/**
 * The compiled expression, or why it cannot be used: 5 fields (minute first), 6 (seconds
 * first) or a nickname (any case). Results are cached per expression text.
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

function compileUncached(expr: string): CompiledCron | string {
  const trimmed = expr.trim();
  let fields = trimmed === '' ? [] : trimmed.split(/\s+/);
  if (fields.length === 1 && trimmed.startsWith('@')) {
    const expansion = NICKNAMES[trimmed.toLowerCase()];
    if (expansion === undefined) {
      return `invalid cron expression '${expr}': unknown nickname (use one of ${Object.keys(NICKNAMES).join(', ')})`;
    }
    fields = expansion.split(' ');
  }
  if (fields.length !== 5 && fields.length !== 6) {
    return (
      `invalid cron expression '${expr}': expected 5 fields (minute hour day-of-month month ` +
      `day-of-week) or 6 (seconds first), got ${fields.length}`
    );
  }
  const [dom, dow] = [fields.at(-3)!, fields.at(-1)!];
  const times = fields.slice(0, -3);
  try {
    const walker = new Cron(fields.join(' '), {
      mode: '5-or-6-parts',
      utcOffset: 0,
      paused: true,
      domAndDow: unrestricted(dom) || unrestricted(dow),
    });
    // Feb 30 parses fine but would make every search run to croner's year-3000 limit.
    if (walker.nextRun(new Date(0)) === null) return `cron expression '${expr}' never fires`;
    return { walker, interval: times.some(unrestricted) };
  } catch (error) {
    const reason = error instanceof Error ? error.message.replace(/^CronPattern:\s*/, '') : String(error);
    return `invalid cron expression '${expr}': ${reason}`;
  }
}
