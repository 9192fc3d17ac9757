import { enqueueRows, type EnqueueOutcome, type EnqueueRowsOptions, type RefusedRow } from '../enqueue/write.ts';
import type { JobWriter, KeyHolder, NewJobRow, Store } from '../store/index.ts';
import { checkJobContent } from '../enqueue/jobRow.ts';
import { errorLine } from '../runtime/errorText.ts';
import { UsageError } from '../errors.ts';
import type { Period } from './period.ts';
import { shownText } from '../shownText.ts';
import type { Schedule } from './define.ts';

/** The job key of one entity's job in one period: `<name>:<entity>:<period>`, or `<name>:<period>` without fan-out. */
export function scheduledJobKey(scheduleName: string, entityKey: string | null, period: string): string {
  return entityKey === null ? `${scheduleName}:${period}` : `${scheduleName}:${entityKey}:${period}`;
}

/** What a fan-out writes through: the job inserts, and the read of who holds keys it found taken. */
export type TickWriter = JobWriter & Pick<Store, 'keyHolders'>;

/** A job holding one of a tick's keys although this schedule did not enqueue it for the tick's period. */
export interface TakenKey {
  key: string;
  /** The holder's kind and id. */
  kind: string;
  jobId: number;
}

/** What enqueueTick did. */
export interface TickOutcome extends EnqueueOutcome {
  /**
   * Keys already held by a job this schedule did not enqueue for this period (enqueued by
   * hand, another kind, another period's row): not counted in `existing`. The schedule's
   * job for such a key was never written.
   */
  conflicting: number;
  /** The oldest of those holders (lowest job id), or null when none. */
  firstConflict: TakenKey | null;
}

/** What a ledger note and schedule health look for in the note of a tick whose keys other jobs held. */
export const KEYS_TAKEN_MARK = 'held by jobs this schedule did not enqueue';

/** The ledger note of a tick some of whose keys other jobs held: `2 keys held by jobs this schedule did not enqueue, first K (kind x, job 123)`. */
export function keysTakenNote(count: number, first: TakenKey | null): string {
  const noun = count === 1 ? 'key' : 'keys';
  return `${count} ${noun} ${KEYS_TAKEN_MARK}${first ? `, first ${first.key} (kind ${first.kind}, job ${first.jobId})` : ''}`;
}

/**
 * The note a finished tick's row keeps: the taken keys first (keysTakenNote), then the
 * tick's own note (`caught up`, a pause's, a cron edit's), then the refused entities
 * (refusedSummary), joined by `; `; null when there is none. The store cuts a note longer
 * than its column at its end, and schedule health reads the taken keys' words at the
 * start (noteSaysKeysTaken): however long the tick's own note (two long crons quoted by an
 * edit's), they are kept.
 */
export function finishedTickNote(own: string | null, taken: string | null, refused: string | null): string | null {
  const parts = [taken, own, refused].filter((part): part is string => part !== null && part !== '');
  return parts.length === 0 ? null : parts.join('; ');
}

/**
 * Whether a tick's ledger note says some of its keys were held by jobs it did not
 * enqueue (keysTakenNote). Only the note's own parts are read, those before a
 * refused-entities part (`N entities refused, first KEY: …`), which quotes a key from
 * jobs() and so could hold the same words.
 */
export function noteSaysKeysTaken(note: string | null): boolean {
  if (note === null) return false;
  for (const part of note.split('; ')) {
    if (REFUSED_PART.test(part)) return false;
    if (TAKEN_PART.test(part)) return true;
  }
  return false;
}
const TAKEN_PART = new RegExp(`^\\d+ keys? ${KEYS_TAKEN_MARK}`);
const REFUSED_PART = /^\d+ entit(?:y|ies) refused/;

/**
 * Each period's key as periodKey writes it (period.ts), its fields in their ranges: years
 * 1970–2999 (croner's horizon; 3000 too, the ISO week-year of 2999's last days), months 01–12, days 01–31, hours 00–23, minutes and
 * seconds 00–59, ISO weeks 01–53.
 */
