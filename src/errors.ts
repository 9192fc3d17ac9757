/**
 * Named errors. Expected outcomes are values (`completeIfLeased` returns false);
 * these are for what the caller must react to.
 */

/**
 * `value instanceof type`, and false where the check itself throws: it reads the value's
 * prototype, which a revoked Proxy refuses. For values a handler, an effect or a fan-out
 * threw, which must be told from cronq's own errors without throwing anew.
 */
export function isInstance<T>(value: unknown, type: abstract new (...args: never[]) => T): value is T {
  try {
    return value instanceof type;
  } catch {
    return false;
  }
}

/** Bad command-line or configuration input. The CLI prints the message alone and exits 64. */
export class UsageError extends Error {
  /**
   * `'UsageError'` (each instance's own field): tells it apart where `instanceof` cannot, as across
   * two copies of cronq. Its subclasses (ScheduleFileError, NotFoundError and EnqueueRefusedError) carry their own name instead.
   */
  override name = 'UsageError';
}

/**
 * What every public call that needs the database (`what`, as the caller named it:
 * `enqueue`, `cronq.admin.stats`...) fails with after stop(): at once, before touching
 * anything. One wording for all of them.
 */
export function usedAfterStop(what: string): UsageError {
  return new UsageError(`${what}() after stop(): a stopped cronq cannot be used again (its database pool is closed); create another with createCronq`);
}

/** A schedule or task file that cannot be used; the message names the file and the problem. */
export class ScheduleFileError extends UsageError {
  /** Always `'ScheduleFileError'` (each instance's own field): tells it apart where `instanceof` cannot, as across two copies of cronq. */
  override name = 'ScheduleFileError';
}

/**
 * Thrown by a handler to say retrying cannot help: the job goes to the dead-letter
 * table at once, whatever attempts remain.
 */
