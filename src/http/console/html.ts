/**
 * HTML built by a tagged template that escapes every interpolation: `html\`<td>${name}</td>\``.
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

/** `text` with & < > " ' replaced by entities: safe in element content and quoted attributes. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]);
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
