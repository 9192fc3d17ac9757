/**
 * What a schedule's ticks are computed from, as the ledger records it on every row it
 * writes (columns cron, timezone), and how a catch-up tells that a row was written under
 * another cron or time zone: the schedule was edited since (README, "Catch-up"). Pure.
 */
import type { TickSource } from '../store/index.ts';
import type { Schedule } from './define.ts';
import { fireTimesBetween } from './period.ts';

export type { TickSource };

/**
 * The cron with runs of whitespace made one space and its ends trimmed: a rewrite that
 * only moves spaces is the same cron. Nothing more is normalised (`0 0 * * 0` and
 * `0 0 * * 7` count as different), so an edit is never mistaken for no edit.
 */
export function normalisedCron(cron: string): string {
  // The blanks and tabs cron reads as separators (dialect.ts), and nothing else.
  return cron.replace(/^[ \t]+|[ \t]+$/g, '').split(/[ \t]+/).join(' ');
}

/** What this version of the schedule computes its ticks from, as its ledger rows record it. */
export function tickSourceOf(schedule: Pick<Schedule, 'cron' | 'timezone'>): TickSource {
  return { cron: normalisedCron(schedule.cron), timezone: schedule.timezone };
}

/**
 * What changed from `row`'s source to `source`: ``cron changed from `A` to `B` `` and/or
 * `timezone changed from X to Y`, or null when `row` was computed from `source` itself, or
 * from an unknown source (NULL columns: a row written before migration 0009 or by an older
 * daemon, read as unchanged). The note of the first row written after an edit whose tick
 * the old version has too (it was the schedule's under either).
 */
export function sourceChange(row: { cron: string | null; timezone: string | null }, source: TickSource): string | null {
  if (row.cron === null || row.timezone === null) return null;
  const cronChanged = normalisedCron(row.cron) !== source.cron;
  const zoneChanged = row.timezone !== source.timezone;
  if (!cronChanged && !zoneChanged) return null;
  const cron = `cron changed from \`${row.cron}\` to \`${source.cron}\``;
  const zone = `timezone changed from ${row.timezone} to ${source.timezone}`;
  return cronChanged && zoneChanged ? `${cron}, ${zone}` : cronChanged ? cron : zone;
}

/**
 * The part of a tick's ledger note that says its cron or time zone changed (sourceChange,
 * sourceChangeNote), through the note's end, or null when it says none. That part always
 * comes last (ScheduleTicker writes it after the tick's own note, `caught up` say), so a
 * note that replaces the tick's (a skip for overlap, a failure) can keep it after its own.
 */
export function sourceChangeIn(note: string | null): string | null {
  if (note === null) return null;
  const found = CHANGE_START.exec(note);
  return found === null ? null : note.slice(found.index + (found[0].startsWith('; ') ? 2 : 0));
}
/** How sourceChange starts, at the start of a note or of one of its `; ` parts. */
const CHANGE_START = /(?:^|; )(?:cron|timezone) changed from /;

/**
 * The ledger note of the first tick written after an edit of the cron or time zone when
 * the old version does not have that tick (sourceChange, and that the ticks before it
 * were not the schedule's), or null as sourceChange.
 */
export function sourceChangeNote(row: { cron: string | null; timezone: string | null }, source: TickSource): string | null {
  const change = sourceChange(row, source);
  return change === null ? null : changeNote(change);
}

/** The note of sourceChangeNote for a `change` already found (sourceChange). */
export function changeNote(change: string): string {
  return `${change}: ticks before this were not the schedule's`;
}

/**
 * True when `at` is a fire time of `source` too: a tick an edited schedule shares with its
 * old version was one of the schedule's under either, so it is caught up like any tick.
 * False for a source this version cannot compute (a cron or zone it does not know, as a
 * newer daemon may have written): such a row's ticks are read as not shared.
 */
export function isFireOf(source: TickSource, at: Date): boolean {
  return sharedFires(source, [at]).size === 1;
}

/**
 * The instants (ms) of `page` (ascending fire times of one schedule) that are fire times of
 * `source` too (isFireOf for each). Costs one listing of `source`'s fires over the page's
 * span, cut at the page's length: when `source` fires no more often there, the page is
 * matched against that list; only a denser source is asked about each instant.
 */
export function sharedFires(source: TickSource, page: Date[]): Set<number> {
  const shared = new Set<number>();
  if (page.length === 0) return shared;
  try {
    const first = new Date(page[0].getTime() - 1);
    const fires = fireTimesBetween(source.cron, source.timezone, first, page[page.length - 1], page.length + 1);
    const theirs = new Set(fires.map((d) => d.getTime()));
    const listedAll = fires.length <= page.length;
    for (const at of page) {
      const ms = at.getTime();
      const mine = listedAll ? theirs.has(ms) : fireTimesBetween(source.cron, source.timezone, new Date(ms - 1), at, 1).length === 1;
      if (mine) shared.add(ms);
    }
  } catch {
    // A source this version cannot compute: nothing is shared.
  }
  return shared;
}
