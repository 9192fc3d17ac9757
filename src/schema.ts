/**
 * `cronq/schema`: cronq's tables as Drizzle table objects, for apps that query them with
 * types (dead letters awaiting review, what is waiting, the tick ledger). Read them
 * freely; change rows only through cronq (`cronq dead requeue`, the API), whose writes
 * are fenced. Names and columns change only through a new migration.
 */
import { mysqlTable } from 'drizzle-orm/mysql-core';
import { jobReadColumns } from './db/schema.ts';
import type { daemons, deadLetters, kindLimits, pauses, scheduleTicks } from './db/schema.ts';
export { deadLetters, scheduleTicks, daemons, pauses, kindLimits, JOB_STATUSES, TICK_OUTCOMES, PAUSE_TARGETS, MAX_KEY_LENGTH } from './db/schema.ts';
export type { JobStatus, TickOutcome, PauseTarget } from './db/schema.ts';

/**
 * `cronq_jobs` with the columns people read. `lease_token`, `lease_until`, `locked_by`
 * and `finished_at` are virtual (NULL when there is none); the columns cronq writes them
 * through (README, "How the lease is stored") are left out: they are storage, not data.
 */
export const jobs = mysqlTable('cronq_jobs', jobReadColumns());

/** A `cronq_jobs` row as Drizzle reads it. */
export type JobRow = typeof jobs.$inferSelect;
/** A `cronq_dead_letters` row as Drizzle reads it. */
export type DeadLetterRow = typeof deadLetters.$inferSelect;
/** A `cronq_schedule_ticks` row as Drizzle reads it. */
export type ScheduleTickRow = typeof scheduleTicks.$inferSelect;
/** A `cronq_daemons` row as Drizzle reads it. */
export type DaemonRow = typeof daemons.$inferSelect;
/** A `cronq_pauses` row: a paused schedule or queue. */
export type PauseRow = typeof pauses.$inferSelect;
/** A `cronq_kind_limits` row: a kind's cluster-wide concurrency limit. */
export type KindLimitRow = typeof kindLimits.$inferSelect;
