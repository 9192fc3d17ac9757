/** `/jobs/ID-or-KEY`: one job's row, attempts, last error and lease holder; its payload to token holders. */
import type { ConsoleContext, PageResult } from '../context.ts';
import { when } from '../format.ts';
import { html } from '../html.ts';
import { page } from '../layout.ts';
import { payloadReadFor, payloadSection } from '../payload.ts';

/** A path segment as a job target: digits naming an id (1 or more) are one, anything else a key (`0`, `000`: no id is 0). */
export function jobTarget(text: string): { id: number } | { key: string } {
  return /^[0-9]{1,15}$/.test(text) && Number(text) >= 1 ? { id: Number(text) } : { key: text };
}

/**
 * One job by `idOrKey` exactly as given (digits: an id, else, or when no job has that id,
 * a key; keys compare byte for byte, white space included), or with `byKey` by key alone
 * (`/jobs?key=`). Digits that are a job's id and another job's key show the id's job with
 * a note linking to the other (one more indexed read, digits only). None: 404, and when
 * the text has white space at either end, a link to search for it trimmed (by key alone when `byKey`).
 */
export async function jobPage(ctx: ConsoleContext, idOrKey: string, { byKey = false }: { byKey?: boolean } = {}): Promise<PageResult> {
  // Only the start the page shows is read, and none for a viewer not shown it: a payload may be tens of megabytes.
  const read = payloadReadFor(ctx.viewer);
  const target = byKey ? { key: idOrKey } : jobTarget(idOrKey);
  let job = await ctx.admin.job(target, read);
  const digits = !byKey && /^[0-9]+$/.test(idOrKey);
  let keyHolder: number | null = null;
  if (digits && job && 'id' in target) {
    // Digits that are also a key: that job is another one, which the id hides.
    const other = await ctx.admin.job({ key: idOrKey }, { payload: false });
    if (other && other.id !== job.id) keyHolder = other.id;
  }
  // A key made of digits: look it up as a key when no job has that id.
  if (!job && digits) job = await ctx.admin.job({ key: idOrKey }, read);
  if (!job) {
    const trimmed = idOrKey.trim();
    const hint =
      trimmed !== idOrKey && trimmed !== ''
        ? html`<p class="note">The search is exact, white space at either end included. <a href="/jobs?${byKey ? 'key' : 'q'}=${encodeURIComponent(trimmed)}">Search for <code>${trimmed}</code> without it</a>.</p>`
        : '';
    return { status: 404, body: page('No such job', ctx.viewer, html`<p>No job with ${byKey ? 'key' : 'id or key'} <code>${idOrKey}</code>.</p>${hint}`) };
  }
  const other = keyHolder === null ? '' : html`<p class="note">Job #${keyHolder} has the key <code>${idOrKey}</code>: <a href="/jobs?key=${encodeURIComponent(idOrKey)}">show it</a>.</p>`;
  const row = (label: string, value: unknown) => html`<dt>${label}</dt><dd>${value === null || value === undefined ? '—' : String(value)}</dd>`;
  const body = html`${other}<dl>
${row('Key', job.key)}${row('Queue', job.queue)}${row('Kind', job.kind)}${row('Status', job.status)}
${row('Attempts', `${job.attempts} of ${job.maxAttempts}`)}${row('Lease expiries', job.leaseExpiries)}
${row('Available at', when(job.availableAt))}${row('Lease holder', job.lockedBy)}${row('Lease until', job.leaseUntil ? when(job.leaseUntil) : null)}
${row('Schedule', job.scheduleName ? `${job.scheduleName} (${job.periodKey})` : null)}
${row('Created', when(job.createdAt))}${row('Updated', when(job.updatedAt))}${row('Finished', job.finishedAt ? when(job.finishedAt) : null)}
${job.cancelledBy ? row('Cancelled', `by ${job.cancelledBy}: ${job.cancelReason}`) : ''}</dl>
<h2>Last error</h2>${job.lastError ? html`<pre>${job.lastError}</pre>` : html`<p class="note">None.</p>`}
<h2>Payload</h2>${payloadSection(ctx.viewer, job, 'admin.job()')}`;
  return { status: 200, body: page(`Job #${job.id}`, ctx.viewer, body, ctx.notice) };
}
