/**
 * The console's actions, each a POST from a form (or a client with a Bearer token):
 * requeue or discard dead letters, pause, resume and run schedules (a paused one is not
 * run: resume it first). Each answers with a one-line outcome; the router redirects
 * back with it. Who acted is recorded as
 * `console:NAME`: in the pause's paused_by, and ahead of the reason in a review's
 * resolution (dead letters record no reviewer of their own).
 */
import { describePause, MAX_REASON_LENGTH, type CronqAdmin, type TickNowOutcome } from '../../admin.ts';
import { sliceChars } from '../../runtime/errorText.ts';
import { shownInLine, shownText } from '../../shownText.ts';
import { decodeSegment } from './context.ts';
import { deadFilter } from './pages/dead.ts';

/** What an action did: where to go back to, and a line saying what happened. */
export interface ActionResult {
  back: string;
  message: string;
}

/** A review's verb as its outcome line says it was done. */
const DONE: Record<string, string> = { requeue: 'requeued', discard: 'discarded' };

/** The reason as recorded: who acted, then why, cut to MAX_REASON_LENGTH (UTF-16 units, never splitting a pair). */
function recorded(operator: string, reason: string): string {
  return sliceChars(`[console:${operator}] ${reason}`, MAX_REASON_LENGTH);
}

/**
 * Runs the action POSTed to `path` with form `fields` as `operator`, or returns null
 * when no action lives there; `query` is the POST's address query (a bulk review refuses
 * one: bulkFilter). Throws UsageError for a missing reason.
 */
export async function runAction(admin: CronqAdmin, path: string, fields: URLSearchParams, operator: string, query = new URLSearchParams()): Promise<ActionResult | null> {
  const reason = () => {
    const text = (fields.get('reason') ?? '').trim();
    if (text === '') throw new ActionRefused('a reason is required');
    return recorded(operator, text);
  };
  let m = /^\/dead\/([0-9]{1,15})\/(requeue|discard)$/.exec(path);
  if (m) {
    const id = Number(m[1]);
    const outcome = m[2] === 'requeue' ? await admin.deadLetters.requeue(id, reason()) : await admin.deadLetters.discard(id, reason());
    return { back: `/dead/${id}`, message: outcome.status === 'done' ? `dead letter #${id}: ${DONE[m[2]]}` : `dead letter #${id}: ${outcome.status.replace(/_/g, ' ')}` };
  }
  m = /^\/dead\/(requeue|discard)$/.exec(path);
  if (m) {
    const filter = bulkFilter(fields, query);
    const why = reason();
    const result = m[1] === 'requeue' ? await admin.deadLetters.requeueMatching(filter, why) : await admin.deadLetters.discardMatching(filter, why);
    return { back: '/dead', message: `${DONE[m[1]]} ${result.touched} dead letter(s)` };
  }
  m = /^\/schedules\/([^/]+)\/(pause|resume|run)$/.exec(path);
  if (m) {
    const name = decodeSegment(m[1]);
    const back = `/schedules/${encodeURIComponent(name)}`;
    if (m[2] === 'pause') {
      const outcome = await admin.pauses.pause('schedule', name, { reason: (fields.get('reason') ?? '').trim() || undefined, by: `console:${operator}` });
      return { back, message: outcome.status === 'no_schedule' ? `no schedule ${name}` : `${outcome.status.replace('_', ' ')}: ${describePause(outcome.pause)}` };
    }
    if (m[2] === 'resume') {
      const outcome = await admin.pauses.resume('schedule', name);
      return { back, message: `${name}: ${outcome.status.replace(/_/g, ' ')}` };
    }
    const outcome = await admin.tick(name);
    return { back, message: ranMessage(name, outcome) };
  }
  return null;
}

/** The fields a bulk review takes: the page's form posts each once (an empty filter field means any). */
const BULK_FIELDS = new Set(['csrf', 'reason', 'kind', 'queue']);

/**
 * A bulk review's filter (deadFilter), refusing a field the form has not (a script's
 * `knd=report`), a filter field given twice (`kind=a&kind=b`) and a filter in the POST's
 * address (`/dead/requeue?kind=report`, as the page's own GET filter reads): ignored, each
 * would widen the filter, and a requeue of every dead letter cannot be taken back.
 */
function bulkFilter(fields: URLSearchParams, query: URLSearchParams): ReturnType<typeof deadFilter> {
  if (query.size > 0) throw new ActionRefused("the filter goes in the form's fields (kind, queue), not the address");
  for (const name of new Set(fields.keys())) {
    if (!BULK_FIELDS.has(name)) throw new ActionRefused(`the filter has no field '${shownInLine(name)}' (kind, queue)`);
    if (name !== 'csrf' && name !== 'reason' && fields.getAll(name).length > 1) throw new ActionRefused(`the filter's ${name} is given twice`);
  }
  return deadFilter(fields);
}

/**
 * The line a run button's outcome shows: what was enqueued, what was not (keys held by other
 * jobs, entities refused, the first named), or why nothing was (a paused schedule is not run).
 */
function ranMessage(name: string, outcome: TickNowOutcome): string {
  switch (outcome.status) {
    case 'enqueued': {
      const [first] = outcome.refused;
      return `${name} run for ${outcome.fireAt.toISOString()}: ${outcome.inserted} enqueued, ${outcome.existing} already there${
        outcome.conflicting > 0 ? `, ${outcome.conflicting} held by jobs this schedule did not enqueue` : ''
      }${outcome.refusedCount > 0 && first ? `, ${outcome.refusedCount} refused (first ${shownText(first.key)}: ${first.reason})` : ''}`;
    }
    case 'paused':
      return `${name}: paused: resume it first (${describePause(outcome.pause)})`;
    default:
      return `${name}: ${outcome.status.replace(/_/g, ' ')}`;
  }
}

/** An action refused for bad form input (400), with the line to show. */
export class ActionRefused extends Error {}
