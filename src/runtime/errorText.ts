/**
 * The one way cronq turns something thrown (by a handler, an effect, a parse, the
 * driver) into text: `errorText` for `last_error`, `failure_reason` and log fields,
 * `thrownText` for the one line a person reads on stderr.
 *
 * Whatever was thrown, the answer is readable, at most ERROR_TEXT_MAX characters, free
 * of URL passwords, and made in time linear in that bound: user text is cut before it
 * is masked, and a thrown value is only ever read through guards (a Proxy, a getter or
 * a `toString` that throws, an object without a prototype all give a text, never an
 * exception). Never a stack (paths and values leak there) and never drizzle's wrapper
 * of a failed statement (its message is the SQL with every parameter, payloads included).
 */
import { types } from 'node:util';
import { driverError } from '../db/client.ts';
import { MASK_WINDOW, maskUrl } from '../db/url.ts';

/** Most characters of an error text (last_error, failure_reason, log fields). */
export const ERROR_TEXT_MAX = 2000;
/** Most characters of a log field about a failed statement (the driver's code and message). */
export const DB_ERROR_TEXT_MAX = 500;
/** Most characters of a stack, where one is shown at all (uncaught errors, LOG_LEVEL=debug). */
export const STACK_TEXT_MAX = 4000;
const TRUNCATED = '… [truncated]';

/**
 * `Name: message` for an error (`CODE: message` for a driver error, whose name is plain
 * `Error`), `non-error thrown: …` for anything else; at most `max` characters.
 */
export function errorText(thrown: unknown, max = ERROR_TEXT_MAX): string {
  return boundedText(rawText(thrown, max + MASK_WINDOW), max);
}

/**
 * `text` cut to `max` characters (ending `… [truncated]` when cut), URL passwords masked.
 * Cut first, with room for a password straddling the cut, so masking is linear in `max`
 * however long `text` is; a cut never splits a surrogate pair.
 */
export function boundedText(text: string, max = ERROR_TEXT_MAX): string {
  const cut = text.length > max + MASK_WINDOW;
  const head = maskUrl(cut ? sliceChars(text, max + MASK_WINDOW) : text);
  if (!cut && head.length <= max) return head;
  return `${sliceChars(head, Math.max(0, max - TRUNCATED.length))}${TRUNCATED}`;
}

/** The first `n` UTF-16 units of `text`, one fewer if that would split a surrogate pair. */
export function sliceChars(text: string, n: number): string {
  if (text.length <= n) return text;
  const last = text.charCodeAt(n - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? n - 1 : n);
}

function rawText(thrown: unknown, limit: number): string {
  const value = guarded(() => driverError(thrown)) ?? thrown;
  switch (typeof value) {
    case 'string':
      return `non-error thrown: ${sliceChars(value, limit)}`;
    case 'object':
    case 'function':
      return value === null ? 'non-error thrown: null' : objectText(value, limit);
    case 'symbol':
      return `non-error thrown: ${guarded(() => sliceChars(value.toString(), limit)) ?? 'a symbol'}`;
    case 'bigint':
      return `non-error thrown: ${bigintText(value, limit)}`;
    default:
      return `non-error thrown: ${String(value)}`;
  }
}

/**
 * A bigint's decimal digits when it has at most `limit` of them, else its size: making
 * decimal digits takes time super-linear in a bigint's size (the digits of
 * `2n ** 30_000_000n`, one shift to make, took 5 s), hex digits linear time.
 */
function bigintText(value: bigint, limit: number): string {
  const magnitude = value < 0n ? -value : value;
  if (magnitude < 10n ** BigInt(limit)) return value.toString();
  const hex = magnitude.toString(16);
  return `a bigint of ${(hex.length - 1) * 4 + Number.parseInt(hex[0], 16).toString(2).length} bits`;
}

function objectText(value: object, limit: number): string {
  const message = stringProperty(value, 'message', limit);
  const isError = guarded(() => value instanceof Error) === true;
  if (message !== undefined || isError) {
    const name = stringProperty(value, 'name', 100);
    const code = stringProperty(value, 'code', 100);
    const text = message ?? '(no readable message)';
    const label = name && name !== 'Error' ? name : code && !text.includes(code) ? code : 'Error';
    return `${label}: ${text}`;
  }
  // Only its length: joining an array's items (a sparse `new Array(4e8)`, a typed array)
  // or listing its indexes takes time in its length, not in the bound.
  const items = listLength(value);
  if (items !== undefined) return `non-error thrown: an array of ${items} item${items === 1 ? '' : 's'}`;
  const custom = guarded(() => {
    const toString = (value as { toString?: unknown }).toString;
    return typeof toString === 'function' && toString !== Object.prototype.toString && toString !== Function.prototype.toString && toString !== Array.prototype.toString
      ? sliceChars(String(toString.call(value)), limit)
      : undefined;
  });
  if (custom !== undefined) return `non-error thrown: ${custom}`;
  if (typeof value === 'function') return 'non-error thrown: a function';
  // A Proxy's keys are its target's, all of them (a typed array's every index): never listed.
  if (types.isProxy(value)) {
    return guarded(() => Reflect.getPrototypeOf(value) ?? true) === undefined ? 'non-error thrown: an object that cannot be read' : PROXY_TEXT;
  }
  const keys = guarded(() => Object.keys(value).slice(0, 10).map((k) => sliceChars(k, 40)));
  if (keys === undefined) return 'non-error thrown: an object that cannot be read';
  return keys.length === 0 ? 'non-error thrown: an object without a message' : `non-error thrown: an object with keys ${keys.join(', ')}`;
}

