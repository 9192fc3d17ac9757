/** `/schedules/NAME`: one schedule's tick ledger, newest first, paged by fire time. */
import type { TickRow } from '../../../admin.ts';
import { actionForm, type ConsoleContext, type PageResult } from '../context.ts';
import { when } from '../format.ts';
import { html, type Html } from '../html.ts';
import { page, table } from '../layout.ts';

/** Ledger rows per page. */
const PAGE_SIZE = 50;

/** A tick's outcome in words: enqueued (caught up), skipped and why, failed and why. */
export function tickOutcome(tick: TickRow): Html {
  const caught = tick.caughtUp ? ' (caught up)' : '';
  const note = tick.note ? html` — ${tick.note}` : '';
  const cls = tick.outcome === 'failed' ? 'bad' : '';
  return html`<span class="${cls}">${tick.outcome}${caught}</span>${note}`;
}

export async function ticksPage(ctx: ConsoleContext, name: string): Promise<PageResult> {
  const listed = (await ctx.admin.schedules({ count: 5 })).find((s) => s.name === name);
  if (!listed) return { status: 404, body: page('No such schedule', ctx.viewer, html`<p>No loaded schedule is named <code>${name}</code>.</p>`) };
  const beforeText = ctx.query.get('before');
  const before = beforeText && !Number.isNaN(Date.parse(beforeText)) ? new Date(beforeText) : undefined;
  const ticks = await ctx.admin.recentTicks(name, PAGE_SIZE, { before });
  const path = `/schedules/${encodeURIComponent(name)}`;
  const rows = ticks.map((t) => [
    html`${when(t.scheduledAt)}`,
    html`${t.periodKey}`,
    tickOutcome(t),
    html`${t.jobsEnqueued}`,
    html`${t.jobsExisting}`,
    html`${t.claimedBy ?? '—'}`,
    html`${when(t.finishedAt)}`,
  ]);
  const older = ticks.length === PAGE_SIZE ? html`<p><a href="${path}?before=${ticks[ticks.length - 1].scheduledAt.toISOString()}">Older ticks</a></p>` : '';
  const body = html`<p><code>${listed.cron}</code> in ${listed.timezone}; next: ${listed.next.map(when).join(', ') || 'never'}.
${listed.paused ? html` <span class="bad">Paused</span> by ${listed.paused.pausedBy}.` : ''}</p>
<p>${listed.paused ? actionForm(ctx, `${path}/resume`, 'Resume') : actionForm(ctx, `${path}/pause`, 'Pause', { reason: true })} ${actionForm(ctx, `${path}/run`, 'Run now')}</p>
<h2>Tick ledger${before ? html` before ${when(before)}` : ''}</h2>
${table(['Fire time (UTC)', 'Period', 'Outcome', '#Enqueued', '#Existing', 'Fanned out by', 'Finished'], rows, 'No ticks recorded.')}${older}`;
  return { status: 200, body: page(`Schedule ${name}`, ctx.viewer, body, ctx.notice) };
}
