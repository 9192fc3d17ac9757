/**
 * The web console's own reads: completions per minute, daemons seen recently, and one
 * job by id or key. (Its other pages read through the stats, dead-letter, ledger and
 * pause statements.)
 *
 * Concurrency contract: plain reads (no locks, READ COMMITTED), each bounded so a page
 * costs the same with a million job rows: every statement walks an index range and
 * stops at a LIMIT. They are snapshots, stale at once; nothing here writes.
 */
import { sql, type SQL } from 'drizzle-orm';
import type { Executor } from '../db/client.ts';
import type { JobStatus } from '../db/schema.ts';
import { payloadColumns, payloadFieldsOf, type NoPayload, type PayloadBound, type PayloadFields, type PayloadReadOptions, type WithoutPayload } from './payloadRead.ts';
import { interval, parseDbTime, rows } from './sql.ts';

/** Done jobs read per queue at most for the completions chart (see completionsPerMinute). */
export const COMPLETIONS_SCAN_MAX = 20_000;
/** How long before its completion a job may have become available and still be counted. */
export const COMPLETION_LAG_MAX_MS = 6 * 3_600_000;

/** Completions per minute over the last hour, oldest minute first. */
export interface Completions {
  /** The minute each count starts at (database clock), 60 of them, the last one the current minute. */
  minutes: Date[];
  /** Jobs marked done in each minute, all queues together. */
  counts: number[];
  /**
   * True when a queue had 20,000 recent done jobs or more (the most read), or more than
   * COMPLETION_QUEUES_MAX queues had done jobs recent enough to count (the 1,000 with the
   * latest were read): counts may be a lower bound.
   */
  capped: boolean;
}

/** Queues whose recent done jobs one completions statement reads (one UNION ALL branch each). */
const COMPLETION_QUEUES_PER_STATEMENT = 100;
/** Queues the completions chart reads at most when it picks them itself (recentDoneQueues). */
export const COMPLETION_QUEUES_MAX = 1_000;

/**
 * Jobs finished 'done' in each of the last 60 minutes. Each queue's done jobs are read
 * newest-available first on the claim index (status, queue, available_at, id,
 * finished_time), from the index alone, at most COMPLETIONS_SCAN_MAX per queue and none
 * that became available over COMPLETION_LAG_MAX_MS ago; a job that waited longer than
 * that before finishing is not counted. (An index on finished_at would do better here
 * but cost every completion a second index write.) `queues`: the queues to read (stats
 * lists them), COMPLETION_QUEUES_PER_STATEMENT to a statement (a statement per queue
 * made 3,300 queues 3,300 round trips, seconds).
 */
export async function completionsPerMinute(exec: Executor, queues: readonly string[], { queuesLeftOut = false } = {}): Promise<Completions> {
  const nowResult = await exec.execute(sql`SELECT UTC_TIMESTAMP(6) AS now`);
  const now = parseDbTime(rows<{ now: string }>(nowResult)[0].now)!;
  const currentMinute = Math.floor(now.getTime() / 60_000) * 60_000;
  const first = currentMinute - 59 * 60_000;
  const counts = new Array<number>(60).fill(0);
  let capped = queuesLeftOut;
  for (let from = 0; from < queues.length; from += COMPLETION_QUEUES_PER_STATEMENT) {
    const part = queues.slice(from, from + COMPLETION_QUEUES_PER_STATEMENT);
    // Grouped by minute since the epoch without the session time zone (UNIX_TIMESTAMP would apply it).
    const branches = sql.join(
      part.map((queue, i) => sql`(SELECT ${i} AS part, recent.* FROM (${recentDoneSql(queue)}) recent)`),
      sql` UNION ALL `,
    );
    const result = await exec.execute(sql`SELECT part, TIMESTAMPDIFF(MINUTE, '1970-01-01', finished_at) AS minute, COUNT(*) AS n
      FROM (${branches}) recent
      GROUP BY part, minute`);
    const scanned = new Array<number>(part.length).fill(0);
    for (const row of rows<{ part: number | string; minute: number | string | null; n: number | string }>(result)) {
      scanned[Number(row.part)] += Number(row.n);
      if (row.minute === null) continue;
      const index = (Number(row.minute) * 60_000 - first) / 60_000;
      if (index >= 0 && index < 60) counts[index] += Number(row.n);
    }
    if (scanned.some((n) => n >= COMPLETIONS_SCAN_MAX)) capped = true;
  }
  return { minutes: counts.map((_, i) => new Date(first + i * 60_000)), counts, capped };
}

