import { describe, expect, it } from 'vitest';
import { fireTimesBetween, validateCron } from '../src/schedule/period.ts';

// The fields of a cron expression mean what cronie's entry.c reads them as; croner only walks
// the values. Expected values below are cronie's, worked out from its get_range/get_number.

const WEEKDAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];
/** The weekdays `expr` fires on in the first two weeks of 2026 (UTC), in order from Sunday. */
function weekdaysOf(expr: string): string[] {
  const fires = fireTimesBetween(expr, 'UTC', new Date('2026-01-03T23:59:00Z'), new Date('2026-01-17T23:59:00Z'), 100);
  return WEEKDAYS.filter((_, day) => fires.some((d) => d.getUTCDay() === day));
}
/** The minutes past the hour `expr` fires at in one hour. */
function minutesOf(expr: string): number[] {
  return fireTimesBetween(expr, 'UTC', new Date('2026-01-01T09:59:59Z'), new Date('2026-01-01T10:59:59Z'), 100).map((d) => d.getUTCMinutes());
}
const problem = (expr: string) => validateCron(expr, 'UTC');

describe('day-of-week names and ranges, as cron reads them', () => {
  it('reads sun as 0 wherever it stands: sun-sun and 0-sun are Sundays alone', () => {
    expect(weekdaysOf('0 0 * * sun-sun')).toEqual(['sun']);
    expect(weekdaysOf('0 0 * * 0-sun')).toEqual(['sun']);
    expect(weekdaysOf('0 0 * * sun')).toEqual(['sun']);
    expect(weekdaysOf('0 0 * * sun-sat')).toEqual(WEEKDAYS);
  });

  it('ends a range that ends in 0 at 7, Sunday, without a step: fri-sun and 5-0 are Friday to Sunday', () => {
    expect(weekdaysOf('0 0 * * fri-sun')).toEqual(['sun', 'fri', 'sat']);
    expect(weekdaysOf('0 0 * * 5-0')).toEqual(['sun', 'fri', 'sat']);
    expect(weekdaysOf('0 0 * * mon-sun')).toEqual(WEEKDAYS);
    expect(weekdaysOf('0 0 * * 7-0')).toEqual(['sun']);
  });

  it('refuses such a range with a step, which cron reads as no day at all, and says what to write', () => {
    expect(problem('0 0 * * mon-sun/2')).toBe(
      "invalid cron expression '0 0 * * mon-sun/2': day-of-week field 'mon-sun/2': the range mon-sun is reversed, and cron selects nothing for it with a step (write 1-7/2)",
    );
    expect(problem('17 14 24-25/28 * mon-sun/1')).toMatch(/reversed/);
  });

  it('takes names in any case, in lists and ranges, in the month and weekday fields only', () => {
    expect(weekdaysOf('0 0 * * MON,Wed-fri')).toEqual(['mon', 'wed', 'thu', 'fri']);
    expect(fireTimesBetween('0 0 1 JUL-aug *', 'UTC', new Date('2026-01-01T00:00:00Z'), new Date('2027-01-01T00:00:00Z')).map((d) => d.getUTCMonth() + 1)).toEqual([7, 8]);
    expect(problem('0 0 mon * *')).toMatch(/day-of-month field 'mon': expected a number, got 'mon'$/);
    expect(problem('0 0 * * monday')).toMatch(/day-of-week field 'monday': expected a number or a name \(sun-sat\), got 'monday'$/);
  });

  it('makes 0 and 7 both Sunday, and a */2 weekday Sunday, Tuesday, Thursday and Saturday', () => {
    expect(weekdaysOf('0 0 * * 7')).toEqual(['sun']);
    expect(weekdaysOf('0 0 * * 0,7')).toEqual(['sun']);
    expect(weekdaysOf('0 0 * * */2')).toEqual(['sun', 'tue', 'thu', 'sat']);
  });
});

