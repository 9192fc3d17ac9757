/**
 * The tables people query from SQL. Names and columns are part of the public
 * contract: change them only through a new migration (`npm run generate`).
 *
 * Every time is UTC `DATETIME(6)` written from the database clock (`UTC_TIMESTAMP(6)`),
 * so hosts with skewed clocks agree on leases and backoff.
 */
import { sql } from 'drizzle-orm';
import {
  bigint,
  boolean,
  char,
  datetime,
  index,
  int,
  json,
  mysqlEnum,
  mysqlTable,
  primaryKey,
  smallint,
  text,
  uniqueIndex,
  varchar,
} from 'drizzle-orm/mysql-core';

const utcNow = sql`(UTC_TIMESTAMP(6))`;
const timestamp = (name: string) => datetime(name, { mode: 'date', fsp: 6 });

/** The statuses a job row can have (cronq_jobs.status). */
export const JOB_STATUSES = ['ready', 'reserved', 'done', 'dead', 'cancelled'] as const;
/** A job's status: ready, reserved (claimed), done, dead or cancelled. */
export type JobStatus = (typeof JOB_STATUSES)[number];

/** Longest normalised reason kept in `cronq_dead_letters.reason_group` (the group index covers all of it). */
export const REASON_GROUP_MAX = 512;

/** Longest accepted job key (the unique index covers all of it; utf8mb4 → 1020 bytes). */
export const MAX_KEY_LENGTH = 255;

/**
 * How the lease is stored (cronq_jobs.lease_fence, lease_deadline, lease_holder and
 * finished_time). InnoDB rewrites a row in place only when no column it changes changes
 * its stored length; a NULL becoming a value, or a name of another length, makes it
 * rebuild the whole record, payload included. So these columns hold a blank of their
 * written width instead of NULL: '' for the CHAR(32) fence, NO_TIME for times, and
 * holders right-padded with spaces to holderWidth bytes of UTF-8, the blank's size (a
 * longer name is stored whole, at the cost of that rewrite). The claim and the
 * completion then write each row in place; on a 100,000-job drain that was a quarter
 * more jobs per second.
 */
export const LEASE_STORAGE = {
  /** What a time column holds for "none" (read as NULL through the public columns). */
  noTime: '1970-01-01 00:00:00.000000',
  /** Holder names are right-padded with spaces to this many bytes (UTF-8: a multibyte character counts its bytes). */
  holderWidth: 48,
} as const;

const noTimeSql = sql.raw(`'${LEASE_STORAGE.noTime}'`);

/**
 * The columns of cronq_jobs that people read: every column but the lease storage (each
 * call builds them anew, for a table of its own). `cronq/schema` shows cronq_jobs with
 * these alone.
 */
