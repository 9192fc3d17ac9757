import { describe, it, expect } from 'vitest';
import { Cron } from 'croner';
import { UsageError } from '../src/errors.ts';
import {
  PERIODS,
  LATEST_FIRE_LOOKBACK_MS,
  fireTimesBetween,
  isPeriod,
  isValidTimeZone,
  latestFireAtOrBefore,
  nextFireAfter,
  periodKey,
  periodKeyOfFire,
  periodLengthMs,
  validateCron,
} from '../src/schedule/period.ts';
import { compileCron } from '../src/schedule/dialect.ts';
import { oracleFireKey, oracleFires } from './support/oracle.ts';

const BERLIN = 'Europe/Berlin';
const NEW_YORK = 'America/New_York';
const AUCKLAND = 'Pacific/Auckland';
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

const at = (iso: string): Date => new Date(iso);
const isoOf = (d: Date | null): string | null => (d ? d.toISOString() : null);
const isos = (ds: Date[]): string[] => ds.map((d) => d.toISOString());
/** `2026-03-29 03:00:00`: the wall clock in `tz`, to make DST assertions readable. */
const wall = (d: Date, tz: string): string => d.toLocaleString('sv-SE', { timeZone: tz });

/** Every calendar date of a year, `YYYY-MM-DD`. */
function datesOf(year: number): string[] {
  const out: string[] = [];
  for (let ms = Date.UTC(year, 0, 1); ms < Date.UTC(year + 1, 0, 1); ms += DAY) out.push(new Date(ms).toISOString().slice(0, 10));
  return out;
}

/** Fires of `expr` whose local date falls in `year`, with a day of margin each side. */
function firesInLocalYear(expr: string, tz: string, year: number): Date[] {
  const fires = fireTimesBetween(expr, tz, new Date(Date.UTC(year - 1, 11, 30)), new Date(Date.UTC(year + 1, 0, 2)));
  return fires.filter((d) => periodKey('year', d, tz) === String(year));
}

describe('periods', () => {
  it('lists the seven periods, shortest first and tick last', () => {
    expect(PERIODS).toEqual(['minute', 'hour', 'day', 'week', 'month', 'year', 'tick']);
  });

  it('recognises period names and nothing else', () => {
    for (const p of PERIODS) expect(isPeriod(p)).toBe(true);
    for (const p of ['second', 'Day', '', 'days', 7, null]) expect(isPeriod(p)).toBe(false);
  });

  it('bounds each period nominally, with an hour to spare for DST days', () => {
    expect(periodLengthMs('minute')).toBe(60_000);
    expect(periodLengthMs('hour')).toBe(HOUR);
    expect(periodLengthMs('day')).toBe(25 * HOUR);
    expect(periodLengthMs('week')).toBe(7 * DAY + HOUR);
    expect(periodLengthMs('month')).toBe(31 * DAY + HOUR);
    expect(periodLengthMs('year')).toBe(366 * DAY + HOUR);
    expect(periodLengthMs('tick')).toBe(0);
  });
});

