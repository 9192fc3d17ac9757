import { describe, expect, it } from 'vitest';
import { fireTimesBetween } from '../src/schedule/period.ts';
import { isFireOf, normalisedCron, sharedFires, sourceChange, sourceChangeIn, sourceChangeNote } from '../src/schedule/tickSource.ts';

describe('what a ledger row says its tick was computed from', () => {
  it('a cron rewritten only in its blanks and tabs is the same cron', () => {
    expect(normalisedCron(' 0  8\t* *  1-5 ')).toBe('0 8 * * 1-5');
    expect(sourceChangeNote({ cron: '0 8 * * 1-5', timezone: 'UTC' }, { cron: normalisedCron('0\t8 * *   1-5'), timezone: 'UTC' })).toBeNull();
  });

  it('a row of unknown source (written before the columns existed) is never read as an edit', () => {
    expect(sourceChangeNote({ cron: null, timezone: null }, { cron: '* * * * *', timezone: 'UTC' })).toBeNull();
  });

  it('an edit of the cron, the zone or both is named in one note', () => {
    const now = { cron: '* * * * *', timezone: 'Europe/Berlin' };
    expect(sourceChangeNote({ cron: '0 0 1 * *', timezone: 'Europe/Berlin' }, now)).toBe(
      "cron changed from `0 0 1 * *` to `* * * * *`: ticks before this were not the schedule's",
    );
    expect(sourceChangeNote({ cron: '* * * * *', timezone: 'UTC' }, now)).toBe("timezone changed from UTC to Europe/Berlin: ticks before this were not the schedule's");
    expect(sourceChangeNote({ cron: '0 0 1 * *', timezone: 'UTC' }, now)).toBe(
      "cron changed from `0 0 1 * *` to `* * * * *`, timezone changed from UTC to Europe/Berlin: ticks before this were not the schedule's",
    );
    // The short form, for a first tick the old version has too: what changed, nothing about the ticks before.
    expect(sourceChange({ cron: '0 0 1 * *', timezone: 'UTC' }, now)).toBe('cron changed from `0 0 1 * *` to `* * * * *`, timezone changed from UTC to Europe/Berlin');
    expect(sourceChange({ cron: '*  * * * *', timezone: 'Europe/Berlin' }, now)).toBeNull();
  });

  it('the part of a note saying what changed is found after the note’s own parts, and nothing else is taken for it', () => {
    const now = { cron: '*/5 * * * *', timezone: 'UTC' };
    const change = sourceChange({ cron: '0 * * * *', timezone: 'UTC' }, now)!;
    expect(sourceChangeIn(change)).toBe(change);
    expect(sourceChangeIn(`caught up; ${change}`)).toBe(change);
    const note = sourceChangeNote({ cron: '0 * * * *', timezone: 'Etc/UTC' }, now)!;
    expect(sourceChangeIn(`paused by ann since 2030-01-03T10:00:00.000Z: deploy; ${note}`)).toBe(note);
    expect(sourceChangeIn('caught up')).toBeNull();
    expect(sourceChangeIn(null)).toBeNull();
    expect(sourceChangeIn('paused: the cron changed from monday')).toBeNull();
  });

  it('the ticks an edited schedule shares with its old version are those the old one fires at too, dense or sparse, over a DST change', () => {
    const from = new Date('2030-10-26T22:00:00Z');
    const to = new Date('2030-10-27T04:00:00Z'); // Berlin falls back at 01:00Z
    const sources = [
      { cron: '*/30 * * * *', timezone: 'Europe/Berlin' },
      { cron: '30 2 * * *', timezone: 'Europe/Berlin' },
      { cron: '* * * * * *', timezone: 'UTC' },
      { cron: '0 0 1 * *', timezone: 'UTC' },
      { cron: 'not a cron', timezone: 'UTC' },
    ];
    for (const page of [fireTimesBetween('*/15 * * * *', 'Europe/Berlin', from, to), fireTimesBetween('0,30 * * * *', 'UTC', from, to)]) {
      for (const source of sources) {
        let all: Set<number>;
        try {
          all = new Set(fireTimesBetween(source.cron, source.timezone, new Date(from.getTime() - 1), to).map((d) => d.getTime()));
        } catch {
          all = new Set();
        }
        const expected = page.filter((at) => all.has(at.getTime())).map((at) => at.getTime());
        expect([...sharedFires(source, page)].sort((a, b) => a - b)).toEqual(expected);
        expect(page.filter((at) => isFireOf(source, at)).map((at) => at.getTime())).toEqual(expected);
      }
    }
  });
});
