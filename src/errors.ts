/**
 * Named errors. Expected outcomes are values (`completeIfLeased` returns false);
 * these are for what the caller must react to.
 */

/** Bad command-line or configuration input. The CLI prints the message alone and exits 64. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** A schedule or task file that cannot be used; the message names the file and the problem. */
export class ScheduleFileError extends UsageError {
  override name = 'ScheduleFileError';
}

/**
 * Thrown by a handler to say retrying cannot help: the job goes to the dead-letter
 * table at once, whatever attempts remain.
 */
export class PermanentError extends Error {
  override name = 'PermanentError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** The database could not be reached at all (the CLI exits 1 naming host and port). */
export class DatabaseUnreachableError extends Error {
  override name = 'DatabaseUnreachableError';
}

/** A lookup by id found nothing (CLI: exit 64). */
export class NotFoundError extends UsageError {
  override name = 'NotFoundError';
}

/**
 * An attempt ran longer than its task's or schedule's `timeout`: the reason `ctx.signal`
 * aborts with, and the error the attempt fails with (retryable, like any handler error).
 */
export class JobTimeoutError extends Error {
  override name = 'JobTimeoutError';
}