describe('periodKey', () => {
  const instant = at('2026-11-30T06:15:42.123Z');

  it('names every period of an instant in UTC', () => {
    expect(periodKey('minute', instant, 'UTC')).toBe('2026-11-30T06:15');
    expect(periodKey('hour', instant, 'UTC')).toBe('2026-11-30T06');
    expect(periodKey('day', instant, 'UTC')).toBe('2026-11-30');
    expect(periodKey('week', instant, 'UTC')).toBe('2026-W49');
    expect(periodKey('month', instant, 'UTC')).toBe('2026-11');
    expect(periodKey('year', instant, 'UTC')).toBe('2026');
  });

  it('names a tick by its UTC instant to the second, whatever the zone', () => {
    expect(periodKey('tick', instant, 'UTC')).toBe('2026-11-30T06:15:42Z');
    expect(periodKey('tick', instant, BERLIN)).toBe('2026-11-30T06:15:42Z');
    expect(periodKey('tick', at('2026-11-30T06:15:00Z'), AUCKLAND)).toBe('2026-11-30T06:15:00Z');
  });

  it('uses the local wall clock of the zone', () => {
    expect(periodKey('minute', instant, BERLIN)).toBe('2026-11-30T07:15');
    expect(periodKey('minute', instant, NEW_YORK)).toBe('2026-11-30T01:15');
    expect(periodKey('minute', at('2026-07-01T06:15:00Z'), BERLIN)).toBe('2026-07-01T08:15');
  });

  it.each([
    ['2027-01-01', '2026-W53'], // Friday: its week's Thursday is 2026-12-31
    ['2024-12-30', '2025-W01'], // Monday: its week's Thursday is 2025-01-02
    ['2021-01-03', '2020-W53'], // Sunday ending 2020's 53rd week
    ['2026-01-01', '2026-W01'], // Thursday: week 1 by definition
    ['2025-12-28', '2025-W52'], // Sunday
    ['2025-12-29', '2026-W01'], // Monday of the week holding 2026-01-01
    ['2026-12-28', '2026-W53'],
    ['2020-12-31', '2020-W53'],
    ['2023-01-01', '2022-W52'], // Sunday
    ['2023-01-02', '2023-W01'],
  ])('puts %s in ISO week %s', (date, week) => {
    expect(periodKey('week', at(`${date}T12:00:00Z`), 'UTC')).toBe(week);
  });

  it('puts an instant just before UTC midnight into the next day, month and year in Berlin', () => {
    const newYearsEve = at('2026-12-31T23:30:00Z');
    expect(periodKey('day', newYearsEve, 'UTC')).toBe('2026-12-31');
    expect(periodKey('day', newYearsEve, BERLIN)).toBe('2027-01-01');
    expect(periodKey('hour', newYearsEve, BERLIN)).toBe('2027-01-01T00');
    expect(periodKey('month', newYearsEve, 'UTC')).toBe('2026-12');
    expect(periodKey('month', newYearsEve, BERLIN)).toBe('2027-01');
    expect(periodKey('year', newYearsEve, 'UTC')).toBe('2026');
    expect(periodKey('year', newYearsEve, BERLIN)).toBe('2027');
    expect(periodKey('week', newYearsEve, BERLIN)).toBe('2026-W53');
  });

  it('starts the ISO week on local Monday, not UTC Monday', () => {
    const sundayNightUtc = at('2026-12-27T23:30:00Z');
    expect(periodKey('week', sundayNightUtc, 'UTC')).toBe('2026-W52');
    expect(periodKey('week', sundayNightUtc, BERLIN)).toBe('2026-W53');
  });

  it('dates an instant by the local calendar across the date line', () => {
    const noonUtc = at('2026-11-30T12:00:00Z');
    expect(periodKey('day', noonUtc, AUCKLAND)).toBe('2026-12-01'); // NZDT, UTC+13
    expect(periodKey('month', noonUtc, AUCKLAND)).toBe('2026-12');
    expect(periodKey('hour', noonUtc, 'Pacific/Kiritimati')).toBe('2026-12-01T02'); // UTC+14
    expect(periodKey('hour', noonUtc, 'Pacific/Pago_Pago')).toBe('2026-11-30T01'); // UTC-11
    expect(periodKey('minute', at('2026-06-30T12:30:00Z'), AUCKLAND)).toBe('2026-07-01T00:30'); // NZST, UTC+12
    expect(periodKey('year', at('2026-12-31T11:00:00Z'), AUCKLAND)).toBe('2027');
  });

  it('gives both passes of a repeated hour the same hour key', () => {
    expect(periodKey('hour', at('2026-10-25T00:30:00Z'), BERLIN)).toBe('2026-10-25T02');
    expect(periodKey('hour', at('2026-10-25T01:30:00Z'), BERLIN)).toBe('2026-10-25T02');
    expect(periodKey('minute', at('2026-10-25T01:30:00Z'), BERLIN)).toBe('2026-10-25T02:30');
  });

  it('rejects an unknown zone and an invalid date', () => {
    expect(() => periodKey('day', instant, 'Mars/Olympus')).toThrow(UsageError);
    expect(() => periodKey('day', instant, 'Mars/Olympus')).toThrow("unknown time zone 'Mars/Olympus'");
    expect(() => periodKey('tick', instant, '')).toThrow(UsageError);
    expect(() => periodKey('day', new Date(Number.NaN), 'UTC')).toThrow(RangeError);
  });
});

describe('isValidTimeZone', () => {
  it('accepts IANA zones and UTC', () => {
    for (const tz of [BERLIN, NEW_YORK, AUCKLAND, 'UTC', 'Etc/UTC', 'Asia/Kolkata']) expect(isValidTimeZone(tz)).toBe(true);
  });

  it('rejects misspelt, made-up and empty zones', () => {
    for (const tz of ['Europe/Berln', 'Mars/Olympus', '', 'CEST+2']) expect(isValidTimeZone(tz)).toBe(false);
  });
});

