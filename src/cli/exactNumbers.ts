/**
 * The JSON text a user typed is stored as JSON.stringify writes what JSON.parse read: every
 * number becomes a double, written back in its shortest round-trip form. A number whose
 * decimal value that changes is refused rather than stored changed: `1e400` (Infinity,
 * written as `null`), `9007199254740993` (…992), `19.999999999999999` (20), `-0` (0).
 * Numbers that differ only in how they are written (`1.50`, `1.5e0`, `15e-1`, for 1.5)
 * are the same value and pass. One pass over the text, strings skipped; each number is
 * compared in time linear in its length, never through BigInt or a big decimal.
 */

/** A JSON number token (the text has parsed, so whatever starts with - or a digit outside a string is one). */
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

/** Up to 15 digits: every such integer is a double exactly, and written back as it is. */
const PLAIN_SMALL_INTEGER = /^-?[1-9][0-9]{0,14}$|^0$/;

/** How many characters of a refused number a message quotes. */
const SHOWN_MAX = 40;

/** Why a number of `json` would not be stored as written, or null: names it (cut) and its place. */
export function inexactNumber(json: string): string | null {
  for (let i = 0; i < json.length; i++) {
    const ch = json.charCodeAt(i);
    if (ch === 0x22) {
      // A string: skip to its closing quote, escapes included.
      for (i++; i < json.length && json.charCodeAt(i) !== 0x22; i++) if (json.charCodeAt(i) === 0x5c) i++;
      continue;
    }
    if (ch !== 0x2d && (ch < 0x30 || ch > 0x39)) continue;
    NUMBER.lastIndex = i;
    const token = NUMBER.exec(json)?.[0];
    if (token === undefined) continue;
    if (!PLAIN_SMALL_INTEGER.test(token)) {
      const shown = token.length > SHOWN_MAX ? `${token.slice(0, SHOWN_MAX)}…` : token;
      const value = Number(token);
      if (!Number.isFinite(value)) return `the number ${shown} at character ${i + 1} is out of range (JSON numbers are read as doubles)`;
      const stored = JSON.stringify(value);
      if (decimalValue(token) !== decimalValue(stored)) {
        const why = Object.is(value, -0) ? 'JSON text is written without negative zero; write 0' : 'JSON numbers are read as doubles; pass it as a string';
        return `the number ${shown} at character ${i + 1} would be stored as ${stored} (${why})`;
      }
    }
    i += token.length - 1;
  }
  return null;
}

const PARTS = /^(-?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?$/;

/**
 * The exact decimal value of a JSON number token, in one spelling per value: sign,
 * significant digits without leading or trailing zeros, exponent (`15e-1` for 1.5, `-0`
 * for any negative zero, `0` for zero). Linear in the token's length.
 */
export function decimalValue(token: string): string {
  const [, sign, whole, fraction = '', exponent = '0'] = PARTS.exec(token)!;
  const digits = whole + fraction;
  let first = 0;
  while (first < digits.length && digits.charCodeAt(first) === 0x30) first++;
  if (first === digits.length) return `${sign}0`;
  let end = digits.length;
  while (digits.charCodeAt(end - 1) === 0x30) end--;
  // Exact while |exponent| < 2^53: a token would need more characters than memory holds to
  // offset a larger one, and a larger one alone makes the double 0 or Infinity, refused anyway.
  const scale = Number(exponent) - fraction.length + (digits.length - end);
  return `${sign}${digits.slice(first, end)}e${scale}`;
}