export function jobReadColumns() {
  return {
    id: bigint('id', { mode: 'number', unsigned: true }).autoincrement().primaryKey(),
    queue: varchar('queue', { length: 64 }).notNull().default('default'),
    kind: varchar('kind', { length: 128 }).notNull(),
    jobKey: varchar('job_key', { length: MAX_KEY_LENGTH }).notNull(),
    payload: json('payload').notNull(),
    status: mysqlEnum('status', JOB_STATUSES).notNull().default('ready'),
    attempts: smallint('attempts', { unsigned: true }).notNull().default(0),
    maxAttempts: smallint('max_attempts', { unsigned: true }).notNull().default(5),
    availableAt: timestamp('available_at').notNull().default(utcNow),
    lastError: text('last_error'),
    /**
     * How many times this job's lease expired while it was reserved: the process running it
     * stopped without finishing it (crashed, was killed, or lost the database for a whole
     * lease). Lease recovery counts them; a job that keeps doing it goes dead.
     */
    leaseExpiries: smallint('lease_expiries', { unsigned: true }).notNull().default(0),
    /** Who cancelled the job (status 'cancelled'), and why. */
    cancelledBy: varchar('cancelled_by', { length: 255 }),
    cancelReason: varchar('cancel_reason', { length: 255 }),
    scheduleName: varchar('schedule_name', { length: 64 }),
    periodKey: varchar('period_key', { length: 32 }),
    /** The schedule tick this job belongs to (null for ad-hoc jobs). */
    scheduledAt: timestamp('scheduled_at'),
    createdAt: timestamp('created_at').notNull().default(utcNow),
    updatedAt: timestamp('updated_at').notNull().default(utcNow),
    /** The lease token while the job has one (reserved, or kept by a done, dead or cancelled job), else NULL. */
    leaseToken: char('lease_token', { length: 32 }).generatedAlwaysAs(sql`NULLIF(\`lease_fence\`, '')`, { mode: 'virtual' }),
    /** When the lease of a reserved job ends, else NULL. */
    leaseUntil: timestamp('lease_until').generatedAlwaysAs(sql`NULLIF(\`lease_deadline\`, ${noTimeSql})`, { mode: 'virtual' }),
    /** Who holds or last held the job's lease (`host:pid`), NULL when it waits for a claim. */
    lockedBy: varchar('locked_by', { length: 255 }).generatedAlwaysAs(sql`NULLIF(RTRIM(\`lease_holder\`), '')`, { mode: 'virtual' }),
    /** When the job finished (done, dead or cancelled), else NULL. */
    finishedAt: timestamp('finished_at').generatedAlwaysAs(sql`NULLIF(\`finished_time\`, ${noTimeSql})`, { mode: 'virtual' }),
  };
}

/** The lease storage columns (LEASE_STORAGE): written by cronq's store, read through jobReadColumns' virtual columns. */
function leaseStorageColumns() {
  return {
    /**
     * Storage of the lease: the claim overwrites these four in place, so each keeps one
     * width in every state (see LEASE_STORAGE). Read the lease through `lease_token`,
     * `lease_until`, `locked_by` and `finished_at` (jobReadColumns), which show NULL where these hold their blank.
     *
     * The fence for every later write: 32 hex characters, the claim's 64 random bits, then
     * the row's id (distinct per row, and new with every claim); '' before the first claim
     * and after a lease is given back.
     */
    leaseFence: char('lease_fence', { length: 32 }).notNull().default(''),
    /** When the lease ends; LEASE_STORAGE.noTime when there is none. */
    leaseDeadline: timestamp('lease_deadline').notNull().default(noTimeSql),
    /** The holder's name right-padded with spaces to LEASE_STORAGE.holderWidth bytes; blanks when none. */
    leaseHolder: varchar('lease_holder', { length: 255 }).notNull().default(sql.raw(`'${' '.repeat(LEASE_STORAGE.holderWidth)}'`)),
    /** When the job finished (done, dead or cancelled); LEASE_STORAGE.noTime before. Indexed (cronq_jobs_claim). */
    finishedTime: timestamp('finished_time').notNull().default(noTimeSql),
  };
}

export const jobs = mysqlTable(
  'cronq_jobs',
  { ...jobReadColumns(), ...leaseStorageColumns() },
  (t) => [
    uniqueIndex('cronq_jobs_job_key').on(t.jobKey),
    // The one index that status changes move, so a claim and a completion each touch one
    // secondary entry. It serves the claim, per queue: WHERE status='ready' AND queue=? AND
    // available_at <= now ORDER BY available_at, id (id the tiebreaker: a stable order, no
    // deadlocks); which queues have ready jobs (a loose scan of (status, queue)); lease
    // recovery, over the status='reserved' prefix (as many rows as jobs in flight); and
    // counts by status and queue. finished_time (finished_at's storage) rides along after
    // id (it never changes the order, and it changes only with status, when the entry
    // moves anyway) so the console's completions per minute read the index alone, without
    // a row lookup each.
    index('cronq_jobs_claim').on(t.status, t.queue, t.availableAt, t.id, t.finishedTime),
    index('cronq_jobs_schedule').on(t.scheduleName, t.periodKey),
  ],
);