describe('validateCron', () => {
  it('accepts 5-field, 6-field and nickname expressions', () => {
    const accepted = ['15 6 * * *', '*/5 * * * *', '0 9 * * MON-FRI', '30 15 6 * * *'];
    const nicknames = ['@hourly', '@daily', '@weekly', '@monthly', '@yearly', '@annually', '@midnight'];
    for (const expr of [...accepted, ...nicknames]) {
      expect(validateCron(expr, BERLIN), expr).toBeNull();
    }
  });

  it('reads nicknames in lowercase only, as cron compares them, and says so', () => {
    expect(validateCron('@DAILY', 'UTC')).toBe("invalid cron expression '@DAILY': unknown nickname (cron reads nicknames in lowercase only: @daily)");
    expect(validateCron('@Hourly', 'UTC')).toMatch(/lowercase only: @hourly\)$/);
  });

  it('names an unknown time zone', () => {
    expect(validateCron('15 6 * * *', 'Mars/Olympus')).toBe("unknown time zone 'Mars/Olympus'");
    expect(validateCron('15 6 * * *', '')).toBe("unknown time zone ''");
  });

  it('asks for 5 or 6 fields', () => {
    const wrongCount = "invalid cron expression '* * * *': expected 5 fields (minute hour day-of-month month day-of-week) or 6 (seconds first), got 4";
    expect(validateCron('* * * *', 'UTC')).toBe(wrongCount);
    expect(validateCron('0 0 0 1 1 * 2027', 'UTC')).toMatch(/got 7$/);
    expect(validateCron('', 'UTC')).toMatch(/got 0$/);
  });

  it('says which field is out of range', () => {
    expect(validateCron('61 * * * *', 'UTC')).toBe("invalid cron expression '61 * * * *': minute field '61': 61 is out of range (0-59)");
    expect(validateCron('0 25 * * *', 'UTC')).toBe("invalid cron expression '0 25 * * *': hour field '25': 25 is out of range (0-23)");
    expect(validateCron('0 0 32 * *', 'UTC')).toBe("invalid cron expression '0 0 32 * *': day-of-month field '32': 32 is out of range (1-31)");
    expect(validateCron('0 0 0 * *', 'UTC')).toMatch(/day-of-month field '0': 0 is out of range \(1-31\)$/);
    expect(validateCron('0 0 * 13 *', 'UTC')).toMatch(/month field '13': 13 is out of range \(1-12\)$/);
    expect(validateCron('0 0 * * FUNDAY', 'UTC')).toBe("invalid cron expression '0 0 * * FUNDAY': day-of-week field 'FUNDAY': expected a number or a name (sun-sat), got 'FUNDAY'");
  });

  it('rejects nicknames other than the calendar ones', () => {
    expect(validateCron('@reboot', 'UTC')).toMatch(/^invalid cron expression '@reboot': unknown nickname \(use one of @yearly, /);
    expect(validateCron('@fortnightly', 'UTC')).toMatch(/unknown nickname/);
  });

  it('rejects an expression that never fires', () => {
    expect(validateCron('0 0 30 2 *', 'UTC')).toBe("cron expression '0 0 30 2 *' never fires");
  });

  it('makes the fire-time functions throw the same message as a UsageError', () => {
    const now = at('2026-01-01T00:00:00Z');
    expect(() => nextFireAfter('61 * * * *', 'UTC', now)).toThrow(new UsageError("invalid cron expression '61 * * * *': minute field '61': 61 is out of range (0-59)"));
    expect(() => fireTimesBetween('* * * * *', 'Mars/Olympus', now, now)).toThrow(new UsageError("unknown time zone 'Mars/Olympus'"));
    expect(() => latestFireAtOrBefore('0 0 30 2 *', 'UTC', now)).toThrow(UsageError);
  });

  it('makes the fire-time functions throw RangeError for an invalid Date', () => {
    const invalid = new Date(Number.NaN);
    expect(() => nextFireAfter('* * * * *', 'UTC', invalid)).toThrow(RangeError);
    expect(() => fireTimesBetween('* * * * *', 'UTC', invalid, new Date())).toThrow(RangeError);
    expect(() => latestFireAtOrBefore('* * * * *', 'UTC', invalid)).toThrow(RangeError);
  });
});

describe('nicknames and seconds', () => {
  const from = at('2026-06-10T12:00:00Z'); // a Wednesday

  it('fires @daily and @midnight at local midnight', () => {
    expect(wall(nextFireAfter('@daily', BERLIN, from)!, BERLIN)).toBe('2026-06-11 00:00:00');
    expect(isoOf(nextFireAfter('@midnight', BERLIN, from))).toBe('2026-06-10T22:00:00.000Z');
  });

  it('fires @hourly on the hour', () => {
    expect(isoOf(nextFireAfter('@hourly', BERLIN, from))).toBe('2026-06-10T13:00:00.000Z');
  });

  it('fires @weekly at midnight starting Sunday', () => {
    expect(wall(nextFireAfter('@weekly', BERLIN, from)!, BERLIN)).toBe('2026-06-14 00:00:00');
  });

  it('fires @monthly on the first and @yearly / @annually on January 1st', () => {
    expect(wall(nextFireAfter('@monthly', BERLIN, from)!, BERLIN)).toBe('2026-07-01 00:00:00');
    expect(wall(nextFireAfter('@yearly', BERLIN, from)!, BERLIN)).toBe('2027-01-01 00:00:00');
    expect(isoOf(nextFireAfter('@annually', BERLIN, from))).toBe('2026-12-31T23:00:00.000Z');
  });

  it('reads a 6-field expression as seconds first', () => {
    expect(isos(fireTimesBetween('*/20 * * * * *', 'UTC', from, at('2026-06-10T12:01:00Z')))).toEqual([
      '2026-06-10T12:00:20.000Z',
      '2026-06-10T12:00:40.000Z',
      '2026-06-10T12:01:00.000Z',
    ]);
    expect(periodKey('tick', nextFireAfter('30 15 6 * * *', 'UTC', from)!, 'UTC')).toBe('2026-06-11T06:15:30Z');
  });
});

describe('nextFireAfter', () => {
  it('returns the next fire in the zone, strictly after the given instant', () => {
    expect(isoOf(nextFireAfter('15 6 * * *', BERLIN, at('2026-11-30T00:00:00Z')))).toBe('2026-11-30T05:15:00.000Z');
    expect(isoOf(nextFireAfter('15 6 * * *', BERLIN, at('2026-11-30T05:15:00Z')))).toBe('2026-12-01T05:15:00.000Z');
    expect(isoOf(nextFireAfter('15 6 * * *', BERLIN, at('2026-11-30T05:14:59.999Z')))).toBe('2026-11-30T05:15:00.000Z');
  });

  it('finds a leap-day schedule years ahead', () => {
    expect(isoOf(nextFireAfter('0 0 29 2 *', 'UTC', at('2096-03-01T00:00:00Z')))).toBe('2104-02-29T00:00:00.000Z');
  });
});