/**
 * The queues completionsPerMinute reads when not told: of `held` (heldStatuses), those
 * with a done job that became available within COMPLETION_LAG_MAX_MS (no other can have
 * one to count), at most COMPLETION_QUEUES_MAX of them, the latest available first;
 * `leftOut` when there were more. Pure.
 */
export function recentDoneQueues(held: ReadonlyArray<{ status: JobStatus; queue: string; latestUs: number }>): { queues: string[]; leftOut: boolean } {
  const recent = held.filter((h) => h.status === 'done' && h.latestUs <= COMPLETION_LAG_MAX_MS * 1000).sort((a, b) => a.latestUs - b.latestUs);
  return { queues: recent.slice(0, COMPLETION_QUEUES_MAX).map((h) => h.queue), leftOut: recent.length > COMPLETION_QUEUES_MAX };
}

/** The finish times of a queue's recently available done jobs, newest first, bounded (see completionsPerMinute). */
export function recentDoneSql(queue: string): SQL {
  return sql`SELECT finished_time AS finished_at FROM cronq_jobs FORCE INDEX (cronq_jobs_claim)
    WHERE status = 'done' AND queue = ${queue} AND available_at >= UTC_TIMESTAMP(6) - ${interval(COMPLETION_LAG_MAX_MS)}
    ORDER BY available_at DESC LIMIT ${COMPLETIONS_SCAN_MAX}`;
}

/** A daemon's row in cronq_daemons. */
export interface DaemonSeen {
  /** Its name: the `lockedBy` its leases carry (`host:pid` by default). */
  id: string;
  /** The host it runs on (os.hostname()). */
  host: string;
  /** Its process id on that host. */
  pid: number;
  /** The kinds it runs (none for a daemon that runs only the scheduler). */
  kinds: string[];
  /** null: every queue. */
  queues: string[] | null;
  /** When it started (database clock). */
  startedAt: Date;
  /** Its latest heartbeat (database clock): silent for three heartbeat intervals, it counts as stalled. */
  heartbeatAt: Date;
  /** Set when it stopped cleanly. */
  stoppedAt: Date | null;
}

/** Daemons listed at most (DaemonSeen rows). */
export const DAEMONS_SEEN_MAX = 200;

/** Daemons heard from within `withinMs` (heartbeat index), most recent first, at most DAEMONS_SEEN_MAX. */
export async function daemonsSeen(exec: Executor, withinMs: number): Promise<DaemonSeen[]> {
  const result = await exec.execute(sql`SELECT id, host, pid, kinds, queues, started_at, heartbeat_at, stopped_at
    FROM cronq_daemons WHERE heartbeat_at >= UTC_TIMESTAMP(6) - ${interval(withinMs)}
    ORDER BY heartbeat_at DESC LIMIT ${DAEMONS_SEEN_MAX}`);
  type Raw = { id: string; host: string; pid: number; kinds: unknown; queues: unknown; started_at: string; heartbeat_at: string; stopped_at: string | null };
  const json = (v: unknown) => (typeof v === 'string' ? JSON.parse(v) : v);
  return rows<Raw>(result).map((r) => ({
    id: r.id,
    host: r.host,
    pid: Number(r.pid),
    kinds: json(r.kinds) as string[],
    queues: json(r.queues) as string[] | null,
    startedAt: parseDbTime(r.started_at)!,
    heartbeatAt: parseDbTime(r.heartbeat_at)!,
    stoppedAt: parseDbTime(r.stopped_at),
  }));
}

