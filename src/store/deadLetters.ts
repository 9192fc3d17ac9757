/**
 * The only place that writes dead-letter triage SQL: listing, grouping and showing
 * dead letters, and resolving them (requeue the job, or discard and leave it dead).
 *
 * Concurrency contract, shared by everything below:
 * - "now" is the database clock (`UTC_TIMESTAMP(6)`), never the host's.
 * - A dead letter is resolved at most once. Resolving locks its row (`FOR UPDATE`),
 *   re-checks `reviewed_at IS NULL` under that lock, and sets `reviewed_at` and
 *   `resolution` in the same transaction as any change to the job, so two operators
 *   triaging the same row at once cannot both act: the second sees it reviewed.
 * - Locks are always taken dead letter first, then job rows in id order. The worker
 *   locks a job and then only inserts new dead letters, so the two never wait on each
 *   other in a cycle.
 * - Requeue changes the job only while it is still 'dead' and this dead letter is its
 *   latest (the job did not die again since), both re-checked under the job's row lock.
 */
import { sql, type SQL } from 'drizzle-orm';
import type { Db, Executor } from '../db/client.ts';
import type { JobStatus } from '../db/schema.ts';
import { UsageError } from '../errors.ts';
import { charLength, longerThanChars } from '../runtime/chars.ts';
import { firstLine } from '../runtime/errorText.ts';
import { reasonGroup } from './failureReason.ts';
import { payloadColumns, payloadFieldsOf, type NoPayload, type PayloadBound, type PayloadFields, type PayloadReadOptions, type WithoutPayload } from './payloadRead.ts';
import { NO_LEASE, NO_TIME, NOW, parseDbTime, PAYLOAD_KEPT, rows, toDbTime } from './sql.ts';

/** The first line of failure_reason, computed by the server so long reasons stay there. */
const FIRST_LINE = sql.raw('SUBSTRING_INDEX(failure_reason, CHAR(10 USING utf8mb4), 1)');

/**
 * Most characters of a reason's first line a listing carries (DeadLetterSummary.reason):
 * the daemon writes reasons of at most 2,000 characters, but one written by hand in SQL
 * may be a single line of megabytes, and a page of 100 such rows would carry them all.
 * The whole reason is in `get` (cronq dead show).
 */
export const LISTED_REASON_MAX = 1_000;
const LISTED_FIRST_LINE = sql.raw(`LEFT(SUBSTRING_INDEX(failure_reason, CHAR(10 USING utf8mb4), 1), ${LISTED_REASON_MAX})`);

/** Dead letters resolved per transaction by the bulk operations. */
export const REVIEW_BATCH_SIZE = 500;
/** Longest accepted triage reason (it is stored in `resolution` after 'requeued: '). */
export const MAX_REASON_LENGTH = 1000;

/** Which dead letters an operation looks at. Every field narrows; none means all. */
export interface DeadLetterFilter {
  /** Only dead letters of jobs from this queue. */
  queue?: string;
  /** Only dead letters of jobs of this kind. */
  kind?: string;
  /** Only dead letters with `dead_at` at or after this instant. */
  since?: Date;
}

/** One dead letter as `dead list` shows it. */
export interface DeadLetterSummary {
  /** The dead letter's id (cronq_dead_letters.id): what requeue, discard and `dead show` take. */
  id: number;
  /** The job row it was copied from; a job that died again has a dead letter per death. */
  jobId: number;
  /** The job's queue when it died. */
  queue: string;
  /** The job's kind. */
  kind: string;
  /** The job's key. */
  key: string;
  /** Attempts the job had made when it died. */
  attempts: number;
  /** When the job went dead (database clock). */
  deadAt: Date;
  /** The first line of failure_reason, its first LISTED_REASON_MAX characters. */
  reason: string;
  /** When an operator requeued or discarded it; null while it awaits review. */
  reviewedAt: Date | null;
  /** What the review did and why: `requeued: <reason>` or `discarded: <reason>`; null while unreviewed. */
  resolution: string | null;
}

/** One dead letter in full (its payload: see PayloadFields), with the current state of its job row (null when the row is gone). */
export interface DeadLetterDetail extends DeadLetterSummary, PayloadFields {
  /** The last error in full, as the job row's last_error had it when it died (bounded, free of secrets). */
  failureReason: string;
  /** Its job row as it is now (it may have been requeued, run and died again since); null when the row is gone (pruned or deleted). */
  job: {
    /** The job row's id (= jobId). */
    id: number;
    /** Its status now. */
    status: JobStatus;
    /** Its attempts now (0 after a requeue, until claimed). */
    attempts: number;
    /** Attempts it gets in all. */
    maxAttempts: number;
    /** When it may be claimed next. */
    availableAt: Date;
    /** When its row last changed. */
    updatedAt: Date;
    /** Its latest failed attempt's error (null before any since a requeue, and once done). */
    lastError: string | null;
  } | null;
}