describe('fireTimesBetween', () => {
  it('excludes the start and includes the end', () => {
    const fires = fireTimesBetween('0 * * * *', 'UTC', at('2026-01-01T00:00:00Z'), at('2026-01-01T03:00:00Z'));
    expect(isos(fires)).toEqual(['2026-01-01T01:00:00.000Z', '2026-01-01T02:00:00.000Z', '2026-01-01T03:00:00.000Z']);
  });

  it('returns nothing for an empty range or a zero limit', () => {
    const t = at('2026-01-01T00:00:00Z');
    expect(fireTimesBetween('* * * * *', 'UTC', t, t)).toEqual([]);
    expect(fireTimesBetween('* * * * *', 'UTC', t, at('2025-01-01T00:00:00Z'))).toEqual([]);
    expect(fireTimesBetween('* * * * *', 'UTC', t, at('2026-01-02T00:00:00Z'), 0)).toEqual([]);
  });

  it('stops at the limit, and paging from the last fire gives the same fires as one call', () => {
    for (const expr of ['*/20 * * * *', '30 2 * * *', '15 1-3 * * *']) {
      const from = at('2026-10-23T00:00:00Z');
      const to = at('2026-10-28T00:00:00Z');
      const all = isos(fireTimesBetween(expr, BERLIN, from, to));
      const paged: string[] = [];
      for (let cursor = from; ; ) {
        const page = fireTimesBetween(expr, BERLIN, cursor, to, 7);
        expect(page.length).toBeLessThanOrEqual(7);
        if (page.length === 0) break;
        paged.push(...isos(page));
        cursor = page[page.length - 1];
      }
      expect(paged, expr).toEqual(all);
    }
  });

  it('lists a year of hourly fires, every real hour once', () => {
    // How fast is a figure for `npm run bench` (section 'periods'), not an assertion here.
    const fires = fireTimesBetween('0 * * * *', BERLIN, at('2026-01-01T00:00:00Z'), at('2027-01-01T00:00:00Z'));
    expect(fires).toHaveLength(8760);
    expect(fires[0].toISOString()).toBe('2026-01-01T01:00:00.000Z');
    for (let i = 1; i < fires.length; i++) expect(fires[i].getTime() - fires[i - 1].getTime()).toBe(HOUR);
  });
});

describe('DST: a time in the spring gap fires once, when the clock jumps', () => {
  it.each([
    // zone, expression, expected fire on the transition day (UTC), its wall time
    [BERLIN, '30 2 * * *', '2026-03-29T01:00:00.000Z', '2026-03-29 03:00:00'],
    [BERLIN, '15 2 * * *', '2026-03-29T01:00:00.000Z', '2026-03-29 03:00:00'],
    [BERLIN, '30 1 * * *', '2026-03-29T00:30:00.000Z', '2026-03-29 01:30:00'],
    [NEW_YORK, '30 2 * * *', '2026-03-08T07:00:00.000Z', '2026-03-08 03:00:00'],
    [NEW_YORK, '30 1 * * *', '2026-03-08T06:30:00.000Z', '2026-03-08 01:30:00'],
    [AUCKLAND, '30 2 * * *', '2026-09-26T14:00:00.000Z', '2026-09-27 03:00:00'],
  ])('%s %s', (tz, expr, utc, local) => {
    const dayStart = at(`${local.slice(0, 10)}T00:00:00Z`);
    const fires = fireTimesBetween(expr, tz, new Date(dayStart.getTime() - 2 * DAY), new Date(dayStart.getTime() + 2 * DAY));
    const onDay = fires.filter((d) => periodKey('day', d, tz) === local.slice(0, 10));
    expect(isos(onDay)).toEqual([utc]);
    expect(wall(onDay[0], tz)).toBe(local);
  });
});

describe('DST: a time in the autumn overlap fires once, at its first occurrence', () => {
  it.each([
    [BERLIN, '30 2 * * *', '2026-10-25T00:30:00.000Z'], // 02:30 CEST; 02:30 CET would be 01:30Z
    [BERLIN, '15 2 * * *', '2026-10-25T00:15:00.000Z'],
    [BERLIN, '30 1 * * *', '2026-10-24T23:30:00.000Z'], // outside the overlap, unaffected
    [NEW_YORK, '30 1 * * *', '2026-11-01T05:30:00.000Z'], // 01:30 EDT; 01:30 EST would be 06:30Z
    [NEW_YORK, '30 2 * * *', '2026-11-01T07:30:00.000Z'],
    [AUCKLAND, '30 2 * * *', '2026-04-04T13:30:00.000Z'], // 02:30 NZDT; 02:30 NZST would be 14:30Z
  ])('%s %s', (tz, expr, utc) => {
    const day = periodKey('day', at(utc), tz);
    const utcMidnight = at(`${day}T00:00:00Z`).getTime();
    const fires = fireTimesBetween(expr, tz, new Date(utcMidnight - 2 * DAY), new Date(utcMidnight + 2 * DAY));
    const onDay = fires.filter((d) => periodKey('day', d, tz) === day);
    expect(isos(onDay)).toEqual([utc]);
  });
});