describe('what cron accepts and refuses', () => {
  it('uses a step longer than its field as cron does, from the range start: */90 is minute 0', () => {
    expect(minutesOf('*/90 * * * *')).toEqual([0]);
    expect(minutesOf('10-50/45 * * * *')).toEqual([10]);
    expect(fireTimesBetween('0 */25 * * *', 'UTC', new Date('2026-01-01T00:00:00Z'), new Date('2026-01-03T00:00:00Z')).map((d) => d.getUTCHours())).toEqual([0, 0]);
  });

  it('refuses the syntax of other dialects (Quartz ? L W #, croner +, cronie ~), naming it', () => {
    const cases: Array<[string, RegExp]> = [
      ['0 0 ? * 1', /day-of-month field '\?': '\?' \(any\) is Quartz syntax, not cron's: write \*$/],
      ['0 0 L * *', /'L' \(last day, nearest weekday\) is Quartz syntax/],
      ['0 0 15W * *', /'15W' \(last day, nearest weekday\) is Quartz syntax/],
      ['0 0 * * 5L', /'5L' \(last day, nearest weekday\) is Quartz syntax/],
      ['0 0 * * mon#2', /'#' \(nth weekday of the month\) is Quartz syntax/],
      ['0 0 1 * +1', /'\+' is croner syntax, not cron's$/],
      ['0~30 * * * *', /'~' \(a random value\) is cronie's own, not supported: pick a value$/],
    ];
    for (const [expr, reason] of cases) expect(problem(expr), expr).toMatch(reason);
  });

  it('refuses a reversed range, which cron reads as nothing, and says how to wrap around', () => {
    expect(problem('0 22-2 * * *')).toBe(
      "invalid cron expression '0 22-2 * * *': hour field '22-2': the range 22-2 is reversed, and cron selects nothing for it (write 22-23,0-2 to wrap around)",
    );
    expect(problem('30-10 * * * *')).toMatch(/the range 30-10 is reversed/);
    // cron ends any range ending in 0 at 7: hours 5-0 are 5, 6 and 7 there; cronq says so and refuses it.
    expect(problem('0 5-0 * * *')).toBe("invalid cron expression '0 5-0 * * *': hour field '5-0': the range 5-0 is reversed; cron reads it as 5-7, which cronq refuses (write 5-23,0 to wrap around)");
  });

  it('suggests a wrap-around that names each value once: dec-jan is 12,1 and thu-mon 4-6,0-1', () => {
    const suggestion = (expr: string) => /\(write ([^ ]+) to wrap around\)$/.exec(problem(expr) ?? '')?.[1];
    expect(suggestion('0 0 * dec-jan *')).toBe('12,1');
    expect(suggestion('0 0 31-1 * *')).toBe('31,1');
    expect(suggestion('0 0 * * thu-mon')).toBe('4-6,0-1');
    expect(suggestion('0 0 * * sat-fri')).toBe('6,0-5');
    expect(suggestion('0 0 * * 7-fri')).toBe('0-5');
    expect(suggestion('59-0 * * * *')).toBe('59,0');
    // Each suggestion means what the range seems to say.
    expect(weekdaysOf(`0 0 * * ${suggestion('0 0 * * thu-mon')}`)).toEqual(['sun', 'mon', 'thu', 'fri', 'sat']);
  });

  it('keeps the step of a reversed range in the wrap-around it suggests, counting on past the top', () => {
    const suggestion = (expr: string) => /\(write ([^ ]+) to wrap around\)$/.exec(problem(expr) ?? '')?.[1];
    expect(suggestion('0 22-2/2 * * *')).toBe('22,0-2/2');
    expect(suggestion('50-10/15 * * * *')).toBe('50,5');
    expect(suggestion('0 0 * * thu-mon/2')).toBe('4-6/2,1');
    expect(suggestion('0 0 * nov-feb/2 *')).toBe('11,1');
    expect(minutesOf(`${suggestion('50-10/15 * * * *')} * * * *`)).toEqual([5, 50]);
    // With a step, cron does not end a range ending in 0 at 7: it reads 5-0/2 as no hour at all.
    expect(problem('0 5-0/2 * * *')).toBe(
      "invalid cron expression '0 5-0/2 * * *': hour field '5-0/2': the range 5-0 is reversed, and cron selects nothing for it (write 5-23/2 to wrap around)",
    );
  });

  it('refuses an empty list element, a step with no range before it, a step of 0 and a sign', () => {
    expect(problem('1, * * * *')).toMatch(/minute field '1,': a list element is empty$/);
    expect(problem('1,,2 * * * *')).toMatch(/minute field '1,,2': a list element is empty$/);
    expect(problem('5/10 * * * *')).toMatch(/minute field '5\/10': a step needs a range before it \('\*\/10' or 'a-b\/10'\), as in cron$/);
    expect(problem('*/0 * * * *')).toMatch(/minute field '\*\/0': a step must be 1 or more$/);
    expect(problem('*/x * * * *')).toMatch(/a step must be a whole number, got 'x'$/);
    expect(problem('-1 * * * *')).toMatch(/minute field '-1': expected a number, got '-1'$/);
  });

  it('separates fields by blanks and tabs alone, and refuses any other character in one line', () => {
    expect(problem('0\t0 *  * *')).toBeNull();
    expect(problem('0\u00a00 * * * *')).toBe('invalid cron expression "0\u00a00 * * * *": holds U+00A0, which cron does not read (only blanks and tabs separate fields)');
    const newline = problem('0 0\n* * 8')!;
    expect(newline).toBe('invalid cron expression "0 0\\n* * 8": holds U+000A, which cron does not read (only blanks and tabs separate fields)');
    expect(newline).not.toContain('\n');
  });

  it('reads leading zeros as cron does, and bounds every part of a message', () => {
    expect(weekdaysOf('0 0 * * 0000000007')).toEqual(['sun']);
    expect(problem(`5/${'9'.repeat(900)} * * * *`)!.length).toBeLessThan(400);
    expect(problem(`${'1'.repeat(900)}-2 * * * *`)!.length).toBeLessThan(400);
  });

  it("reads a step's leading zeros as cron does: */0000000005 is every five minutes", () => {
    expect(minutesOf('*/0000000005 * * * *')).toEqual([0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55]);
    expect(minutesOf('0-30/00000000010 * * * *')).toEqual([0, 10, 20, 30]);
    expect(weekdaysOf('0 0 * * 1-5/0000000002')).toEqual(['mon', 'wed', 'fri']);
  });

  it('refuses a step of ten digits or more, which cron cuts to 32 bits (*/4294967297 is every minute there)', () => {
    expect(problem('*/4294967297 * * * *')).toBe(
      "invalid cron expression '*/4294967297 * * * *': minute field '*/4294967297': a step must be at most 999999999 (cron cuts a longer number to 32 bits)",
    );
    expect(problem('*/2147483648 * * * *')).toMatch(/a step must be at most 999999999/);
    expect(problem('5-10/2147483647 * * * *')).toMatch(/a step must be at most 999999999/);
    expect(problem(`*/${'9'.repeat(900)} * * * *`)!.length).toBeLessThan(400);
    expect(minutesOf('*/999999999 * * * *')).toEqual([0]);
    expect(minutesOf('*/000000000000090 * * * *')).toEqual([0]);
  });

  it('reads nothing past 1,000 characters and quotes only the start of a long text', () => {
    const long = `${'1,'.repeat(1000)}1 * * * *`;
    const refused = problem(long)!;
    expect(refused).toMatch(/^invalid cron expression "1,1,.*…": longer than 1000 characters$/);
    expect(refused.length).toBeLessThan(200);
    // A list of every minute is well within it.
    expect(problem(`${Array.from({ length: 60 }, (_, i) => i).join(',')} * * * *`)).toBeNull();
  });
});
