/** What every console page and action receives. */
import type { CronqAdmin } from '../../admin.ts';
import { fieldValue, html, type Html } from './html.ts';
import type { Viewer } from './layout.ts';

/** One request as the pages see it. */
export interface ConsoleContext {
  admin: CronqAdmin;
  query: URLSearchParams;
  viewer: Viewer;
  /** This session's CSRF token for forms; null when the viewer cannot act. */
  csrf: string | null;
  /** A one-line outcome of the previous action (from `?done=`, only when sealed by this console: NoticeSeal), shown above the page. */
  notice: string | null;
}

/** A rendered page and its status. */
export interface PageResult {
  status: number;
  body: Html;
}

/**
 * A POST form for an action, or nothing when the viewer cannot act. `reason` adds a
 * required, labelled reason field (the reason is recorded with the action).
 */
export function actionForm(ctx: ConsoleContext, action: string, button: string, options: { reason?: boolean; hidden?: Record<string, string> } = {}): Html | '' {
  if (!ctx.csrf) return '';
  const id = `f-${action.replace(/[^a-z0-9]+/gi, '-')}`;
  const hidden = Object.entries(options.hidden ?? {}).map(([k, v]) => html`<input type="hidden" name="${k}" value="${fieldValue(v)}">`);
  const reason = options.reason
    ? html`<label for="${id}">Reason</label><input id="${id}" type="text" name="reason" required maxlength="200">`
    : '';
  return html`<form class="inline" method="post" action="${action}"><input type="hidden" name="csrf" value="${ctx.csrf}">${hidden}${reason}<button type="submit">${button}</button></form>`;
}

/** A URL path segment decoded, or as it is when its percent-encoding is broken (`%E0%A4%A`): it then names nothing. */
export function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