/** One job row as an operator reads it, its payload included (see PayloadFields). */
export interface JobRecord extends PayloadFields {
  /** The row's id (cronq_jobs.id). */
  id: number;
  /** The queue it waits in or was claimed from. */
  queue: string;
  /** Its kind: the task or schedule that runs it. */
  kind: string;
  /** Its unique key (job_key). */
  key: string;
  /** Where it stands now: ready, reserved (a handler has it), done, dead or cancelled. */
  status: JobStatus;
  /** Attempts claimed so far (a release on shutdown gives one back). */
  attempts: number;
  /** Attempts it gets in all before it goes dead. */
  maxAttempts: number;
  /** When it may be claimed next (its runAt, or a retry's backoff); for a finished job, the last such time. */
  availableAt: Date;
  /** The lease holder (host:pid) and until when; null when not reserved. */
  lockedBy: string | null;
  /** When its lease runs out (null unless reserved; past once the lease ran out and until recovery comes). */
  leaseUntil: Date | null;
  /** How many of its leases ran out, and runs a shutdown's grace cut short: at maxLeaseExpiries it goes dead. */
  leaseExpiries: number;
  /** The latest failed attempt's error, one line (null before any failure, and once done). */
  lastError: string | null;
  /** Who cancelled it (null unless cancelled). */
  cancelledBy: string | null;
  /** Why it was cancelled (null unless cancelled). */
  cancelReason: string | null;
  /** The schedule whose tick enqueued it (null for a job enqueued by hand). */
  scheduleName: string | null;
  /** That tick's period key (null for a job enqueued by hand). */
  periodKey: string | null;
  /** When it was enqueued (database clock, as every time here). */
  createdAt: Date;
  /** When its row last changed. */
  updatedAt: Date;
  /** When it was done, went dead or was cancelled; null until then. */
  finishedAt: Date | null;
}

/** A job by its id or by its key. */
export type JobTarget =
  | {
      /** The row's id (cronq_jobs.id). */
      id: number;
    }
  | {
      /** Its unique key (job_key), compared byte for byte. */
      key: string;
    };

/**
 * One job by primary key (a number) or by its unique key (a string); null when none.
 * `payloadCharsMax`: read only the payload's first that many characters (code points; at
 * most four bytes each) from the database, so a page showing a job costs the same whether
 * its payload is 1 kB or 60 MB. (The server still casts the whole, as an unbounded read
 * does, so a payload over its max_allowed_packet stays null, never a start of it.)
 * `payload: false`: read none of it, nor its size; the record has no payload fields.
 */
export async function jobByIdOrKey(exec: Executor, target: JobTarget, options: NoPayload): Promise<WithoutPayload<JobRecord> | null>;
export async function jobByIdOrKey(exec: Executor, target: JobTarget, options?: PayloadBound): Promise<JobRecord | null>;
export async function jobByIdOrKey(exec: Executor, target: JobTarget, options?: PayloadReadOptions): Promise<JobRecord | WithoutPayload<JobRecord> | null>;
export async function jobByIdOrKey(exec: Executor, target: JobTarget, options: PayloadReadOptions = {}): Promise<JobRecord | WithoutPayload<JobRecord> | null> {
  const where = 'id' in target ? sql`id = ${target.id}` : sql`job_key = ${target.key}`;
  const result = await exec.execute(sql`SELECT id, queue, kind, job_key${payloadColumns(sql.raw('payload'), options)},
      status, attempts, max_attempts, available_at,
      lease_until, locked_by, lease_expiries, last_error, cancelled_by, cancel_reason, schedule_name, period_key,
      created_at, updated_at, finished_at
    FROM cronq_jobs WHERE ${where} LIMIT 1`);
  const r = rows<Record<string, any>>(result)[0];
  if (!r) return null;
  return {
    id: Number(r.id),
    queue: r.queue,
    kind: r.kind,
    key: r.job_key,
    ...payloadFieldsOf(r, options),
    status: r.status,
    attempts: Number(r.attempts),
    maxAttempts: Number(r.max_attempts),
    availableAt: parseDbTime(r.available_at)!,
    lockedBy: r.status === 'reserved' ? r.locked_by : null,
    leaseUntil: r.status === 'reserved' ? parseDbTime(r.lease_until) : null,
    leaseExpiries: Number(r.lease_expiries),
    lastError: r.last_error,
    cancelledBy: r.cancelled_by,
    cancelReason: r.cancel_reason,
    scheduleName: r.schedule_name,
    periodKey: r.period_key,
    createdAt: parseDbTime(r.created_at)!,
    updatedAt: parseDbTime(r.updated_at)!,
    finishedAt: parseDbTime(r.finished_at),
  };
}
