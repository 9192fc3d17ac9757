/**
 * HTML built by a tagged template that escapes every interpolation (escapeHtml: HTML
 * specials as entities, control and bidi characters as visible escapes): `html\`<td>${name}</td>\``.
 * Only an `Html` value (another template's result, or `trusted(...)` for markup written
 * in this codebase) passes through unescaped; arrays are joined, null and undefined
 * print nothing. Linear in the size of its parts.
 */

/** Markup known to be safe: built by `html` or marked `trusted` by code, never from data. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

type Part = Html | string | number | boolean | null | undefined | Part[];

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/**
 * What escapeHtml replaces: the five HTML specials; C0 controls but tab and newline, DEL
 * and C1 controls (as the CLI's printable); and the bidi controls that reorder what is
 * shown: marks U+200E, U+200F, U+061C, embeddings and overrides U+202A–202E, isolates
 * U+2066–2069 (a key `refund:\u202E0000001-resu` read as `refund:user-1000000`); and the
 * characters that show as nothing (U+00AD, U+180E, U+200B, U+2060–2064, U+FEFF), as the
 * CLI escapes them too (the joiners U+200C/U+200D stay: emoji are made of them).
 */
const SPECIAL = /[&<>"'\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u061c\u180e\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/g;

/** A control or bidi character as visible text: `\x1b` below U+0100, `\u202e` above (as the CLI writes `\x1b`). */
function visible(c: string): string {
  const code = c.charCodeAt(0);
  return code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/**
 * `text` safe and legible anywhere in a page (element content, quoted attributes,
 * <title>): & < > " ' as entities, and every control or bidi character (SPECIAL) written
 * as a visible escape, so text from jobs and handlers reads as it is stored and cannot
 * reorder or hide what is shown around it. Tabs and line breaks stay. One pass, linear.
 */
export function escapeHtml(text: string): string {
  return text.replace(SPECIAL, (c) => ESCAPES[c] ?? visible(c));
}

/**
 * `text` for a form field's value (a filter to resubmit, a hidden field an action posts):
 * only & < > " ' as entities, the rest exact, so the form sends back the very value it
 * was given (a visibly escaped one would name another kind or queue).
 */
export function fieldValue(text: string): Html {
  return new Html(text.replace(/[&<>"']/g, (c) => ESCAPES[c]));
}

function render(part: Part): string {
  if (part === null || part === undefined || part === false) return '';
  if (part instanceof Html) return part.text;
  if (Array.isArray(part)) return part.map(render).join('');
  return escapeHtml(String(part));
}

/** The tagged template: literal parts as written, every interpolation escaped unless it is Html. */
export function html(strings: TemplateStringsArray, ...values: Part[]): Html {
  let out = strings[0];
  for (let i = 0; i < values.length; i += 1) out += render(values[i]) + strings[i + 1];
  return new Html(out);
}

/** Marks markup written in this codebase (never data) as safe to insert as is. */
export function trusted(markup: string): Html {
  return new Html(markup);
}
