/** `/dead/ID`: one dead letter with its full reason, its job now, and (to token holders) its payload; requeue and discard. */
import { actionForm, type ConsoleContext, type PageResult } from '../context.ts';
import { when } from '../format.ts';
import { html } from '../html.ts';
import { page } from '../layout.ts';
import { payloadReadFor, payloadSection } from '../payload.ts';

export async function deadLetterPage(ctx: ConsoleContext, id: number): Promise<PageResult> {
  // Only the start the page shows is read, and none for a viewer not shown it: a payload may be tens of megabytes.
  const letter = await ctx.admin.deadLetters.get(id, payloadReadFor(ctx.viewer));
  if (!letter) return { status: 404, body: page('No such dead letter', ctx.viewer, html`<p>No dead letter #${id}.</p>`) };
  const review = letter.reviewedAt
    ? html`<p>Reviewed ${when(letter.reviewedAt)}: ${letter.resolution}</p>`
    : html`<p>${actionForm(ctx, `/dead/${id}/requeue`, 'Requeue', { reason: true })}</p><p>${actionForm(ctx, `/dead/${id}/discard`, 'Discard', { reason: true })}</p>`;
  const payload = payloadSection(ctx.viewer, letter, `cronq dead show ${id} --json`);
  const body = html`<dl>
<dt>Job</dt><dd><a href="/jobs/${letter.jobId}">#${letter.jobId}</a> <code>${letter.key}</code> (${letter.kind} on ${letter.queue})</dd>
<dt>Died</dt><dd>${when(letter.deadAt)} after ${letter.attempts} attempts</dd>
<dt>Job now</dt><dd>${letter.job ? `${letter.job.status}, attempts ${letter.job.attempts}/${letter.job.maxAttempts}` : 'the row is gone'}</dd></dl>
${review}
<h2>Reason</h2><pre>${letter.failureReason}</pre>
<h2>Payload</h2>${payload}`;
  return { status: 200, body: page(`Dead letter #${id}`, ctx.viewer, body, ctx.notice) };
}