describe('DST: a daily schedule fires exactly once on every local day', () => {
  it.each([
    [BERLIN, '30 2 * * *'],
    [BERLIN, '30 1 * * *'],
    [BERLIN, '15 2 * * *'],
    [BERLIN, '0 0 * * *'],
    [NEW_YORK, '30 2 * * *'],
    [NEW_YORK, '30 1 * * *'],
    [AUCKLAND, '30 2 * * *'],
    ['America/Santiago', '0 0 * * *'], // its clocks change at midnight
    ['Australia/Lord_Howe', '45 1 * * *'], // half-hour DST
  ])('%s %s, all of 2026', (tz, expr) => {
    const days = firesInLocalYear(expr, tz, 2026).map((d) => periodKey('day', d, tz));
    expect(days).toHaveLength(365);
    expect(days).toEqual(datesOf(2026));
  });

  it('fires a list of fixed hours once per hour per local day, DST days included', () => {
    const fires = firesInLocalYear('30 2,14 * * *', BERLIN, 2026);
    const keys = fires.map((d) => periodKey('hour', d, BERLIN));
    expect(fires).toHaveLength(730);
    expect(new Set(keys).size).toBe(730);
    expect(keys).toContain('2026-03-29T03'); // the gap's 02:30 fires at 03:00
  });

  it('differs from croner\'s default rule, which would skip and double a list of hours', () => {
    // Documents why the module uses fixedTimeRule 'no-wildcard' semantics.
    const croner = new Cron('30 2,14 * * *', { timezone: BERLIN, paused: true });
    expect(isos(croner.nextRuns(2, at('2026-03-28T14:00:00Z')))).toEqual(['2026-03-29T12:30:00.000Z', '2026-03-30T00:30:00.000Z']);
    expect(isos(croner.nextRuns(3, at('2026-10-24T14:00:00Z'))).slice(0, 2)).toEqual(['2026-10-25T00:30:00.000Z', '2026-10-25T01:30:00.000Z']);
    expect(isos(fireTimesBetween('30 2,14 * * *', BERLIN, at('2026-10-24T14:00:00Z'), at('2026-10-25T14:00:00Z')))).toEqual([
      '2026-10-25T00:30:00.000Z',
      '2026-10-25T13:30:00.000Z',
    ]);
  });
});

describe('DST: an interval schedule fires at every real matching instant', () => {
  it('fires hourly 25 times on the autumn day and 23 on the spring day, the repeated hour sharing a key', () => {
    const autumn = fireTimesBetween('0 * * * *', BERLIN, at('2026-10-24T20:00:00Z'), at('2026-10-26T02:00:00Z')).filter(
      (d) => periodKey('day', d, BERLIN) === '2026-10-25',
    );
    expect(autumn).toHaveLength(25);
    const hourKeys = autumn.map((d) => periodKey('hour', d, BERLIN));
    expect(hourKeys.filter((k) => k === '2026-10-25T02')).toHaveLength(2);
    expect(new Set(hourKeys).size).toBe(24);

    const spring = fireTimesBetween('0 * * * *', BERLIN, at('2026-03-28T20:00:00Z'), at('2026-03-30T02:00:00Z')).filter(
      (d) => periodKey('day', d, BERLIN) === '2026-03-29',
    );
    expect(spring).toHaveLength(23);
    expect(spring.map((d) => periodKey('hour', d, BERLIN))).not.toContain('2026-03-29T02');
  });

  it('fires a stepped minute inside the repeated hour on both passes, and not at all in the gap', () => {
    const autumn = fireTimesBetween('*/30 2 * * *', BERLIN, at('2026-10-24T12:00:00Z'), at('2026-10-25T12:00:00Z'));
    expect(isos(autumn)).toEqual([
      '2026-10-25T00:00:00.000Z',
      '2026-10-25T00:30:00.000Z',
      '2026-10-25T01:00:00.000Z',
      '2026-10-25T01:30:00.000Z',
    ]);
    expect(fireTimesBetween('*/30 2 * * *', BERLIN, at('2026-03-28T12:00:00Z'), at('2026-03-29T12:00:00Z'))).toEqual([]);
  });

  it('fires hourly through the New York and Auckland transitions without gaps or repeats', () => {
    for (const [tz, from] of [
      [NEW_YORK, '2026-03-07T00:00:00Z'],
      [NEW_YORK, '2026-10-31T00:00:00Z'],
      [AUCKLAND, '2026-04-03T00:00:00Z'],
      [AUCKLAND, '2026-09-25T00:00:00Z'],
    ] as const) {
      const fires = fireTimesBetween('0 * * * *', tz, at(from), new Date(at(from).getTime() + 3 * DAY));
      expect(fires).toHaveLength(72);
      for (let i = 1; i < fires.length; i++) expect(fires[i].getTime() - fires[i - 1].getTime()).toBe(HOUR);
    }
  });
});