const Y = '(?:19[7-9]\\d|2\\d{3}|3000)'; // 3000: the ISO week-year of 2999's last days
const MO = '(?:0[1-9]|1[0-2])';
const D = '(?:0[1-9]|[12]\\d|3[01])';
const H = '(?:[01]\\d|2[0-3])';
const MI = '[0-5]\\d';
const PERIOD_KEY: Record<Period, string> = {
  minute: `${Y}-${MO}-${D}T${H}:${MI}`,
  hour: `${Y}-${MO}-${D}T${H}`,
  day: `${Y}-${MO}-${D}`,
  week: `${Y}-W(?:0[1-9]|[1-4]\\d|5[0-3])`,
  month: `${Y}-${MO}`,
  year: Y,
  tick: `${Y}-${MO}-${D}T${H}:${MI}:${MI}Z`,
};
/** `:<period key>` ending a key, and the whole rest of a key after `<name>:`, per period. */
const PERIOD_KEY_END = Object.fromEntries(Object.entries(PERIOD_KEY).map(([p, re]) => [p, new RegExp(`:${re}$`)])) as Record<Period, RegExp>;
const PERIOD_KEY_ONLY = Object.fromEntries(Object.entries(PERIOD_KEY).map(([p, re]) => [p, new RegExp(`^${re}$`)])) as Record<Period, RegExp>;

/** What refuseScheduleKey knows of a schedule: its period, and whether it fans out (has jobs()). */
export interface ScheduleKeyShape {
  period: Period;
  fansOut: boolean;
}

/**
 * Refuses (UsageError naming the key and the schedule) a key the schedule's tick could
 * write: `<name>:<period key>` for a schedule without fan-out, `<name>:<entity>:<period
 * key>` for one with (`schedules` maps each name to its shape), the period key of its
 * period with its fields in range. A schedule's keys are written by its ticks alone: a
 * job enqueued by hand under one would take a period's key, and the tick would find it
 * taken and never write the schedule's job. Keys that only start with the name
 * (`daily:2026-12-04:mail`, `yearly:order:4711`: follow-up jobs) are left alone. Schedule
 * names hold no ':', so the key's part before its first ':' is the only name it can
 * belong to.
 */
export function refuseScheduleKey(key: string, schedules: ReadonlyMap<string, ScheduleKeyShape>): void {
  const colon = key.indexOf(':');
  if (colon <= 0) return;
  const name = key.slice(0, colon);
  const shape = schedules.get(name);
  if (shape === undefined) return;
  const rest = key.slice(colon + 1);
  const its = shape.fansOut ? PERIOD_KEY_END[shape.period].test(rest) && rest.search(PERIOD_KEY_END[shape.period]) > 0 : PERIOD_KEY_ONLY[shape.period].test(rest);
  if (!its) return;
  throw new UsageError(
    `job key ${JSON.stringify(shownText(key))} is a key of schedule '${name}' (its name, then ${shape.fansOut ? 'an entity and ' : ''}${shape.period === 'hour' ? 'an' : 'a'} ${shape.period} period key): a schedule's keys are written by its ticks; ` +
      `enqueued by hand, it would take a period's key and that tick would find it taken. To run a period now: \`cronq tick ${name} --at ISO\` (cronq.admin.tick)`,
  );
}

/** Most entities one tick's jobs() may yield (MAX_TICK_ENTITIES by default): past it the fan-out is stopped and its tick failed. */
export const MAX_TICK_ENTITIES = 10_000_000;

/**
 * jobs() yielded more entities than a tick takes (maxEntities): a generator that never
 * ends (a cursor that does not advance, a `for (;;)` without its break) would otherwise
 * hold its tick for ever, renewing its lease with every entity. Never retried.
 */
export class FanoutTooLargeError extends Error {
  override name = 'FanoutTooLargeError';
}