/** Dead letters sharing a kind and a normalised first line (see `normaliseReason`). */
export interface DeadLetterGroup {
  /** The kind the group's dead letters share. */
  kind: string;
  /** The normalised first line. */
  reason: string;
  /** Dead letters in the group (those the query covers). */
  count: number;
  /** The oldest one's dead_at. */
  firstDeadAt: Date;
  /** The newest one's dead_at. */
  lastDeadAt: Date;
  /** The lowest dead letter id in the group, to pass to `dead show`. */
  exampleId: number;
}

/** What resolving one dead letter by id did. Only 'done' changed anything. */
export type ReviewOutcome =
  | {
      /** Reviewed now, by this call: the dead letter is marked and, for a requeue, its job is ready again. */
      status: 'done';
      /** What was done. */
      action: ReviewAction;
      /** The dead letter reviewed. */
      deadLetterId: number;
      /** Its job row. */
      jobId: number;
      /** Its job's key. */
      key: string;
    }
  | {
      /** No dead letter has that id: nothing changed. */
      status: 'not_found';
      /** The id asked for. */
      deadLetterId: number;
    }
  | {
      /** Reviewed before (by another operator, perhaps at the same moment): nothing changed. */
      status: 'already_reviewed';
      /** The dead letter asked for. */
      deadLetterId: number;
      /** When the earlier review was made. */
      reviewedAt: Date;
      /** What the earlier review recorded (see DeadLetterSummary.resolution). */
      resolution: string | null;
    }
  | {
      /** Requeue only: the job row is not 'dead' any more; nothing changed. */
      status: 'job_not_dead';
      /** The dead letter asked for (left unreviewed). */
      deadLetterId: number;
      /** Its job row. */
      jobId: number;
      /** The job's status now; null when the row no longer exists. */
      jobStatus: JobStatus | null;
    }
  | {
      /** Requeue only: the job died again later; its newer dead letter is the one to act on. Nothing changed. */
      status: 'superseded';
      /** The dead letter asked for (left unreviewed). */
      deadLetterId: number;
      /** Its job row. */
      jobId: number;
      /** The job's newest dead letter: requeue that one. */
      latestDeadLetterId: number;
    };

/** 'requeue': the job goes back to 'ready'. 'discard': the job stays dead. */
export type ReviewAction = 'requeue' | 'discard';

/** What a bulk resolution did, over all its batches. */
export interface BulkReviewResult {
  /** Dead letters resolved (for requeue: jobs put back to 'ready'). */
  touched: number;
  /** Requeue only: matching dead letters left unreviewed because their job is not 'dead'. */
  skippedJobNotDead: number;
  /** Requeue only: matching dead letters left unreviewed because their job died again later. */
  skippedSuperseded: number;
  /**
   * Matching dead letters (that existed at the start) still unreviewed at the end beyond
   * the two above: ones another transaction held when their batch passed (SKIP LOCKED),
   * which it then did not resolve (an operator's by-hand transaction rolled back, say).
   * A lower bound when others resolve matching rows meanwhile. Absent when interrupted.
   */
  skippedHeld?: number;
  /**
   * True when `signal` stopped it between two batches: the counts are what the committed
   * batches did, and the matching dead letters after them are still unreviewed (running
   * it again goes on from there; it never resolves one twice).
   */
  interrupted?: boolean;
}

/** How a bulk resolution reports and stops. */
export interface BulkReviewOptions {
  /** Dead letters resolved per transaction (REVIEW_BATCH_SIZE). */
  batchSize?: number;
  /** Called after each committed batch with the totals so far. */
  onBatch?: (soFar: BulkReviewResult) => void;
  /** Once aborted, no further batch starts (the one in flight commits or rolls back whole). */
  signal?: AbortSignal;
}

const time = (value: string | Date): Date => parseDbTime(value)!;

