/** `/schedules/NAME`: one schedule's tick ledger, newest first, paged by fire time. */
import type { TickRow } from '../../../admin.ts';
import { UsageError } from '../../../errors.ts';
import { shownInLine } from '../../../shownText.ts';
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

/**
 * An ISO 8601 date, or instant with a zone, as `?before=` takes it: a year of four digits,
 * or a sign and six (extended years, which the admin call refuses past 1–9999; -000000 is
 * no year). Date.parse reads other years as it guesses (-2026 and +2026 as 2026, -000000 as 2001).
 */
const ISO_BEFORE = /^(\d{4}|[+-]\d{6})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-](\d{2}):(\d{2})))?$/;

/**
 * The instant `?before=` names (none when empty, the newest page). Anything else Date.parse
 * would guess at (`1` is 2001-01-01, `2026-02-30` is March 2, a time without a zone is the
 * host's) is refused with a UsageError (400), not read as another instant.
 */
function beforeOf(text: string): Date | undefined {
  if (text === '') return undefined;
  const match = ISO_BEFORE.exec(text);
  const [year, month, day, hour = 0, minute = 0, second = 0, offsetHour = 0, offsetMinute = 0] = (match ?? []).slice(1).map((part) => (part === undefined ? undefined : Number(part)));
  const exists =
    match !== null &&
    match[1] !== '-000000' && month! >= 1 && month! <= 12 && day! >= 1 && day! <= daysInMonth(year!, month!) && hour <= 23 && minute <= 59 && second <= 59 && offsetHour <= 23 && offsetMinute <= 59;
  const date = new Date(text);
  if (!exists || Number.isNaN(date.getTime())) {
    throw new UsageError(`before must be an ISO 8601 date or instant with a zone, such as 2026-12-01T02:00:00Z (got '${shownInLine(text)}')`);
  }
  return date;
}

function daysInMonth(year: number, month: number): number {
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  return [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]!;
}

export async function ticksPage(ctx: ConsoleContext, name: string): Promise<PageResult> {
  const listed = (await ctx.admin.schedules({ count: 5 })).find((s) => s.name === name);
  if (!listed) return { status: 404, body: page('No such schedule', ctx.viewer, html`<p>No loaded schedule is named <code>${name}</code>.</p>`) };
  const before = beforeOf(ctx.query.get('before') ?? '');
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
