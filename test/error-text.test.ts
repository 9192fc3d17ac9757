import { describe, expect, it } from 'vitest';
import { parseDatabaseUrl, maskUrl } from '../src/db/url.ts';
import { boundedText, ERROR_TEXT_MAX, errorText } from '../src/runtime/errorText.ts';

/** Generous on purpose: the quadratic masker took 1.8 s for 50k characters and 127 s for 400k. */
const LINEAR_BOUND_MS = 2_000;

function timed<T>(work: () => T): { value: T; ms: number } {
  const startedAt = performance.now();
  const value = work();
  return { value, ms: performance.now() - startedAt };
}

describe('maskUrl', () => {
  it('masks the password of a mysql URL and leaves the rest', () => {
    expect(maskUrl('cannot reach mysql://u:p@h:3306/db now')).toBe('cannot reach mysql://u:***@h:3306/db now');
    expect(maskUrl('a mysql://root@h/db without password')).toBe('a mysql://root@h/db without password');
    expect(maskUrl('https://example.com/a:b')).toBe('https://example.com/a:b');
  });

  it("masks a password holding a space, '@', '/', ':' or '#', whatever the URL's shape", () => {
    for (const password of ['p ss', 'p@ss', 'p/ss', 'p:ss', 'p#ss', 'a b@c/d:e#f']) {
      const masked = maskUrl(`failed: mysql://user:${password}@db.example:3306/app (code 1)`);
      expect(masked).toBe('failed: mysql://user:***@db.example:3306/app (code 1)');
    }
    expect(maskUrl('x mysql://user:s3cr3t pass@host/db\nnext line has an @ sign')).toBe('x mysql://user:***@host/db\nnext line has an @ sign');
  });

  it('masks a parsed DATABASE_URL password wherever it appears, even outside a URL', () => {
    const target = parseDatabaseUrl('mysql://app:hunter%20two@127.0.0.1:3306/cronq');
    expect(target.password).toBe('hunter two');
    expect(target.masked).not.toContain('hunter');
    expect(maskUrl('login with hunter two failed; encoded hunter%20two')).toBe('login with *** failed; encoded ***');
  });

  it('a URL that does not parse is reported with its password masked', () => {
    expect(() => parseDatabaseUrl('mysql://u:pa ss@[bad/db')).toThrow(/mysql:\/\/u:\*\*\*@\[bad\/db/);
    try {
      parseDatabaseUrl('mysql://u:pa ss@[bad/db');
    } catch (error) {
      expect((error as Error).message).not.toContain('pa ss');
    }
  });

  it('is linear on adversarial text: long scheme-like runs, scheme://user: with no @, many ://', () => {
    const inputs = [
      'a'.repeat(1_000_000),
      'a0+.-'.repeat(200_000),
      `${'a'.repeat(500_000)}://user:${'x'.repeat(500_000)}`,
      'mysql://user:'.repeat(80_000),
      'a://b:'.repeat(200_000),
      `${'a://b:c'.repeat(100_000)}@`,
      `${'://'.repeat(300_000)}`,
      `${'x://u:p\n'.repeat(120_000)}@`,
    ];
    for (const input of inputs) {
      const { value, ms } = timed(() => maskUrl(input));
      expect(ms).toBeLessThan(LINEAR_BOUND_MS);
      expect(value.length).toBeLessThanOrEqual(input.length + 3);
    }
  });
});

describe('errorText', () => {
  it('cuts a 1 MB message to the bound before masking, and still masks a password near the cut', () => {
    const huge = new Error(`upstream said: ${'a0+.-'.repeat(200_000)}`);
    const { value, ms } = timed(() => errorText(huge));
    expect(ms).toBeLessThan(LINEAR_BOUND_MS);
    expect(value.length).toBeLessThanOrEqual(ERROR_TEXT_MAX);
    expect(value).toMatch(/^Error: upstream said: a0\+\.-.*… \[truncated\]$/s);
    const straddling = `${'x'.repeat(ERROR_TEXT_MAX - 20)} mysql://u:secret-password@h/db ${'y'.repeat(10_000)}`;
    expect(boundedText(straddling)).not.toContain('secret');
  });

  it('gives a readable, bounded reason for any thrown value', () => {
    const revoked = Proxy.revocable({}, {});
    revoked.revoke();
    const hostileGetter = new (class extends Error {
      override get message(): string {
        throw new Error('no');
      }
    })();
    const cases: Array<[unknown, RegExp]> = [
      [new Error('boom'), /^Error: boom$/],
      [new TypeError('bad'), /^TypeError: bad$/],
      [Object.assign(new Error('Duplicate entry'), { code: 'ER_DUP_ENTRY' }), /^ER_DUP_ENTRY: Duplicate entry$/],
      [Object.create(null), /^non-error thrown: an object without a message$/],
      [{ weird: true }, /^non-error thrown: an object with keys weird$/],
      [{ toString: () => { throw new Error('no'); } }, /^non-error thrown: an object with keys toString$/],
      [{ message: 'plain object', code: 'E_X' }, /^E_X: plain object$/],
      [revoked.proxy, /^non-error thrown: an object that cannot be read$/],
      [new Proxy({}, { get: () => { throw new Error('trap'); }, getPrototypeOf: () => { throw new Error('trap'); } }), /^non-error thrown: an object/],
      [hostileGetter, /^Error: \(no readable message\)$/],
      [Symbol('why'), /^non-error thrown: Symbol\(why\)$/],
      [null, /^non-error thrown: null$/],
      [undefined, /^non-error thrown: undefined$/],
      [42, /^non-error thrown: 42$/],
      ['x'.repeat(1_000_000), /^non-error thrown: x+… \[truncated\]$/],
      [Symbol('s'.repeat(100_000)), /^non-error thrown: Symbol\(s+… \[truncated\]$/],
      [new (class Custom { toString() { return 'custom text'; } })(), /^non-error thrown: custom text$/],
    ];
    for (const [thrown, expected] of cases) {
      const text = errorText(thrown);
      expect(text).toMatch(expected);
      expect(text.length).toBeLessThanOrEqual(ERROR_TEXT_MAX);
    }
  });

  it('reads a thrown value that is cheap to make but costly to print in time bounded by the text: a huge bigint, a huge sparse or typed array', () => {
    // 2n ** 30_000_000n is one shift to make; its decimal digits took 5 s, and new Array(4e8) joined to 400 MB of commas.
    const cases: Array<[unknown, RegExp]> = [
      [2n ** 30_000_000n, /^non-error thrown: a bigint of 30000001 bits$/],
      [-(2n ** 30_000_000n), /^non-error thrown: a bigint of 30000001 bits$/],
      [new Array(400_000_000), /^non-error thrown: an array of 400000000 items$/],
      [new Uint8Array(400_000_000), /^non-error thrown: an array of 400000000 items$/],
      [[new Array(400_000_000)], /^non-error thrown: an array of 1 item$/],
      [10n ** 100n, /^non-error thrown: 10{100}$/],
      [10n ** 1999n, /^non-error thrown: 10+… \[truncated\]$/],
      [-7n, /^non-error thrown: -7$/],
    ];
    for (const [thrown, expected] of cases) {
      const { value, ms } = timed(() => errorText(thrown));
      expect(value).toMatch(expected);
      expect(ms).toBeLessThan(LINEAR_BOUND_MS / 4);
    }
  });

  it('reads a typed array behind a Proxy or under a length of its own in time bounded by the text, never listing its indexes', () => {
    // Object.keys listed every index: a 1e6-byte Uint8Array behind new Proxy(…, {}) took 5 s, 1e7 over a minute.
    const shadowed = Object.defineProperty(new Uint8Array(10_000_000), 'length', { value: Number.NaN });
    const cases: Array<[unknown, RegExp]> = [
      [new Proxy(new Uint8Array(10_000_000), {}), /^non-error thrown: an object behind a Proxy$/],
      [shadowed, /^non-error thrown: an array of 10000000 items$/],
      [new Proxy({ weird: true }, {}), /^non-error thrown: an object behind a Proxy$/],
      [new Proxy(new Array(400_000_000), {}), /^non-error thrown: an array of 400000000 items$/],
      [new Proxy(new Error('boom'), {}), /^Error: boom$/],
    ];
    for (const [thrown, expected] of cases) {
      const { value, ms } = timed(() => errorText(thrown));
      expect(value).toMatch(expected);
      expect(ms).toBeLessThan(LINEAR_BOUND_MS / 4);
    }
  });

  it('never splits a surrogate pair when it cuts', () => {
    const text = errorText(new Error('😀'.repeat(5_000)));
    const beforeMarker = text.slice(0, text.indexOf('…'));
    expect(beforeMarker).not.toMatch(/[\uD800-\uDBFF]$/);
  });
});