function filterSql(filter: DeadLetterFilter): SQL {
  const parts: SQL[] = [];
  if (filter.queue !== undefined) parts.push(sql`queue = ${filter.queue}`);
  if (filter.kind !== undefined) parts.push(sql`kind = ${filter.kind}`);
  if (filter.since !== undefined) parts.push(sql`dead_at >= ${toDbTime(filter.since)}`);
  return parts.length === 0 ? sql`TRUE` : sql.join(parts, sql` AND `);
}

const unreviewedOnly = (includeReviewed: boolean | undefined): SQL => (includeReviewed ? sql`TRUE` : sql`reviewed_at IS NULL`);

type SummaryRow = {
  id: number;
  job_id: number;
  queue: string;
  kind: string;
  job_key: string;
  attempts: number;
  dead_at: string;
  reviewed_at: string | null;
  resolution: string | null;
  reason: string;
};

const SUMMARY_COLUMNS = sql`id, job_id, queue, kind, job_key, attempts, dead_at, reviewed_at, resolution, ${LISTED_FIRST_LINE} AS reason`;

function toSummary(r: SummaryRow): DeadLetterSummary {
  return {
    id: Number(r.id),
    jobId: Number(r.job_id),
    queue: r.queue,
    kind: r.kind,
    key: r.job_key,
    attempts: Number(r.attempts),
    deadAt: time(r.dead_at),
    reason: firstLine(r.reason ?? ''),
    reviewedAt: parseDbTime(r.reviewed_at),
    resolution: r.resolution,
  };
}

/**
 * Dead letters matching `filter`, oldest `dead_at` first (then id); unreviewed only
 * unless `includeReviewed`. At most `limit` rows; `more` says whether others match.
 * Unreviewed listing reads the `cronq_dead_letters_review` index in order.
 */
export async function listDeadLetters(
  exec: Executor,
  options: DeadLetterFilter & { includeReviewed?: boolean; limit: number },
): Promise<{ letters: DeadLetterSummary[]; more: boolean }> {
  const result = await exec.execute(sql`SELECT ${SUMMARY_COLUMNS}
    FROM cronq_dead_letters
    WHERE ${unreviewedOnly(options.includeReviewed)} AND ${filterSql(options)}
    ORDER BY dead_at, id
    LIMIT ${options.limit + 1}`);
  const found = rows<SummaryRow>(result).map(toSummary);
  return { letters: found.slice(0, options.limit), more: found.length > options.limit };
}

/**
 * Counts of dead letters matching `filter` (unreviewed only unless `includeReviewed`),
 * grouped by kind and normalised first line of failure_reason (`reason_group`, see
 * `reasonGroup`). The server groups on the `cronq_dead_letters_group` index, so the cost
 * follows the number of matching rows, not their text; rows written before migration
 * 0006 (reason_group NULL) are grouped by first line and normalised here, then merged.
 * Largest group first, then by kind and reason. With `limit`, only the `limit` largest:
 * the server ranks and cuts its groups (so a table of many distinct reasons costs the
 * caller `limit` rows, not one per reason), and the pre-0006 rows' groups are merged into
 * those before the cut.
 */
export async function groupDeadLetters(
  exec: Executor,
  options: DeadLetterFilter & { includeReviewed?: boolean; limit?: number },
): Promise<DeadLetterGroup[]> {
  const where = sql`${unreviewedOnly(options.includeReviewed)} AND ${filterSql(options)}`;
  const grouped = await exec.execute(sql`SELECT kind, reason_group AS reason, COUNT(*) AS n,
      MIN(dead_at) AS first_dead_at, MAX(dead_at) AS last_dead_at, MIN(id) AS example_id
    FROM cronq_dead_letters
    WHERE ${where} AND reason_group IS NOT NULL
    GROUP BY kind, reason_group
    ${options.limit === undefined ? sql`` : sql`ORDER BY n DESC, kind, reason_group LIMIT ${options.limit}`}`);
  const legacy = await exec.execute(sql`SELECT kind, ${FIRST_LINE} AS reason, COUNT(*) AS n,
      MIN(dead_at) AS first_dead_at, MAX(dead_at) AS last_dead_at, MIN(id) AS example_id
    FROM cronq_dead_letters
    WHERE ${where} AND reason_group IS NULL
    GROUP BY kind, reason`);
  type GroupRow = { kind: string; reason: string | null; n: number; first_dead_at: string; last_dead_at: string; example_id: number };
  const groups = new Map<string, DeadLetterGroup>();
  const add = (r: GroupRow, reason: string) => {
    const id = JSON.stringify([r.kind, reason]);
    const first = time(r.first_dead_at);
    const last = time(r.last_dead_at);
    const seen = groups.get(id);
    if (!seen) {
      groups.set(id, { kind: r.kind, reason, count: Number(r.n), firstDeadAt: first, lastDeadAt: last, exampleId: Number(r.example_id) });
      return;
    }
    seen.count += Number(r.n);
    if (first < seen.firstDeadAt) seen.firstDeadAt = first;
    if (last > seen.lastDeadAt) seen.lastDeadAt = last;
    seen.exampleId = Math.min(seen.exampleId, Number(r.example_id));
  };
  for (const r of rows<GroupRow>(grouped)) add(r, r.reason ?? '');
  for (const r of rows<GroupRow>(legacy)) add(r, reasonGroup(r.reason ?? ''));
  return [...groups.values()]
    .sort((a, b) => b.count - a.count || a.kind.localeCompare(b.kind) || a.reason.localeCompare(b.reason))
    .slice(0, options.limit);
}

