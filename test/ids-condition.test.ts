import { describe, expect, it } from 'vitest';
import { idsCondition } from '../src/store/sql.ts';

describe('idsCondition', () => {
  it('writes a run of three or more consecutive ids as one range', () => {
    expect(idsCondition([5, 6, 7, 8])).toBe('id BETWEEN 5 AND 8');
  });

  it('writes ids standing alone, and runs of two, as one IN list', () => {
    expect(idsCondition([3, 9, 10, 20])).toBe('id IN (3, 9, 10, 20)');
  });

  it('joins ranges and the IN list with OR, sorting the ids and dropping repeats', () => {
    expect(idsCondition([12, 1, 2, 3, 40, 11, 10, 3, 99])).toBe('(id BETWEEN 1 AND 3 OR id BETWEEN 10 AND 12 OR id IN (40, 99))');
  });

  it('holds for exactly the ids given', () => {
    const ids = [1, 2, 3, 7, 9, 10, 11, 12, 30, 31];
    const condition = idsCondition(ids);
    const holds = (id: number) =>
      condition
        .replace(/^\(|\)$/g, '')
        .split(' OR ')
        .some((part) => {
          const range = /^id BETWEEN (\d+) AND (\d+)$/.exec(part);
          if (range) return id >= Number(range[1]) && id <= Number(range[2]);
          return part.replace(/^id IN \(|\)$/g, '').split(', ').map(Number).includes(id);
        });
    expect(Array.from({ length: 40 }, (_, id) => id).filter(holds)).toEqual(ids);
  });

  it('holds for no row given no ids, and refuses anything but whole numbers, which it writes unescaped', () => {
    expect(idsCondition([])).toBe('FALSE');
    expect(() => idsCondition([1.5, 2.5, 3.5])).toThrow(TypeError);
    expect(() => idsCondition([Number.NaN])).toThrow(TypeError);
    expect(() => idsCondition(['1) OR (1=1' as unknown as number])).toThrow(TypeError);
  });
});
