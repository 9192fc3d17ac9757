/**
 * `/`: per queue counts and oldest wait (the OVERVIEW_QUEUES most behind, and how many
 * more there are), completions per minute, dead letters awaiting review, daemons seen.
 * Its statements are bounded whatever the number of queues but for the completions
 * chart's, one per 100 queues holding done jobs.
 */
import { JOB_STATUSES } from '../../../admin.ts';
import { barChart } from '../chart.ts';
import type { ConsoleContext, PageResult } from '../context.ts';
import { age, atLeast, when } from '../format.ts';
import { html } from '../html.ts';
import { page, table } from '../layout.ts';

/** Queues the overview lists at most: `cronq stats` lists every one. */
export const OVERVIEW_QUEUES = 50;

export async function overviewPage(ctx: ConsoleContext): Promise<PageResult> {
  // One read at a time: a page holds one connection of the engine's pool, so the gate's two
  // pages hold at most two (in parallel, two overviews waiting out a lock held eight).
  const listed = await ctx.admin.queuesMostBehind({ limit: OVERVIEW_QUEUES });
  const deadLetters = await ctx.admin.deadLetters.awaitingReview();
  const completions = await ctx.admin.completions();
  const daemons = await ctx.admin.daemons();
  const total = completions.counts.reduce((a, b) => a + b, 0);
  const queues = table(
    ['Queue', '#Ready', '#Reserved', '#Done', '#Dead', '#Cancelled', 'Oldest waiting'],
    listed.queues.map((q) => [html`${q.queue}`, ...JOB_STATUSES.map((s) => html`${atLeast(q[s], q.capped.includes(s))}`), html`${age(q.oldestReadyAgeSeconds)}`]),
    'No jobs yet.',
  );
  const daemonRows = table(
    ['Daemon', 'Kinds', 'Queues', 'Started', 'Last heard', 'State'],
    daemons.map((d) => [
      html`${d.id}`,
      html`${d.kinds.join(', ')}`,
      html`${d.queues === null ? 'all' : d.queues.join(', ')}`,
      html`${when(d.startedAt)}`,
      html`${when(d.heartbeatAt)}`,
      d.stoppedAt ? html`stopped` : html`<span class="ok">running</span>`,
    ]),
    'No daemon heard from in the last 10 minutes.',
  );
  const more = listed.total - listed.queues.length;
  const notShown =
    more > 0
      ? html`<p class="note">The ${listed.queues.length} queues most behind are shown (oldest waiting job first, then those running jobs); ${more} more ${more === 1 ? 'queue is' : 'queues are'} not: <code>cronq stats</code> lists every queue.</p>`
      : html``;
  const capped = listed.queues.some((q) => q.capped.length > 0)
    ? html`<p class="note">A count ending in + is at least that many: counting stops there so this page costs the same on a big table.</p>`
    : html``;
  const body = html`<h2>Queues</h2>${queues}${notShown}${capped}
<h2>Completions per minute, last hour</h2>
${barChart(completions.counts, `${total} jobs completed in the last hour`)}
<p class="note">${total} completed in the last hour${completions.capped ? ' (at least: the read is bounded)' : ''}; peak ${Math.max(0, ...completions.counts)} in a minute.</p>
<h2>Dead letters</h2>
<p><a href="/dead">${atLeast(deadLetters.awaitingReview, deadLetters.capped)} awaiting review</a></p>
<h2>Daemons seen recently</h2>${daemonRows}`;
  return { status: 200, body: page('Overview', ctx.viewer, body, ctx.notice) };
}