/**
 * Inside the transaction that just inserted them (holding their jobs' row locks): sets
 * `reason_group` on the dead letters of jobs `jobIds` with ids from `firstId` (the
 * insert's first generated id) that have none, from the failure_reason the server stored
 * (used when that reason was an SQL expression). Only this transaction's own new rows
 * match: no other transaction can add a dead letter for a job whose row it holds locked,
 * so no lock is taken on any other dead letter.
 */
export async function fillReasonGroups(tx: Executor, jobIds: number[], firstId: number): Promise<void> {
  const missing = rows<{ id: number; reason: string }>(
    await tx.execute(sql`SELECT id, ${FIRST_LINE} AS reason FROM cronq_dead_letters
      WHERE id >= ${firstId} AND job_id IN ${jobIds} AND reason_group IS NULL`),
  );
  const byGroup = new Map<string, number[]>();
  for (const r of missing) {
    const group = reasonGroup(r.reason);
    const ids = byGroup.get(group);
    if (ids) ids.push(Number(r.id));
    else byGroup.set(group, [Number(r.id)]);
  }
  for (const [group, ids] of byGroup) {
    await tx.execute(sql`${PAYLOAD_KEPT}UPDATE cronq_dead_letters SET reason_group = ${group} WHERE id IN ${ids}`);
  }
}

/**
 * One dead letter by its own id (`cronq_dead_letters.id`) with its job's current row; null
 * when there is none. `payloadCharsMax`: read only the payload's first that many
 * characters (code points) from the database, as jobByIdOrKey does (the whole is still
 * cast, so one over max_allowed_packet stays null). `payload: false`: read none of it,
 * nor its size; the result has no payload fields.
 */
export async function getDeadLetter(exec: Executor, id: number, options: NoPayload): Promise<WithoutPayload<DeadLetterDetail> | null>;
export async function getDeadLetter(exec: Executor, id: number, options?: PayloadBound): Promise<DeadLetterDetail | null>;
export async function getDeadLetter(exec: Executor, id: number, options?: PayloadReadOptions): Promise<DeadLetterDetail | WithoutPayload<DeadLetterDetail> | null>;
export async function getDeadLetter(exec: Executor, id: number, options: PayloadReadOptions = {}): Promise<DeadLetterDetail | WithoutPayload<DeadLetterDetail> | null> {
  const result = await exec.execute(sql`SELECT d.id, d.job_id, d.queue, d.kind, d.job_key, d.attempts, d.dead_at,
      d.reviewed_at, d.resolution, d.failure_reason${payloadColumns(sql.raw('d.payload'), options)},
      j.id AS j_id, j.status AS j_status, j.attempts AS j_attempts, j.max_attempts AS j_max_attempts,
      j.available_at AS j_available_at, j.updated_at AS j_updated_at, j.last_error AS j_last_error
    FROM cronq_dead_letters d LEFT JOIN cronq_jobs j ON j.id = d.job_id
    WHERE d.id = ${id}`);
  type DetailRow = Omit<SummaryRow, 'reason'> & {
    failure_reason: string;
    payload_text?: string | null;
    payload_bytes?: number;
    payload_chars?: number;
    j_id: number | null;
    j_status: JobStatus | null;
    j_attempts: number;
    j_max_attempts: number;
    j_available_at: string;
    j_updated_at: string;
    j_last_error: string | null;
  };
  const [r] = rows<DetailRow>(result);
  if (!r) return null;
  return {
    ...toSummary({ ...r, reason: r.failure_reason }),
    failureReason: r.failure_reason,
    ...payloadFieldsOf(r, options),
    job:
      r.j_id === null
        ? null
        : {
            id: Number(r.j_id),
            status: r.j_status!,
            attempts: Number(r.j_attempts),
            maxAttempts: Number(r.j_max_attempts),
            availableAt: time(r.j_available_at),
            updatedAt: time(r.j_updated_at),
            lastError: r.j_last_error,
          },
  };
}

