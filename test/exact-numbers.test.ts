import { describe, expect, it } from 'vitest';
import { decimalValue, inexactNumber } from '../src/cli/exactNumbers.ts';

describe('payload numbers that would be stored changed', () => {
  it.each([
    ['{"price":19.999999999999999}', '19.999999999999999 at character 10 would be stored as 20'],
    ['{"big":123456789012345678901234567890.5}', '123456789012345678901234567890.5 at character 8 would be stored as 1.2345678901234568e+29'],
    ['[1.0000000000000001]', '1.0000000000000001 at character 2 would be stored as 1'],
    ['[9007199254740993]', '9007199254740993 at character 2 would be stored as 9007199254740992'],
    ['[1e-400]', '1e-400 at character 2 would be stored as 0'],
    ['[0.1000000000000000000000000000001]', '0.1000000000000000000000000000001 at character 2 would be stored as 0.1'],
  ])('%s is refused naming the number, its place and what it would become', (json, named) => {
    expect(inexactNumber(json)).toBe(`the number ${named} (JSON numbers are read as doubles; pass it as a string)`);
  });

  it('negative zero is refused: JSON.stringify writes it as 0', () => {
    for (const json of ['-0', '[-0.0]', '{"a":-0e7}']) expect(inexactNumber(json), json).toMatch(/^the number -0(\.0|e7)? at character \d+ would be stored as 0 \(JSON text is written without negative zero; write 0\)$/);
  });

  it('a number out of range is refused as before', () => {
    expect(inexactNumber('{"amount":1e400}')).toBe('the number 1e400 at character 11 is out of range (JSON numbers are read as doubles)');
  });

  it('a refused number is quoted at most 40 characters long', () => {
    const message = inexactNumber(`[1.${'0'.repeat(1000)}1]`)!;
    expect(message).toBe(`the number 1.${'0'.repeat(38)}… at character 2 would be stored as 1 (JSON numbers are read as doubles; pass it as a string)`);
  });
});

describe('payload numbers stored as written', () => {
  it('accepts every spelling of a value a double holds as written: trailing zeros, exponents, shortest forms', () => {
    expect(inexactNumber('[1.50,1.5e0,15e-1,150E-2,0.1,-0.5,0,0.0,0e5,1e300,1e21,5e-324,9007199254740992,-9007199254740992,0.30000000000000004]')).toBeNull();
    expect(new Set(['1.5', '1.50', '1.5e0', '15e-1', '0.15e+1', '150E-2'].map(decimalValue))).toEqual(new Set(['15e-1']));
  });

  it('never reads a number inside a string, escaped quotes included', () => {
    expect(inexactNumber('{"note":"19.999999999999999 and -0","x":"\\"1e400"}')).toBeNull();
  });

  it('checks a 3 MB payload of 300,000 numbers, and numbers of a million digits, in one linear pass', () => {
    const many = `[${Array.from({ length: 300_000 }, (_, i) => `${i}.${i % 97}5`).join(',')}]`;
    expect(inexactNumber(many)).toBeNull();
    // 1 written with a million zeros either side of it: the same value, accepted.
    expect(inexactNumber(`[1.${'0'.repeat(1_000_000)}, 0.${'0'.repeat(1_000_000)}1e1000001]`)).toBeNull();
    expect(inexactNumber(`[1.${'0'.repeat(1_000_000)}1]`)).toMatch(/would be stored as 1 /);
  });
});
