/**
 * Telling "the server refused this row's content" apart from every other failure, and
 * saying in one line what is wrong with the row. A refusal is about one row (a lone
 * surrogate in its payload, JSON nested too deep, a value too long): the same statement
 * without that row would succeed, so a batch can be split to find it. Connection errors,
 * lock waits and the like are never refusals: they are outages and are retried as such.
 */
import { driverError } from '../db/client.ts';
import { firstLine, sliceChars } from '../runtime/errorText.ts';

/**
 * Server error numbers that reject a row for what it holds. mysql2 names errors with
 * MySQL's list, so MariaDB's 4025 (CONSTRAINT ... failed: the JSON CHECK) arrives under a
 * MySQL name that means something else; numbers do not mislead.
 */
const ROW_REFUSAL_ERRNOS = new Set([
  4025, // MariaDB ER_CONSTRAINT_FAILED: the payload's json_valid() CHECK
  3819, // MySQL ER_CHECK_CONSTRAINT_VIOLATED
  3140, // MySQL ER_INVALID_JSON_TEXT
  3141, // MySQL ER_INVALID_JSON_TEXT_IN_PARAM
  3144, // MySQL ER_INVALID_JSON_CHARSET
  3157, // MySQL ER_JSON_DOCUMENT_TOO_DEEP
  1406, // ER_DATA_TOO_LONG
  1366, // ER_TRUNCATED_WRONG_VALUE_FOR_FIELD (incorrect string value)
  1292, // ER_TRUNCATED_WRONG_VALUE
  1264, // ER_WARN_DATA_OUT_OF_RANGE
  1048, // ER_BAD_NULL_ERROR
]);

/** True when the server rejected a statement for the content of (one of) its rows. */
export function isRowRefusal(error: unknown): boolean {
  const e = driverError(error) as { errno?: number; sqlState?: string };
  if (typeof e?.errno !== 'number') return false;
  return ROW_REFUSAL_ERRNOS.has(e.errno) || (typeof e.sqlState === 'string' && e.sqlState.startsWith('22'));
}

/** Above this many levels of nesting, a refused payload is reported as too deep (MariaDB refuses 32, MySQL 100). */
const DEEP_PAYLOAD_LEVELS = 32;
const SERVER_REASON_MAX = 200;

/**
 * One line saying why the server refused a row whose payload is `payloadJson`: what is
 * wrong with the payload when that can be told (a lone UTF-16 surrogate, nesting too
 * deep), then the server's own words and error number. Never the payload itself.
 * Linear in the payload's length.
 */
export function refusalReason(payloadJson: string, error: unknown): string {
  const e = driverError(error) as { errno?: number; message?: string };
  const said = sliceChars(firstLine(e?.message ?? 'no message'), SERVER_REASON_MAX);
  const server = `server said: ${said}${typeof e?.errno === 'number' ? ` (errno ${e.errno})` : ''}`;
  const shape = payloadShape(payloadJson);
  if (shape.loneSurrogateAt !== null) {
    return `payload holds a lone UTF-16 surrogate (half of a character, such as a cut emoji) at character ${shape.loneSurrogateAt}, which is not valid Unicode; ${server}`;
  }
  if (shape.depth >= DEEP_PAYLOAD_LEVELS) {
    return `payload is JSON nested ${shape.depth} levels deep, deeper than the database accepts; ${server}`;
  }
  return server;
}

/**
 * Scans JSON text once: the offset of the first lone surrogate (raw, or written as a
 * `\uD800`-style escape, as JSON.stringify writes them) and the deepest nesting.
 */
export function payloadShape(json: string): { loneSurrogateAt: number | null; depth: number } {
  let depth = 0;
  let maxDepth = 0;
  let inString = false;
  let pendingHighAt = -1; // offset of a high surrogate still waiting for its low half
  let loneSurrogateAt: number | null = null;
  const unit = (code: number, at: number) => {
    const high = code >= 0xd800 && code <= 0xdbff;
    const low = code >= 0xdc00 && code <= 0xdfff;
    if (pendingHighAt >= 0 && !low && loneSurrogateAt === null) loneSurrogateAt = pendingHighAt;
    if (low && pendingHighAt < 0 && loneSurrogateAt === null) loneSurrogateAt = at;
    pendingHighAt = high ? at : -1;
  };
  for (let i = 0; i < json.length && loneSurrogateAt === null; i++) {
    const c = json.charCodeAt(i);
    if (inString) {
      if (c === 0x5c /* \ */) {
        if (json[i + 1] === 'u') {
          const code = Number.parseInt(json.slice(i + 2, i + 6), 16);
          unit(Number.isNaN(code) ? 0 : code, i);
          i += 5;
        } else {
          unit(0, i);
          i += 1;
        }
      } else {
        if (c === 0x22 /* " */) inString = false;
        unit(c, i);
      }
      continue;
    }
    unit(0, i);
    if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) maxDepth = Math.max(maxDepth, ++depth);
    else if (c === 0x5d || c === 0x7d) depth -= 1;
  }
  if (pendingHighAt >= 0 && loneSurrogateAt === null) loneSurrogateAt = pendingHighAt;
  return { loneSurrogateAt, depth: maxDepth };
}