function checkReason(reason: string): string {
  if (typeof reason !== 'string') throw new UsageError('a reason is required');
  const trimmed = reason.trim();
  if (trimmed === '') throw new UsageError('a reason is required');
  if (longerThanChars(trimmed, MAX_REASON_LENGTH)) throw new UsageError(`the reason is ${charLength(trimmed)} characters long; at most ${MAX_REASON_LENGTH}`);
  return trimmed;
}

function resolutionText(action: ReviewAction, reason: string): string {
  return `${action === 'requeue' ? 'requeued' : 'discarded'}: ${reason}`;
}

type LockedLetter = { id: number; job_id: number };

/**
 * Inside a transaction holding the locks of `letters` (all unreviewed): for requeue,
 * locks their jobs in id order and keeps the letters whose job is still 'dead' and
 * whose latest dead letter they are; puts those jobs back to 'ready' (attempts and
 * lease expiries 0, available now, lease cleared, last_error kept) and marks the kept letters reviewed.
 * Discard keeps every letter and leaves jobs alone.
 */
async function resolveLocked(
  tx: Executor,
  action: ReviewAction,
  letters: LockedLetter[],
  reason: string,
): Promise<{ done: number[]; jobNotDead: Map<number, JobStatus | null>; superseded: Map<number, number> }> {
  const jobNotDead = new Map<number, JobStatus | null>();
  const superseded = new Map<number, number>();
  let kept = letters;
  if (action === 'requeue') {
    const jobIds = [...new Set(letters.map((l) => Number(l.job_id)))].sort((a, b) => a - b);
    const statuses = new Map(
      rows<{ id: number; status: JobStatus }>(
        await tx.execute(sql`SELECT id, status FROM cronq_jobs WHERE id IN ${jobIds} ORDER BY id FOR UPDATE`),
      ).map((r) => [Number(r.id), r.status]),
    );
    // With the job locked and dead, no new dead letter can appear for it: this read is stable.
    const latest = new Map(
      rows<{ job_id: number; latest: number }>(
        await tx.execute(sql`SELECT job_id, MAX(id) AS latest FROM cronq_dead_letters WHERE job_id IN ${jobIds} GROUP BY job_id`),
      ).map((r) => [Number(r.job_id), Number(r.latest)]),
    );
    kept = letters.filter((l) => {
      const status = statuses.get(Number(l.job_id)) ?? null;
      if (status !== 'dead') {
        jobNotDead.set(Number(l.id), status);
        return false;
      }
      const newest = latest.get(Number(l.job_id))!;
      if (newest !== Number(l.id)) {
        superseded.set(Number(l.id), newest);
        return false;
      }
      return true;
    });
    if (kept.length > 0) {
      await tx.execute(sql`${PAYLOAD_KEPT}UPDATE cronq_jobs
        SET status = 'ready', attempts = 0, lease_expiries = 0, available_at = ${NOW}, ${NO_LEASE},
            finished_time = ${NO_TIME}, updated_at = ${NOW}
        WHERE id IN ${kept.map((l) => Number(l.job_id))} AND status = 'dead'`);
    }
  }
  const done = kept.map((l) => Number(l.id));
  if (done.length > 0) {
    await tx.execute(sql`${PAYLOAD_KEPT}UPDATE cronq_dead_letters
      SET reviewed_at = ${NOW}, resolution = ${resolutionText(action, reason)}
      WHERE id IN ${done} AND reviewed_at IS NULL`);
  }
  return { done, jobNotDead, superseded };
}

/**
 * Resolves one dead letter by its own id: `requeue` puts the same job row back to
 * 'ready' (attempts and lease expiries 0, available now; its key and id stay, so
 * nothing is duplicated), `discard` leaves the job dead. Either sets `reviewed_at` and
 * `resolution` ('requeued: REASON' / 'discarded: REASON') in the same transaction. Waits (bounded by
 * the lock wait timeout) for another operator holding the row, then re-checks it.
 * Any outcome but 'done' changed nothing. Throws UsageError for an empty reason.
 */
