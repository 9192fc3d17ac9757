/**
 * C0 controls but tab and newline, DEL, and C1 controls: what a terminal may act on
 * instead of showing; the bidirectional controls (U+061C, U+200E-U+200F,
 * U+202A-U+202E, U+2066-U+2069), which reorder the text shown around them so a line
 * reads as something it does not say; and the characters that show as nothing (soft
 * hyphen U+00AD, U+180E, zero-width space U+200B, word joiner and invisible operators
 * U+2060-U+2064, U+FEFF), so keys differing only by one do not look alike. The
 * zero-width joiners U+200C/U+200D stay: emoji sequences and some scripts are made of them.
 */
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u061c\u180e\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/g;

/**
 * `text` with every control character a terminal would act on (ESC sequences that clear
 * the screen, move the cursor over earlier lines, set the title; a carriage return that
 * overwrites its line) written as a visible escape, `\x1b`: keys, kinds and failure
 * reasons come from jobs and handlers, and must read as they are stored. Tabs and line
 * breaks stay. Linear in the text's length; JSON output (jsonText) never holds such characters.
 */
export function printable(text: string): string {
  return text.replace(CONTROL, escaped);
}

/** Every control printable escapes, and tabs and line breaks as well. */
const CONTROL_IN_LINE = /[\x00-\x1f\x7f-\x9f\xad\u061c\u180e\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/g;

/**
 * `text` as printable shows it, with tabs and line breaks escaped too (`\x09`, `\x0a`):
 * for one line of a table cell, where `a\t`, `a\r` and `a ` must not look alike.
 */
export function printableLine(text: string): string {
  return text.replace(CONTROL_IN_LINE, escaped);
}

/** The one escape of a control character: `\x1b`, or `\u202e` above U+00FF (valid in JSON text too). */
function escaped(c: string): string {
  const code = c.charCodeAt(0);
  return code > 0xff ? `\\u${code.toString(16).padStart(4, '0')}` : `\\x${code.toString(16).padStart(2, '0')}`;
}

/** DEL and C1 controls, which JSON.stringify leaves raw (it escapes only C0). */
const RAW_IN_JSON = /[\x7f-\x9f\xad]/g;

/**
 * `value` as JSON (JSON.stringify's `space`) with DEL and C1 controls written as `\u0085`
 * escapes: it parses back to the same value, and printable leaves it as it is (its `\x85`
 * is no JSON escape, so `--json` output holding one failed to parse).
 */
export function jsonText(value: unknown, space?: number): string {
  return JSON.stringify(value, null, space).replace(RAW_IN_JSON, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** A word a POSIX shell reads as it is: nothing to quote (zsh expands a leading `=`: `=ls` is ls's path). */
const PLAIN_WORD = /^[A-Za-z0-9._\-:@/+,%][A-Za-z0-9._\-:@/+=,%]*$/;

/**
 * `text` as one word to paste into a shell command line (bash, zsh, ksh), read back
 * exactly: as it is when plain, in single quotes when it holds no control character or
 * quote, otherwise in `$'…'` with each control character (CONTROL_IN_LINE), backslash and
 * single quote escaped (`$'mail\tbulk'`). Printable as it stands: nothing in it acts on a
 * terminal. Linear in the text's length. For hints that name a value to type back
 * (`cronq resume --unknown-target NAME`); not for text only read.
 */
export function shellWord(text: string): string {
  if (PLAIN_WORD.test(text)) return text;
  if (!/['\\]/.test(text) && !CONTROL_IN_LINE_ONE.test(text)) return `'${text}'`;
  return `$'${text.replace(/[\\']/g, (c) => `\\${c}`).replace(CONTROL_IN_LINE, shellEscaped)}'`;
}

/** CONTROL_IN_LINE for a test (no g flag: test() must not keep a lastIndex). */
const CONTROL_IN_LINE_ONE = new RegExp(CONTROL_IN_LINE.source);

/**
 * A control character inside `$'…'`: `\t`, `\n`, `\r`, else `\xHH` below U+0080 (one
 * byte), `\uHHHH` from there on (the shell writes it in UTF-8, as the name is stored).
 */
function shellEscaped(c: string): string {
  if (c === '\t') return '\\t';
  if (c === '\n') return '\\n';
  if (c === '\r') return '\\r';
  const code = c.charCodeAt(0);
  return code >= 0x80 ? `\\u${code.toString(16).padStart(4, '0')}` : `\\x${code.toString(16).padStart(2, '0')}`;
}