/** What a fan-out is told as it goes (enqueueTick). */
export interface EnqueueTickOptions extends Pick<EnqueueRowsOptions, 'afterBatch' | 'onRefused' | 'signal'> {
  /** Most entities jobs() may yield (default MAX_TICK_ENTITIES); the next one ends the fan-out with FanoutTooLargeError. */
  maxEntities?: number;
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
 * A key can be taken by a job this schedule did not write for this period (a hand
 * enqueue of `daily:2026-12-04`, a job of another kind): its schedule job is then never
 * written. Such keys are counted as `conflicting`, not `existing`, the oldest holder
 * named in `firstConflict`. The read of existing keys before a batch's INSERT
 * (enqueueRows) tells them apart in the same statement (keyHolders: the unique key
 * index, and the rows found), so a safety-net tick whose keys all exist sends no
 * statement more; only a batch whose INSERT found keys that read did not (a batch under
 * ten rows, one after a batch that found none, a key written meanwhile) reads who holds
 * its other keys after it. A batch with no existing key reads nothing more. `afterBatch`
 * is told the batch's existing keys as enqueueRows counts them, conflicting ones among them.
 *
 * An entity that cannot become a job (the database refuses its content, it is too large
 * for one statement, its key is too long, or jobs() yielded something that is not
 * `{ key, payload? }`) is refused alone: passed to `onRefused`, counted and listed in the
 * outcome, while the other entities are enqueued. Once `signal` aborts, the fan-out
 * stops (`stopped`), its gathered rows written, without waiting for a jobs() still working
 * on its next entity; the rest is left for a resumption.
 */
export async function enqueueTick(
  writer: TickWriter,
  schedule: Schedule,
  tick: { scheduledAt: Date; periodKey: string },
  { onEntity, afterBatch, maxEntities = MAX_TICK_ENTITIES, ...options }: EnqueueTickOptions = {},
): Promise<TickOutcome> {
  let conflicting = 0;
  let first: KeyHolder | null = null;
  /** Counts at most `most` of `outside` (lowest id first) as conflicting. */
  const taken = (outside: KeyHolder[], most: number) => {
    const count = Math.min(outside.length, most);
    conflicting += count;
    if (count > 0 && (first === null || outside[0].id < first.id)) first = outside[0];
  };
  const existingKeys = async (keys: string[]) => {
    const { existing, outside } = await writer.keyHolders(keys, schedule.name, tick.periodKey);
    taken(outside, outside.length);
    return existing;
  };
  const checked: EnqueueRowsOptions['afterBatch'] = async (batch) => {
    // Existing keys the read before the INSERT did not see: who holds them, among the others.
    const unseen = batch.existing - batch.present.size;
    if (unseen > 0) {
      const { outside } = await writer.keyHolders(batch.present.size === 0 ? batch.keys : batch.keys.filter((key) => !batch.present.has(key)), schedule.name, tick.periodKey);
      taken(outside, unseen);
    }
    await afterBatch?.(batch);
  };
  // Two batch INSERTs in flight: the database then uses both cores (about 1.5× the rate of one).
  const outcome = await enqueueRows(writer, tickRows(schedule, tick.scheduledAt, tick.periodKey, maxEntities, onEntity), { ...options, existingKeys, afterBatch: checked, parallel: 2 });
  // Never more than the existing rows (a row the server refused, a key jobs() repeated).
  const counted = Math.min(conflicting, outcome.existing);
  const holder = first as KeyHolder | null;
  return {
    ...outcome,
    existing: outcome.existing - counted,
    conflicting: counted,
    firstConflict: holder && { key: holder.key, kind: holder.kind, jobId: holder.id },
  };
}

async function* tickRows(schedule: Schedule, scheduledAt: Date, period: string, maxEntities: number, onEntity?: () => Promise<void> | undefined): AsyncGenerator<NewJobRow | RefusedRow> {
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
    if (index > maxEntities) throw new FanoutTooLargeError(`jobs() yielded more than ${maxEntities.toLocaleString('en-US')} entities; the fan-out was stopped there`);
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