export async function resolveDeadLetter(db: Db, id: number, action: ReviewAction, reason: string): Promise<ReviewOutcome> {
  const why = checkReason(reason);
  return db.transaction(async (tx) => {
    const [letter] = rows<LockedLetter & { job_key: string; reviewed_at: string | null; resolution: string | null }>(
      await tx.execute(sql`SELECT id, job_id, job_key, reviewed_at, resolution FROM cronq_dead_letters WHERE id = ${id} FOR UPDATE`),
    );
    if (!letter) return { status: 'not_found', deadLetterId: id };
    if (letter.reviewed_at !== null) {
      return { status: 'already_reviewed', deadLetterId: id, reviewedAt: time(letter.reviewed_at), resolution: letter.resolution };
    }
    const jobId = Number(letter.job_id);
    const { done, jobNotDead, superseded } = await resolveLocked(tx, action, [letter], why);
    if (jobNotDead.has(id)) return { status: 'job_not_dead', deadLetterId: id, jobId, jobStatus: jobNotDead.get(id)! };
    if (superseded.has(id)) return { status: 'superseded', deadLetterId: id, jobId, latestDeadLetterId: superseded.get(id)! };
    if (done.length !== 1) throw new Error(`dead letter ${id} was locked and unreviewed but not resolved`);
    return { status: 'done', action, deadLetterId: id, jobId, key: letter.job_key };
  });
}

/**
 * Resolves every unreviewed dead letter matching `filter` that existed when the call
 * started (so jobs that die again meanwhile are not chased), oldest first, in
 * transactions of at most `batchSize` rows. Each batch locks its dead letters with
 * `FOR UPDATE SKIP LOCKED` (rows another operator holds right now are left to them)
 * and then applies exactly what `resolveDeadLetter` would. An empty filter means every
 * unreviewed dead letter. Returns how many it resolved and, for requeue, how many it
 * left unreviewed because the job is no longer dead or died again later. `onBatch` hears
 * the totals after each commit; an aborted `signal` stops it before the next batch
 * (`interrupted`), so a run stopped midway has resolved whole batches only.
 */
export async function resolveMatching(
  db: Db,
  filter: DeadLetterFilter,
  action: ReviewAction,
  reason: string,
  { batchSize = REVIEW_BATCH_SIZE, onBatch, signal }: BulkReviewOptions = {},
): Promise<BulkReviewResult> {
  const why = checkReason(reason);
  const [{ until }] = rows<{ until: string }>(await db.execute(sql`SELECT CAST(${NOW} AS CHAR) AS until`));
  const total: BulkReviewResult = { touched: 0, skippedJobNotDead: 0, skippedSuperseded: 0 };
  let cursor: { deadAt: string; id: number } | null = null;
  for (;;) {
    if (signal?.aborted) return { ...total, interrupted: true };
    const after: SQL = cursor
      ? sql`((dead_at = ${cursor.deadAt} AND id > ${cursor.id}) OR dead_at > ${cursor.deadAt}) AND `
      : sql``;
    const batch = await db.transaction(async (tx) => {
      const letters = rows<LockedLetter & { dead_at_text: string }>(
        await tx.execute(sql`SELECT id, job_id, CAST(dead_at AS CHAR) AS dead_at_text
          FROM cronq_dead_letters
          WHERE reviewed_at IS NULL AND ${after}dead_at <= ${until} AND ${filterSql(filter)}
          ORDER BY dead_at, id
          LIMIT ${batchSize}
          FOR UPDATE SKIP LOCKED`),
      );
      if (letters.length === 0) return null;
      const outcome = await resolveLocked(tx, action, letters, why);
      return { outcome, count: letters.length, last: letters.at(-1)! };
    });
    if (!batch) break;
    total.touched += batch.outcome.done.length;
    total.skippedJobNotDead += batch.outcome.jobNotDead.size;
    total.skippedSuperseded += batch.outcome.superseded.size;
    cursor = { deadAt: batch.last.dead_at_text, id: Number(batch.last.id) };
    onBatch?.({ ...total });
    if (batch.count < batchSize) break;
  }
  // A plain count: what SKIP LOCKED passed over and nobody resolved shows up here.
  const [{ open }] = rows<{ open: number }>(
    await db.execute(sql`SELECT COUNT(*) AS open FROM cronq_dead_letters
      WHERE reviewed_at IS NULL AND dead_at <= ${until} AND ${filterSql(filter)}`),
  );
  return { ...total, skippedHeld: Math.max(0, Number(open) - total.skippedJobNotDead - total.skippedSuperseded) };
}