describe('latestFireAtOrBefore', () => {
  it('returns a fire exactly at the given instant, and the one before a millisecond earlier', () => {
    expect(isoOf(latestFireAtOrBefore('15 6 * * *', BERLIN, at('2026-11-30T05:15:00Z')))).toBe('2026-11-30T05:15:00.000Z');
    expect(isoOf(latestFireAtOrBefore('15 6 * * *', BERLIN, at('2026-11-30T05:14:59.999Z')))).toBe('2026-11-29T05:15:00.000Z');
    expect(isoOf(latestFireAtOrBefore('15 6 * * *', BERLIN, at('2026-11-30T05:15:00.500Z')))).toBe('2026-11-30T05:15:00.000Z');
  });

  it('finds dense and sparse schedules', () => {
    expect(isoOf(latestFireAtOrBefore('*/10 * * * * *', 'UTC', at('2026-05-05T10:00:07Z')))).toBe('2026-05-05T10:00:00.000Z');
    expect(isoOf(latestFireAtOrBefore('@yearly', BERLIN, at('2026-12-31T22:59:59Z')))).toBe('2025-12-31T23:00:00.000Z');
    expect(isoOf(latestFireAtOrBefore('0 0 29 2 *', 'UTC', at('2104-02-28T00:00:00Z')))).toBe('2096-02-29T00:00:00.000Z');
  });

  it('gives up beyond the lookback of just over 8 years', () => {
    // Feb 29 on a Sunday (day of week */7 is Sunday alone, and starts with *: BOTH day fields must match): 2004, 2032, 2060.
    expect(isoOf(latestFireAtOrBefore('0 0 29 2 */7', 'UTC', at('2040-01-01T00:00:00Z')))).toBe('2032-02-29T00:00:00.000Z');
    expect(latestFireAtOrBefore('0 0 29 2 */7', 'UTC', at('2059-12-31T00:00:00Z'))).toBeNull();
    expect(LATEST_FIRE_LOOKBACK_MS).toBeGreaterThan(Date.UTC(2104, 1, 29) - Date.UTC(2096, 1, 29));
  });

  it('follows the DST rules: the gap fire, and only the first pass of an overlap', () => {
    expect(isoOf(latestFireAtOrBefore('30 2 * * *', BERLIN, at('2026-03-29T01:00:00Z')))).toBe('2026-03-29T01:00:00.000Z');
    expect(isoOf(latestFireAtOrBefore('30 2 * * *', BERLIN, at('2026-10-25T01:45:00Z')))).toBe('2026-10-25T00:30:00.000Z');
    expect(isoOf(latestFireAtOrBefore('0 * * * *', BERLIN, at('2026-10-25T01:45:00Z')))).toBe('2026-10-25T01:00:00.000Z');
  });
});

describe('agrees with croner 11 converting time zones itself (fixedTimeRule no-wildcard)', () => {
  // The module walks croner's wall clock and applies the DST rules itself, for speed; croner's own
  // zone-aware enumeration is the reference. Dense expressions are compared around the transitions.
  // Lord Howe shifts by half an hour, Santiago at midnight, Casablanca around Ramadan.
  const zones = [BERLIN, NEW_YORK, AUCKLAND, 'Australia/Lord_Howe', 'America/Santiago', 'Africa/Casablanca'];
  const croner = (expr: string, tz: string) => new Cron(expr, { timezone: tz, paused: true, fixedTimeRule: 'no-wildcard' });
  const cronerBetween = (expr: string, tz: string, from: Date, to: Date): string[] => {
    const job = croner(expr, tz);
    const out: string[] = [];
    for (let d: Date | null = from; (d = job.nextRun(d)) && d <= to; ) out.push(d.toISOString());
    return out;
  };

  it.each(zones)('%s: daily and listed times over a year', (tz) => {
    const from = at('2025-12-31T00:00:00Z');
    const to = at('2027-01-02T00:00:00Z');
    for (const expr of ['30 2 * * *', '0 0 * * *', '30 2,14 * * *', '0 1-3 * * 1-5', '59 23 * * *']) {
      expect(isos(fireTimesBetween(expr, tz, from, to)), expr).toEqual(cronerBetween(expr, tz, from, to));
    }
  });

  it.each(zones)('%s: dense expressions around each 2026 transition', (tz) => {
    const offsetAt = (ms: number): number => Date.parse(`${periodKey('minute', new Date(ms), tz)}:00Z`) - ms;
    const transitions: number[] = [];
    for (let ms = Date.UTC(2026, 0, 1); ms < Date.UTC(2027, 0, 1); ms += HOUR) {
      if (offsetAt(ms) !== offsetAt(ms + HOUR)) transitions.push(ms);
    }
    expect(transitions.length).toBeGreaterThanOrEqual(2);
    for (const t of transitions) {
      const from = new Date(t - DAY);
      const to = new Date(t + DAY);
      for (const expr of ['0 * * * *', '*/15 * * * *', '*/30 2 * * *', '0,30 0-3 * * *']) {
        const label = `${expr} near ${new Date(t).toISOString()}`;
        expect(isos(fireTimesBetween(expr, tz, from, to)), label).toEqual(cronerBetween(expr, tz, from, to));
      }
    }
  });

  it.each(zones)('%s: latest fire matches croner previousRuns at awkward instants', (tz) => {
    // Next to the Berlin, New York and Auckland transitions, plus an ordinary moment.
    const instants = [
      '2026-03-29T00:59:59Z',
      '2026-03-29T01:00:00Z',
      '2026-10-25T00:45:00Z',
      '2026-10-25T01:30:00Z',
      '2026-11-01T06:15:00Z',
      '2026-04-04T14:00:00Z',
      '2026-09-26T14:00:00Z',
      '2026-06-15T12:34:56Z',
    ];
    for (const expr of ['30 2 * * *', '0 * * * *', '*/30 2 * * *', '15 1-3 * * *']) {
      for (const iso of instants) {
        const expected = croner(expr, tz).previousRuns(1, new Date(at(iso).getTime() + 1))[0] ?? null;
        expect(isoOf(latestFireAtOrBefore(expr, tz, at(iso))), `${expr} at ${iso}`).toBe(isoOf(expected));
      }
    }
  });
});

