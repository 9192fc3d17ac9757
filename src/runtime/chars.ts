/**
 * Text lengths as MySQL and MariaDB count them. A VARCHAR(n) of utf8mb4 holds n
 * characters (code points), where a JS string's `length` counts UTF-16 units: two for
 * each character outside the Basic Multilingual Plane, such as an emoji. Checking a
 * column's limit against `length` refused values the column holds.
 */

/**
 * How many characters (code points) `text` holds: a surrogate pair counts once, a lone
 * surrogate once (the driver writes it as one character). Linear, allocates nothing.
 */
export function charLength(text: string): number {
  let n = text.length;
  for (let i = 0; i < text.length - 1; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        n--;
        i++;
      }
    }
  }
  return n;
}

/**
 * True when `text` holds more than `max` characters (code points), as a VARCHAR(max)
 * counts them. Counts only when `length` alone cannot tell (between max and 2·max units).
 */
export function longerThanChars(text: string, max: number): boolean {
  if (text.length <= max) return false;
  if (text.length > 2 * max) return true;
  return charLength(text) > max;
}
