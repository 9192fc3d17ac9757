import { describe, expect, it } from 'vitest';
import { normalisedCron, sourceChangeNote } from '../src/schedule/tickSource.ts';

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
  });
});