/** cronq_dead_letters: one row per job that went dead, kept for triage (reviewed_at and resolution once requeued or discarded). */
export const deadLetters = mysqlTable(
  'cronq_dead_letters',
  {
    id: bigint('id', { mode: 'number', unsigned: true }).autoincrement().primaryKey(),
    jobId: bigint('job_id', { mode: 'number', unsigned: true }).notNull(),
    queue: varchar('queue', { length: 64 }).notNull(),
    kind: varchar('kind', { length: 128 }).notNull(),
    jobKey: varchar('job_key', { length: MAX_KEY_LENGTH }).notNull(),
    payload: json('payload').notNull(),
    failureReason: text('failure_reason').notNull(),
    attempts: smallint('attempts', { unsigned: true }).notNull(),
    deadAt: timestamp('dead_at').notNull().default(utcNow),
    reviewedAt: timestamp('reviewed_at'),
    resolution: text('resolution'),
    /**
     * The failure reason's first line normalised for triage (`normaliseReason`), cut to
     * REASON_GROUP_MAX characters; written with the row. NULL only on rows written before
     * migration 0006, which grouping normalises as it reads them.
     */
    reasonGroup: varchar('reason_group', { length: REASON_GROUP_MAX }),
  },
  (t) => [
    index('cronq_dead_letters_review').on(t.reviewedAt, t.deadAt, t.id),
    // Grouping reads only this index: unreviewed rows by kind and reason group, with dead_at (and id) covered.
    index('cronq_dead_letters_group').on(t.reviewedAt, t.kind, t.reasonGroup, t.deadAt),
    index('cronq_dead_letters_job').on(t.jobId),
  ],
);

/** What the scheduler did with a tick (cronq_schedule_ticks.outcome). */
export const TICK_OUTCOMES = ['enqueued', 'skipped', 'failed'] as const;
/** A tick's outcome: its jobs enqueued, the tick skipped (with a note saying why), or failed. */
export type TickOutcome = (typeof TICK_OUTCOMES)[number];

/**
 * The tick ledger: one row per schedule fire instant the scheduler has dealt with,
 * enqueued or deliberately skipped (with the reason in `note`). The unique key makes
 * the daemon that inserts a tick's row the one that fans it out; `fanout_until` is that
 * daemon's lease on the fan-out, so another can redo it if the first dies before
 * `finished_at`.
 */
export const scheduleTicks = mysqlTable(
  'cronq_schedule_ticks',
  {
    id: bigint('id', { mode: 'number', unsigned: true }).autoincrement().primaryKey(),
    scheduleName: varchar('schedule_name', { length: 64 }).notNull(),
    scheduledAt: timestamp('scheduled_at').notNull(),
    periodKey: varchar('period_key', { length: 32 }).notNull(),
    outcome: mysqlEnum('outcome', TICK_OUTCOMES).notNull(),
    jobsEnqueued: int('jobs_enqueued', { unsigned: true }).notNull().default(0),
    jobsExisting: int('jobs_existing', { unsigned: true }).notNull().default(0),
    /** True when the tick was handled after its instant had passed by more than the lateness tolerance. */
    caughtUp: boolean('caught_up').notNull().default(false),
    /** Why a tick was skipped, or who enqueued it late. */
    note: varchar('note', { length: 255 }),
    claimedBy: varchar('claimed_by', { length: 255 }),
    fanoutUntil: timestamp('fanout_until'),
    /**
     * The cron (whitespace normalised) and time zone the tick was computed from, so a
     * catch-up can tell an edited schedule's rows from its own; NULL on rows written
     * before migration 0009 or by an older daemon (read as "unknown").
     */
    cron: varchar('cron', { length: 1000 }),
    timezone: varchar('timezone', { length: 64 }),
    startedAt: timestamp('started_at').notNull().default(utcNow),
    finishedAt: timestamp('finished_at'),
  },
  (t) => [
    uniqueIndex('cronq_schedule_ticks_tick').on(t.scheduleName, t.scheduledAt),
    index('cronq_schedule_ticks_unfinished').on(t.scheduleName, t.finishedAt),
  ],
);

/**
 * One row per running daemon (workers, a scheduler or both), written at start and
 * refreshed by its heartbeat: which kinds and queues it serves (none without workers),
 * and the connections its overlap locks are held on. A job whose kind no live daemon serves can then be told
 * apart from one that an older or newer daemon in a rolling deploy can still run.
 */
