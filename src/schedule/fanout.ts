import { enqueueRows, type EnqueueOutcome, type EnqueueRowsOptions, type RefusedRow } from '../enqueue/write.ts';
import type { JobWriter, NewJobRow } from '../store/index.ts';
import { checkJobContent } from '../enqueue/jobRow.ts';
import { errorLine } from '../runtime/errorText.ts';
import { shownText } from '../shownText.ts';
import type { Schedule } from './define.ts';

/** The job key of one entity's job in one period: `<name>:<entity>:<period>`, or `<name>:<period>` without fan-out. */
export function scheduledJobKey(scheduleName: string, entityKey: string | null, period: string): string {
  return entityKey === null ? `${scheduleName}:${period}` : `${scheduleName}:${entityKey}:${period}`;
}

/** What a fan-out is told as it goes (enqueueTick). */
export interface EnqueueTickOptions extends Pick<EnqueueRowsOptions, 'afterBatch' | 'onRefused' | 'signal'> {
  /**
   * Runs as each entity arrives from jobs(), before it becomes a row: a promise it returns
   * is awaited before the next entity is asked for, and a rejection ends the fan-out with
   * that error (the rows gathered before it are still written).
   */
  onEntity?: () => Promise<void> | undefined;
}

/**
 * Enqueues the jobs of one tick: one per entity the schedule's `jobs()` yields (or a
 * single job without fan-out), keyed by the tick's period, streamed in batches so a
 * fan-out of 100,000 entities never sits in memory. `tick.periodKey` is the caller's
 * periodKeyOfFire of the tick, computed once (its ledger row holds the same). Keys that
 * exist are left alone, which makes repeating a tick harmless. `afterBatch` runs after
 * each batch, `onEntity` as each entity arrives.
 *
 * An entity that cannot become a job (the database refuses its content, it is too large
 * for one statement, its key is too long, or jobs() yielded something that is not
 * `{ key, payload? }`) is refused alone: passed to `onRefused`, counted and listed in the
 * outcome, while the other entities are enqueued. Once `signal` aborts, the fan-out
 * stops (`stopped`), its gathered rows written, without waiting for a jobs() still working
 * on its next entity; the rest is left for a resumption.
 */
export async function enqueueTick(
  writer: JobWriter,
  schedule: Schedule,
  tick: { scheduledAt: Date; periodKey: string },
  { onEntity, ...options }: EnqueueTickOptions = {},
): Promise<EnqueueOutcome> {
  // Two batch INSERTs in flight: the database then uses both cores (about 1.5× the rate of one).
  return enqueueRows(writer, tickRows(schedule, tick.scheduledAt, tick.periodKey, onEntity), { ...options, parallel: 2 });
}

async function* tickRows(schedule: Schedule, scheduledAt: Date, period: string, onEntity?: () => Promise<void> | undefined): AsyncGenerator<NewJobRow | RefusedRow> {
  const base = {
    queue: schedule.queue,
    kind: schedule.name,
    maxAttempts: schedule.maxAttempts,
    runAt: null,
    scheduleName: schedule.name,
    periodKey: period,
    scheduledAt,
  };
  if (!schedule.jobs) {
    yield { ...base, key: scheduledJobKey(schedule.name, null, period), payloadJson: '{}' };
    return;
  }
  let index = 0;
  for await (const item of schedule.jobs({ scheduledAt, periodKey: period })) {
    index += 1;
    const told = onEntity?.(); // most entities: nothing to await (one microtask each would add up)
    if (told) await told;
    // Each field read once: a getter or a Proxy that throws refuses this entity alone.
    let entity: { key: unknown; payload: unknown };
    try {
      entity = typeof item === 'object' && item !== null ? { key: item.key, payload: item.payload } : { key: undefined, payload: undefined };
    } catch (error) {
      yield refused(`entity #${index}`, `reading what jobs() yielded threw: ${errorLine(error, 200)}`);
      continue;
    }
    if (typeof entity.key !== 'string' || entity.key === '') {
      yield refused(`entity #${index}`, 'jobs() yielded something other than { key: string, payload? }');
      continue;
    }
    const key = scheduledJobKey(schedule.name, entity.key, period);
    const content = checkJobContent(key, entity.payload);
    if ('problem' in content) {
      // A key too long to store is too long to log whole as well.
      yield refused(content.field === 'key' ? shownText(key, 60) : key, content.problem);
      continue;
    }
    yield { ...base, key, payloadJson: content.payloadJson };
  }
}

const refused = (key: string, reason: string): RefusedRow => ({ refused: { key, reason } });
