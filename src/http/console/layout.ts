/** The page shell every console page shares: head, navigation, stylesheet, login state. */
import { html, trusted, type Html } from './html.ts';

const STYLE = trusted(`
:root{font-family:system-ui,sans-serif;line-height:1.4;color:#1b1f24;background:#fafafa}
body{margin:0 auto;max-width:70rem;padding:0 1rem 2rem}
nav{display:flex;flex-wrap:wrap;gap:.25rem 1rem;align-items:center;padding:.75rem 0;border-bottom:1px solid #ccd}
nav a{font-weight:600}
a{color:#0550ae}
a:focus,button:focus,input:focus,select:focus{outline:3px solid #fb8c00;outline-offset:1px}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:1.5rem}
.table{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-size:.9rem}
th,td{text-align:left;padding:.3rem .5rem;border-bottom:1px solid #e1e4e8;vertical-align:top}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
pre{white-space:pre-wrap;word-break:break-word;background:#f0f2f4;padding:.5rem;max-height:30rem;overflow:auto}
.chart{width:100%;height:5rem;fill:#2f81f7;background:#fff;border:1px solid #e1e4e8}
.bad{color:#b3261e;font-weight:600}.ok{color:#1a7f37}
form.inline{display:inline-flex;gap:.3rem;flex-wrap:wrap;align-items:center;margin:.2rem 0}
input[type=text],input[type=password]{padding:.3rem;min-width:10rem}
button{padding:.3rem .7rem;cursor:pointer}
.note{color:#57606a;font-size:.9rem}
.flash{background:#ddf4ff;border:1px solid #54aeff;padding:.5rem}
@media (max-width:40rem){th,td{padding:.25rem}nav{font-size:.95rem}}
`);

/** What the shell needs to know about the viewer. */
export interface Viewer {
  /** The token's name when the request carries a valid token; null: read-only. */
  operator: string | null;
  /** Whether a token is configured at all (otherwise the console is read-only for everyone). */
  actionsEnabled: boolean;
}

/** A whole page: `title` in <title> and <h1>, `body` inside <main>, an optional notice above it. */
export function page(title: string, viewer: Viewer, body: Html, notice?: string | null): Html {
  const who = viewer.operator
    ? html`<span>signed in as <strong>${viewer.operator}</strong></span> <form class="inline" method="post" action="/logout"><button type="submit">Sign out</button></form>`
    : viewer.actionsEnabled
      ? html`<a href="/login">Sign in</a>`
      : html`<span class="note">read-only</span>`;
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · cronq</title><style>${STYLE}</style></head>
<body><nav aria-label="Console"><a href="/">Overview</a><a href="/schedules">Schedules</a><a href="/dead">Dead letters</a>
<form class="inline" method="get" action="/jobs"><label for="job-q">Job id or key</label><input id="job-q" type="text" name="q" required><button type="submit">Find</button></form>
<span style="margin-left:auto">${who}</span></nav>
<main><h1>${title}</h1>${notice ? html`<p class="flash" role="status">${notice}</p>` : ''}${body}</main></body></html>`;
}

/** A table: header cells (a leading '#' marks a numeric column) and rows of cells, or `empty` when no rows. */
export function table(headers: string[], rows: Html[][], empty: string): Html {
  if (rows.length === 0) return html`<p class="note">${empty}</p>`;
  const numeric = headers.map((h) => h.startsWith('#'));
  return html`<div class="table"><table><thead><tr>${headers.map((h, i) => html`<th scope="col"${numeric[i] ? trusted(' class="n"') : ''}>${numeric[i] ? h.slice(1) : h}</th>`)}</tr></thead>
<tbody>${rows.map((r) => html`<tr>${r.map((c, i) => html`<td${numeric[i] ? trusted(' class="n"') : ''}>${c}</td>`)}</tr>`)}</tbody></table></div>`;
}
