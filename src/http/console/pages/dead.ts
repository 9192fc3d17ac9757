/** `/dead`: unreviewed dead letters grouped by kind and normalised reason, the oldest listed; bulk requeue and discard. */
import { actionForm, type ConsoleContext, type PageResult } from '../context.ts';
import { when } from '../format.ts';
import { fieldValue, html } from '../html.ts';
import { page, table } from '../layout.ts';

/** Dead letters listed on the page. */
const LISTED = 100;
/** Groups listed on the page, the largest: distinct reasons are unbounded, the page is not. */
const LISTED_GROUPS = 100;

/** The filter a /dead URL carries (`?kind=&queue=`); empty values mean "any". */
export function deadFilter(query: URLSearchParams): { kind?: string; queue?: string } {
  const kind = query.get('kind') || undefined;
  const queue = query.get('queue') || undefined;
  return { ...(kind ? { kind } : {}), ...(queue ? { queue } : {}) };
}

export async function deadPage(ctx: ConsoleContext): Promise<PageResult> {
  const filter = deadFilter(ctx.query);
  // One read at a time, one connection of the engine's pool (see overviewPage).
  const groupsRead = await ctx.admin.deadLetters.groups({ ...filter, limit: LISTED_GROUPS + 1 });
  const { letters, more } = await ctx.admin.deadLetters.list({ ...filter, limit: LISTED });
  const groups = groupsRead.slice(0, LISTED_GROUPS);
  const groupRows = groups.map((g) => [
    html`<a href="/dead?kind=${encodeURIComponent(g.kind)}">${g.kind}</a>`,
    html`${g.reason}`,
    html`${g.count}`,
    html`${when(g.firstDeadAt)}`,
    html`${when(g.lastDeadAt)}`,
    html`<a href="/dead/${g.exampleId}">#${g.exampleId}</a>`,
  ]);
  const letterRows = letters.map((l) => [
    html`<a href="/dead/${l.id}">#${l.id}</a>`,
    html`${l.queue}`,
    html`${l.kind}`,
    html`<a href="/jobs/${l.jobId}">${l.key}</a>`,
    html`${l.attempts}`,
    html`${when(l.deadAt)}`,
    html`${l.reason}`,
  ]);
  const hidden = { kind: filter.kind ?? '', queue: filter.queue ?? '' };
  const scope = filter.kind || filter.queue ? `matching this filter` : 'all';
  const bulk = ctx.csrf
    ? html`<h2>Review ${scope}</h2><p>${actionForm(ctx, '/dead/requeue', `Requeue ${scope}`, { reason: true, hidden })}</p>
<p>${actionForm(ctx, '/dead/discard', `Discard ${scope}`, { reason: true, hidden })}</p>`
    : '';
  const body = html`<form method="get" action="/dead" class="inline"><label for="kind">Kind</label><input id="kind" type="text" name="kind" value="${fieldValue(filter.kind ?? '')}">
<label for="queue">Queue</label><input id="queue" type="text" name="queue" value="${fieldValue(filter.queue ?? '')}"><button type="submit">Filter</button></form>
<h2>Groups</h2>${table(['Kind', 'Reason (normalised)', '#Count', 'First', 'Last', 'Example'], groupRows, 'No dead letters awaiting review.')}
${groupsRead.length > LISTED_GROUPS ? html`<p class="note">Only the ${LISTED_GROUPS} largest groups are listed.</p>` : ''}<h2>Oldest awaiting review</h2>${table(['Dead letter', 'Queue', 'Kind', 'Job key', '#Attempts', 'Died', 'Reason'], letterRows, 'None.')}
${more ? html`<p class="note">Only the oldest ${LISTED} are listed.</p>` : ''}${bulk}`;
  return { status: 200, body: page('Dead letters', ctx.viewer, body, ctx.notice) };
}
