/**
 * How a dead letter's `failure_reason` is summarised for triage: its first line, and
 * that line with the parts that differ per job (ids, numbers) replaced, so one cause
 * failing fifty jobs reads as one group.
 */
import { REASON_GROUP_MAX } from '../db/schema.ts';
import { firstLine, sliceChars } from '../runtime/errorText.ts';

const UUID = /\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi;
const HEX_LITERAL = /\b0x[0-9a-f]+\b/gi;
/** A standalone token of 8+ hex characters holding both a digit and a letter a-f. */
const HEX_TOKEN = /\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b/gi;
const NUMBER = /\d+(?:[.,:]\d+)*/g;

/**
 * Normalises the first line of a failure reason for grouping. In this order:
 * 1. only the first line counts (the rest is usually a stack or a body);
 * 2. UUIDs (8-4-4-4-12 hex) become `<uuid>`;
 * 3. hex literals (`0x1f`) and standalone hex tokens of 8 or more characters that hold
 *    both a digit and a letter a-f (lease tokens, hashes, object ids) become `<hex>`;
 * 4. every run of digits, with any `.`/`,`/`:`-joined digit groups (3.14, 10.0.0.1,
 *    02:00:00), becomes `#`;
 * 5. runs of whitespace become one space, and the ends are trimmed.
 * Words and quoted text are kept: "column 'email' is null" and "column 'name' is null"
 * are different causes. So "user 42 not found" and "user 43 not found" both read
 * "user # not found", but "HTTP 503" and "HTTP 404" also both read "HTTP #".
 */
export function normaliseReason(reason: string): string {
  return firstLine(reason)
    .replace(UUID, '<uuid>')
    .replace(HEX_LITERAL, '<hex>')
    .replace(HEX_TOKEN, '<hex>')
    .replace(NUMBER, '#')
    .replace(/\s+/g, ' ')
    .trim();
}

/**
 * What `cronq_dead_letters.reason_group` holds for a failure reason: `normaliseReason`,
 * cut to REASON_GROUP_MAX characters (never inside a surrogate pair). Reasons that
 * normalise alike up to that length fall in one group.
 */
export function reasonGroup(reason: string): string {
  return sliceChars(normaliseReason(reason), REASON_GROUP_MAX);
}