const PROXY_TEXT = 'non-error thrown: an object behind a Proxy';

/** The typed arrays' own `length` getter, which reads the array itself, whatever `length` an instance shadows it with. */
const typedArrayLength = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype), 'length')?.get;

/**
 * How many items an array or a typed array has (a typed array's true length, not a
 * `length` of its own), else undefined: JSON, String() and Object.keys visit each of
 * them, so it is read alone. Never throws.
 */
function listLength(value: unknown): number | undefined {
  const items = guarded(() =>
    Array.isArray(value) ? Number(value.length) : types.isTypedArray(value) && typedArrayLength ? Number(typedArrayLength.call(value)) : undefined,
  );
  return items !== undefined && Number.isFinite(items) ? items : undefined;
}

/** `value[key]` when it is a string or a number (cut to `limit`), else undefined; never throws. */
function stringProperty(value: object, key: string, limit: number): string | undefined {
  return guarded(() => {
    const v = (value as Record<string, unknown>)[key];
    if (typeof v === 'string') return sliceChars(v, limit);
    if (typeof v === 'number') return String(v);
    return undefined;
  });
}

function guarded<T>(read: () => T): T | undefined {
  try {
    return read();
  } catch {
    return undefined;
  }
}

/**
 * The first line of errorText(thrown), at most `max` characters, `…` included when it
 * is cut (between characters, as thrownText cuts): the one-line reason a log field or a
 * ledger note holds, visibly cut when it is.
 */
export function errorLine(thrown: unknown, max: number): string {
  return firstLineCut(errorText(thrown), max);
}

/** The first line of `text`, without a trailing carriage return or spaces. */
export function firstLine(text: string): string {
  const end = text.indexOf('\n');
  return (end === -1 ? text : text.slice(0, end)).trimEnd();
}

/**
 * One readable line for whatever was thrown, for a person (a schedule file that failed
 * to load): an Error's first message line, else `threw a non-Error value: ` and the value
 * as JSON (`{"weird":true}`), or as String() when JSON cannot hold it; at most `maxChars`
 * (the cut marked with …). Never throws, like errorText.
 */
export function thrownText(value: unknown, maxChars = 300): string {
  // Guarded too: `instanceof` reads the prototype, which a revoked Proxy refuses.
  if (guarded(() => value instanceof Error) === true) {
    const error = value as Error;
    const message = guarded(() => String(error.message)) ?? '';
    return firstLineCut(message.trim() === '' ? (guarded(() => String(error.name)) ?? 'Error') : message, maxChars);
  }
  const shown =
    (types.isProxy(value) && !isListLike(value) ? valueText(value, maxChars) : boundedJson(value, maxChars)) ??
    (typeof value === 'bigint' || isListLike(value) ? valueText(value, maxChars) : guarded(() => String(value))) ??
    guarded(() => Object.prototype.toString.call(value)) ??
    'an unprintable value';
  return firstLineCut(`threw a non-Error value: ${shown}`, maxChars);
}

const NON_ERROR = 'non-error thrown: ';

/** errorText's reading of a value that is not an Error (`an array of N items`), without its `non-error thrown: `. */
function valueText(value: unknown, max: number): string {
  const text = errorText(value, max);
  return text.startsWith(NON_ERROR) ? text.slice(NON_ERROR.length) : text;
}

/** An array or a typed array: JSON and String() visit each of its items. */
function isListLike(value: unknown): boolean {
  return listLength(value) !== undefined;
}

/**
 * JSON.stringify(value) as far as about its first `max` characters, in time bounded by
 * `max`: a string is cut there, an array or typed array longer than the room left gives
 * only its first items (JSON visits every index, a typed array's as keys), and whatever
 * comes once the text is past `max` is left out (firstLineCut cuts before it anyway).
 * Undefined when JSON cannot hold the value (a cycle, a bigint, a throwing toJSON).
 */
function boundedJson(value: unknown, max: number): string | undefined {
  let room = max;
  return guarded(() =>
    JSON.stringify(value, (key: string, item: unknown) => {
      if (room < 0) return undefined;
      room -= key.length + 2;
      // A String object is written as its whole text, so it is cut as a string is.
      const text = typeof item === 'string' ? item : types.isStringObject(item) ? String.prototype.valueOf.call(item) : undefined;
      if (text !== undefined) {
        const cut = sliceChars(text, Math.max(0, room) + 1);
        room -= cut.length;
        return cut;
      }
      const length = listLength(item);
      // JSON lists a Proxy's keys (its target's, all of them) before the replacer sees any.
      if (length === undefined) return types.isProxy(item) && !Array.isArray(item) ? valueText(item, max) : item;
      const list = item as ArrayLike<unknown>;
      const shown = Math.ceil(Math.max(0, room) / 2) + 1;
      if (length <= shown && !types.isTypedArray(item)) return item;
      if (length <= shown) return Object.fromEntries(Array.from({ length }, (_, i) => [i, list[i]]));
      return Array.isArray(list) ? list.slice(0, shown) : Object.fromEntries(Array.from({ length: shown }, (_, i) => [i, list[i]]));
    }),
  );
}

function firstLineCut(text: string, maxChars: number): string {
  const line = firstLine(text);
  return line.length > maxChars ? `${sliceChars(line, maxChars - 1)}…` : line;
}

/**
 * The error worth showing a person: the driver's own, not drizzle's wrapper of a failed
 * statement (whose message is the SQL with every parameter, payloads included). Any
 * other error comes back as it is.
 */
export function shownError(error: unknown): unknown {
  return guarded(() => driverError(error)) ?? error;
}
