import { UsageError } from '../errors.ts';
import { shownInLine } from '../shownText.ts';

// A time needs its zone: a bare local time would mean different instants on different hosts.
const ISO_INSTANT = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,6})?)?(?:Z|[+-](\d{2}):?(\d{2})))?$/;

/** The earliest year a flag may name: times are stored from the Unix epoch on. */
export const MIN_YEAR = 1970;

/** The first instant a DATETIME cannot hold. */
const END_OF_9999 = Date.UTC(10_000, 0, 1);

/**
 * Parses an ISO 8601 instant with a date (`2026-12-01`, `2026-12-01T02:00:00Z`,
 * `2026-12-01T03:00+01:00`); the one parser of every `--run-at`, `--at`, `--since` and
 * `--from`. Refuses, with one line naming `flag`, anything Date would guess at or roll
 * over: no zone, a day the month does not have (2026-02-30 is not 2026-03-02), 24:00,
 * a 60th second, an offset past ±23:59, an instant before 1970, and one in the year 10000
 * (UTC) or later.
 */
export function parseIsoInstant(value: string, flag: string): Date {
  const refuse = (why: string) => new UsageError(`${flag} ${why} (got '${shownInLine(value)}')`);
  const match = ISO_INSTANT.exec(value);
  if (!match) throw refuse('must be an ISO 8601 instant with a zone, such as 2026-12-01T02:00:00Z');
  const [year, month, day, hour = 0, minute = 0, second = 0, offsetHour = 0, offsetMinute = 0] = match
    .slice(1)
    .map((part) => (part === undefined ? undefined : Number(part)));
  if (year! < MIN_YEAR) throw refuse(`must be in ${MIN_YEAR} or later`);
  if (month! < 1 || month! > 12 || day! < 1 || day! > daysInMonth(year!, month!)) throw refuse('is not a date that exists');
  if (hour > 23 || minute > 59 || second > 59 || offsetHour > 23 || offsetMinute > 59) throw refuse('is not a time that exists');
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) throw refuse('must be an ISO 8601 instant with a zone, such as 2026-12-01T02:00:00Z');
  if (date.getTime() < 0) throw refuse(`must be in ${MIN_YEAR} or later`);
  // 9999-12-31T23:00-05:00 is in the year 10000 UTC, past DATETIME: the database would
  // refuse it as a run time and compare it as text in a filter (--since matching everything).
  if (date.getTime() >= END_OF_9999) throw refuse('must be before the year 10000 (UTC)');
  return date;
}

function daysInMonth(year: number, month: number): number {
  // Day 0 of the next month is the last day of this one (UTC: no DST to shift it).
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}