export class PermanentError extends Error {
  /** Always `'PermanentError'` (each instance's own field): tells it apart where `instanceof` cannot, as across two copies of cronq. */
  override name = 'PermanentError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** The database could not be reached at all (the CLI exits 1 naming host and port). */
export class DatabaseUnreachableError extends Error {
  /** Always `'DatabaseUnreachableError'` (each instance's own field): tells it apart where `instanceof` cannot, as across two copies of cronq. */
  override name = 'DatabaseUnreachableError';
}

/**
 * An admin call lost a race for row locks: a lock wait ran out (innodb_lock_wait_timeout,
 * 5 s on cronq's sessions) or InnoDB chose its transaction as a deadlock's victim. The
 * statement that waited was rolled back and changed nothing; another transaction holds
 * the rows (a long or a stuck one), and the same call may simply be made again (a bulk
 * call's earlier batches stay done; repeating it goes on from there). `call` names it
 * (`cronq.admin.cancel`), `reason` is the server's code and first line; `cause` is the
 * driver's error without its SQL. The CLI exits 75 (EX_TEMPFAIL).
 */
export class DatabaseBusyError extends Error {
  /** Always `'DatabaseBusyError'` (each instance's own field): tells it apart where `instanceof` cannot, as across two copies of cronq. */
  override name = 'DatabaseBusyError';
  constructor(
    /** The call that lost the race, as its caller named it (`cronq.admin.cancel`). */
    readonly call: string,
    /** The server's error code and message (`ER_LOCK_WAIT_TIMEOUT Lock wait timeout exceeded; try restarting transaction`). */
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(`${call}(): the database is busy (${reason}); try again`, options);
  }
}

/** The schema is older than this code: `cronq migrate` has not been run (`admin.checkSchema`; the CLI exits 1 naming the fix). */
export class SchemaBehindError extends Error {
  /** Always `'SchemaBehindError'` (each instance's own field): tells it apart where `instanceof` cannot, as across two copies of cronq. */
  override name = 'SchemaBehindError';
}

/** The server answers but the database the URL names does not exist (CLI: exit 1, with the hint to migrate). */
export class DatabaseMissingError extends Error {
  /** Always `'DatabaseMissingError'` (each instance's own field): tells it apart where `instanceof` cannot, as across two copies of cronq. */
  override name = 'DatabaseMissingError';
}

/** A lookup by id found nothing (CLI: exit 64). */
export class NotFoundError extends UsageError {
  /** Always `'NotFoundError'` (each instance's own field): tells it apart where `instanceof` cannot, as across two copies of cronq. */
  override name = 'NotFoundError';
}

/** A job the database refused for its content, or too large for one statement. */
export interface RefusedJobInfo {
  /** The refused job's key, as given (the one place a message identifies the job by). */
  key: string;
  /** One line: what is wrong with the job, then the server's words. Never the payload. */
  reason: string;
}

/**
 * The database refused the content of one or more jobs (a lone surrogate in a payload,
 * JSON nested too deep, a row larger than max_allowed_packet...): `enqueue` wrote
 * nothing; `enqueueMany` wrote every other job, then threw this. `refused` lists the
 * first 1,000 refused jobs, `refusedCount` counts them all. A UsageError: the input is
 * at fault, and the CLI exits 64.
 */
export class EnqueueRefusedError extends UsageError {
  /** Always `'EnqueueRefusedError'` (each instance's own field): tells it apart where `instanceof` cannot, as across two copies of cronq. */
  override name = 'EnqueueRefusedError';
  constructor(
    /** The first 1,000 refused jobs, in the order given, each with why. */
    readonly refused: RefusedJobInfo[],
    /** How many jobs were refused in all (more than `refused` holds past 1,000). */
    readonly refusedCount: number,
    /** What was written meanwhile (enqueueMany; zeros for enqueue). */
    readonly written: {
      /** New rows committed. */
      inserted: number;
      /** Jobs left alone because their key was there already. */
      existing: number;
    },
  ) {
    const first = refused[0];
    super(
      refusedCount === 1 && first
        ? `the database refused job ${JSON.stringify(first.key)}: ${first.reason}`
        : `the database refused ${refusedCount} jobs (${written.inserted} others inserted, ${written.existing} already present); first ${JSON.stringify(first?.key)}: ${first?.reason}`,
    );
  }
}

/**
 * Enqueueing failed for a reason other than the jobs' content (the connection, a lock
 * wait): the message names the key (or the batch) and the server's reason, never the
 * payload or the statement. `code` and `errno` are the driver's; `cause` is the driver's
 * error without its SQL.
 */
export class EnqueueError extends Error {
  /** Always `'EnqueueError'` (each instance's own field): tells it apart where `instanceof` cannot, as across two copies of cronq. */
  override name = 'EnqueueError';
  constructor(
    message: string,
    /** The driver's error code (`ER_LOCK_WAIT_TIMEOUT`, `ECONNREFUSED`), undefined when it gave none. */
    readonly code: string | undefined,
    /** The driver's errno: the server's error number (1205) for a statement it refused, Node's for a connection that failed; undefined when it gave none. */
    readonly errno: number | undefined,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * A tick run by hand (`admin.tick`, `cronq tick`) whose fan-out failed midway, `jobs()`
 * throwing say: the message is one line naming the schedule, the fire time and how many
 * jobs were enqueued before it, then the first line of the error (at most 300
 * characters). Those jobs stay enqueued; repeating the tick enqueues the rest. `cause`
 * is what failed (a driver's error without its SQL).
 */
export class TickFanoutError extends Error {
  /** Always `'TickFanoutError'` (each instance's own field): tells it apart where `instanceof` cannot, as across two copies of cronq. */
  override name = 'TickFanoutError';
  constructor(
    /** The schedule's name. */
    readonly schedule: string,
    /** The fire time the tick ran for (UTC). */
    readonly fireAt: Date,
    /** The tick's period key, in the schedule's time zone (the last part of its jobs' keys). */
    readonly periodKey: string,
    /** Jobs inserted, and ones whose key was there already, before the failure. */
    readonly written: {
      /** New jobs committed before the failure: they stay enqueued. */
      inserted: number;
      /** Jobs whose key was there already. */
      existing: number;
    },
    reason: string,
    options?: { cause?: unknown },
  ) {
    super(
      `tick ${schedule} at ${fireAt.toISOString()} (period ${periodKey}): fan-out failed after ${written.inserted} ${written.inserted === 1 ? 'job' : 'jobs'} enqueued (${written.existing} already present): ${reason}`,
      options,
    );
  }
}

/**
 * An attempt ran longer than its task's or schedule's `timeout`: the reason `ctx.signal`
 * aborts with, and the error the attempt fails with (retryable, like any handler error).
 */
export class JobTimeoutError extends Error {
  /**
   * `'JobTimeoutError'` (each instance's own field): tells it apart where `instanceof` cannot, as across
   * two copies of cronq. Its subclasses (EffectTimeoutError) carry their own name instead.
   */
  override name = 'JobTimeoutError';
}

/**
 * A job's effects (`ctx.effect`) did not finish within their bound (the task's `timeout`,
 * and in any case well before the lease ends): their transaction was abandoned, rolled
 * back by the server, and the attempt fails with this (retryable, like any handler error).
 */
export class EffectTimeoutError extends JobTimeoutError {
  /** Always `'EffectTimeoutError'` (each instance's own field): tells it apart where `instanceof` cannot, as across two copies of cronq. */
  override name = 'EffectTimeoutError';
}

/**
 * The reason a handler's `ctx.signal` aborts when renewal finds its lease gone: another
 * worker or lease recovery owns the job now, and this attempt's outcome will not be written.
 */
export class LeaseLostError extends Error {
  /**
   * `'LeaseLostError'` (each instance's own field): tells it apart where `instanceof` cannot, as across
   * two copies of cronq. Its subclasses (JobCancelledError) carry their own name instead.
   */
  override name = 'LeaseLostError';
}

/**
 * The reason a handler's `ctx.signal` aborts when an operator cancelled its job
 * (`cronq cancel`): a LeaseLostError too, since the run's result is discarded the same way.
 */
export class JobCancelledError extends LeaseLostError {
  /** Always `'JobCancelledError'` (each instance's own field): tells it apart where `instanceof` cannot, as across two copies of cronq. */
  override name = 'JobCancelledError';
}

/**
 * The reason a handler's `ctx.signal` aborts when `stop()`'s grace period runs out: the
 * job is released (its attempt not counted) for another worker.
 */
export class ShutdownAbortError extends Error {
  /** Always `'ShutdownAbortError'` (each instance's own field): tells it apart where `instanceof` cannot, as across two copies of cronq. */
  override name = 'ShutdownAbortError';
}

/**
 * What `migrate()` rejects with when stop() came while it was still connecting to the
 * server (a database that does not answer): nothing was created or applied, and the next
 * migrate() starts from scratch. Once connected, a stop waits for the migration instead.
 */
export class MigrationNotBegunError extends Error {
  /** Always `'MigrationNotBegunError'` (each instance's own field): tells it apart where `instanceof` cannot, as across two copies of cronq. */
  override name = 'MigrationNotBegunError';
}
