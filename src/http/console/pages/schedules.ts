/** `/schedules`: every loaded schedule with cron, zone, next fire times, last tick, paused, overdue; pause, resume, run now. */
import { actionForm, type ConsoleContext, type PageResult } from '../context.ts';
import { when } from '../format.ts';
import { html } from '../html.ts';
import { page, table } from '../layout.ts';
import { tickOutcome } from './ticks.ts';

export async function schedulesPage(ctx: ConsoleContext): Promise<PageResult> {
  const listed = await ctx.admin.schedules({ count: 3 });
  const rows = listed.map((s) => {
    const path = `/schedules/${encodeURIComponent(s.name)}`;
    const actions = s.paused
      ? actionForm(ctx, `${path}/resume`, `Resume ${s.name}`)
      : actionForm(ctx, `${path}/pause`, `Pause ${s.name}`, { reason: true });
    return [
      html`<a href="${path}">${s.name}</a>`,
      html`<code>${s.cron}</code>`,
      html`${s.timezone}`,
      html`${s.next.map((d) => html`${when(d)}<br>`)}`,
      s.lastTick ? html`${when(s.lastTick.scheduledAt)}: ${tickOutcome(s.lastTick)}` : html`never`,
      s.paused ? html`<span class="bad">paused</span> by ${s.paused.pausedBy}${s.paused.reason ? html`: ${s.paused.reason}` : ''}` : html`no`,
      s.health.overdue ? html`<span class="bad">overdue</span> since ${when(s.health.overdueSince)}` : html`<span class="ok">no</span>`,
      html`${actions}${actionForm(ctx, `${path}/run`, `Run ${s.name} now`)}`,
    ];
  });
  const body = table(['Schedule', 'Cron', 'Zone', 'Next fire times (UTC)', 'Last tick', 'Paused', 'Overdue', 'Actions'], rows, 'No schedules loaded.');
  return { status: 200, body: page('Schedules', ctx.viewer, body, ctx.notice) };
}
