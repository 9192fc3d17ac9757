/**
 * A user's value as a message quotes it (a refused duration, instant, name or log level):
 * the start of it, never a whole megabyte someone passed, and never half an emoji.
 *
 * A leaf that imports nothing, so every module above the store may use it: logger.ts and
 * duration.ts included, which runtime/ imports and which therefore cannot import runtime/.
 */

/** How many UTF-16 units of a user's value a message shows. */
export const SHOWN_TEXT_MAX = 64;

/**
 * `text` as a message shows it: whole when it has at most `max` UTF-16 units, else its
 * first `max` (one fewer rather than half a surrogate pair) followed by `…`. Adds no quotes.
 */
export function shownText(text: string, max = SHOWN_TEXT_MAX): string {
  if (text.length <= max) return text;
  const last = text.charCodeAt(max - 1);
  return `${text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max)}…`;
}

/**
 * shownText for a value quoted inside a one-line message (`(got 'x')`): its line breaks
 * shown as `\x0a` and `\x0d` too, since each line of a command's error text is printed as
 * a line of its own (a LOG_LEVEL of `info\nwarn` read as two refusals). Other control
 * characters are escaped where the line is printed.
 */
export function shownInLine(text: string, max = SHOWN_TEXT_MAX): string {
  return shownText(text, max).replace(/[\n\r]/g, (c) => (c === '\n' ? '\\x0a' : '\\x0d'));
}

/**
 * What to show for a payload the server would not return (larger than its
 * max_allowed_packet: a job or dead letter's `payloadText` is null), in place of it.
 */
export function unreadablePayloadNote(bytes: number): string {
  return `(not readable here: ${bytes} bytes, larger than the server's max_allowed_packet; raise it to read the payload)`;
}

/** What to show for a stored time that is no instant (a zero date, written by hand with strict mode off). */
export const INVALID_TIME_TEXT = 'not a valid time';

/**
 * An instant as ISO 8601 UTC, or INVALID_TIME_TEXT for an Invalid Date: a DATETIME the
 * server returned as `0000-00-00 00:00:00` (a NULL or bad value written by hand with
 * strict mode off, or ALLOW_INVALID_DATES), which `toISOString` would throw on.
 */
export function instantText(date: Date): string {
  return Number.isNaN(date.getTime()) ? INVALID_TIME_TEXT : date.toISOString();
}

/**
 * A refused option's value as a message shows it, in a bounded line: a string quoted and
 * cut as shownText cuts it, another value by its JSON (`{}`, `[1]`) cut the same way, or by
 * its kind where JSON cannot write it (`a bigint`, `a function`, `an object` that holds
 * itself), as JSON.stringify would throw a TypeError from the message itself.
 */
export function shownValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(shownText(value));
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'symbol') return shownText(String(value));
  try {
    const json = JSON.stringify(value);
    return json === undefined ? String(value) : shownText(json);
  } catch {
    return typeof value === 'bigint' ? 'a bigint' : Array.isArray(value) ? 'an array' : 'an object';
  }
}