export const daemons = mysqlTable(
  'cronq_daemons',
  {
    /** Its `lockedBy` (`host:pid` by default), the value written to cronq_jobs.locked_by. */
    id: varchar('id', { length: 255 }).primaryKey(),
    host: varchar('host', { length: 255 }).notNull(),
    pid: int('pid', { unsigned: true }).notNull(),
    /** JSON array of the task kinds this daemon can run. */
    kinds: json('kinds').notNull(),
    /** JSON array of the queues it claims from, or null for every queue. */
    queues: json('queues'),
    startedAt: timestamp('started_at').notNull().default(utcNow),
    heartbeatAt: timestamp('heartbeat_at').notNull().default(utcNow),
    /** Set when the daemon stops cleanly. */
    stoppedAt: timestamp('stopped_at'),
    /** How often it refreshes heartbeat_at, in ms, written with overlap_connections: its staleness is judged by its own interval. */
    heartbeatMs: int('heartbeat_ms', { unsigned: true }),
    /**
     * JSON array of the connection ids (CONNECTION_ID()) its overlap locks are held on,
     * each written before its lock is taken; may name connections that hold none any more.
     */
    overlapConnections: json('overlap_connections'),
    /** When overlap_connections was last written (listings older than the server's start name other sessions). */
    overlapListedAt: timestamp('overlap_listed_at'),
  },
  (t) => [index('cronq_daemons_heartbeat').on(t.heartbeatAt)],
);

/** What a pause can stop (cronq_pauses.target): a schedule's ticks or a queue's claims. */
export const PAUSE_TARGETS = ['schedule', 'queue'] as const;
/** A pause's target kind: 'schedule' or 'queue'. */
export type PauseTarget = (typeof PAUSE_TARGETS)[number];

/**
 * What an operator has paused: a schedule (its ticks are recorded as skipped) or a queue
 * (no daemon claims from it). A row is the pause; resuming deletes it. Every daemon reads
 * this table at least once per poll, so a pause holds cluster-wide and across restarts.
 */
export const pauses = mysqlTable(
  'cronq_pauses',
  {
    target: mysqlEnum('target', PAUSE_TARGETS).notNull(),
    name: varchar('name', { length: 128 }).notNull(),
    reason: varchar('reason', { length: 255 }),
    pausedBy: varchar('paused_by', { length: 255 }).notNull(),
    pausedAt: timestamp('paused_at').notNull().default(utcNow),
  },
  (t) => [primaryKey({ columns: [t.target, t.name] })],
);

/**
 * One row per task kind with a cluster-wide concurrency limit: the row a claim of that
 * kind locks (FOR UPDATE) while it counts the kind's running jobs, so claims of one
 * limited kind are serialised and never exceed the limit together. Kinds without a limit
 * have no row and their claims never touch this table.
 */
export const kindLimits = mysqlTable('cronq_kind_limits', {
  kind: varchar('kind', { length: 128 }).primaryKey(),
  maxRunning: int('max_running', { unsigned: true }).notNull(),
  updatedAt: timestamp('updated_at').notNull().default(utcNow),
});

/**
 * The web console's sessions signed out before they expired: a row per sign-out, keyed
 * by the SHA-256 of the session cookie (hex; the cookie itself, which would sign in, is
 * never stored). Every daemon's console refuses a cookie listed here, so a sign-out holds
 * behind one address served by several daemons. `expires_at` is when no daemon would take
 * the cookie anyway; rows past it are deleted by the next sign-out.
 */
export const consoleSignOuts = mysqlTable(
  'cronq_console_sign_outs',
  {
    sessionHash: char('session_hash', { length: 64 }).primaryKey(),
    expiresAt: timestamp('expires_at').notNull(),
  },
  (t) => [index('cronq_console_sign_outs_expiry').on(t.expiresAt)],
);

export type JobRow = typeof jobs.$inferSelect;
export type DeadLetterRow = typeof deadLetters.$inferSelect;
