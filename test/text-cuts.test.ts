/**
 * Wherever cronq cuts text that came from a user (an error message, an entity key, a
 * table cell, the server's words about a row) to a limit, it cuts between characters:
 * an emoji straddling the limit is dropped whole, never halved into a lone surrogate
 * that the driver or a JSON reader would mangle. No database: each cut is pure.
 */
import { describe, expect, it } from 'vitest';
import { renderTable } from '../src/cli/textTable.ts';
import { boundedText, errorLine, thrownText } from '../src/runtime/errorText.ts';
import { enqueueTick, type TickWriter } from '../src/schedule/fanout.ts';
import { defineSchedule, defineTask } from '../src/index.ts';
import { parseDuration } from '../src/duration.ts';
import { parseIsoInstant } from '../src/cli/instant.ts';
import { shownText } from '../src/shownText.ts';
import type { RefusedJob } from '../src/enqueue/write.ts';
import { refusalReason } from '../src/store/refusal.ts';
import { driverFailure } from '../src/db/client.ts';

const EMOJI = '😀';
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** `n` letters then emoji, so that a cut after `n` + 1 units would split the first emoji. */
const straddling = (n: number, emoji = 200) => `${'x'.repeat(n)}${EMOJI.repeat(emoji)}`;

describe('cutting user text to a limit', () => {
  it('boundedText leaves no lone surrogate when masking passwords shrinks the text it cut', () => {
    const urls = Array.from({ length: 3 }, () => `mysql://u:${'p'.repeat(200)}@h/db `).join('');
    // The first cut (max + MASK_WINDOW units) lands inside an emoji; masking then shrinks the rest below max.
    const text = `${urls}${straddling(2000 + 256 - urls.length - 1)}`;
    expect(boundedText(text, 2000)).not.toMatch(LONE_SURROGATE);
  });

  it('errorLine cuts the first line of an error to its limit between characters', () => {
    const line = errorLine(new Error(straddling(199 - 'Error: '.length)), 200);
    expect(line).not.toMatch(LONE_SURROGATE);
    expect(line.length).toBeLessThanOrEqual(200);
  });

  it('errorLine marks a cut with … and stays within its limit; a line that fits is whole', () => {
    const cut = errorLine(new Error('x'.repeat(500)), 200);
    expect(cut).toBe(`Error: ${'x'.repeat(200 - 'Error: '.length - 1)}…`);
    expect(cut).toHaveLength(200);
    const straddled = errorLine(new Error(straddling(198 - 'Error: '.length)), 200);
    expect(straddled).toMatch(/x…$/);
    expect(straddled.length).toBeLessThanOrEqual(200);
    expect(errorLine(new Error('x'.repeat(200 - 'Error: '.length)), 200)).toBe(`Error: ${'x'.repeat(193)}`);
    expect(errorLine(new Error(`short\n${'y'.repeat(500)}`), 200)).toBe('Error: short');
  });

  it('thrownText cuts the line a person reads between characters', () => {
    expect(thrownText(new Error(straddling(298)), 300)).not.toMatch(LONE_SURROGATE);
  });

  it('a table cell cut to its column width keeps whole emoji', () => {
    const table = renderTable([{ header: 'h', maxWidth: 5 }], [[`abc${EMOJI}x`]]);
    expect(table).not.toMatch(LONE_SURROGATE);
  });

  it("the server's words about a refused row are cut between characters", () => {
    const reason = refusalReason('{}', Object.assign(new Error(straddling(199)), { errno: 1062 }));
    expect(reason).not.toMatch(LONE_SURROGATE);
  });

  it('a fan-out entity refused for a long key is named by a cut that keeps whole emoji', async () => {
    const schedule = defineSchedule({
      name: 'a',
      cron: '0 3 * * *',
      timezone: 'UTC',
      period: 'day',
      async *jobs() {
        yield { key: straddling(57, 300) }; // `a:` + 57 letters: the first emoji straddles unit 60
      },
      handle() {},
    });
    const refused: RefusedJob[] = [];
    const writer = { insertJobs: async () => [], maxAllowedPacket: async () => 64 * 1024 * 1024 } as unknown as TickWriter;
    await enqueueTick(writer, schedule, { scheduledAt: new Date('2026-01-01T03:00:00Z'), periodKey: '2026-01-01' }, { onRefused: (r) => void refused.push(r) });
    expect(refused).toHaveLength(1);
    expect(refused[0].key).not.toMatch(LONE_SURROGATE);
  });
});

describe("cutting the driver's words", () => {
  it('driverFailure cuts a server message to its first 500 units between characters', () => {
    const failure = driverFailure(Object.assign(new Error(`Duplicate entry '${straddling(499 - "Duplicate entry '".length)}' for key 'k'`), { errno: 1062 }));
    expect(failure?.message).not.toMatch(LONE_SURROGATE);
    expect(failure?.message.length).toBeLessThanOrEqual(500);
  });
});

describe('a refused value quoted in a message', () => {
  const refusal = (refuse: () => unknown) => {
    try {
      refuse();
    } catch (error) {
      return (error as Error).message;
    }
    throw new Error('not refused');
  };

  it('shows at most 64 units of it, one fewer rather than half an emoji, … when cut', () => {
    expect(shownText('short')).toBe('short');
    expect(shownText('x'.repeat(64))).toBe('x'.repeat(64));
    expect(shownText('x'.repeat(65))).toBe(`${'x'.repeat(64)}…`);
    expect(shownText(straddling(63))).toBe(`${'x'.repeat(63)}…`);
  });

  it('a duration, an instant, a task name and a queue are cut the same way', () => {
    for (const message of [
      refusal(() => parseDuration(straddling(63), 'leaseMs')),
      refusal(() => parseIsoInstant(straddling(63), '--run-at')),
      refusal(() => defineTask({ name: straddling(63), handle() {} })),
      refusal(() => defineTask({ name: 'ok', queue: straddling(63), handle() {} })),
    ]) {
      expect(message).not.toMatch(LONE_SURROGATE);
      expect(message).toContain(`${'x'.repeat(63)}…`);
    }
  });
});