describe('the cron dialect is Vixie cron\'s (cronie), checked against the oracle', () => {
  const LORD_HOWE = 'Australia/Lord_Howe'; // DST moves the clock by 30 minutes
  const NUUK = 'America/Nuuk'; // its clocks change at midnight
  const ZONES = [BERLIN, NEW_YORK, LORD_HOWE, NUUK];
  const YEAR: [number, number] = [Date.UTC(2026, 0, 1), Date.UTC(2027, 0, 1)];

  /** Six days around each 2026 offset change of `tz`, plus a plain week in June. */
  const windowsOf = (tz: string): Array<[number, number]> => {
    const offsetAt = (ms: number): number => Date.parse(`${periodKey('minute', new Date(ms), tz)}:00Z`) - ms;
    const windows: Array<[number, number]> = [[Date.UTC(2026, 5, 10), Date.UTC(2026, 5, 17)]];
    for (let ms = YEAR[0]; ms < YEAR[1]; ms += HOUR) {
      if (offsetAt(ms) !== offsetAt(ms + HOUR)) windows.push([ms - 3 * DAY, ms + 3 * DAY]);
    }
    expect(windows.length, tz).toBe(3);
    return windows;
  };

  /** Fires in [from, to] and their day and hour keys agree with the oracle's. */
  const agree = (expr: string, tz: string, [from, to]: [number, number]) => {
    const ours = fireTimesBetween(expr, tz, new Date(from - 1), new Date(to));
    const expected = oracleFires({ kind: 'cron', expr }, tz, from, to);
    const label = `${expr} in ${tz} from ${new Date(from).toISOString()}`;
    expect(isos(ours), label).toEqual(expected.map((f) => new Date(f.at).toISOString()));
    for (const period of ['day', 'hour'] as const) {
      expect(ours.map((d) => periodKeyOfFire(period, expr, tz, d)), `${label} (${period} keys)`).toEqual(expected.map((f) => oracleFireKey(period, f)));
    }
  };

  it.each(ZONES)('%s: a day field starting with * makes both day fields count; two restricted ones count either', (tz) => {
    for (const expr of ['0 0 */2 * 1', '30 12 1 * */2', '0 6 13 * 5', '15 3 1-7 * 0', '0 0 * * 1', '0 9 15 * *', '0 0 */10 * 1-5']) {
      agree(expr, tz, YEAR);
    }
  });

  it('fires `0 0 */2 * 1` on Mondays that are odd days only: 53 times in 2026–2027, not 422', () => {
    const fires = fireTimesBetween('0 0 */2 * 1', BERLIN, new Date(YEAR[0] - 2 * HOUR), new Date(Date.UTC(2028, 0, 1) - 2 * HOUR));
    expect(fires).toHaveLength(53);
    expect(fires.map((d) => wall(d, BERLIN).slice(0, 10)).slice(0, 3)).toEqual(['2026-01-05', '2026-01-19', '2026-02-09']);
    expect(fireTimesBetween('0 0 13 * 5', 'UTC', at('2026-02-01T00:00:00Z'), at('2026-02-28T00:00:00Z')).map((d) => d.getUTCDate())).toEqual([6, 13, 20, 27]);
  });

  it.each(ZONES)('%s: only a minute or hour field starting with * makes an interval job', (tz) => {
    for (const window of windowsOf(tz)) {
      for (const expr of ['0 0-23/2 * * *', '30 1-23/4 * * *', '30 21-23/2 * * *', '0,30 0-3 * * *', '0 */2 * * *', '*/30 1-3 * * *', '30 * * * *', '30 2 * * *']) {
        agree(expr, tz, window);
      }
    }
  });

  it('runs a stepped hour list as a fixed-time job in Berlin: the skipped 02:00 at the jump, the repeated one once', () => {
    const spring = fireTimesBetween('0 0-23/2 * * *', BERLIN, at('2026-03-28T22:30:00Z'), at('2026-03-29T04:30:00Z'));
    expect(spring.map((d) => wall(d, BERLIN))).toEqual(['2026-03-29 00:00:00', '2026-03-29 03:00:00', '2026-03-29 04:00:00', '2026-03-29 06:00:00']);
    expect(periodKeyOfFire('hour', '0 0-23/2 * * *', BERLIN, spring[1])).toBe('2026-03-29T02');
    const autumn = fireTimesBetween('0 0-23/2 * * *', BERLIN, at('2026-10-24T21:30:00Z'), at('2026-10-25T03:30:00Z'));
    expect(isos(autumn)).toEqual(['2026-10-24T22:00:00.000Z', '2026-10-25T00:00:00.000Z', '2026-10-25T03:00:00.000Z']);
    // `0 */2 * * *` starts with *: an interval job, so the repeated 02:00 fires twice and the skipped one not at all.
    expect(isos(fireTimesBetween('0 */2 * * *', BERLIN, at('2026-10-24T21:30:00Z'), at('2026-10-25T03:30:00Z')))).toEqual([
      '2026-10-24T22:00:00.000Z', '2026-10-25T00:00:00.000Z', '2026-10-25T01:00:00.000Z', '2026-10-25T03:00:00.000Z',
    ]);
  });

  it('counts a seconds field starting with * as an interval too, and reads nicknames as cron does', () => {
    const interval = (expr: string) => (compileCron(expr) as { interval: boolean }).interval;
    expect([interval('*/10 30 2 * * *'), interval('0 30 2 * * *'), interval('0 0-23/2 * * *'), interval('* 2 * * *')]).toEqual([true, false, false, true]);
    expect([interval('@hourly'), interval('@daily'), interval('@weekly'), interval('@yearly')]).toEqual([true, false, false, false]);
  });

  it.each(ZONES)('%s: a fixed time skipped by a jump fires at the jump, keyed by the time it was meant for', (tz) => {
    for (const expr of ['0 23 * * *', '30 23 * * *', '59 23 * * *', '0 0 * * *', '45 1 * * *', '0,30 23 * * 6', '15 2 * * *', '15 2 */2 * 0']) {
      agree(expr, tz, YEAR);
    }
  });

  it('fires Nuuk\'s skipped 23:30 of Saturday 28 March 2026 at the midnight jump, under Saturday\'s key', () => {
    const fires = fireTimesBetween('30 23 * * *', NUUK, at('2026-03-27T12:00:00Z'), at('2026-03-31T12:00:00Z'));
    expect(fires.map((d) => [wall(d, NUUK), periodKeyOfFire('day', '30 23 * * *', NUUK, d)])).toEqual([
      ['2026-03-27 23:30:00', '2026-03-27'],
      ['2026-03-29 00:00:00', '2026-03-28'], // 23:00 → 00:00: 23:30 never showed
      ['2026-03-29 23:30:00', '2026-03-29'],
      ['2026-03-30 23:30:00', '2026-03-30'],
    ]);
    expect(periodKeyOfFire('hour', '30 23 * * *', NUUK, fires[1])).toBe('2026-03-28T23');
    expect(periodKeyOfFire('tick', '30 23 * * *', NUUK, fires[1])).toBe('2026-03-29T01:00:00Z');
    // The days of 2026 each get exactly one key.
    const keys = firesInLocalYear('59 23 * * *', NUUK, 2026).map((d) => periodKeyOfFire('day', '59 23 * * *', NUUK, d));
    expect(keys).toEqual(datesOf(2026));
  });

  it('fires noon of Apia\'s skipped 30 December 2011 at the jump, keyed by that day', () => {
    const fires = fireTimesBetween('0 12 * * *', 'Pacific/Apia', at('2011-12-28T12:00:00Z'), at('2012-01-01T12:00:00Z'));
    expect(fires.map((d) => [d.toISOString(), periodKeyOfFire('day', '0 12 * * *', 'Pacific/Apia', d)])).toEqual([
      ['2011-12-28T22:00:00.000Z', '2011-12-28'],
      ['2011-12-29T22:00:00.000Z', '2011-12-29'],
      ['2011-12-30T10:00:00.000Z', '2011-12-30'], // 29 Dec 23:59:59 −10 → 31 Dec 00:00 +14
      ['2011-12-30T22:00:00.000Z', '2011-12-31'],
      ['2011-12-31T22:00:00.000Z', '2012-01-01'],
    ]);
    agree('0 12 * * *', 'Pacific/Apia', [Date.UTC(2011, 11, 20), Date.UTC(2012, 0, 10)]);
  });

  it('gives the same fires however a search is paged across a jump and a repeated range', () => {
    for (const [expr, tz, fromIso] of [
      ['*/20 23 * * *', NUUK, '2026-10-23T12:00:00Z'],
      ['*/20 * * * *', LORD_HOWE, '2026-04-04T12:00:00Z'],
      ['0,20,40 23 * * *', NUUK, '2026-03-27T12:00:00Z'],
    ] as const) {
      const from = at(fromIso);
      const to = new Date(from.getTime() + 2 * DAY);
      const all = isos(fireTimesBetween(expr, tz, from, to));
      const paged: string[] = [];
      for (let cursor = from; ; ) {
        const page = fireTimesBetween(expr, tz, cursor, to, 3);
        if (page.length === 0) break;
        paged.push(...isos(page));
        cursor = page[page.length - 1];
      }
      expect(paged, expr).toEqual(all);
      // Starting anywhere, even inside a repeated range, gives the tail of the same list.
      for (let ms = from.getTime(); ms < to.getTime(); ms += 7 * 60_000) {
        const tail = all.filter((iso) => Date.parse(iso) > ms);
        expect(isos(fireTimesBetween(expr, tz, new Date(ms), to)), `${expr} from ${new Date(ms).toISOString()}`).toEqual(tail);
      }
    }
  });
});
