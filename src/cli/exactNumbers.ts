/**
 * The JSON text a user typed keeps its numbers only if JavaScript can hold them: JSON.parse
 * reads every number as a double, so `1e400` becomes Infinity (written back as `null`)
 * and `9007199254740993` becomes …992, silently. This finds the first such number in
 * JSON text that JSON.parse accepted. One pass over the text, strings skipped.
 */

/** A JSON number token (the text has parsed, so whatever starts with - or a digit outside a string is one). */
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

/** Why a number of `json` would not survive being read, or null: names it (cut) and its place. */
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
    const shown = token.length > 40 ? `${token.slice(0, 40)}…` : token;
    const value = Number(token);
    if (!Number.isFinite(value)) return `the number ${shown} at character ${i + 1} is out of range (JSON numbers are read as doubles)`;
    if (/^-?[0-9]+$/.test(token) && !Number.isSafeInteger(value) && BigInt(token) !== BigInt(value)) {
      return `the number ${shown} at character ${i + 1} cannot be kept exactly (integers beyond 2^53 are rounded; pass it as a string)`;
    }
    i += token.length - 1;
  }
  return null;
}
