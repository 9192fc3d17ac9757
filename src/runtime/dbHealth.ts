import { isConnectionError, isLockConflict } from '../db/client.ts';
import { retryDelayMs, type Backoff } from './backoff.ts';
import { DB_ERROR_TEXT_MAX, errorText } from './errorText.ts';
import type { Logger } from '../logger.ts';

/**
 * Tracks whether the database answers, so an outage is logged once (`db_unavailable`)
 * and its end once (`db_recovered`) instead of once per failed statement, and hands
 * out a jittered, growing delay for loops to back off with meanwhile.
 *
 * Only connection errors make an outage. A statement the server refused (a lock wait,
 * a constraint) while it answers is logged as `db_error`, at most once a minute per
 * place, and backed off from without declaring the database down.
 */
export class DbHealth {
  private failingSince: number | null = null;
  /** When the last outage ended (Date.now()); statements sent before it failing late declare none. */
  private recoveredAt = Number.NEGATIVE_INFINITY;
  private failures = 0;
  /** Set by poolClosing: from then on a failed statement is our own stop's doing, not the database's. */
  private poolClosed = false;
  private readonly statementErrorLoggedAt = new Map<string, number>();
  lastOkAt = Date.now();

  constructor(private readonly log: Logger) {}

  get healthy(): boolean {
    return this.failingSince === null;
  }

  /**
   * A statement succeeded. `startedAt` (Date.now() when it was sent; default now) keeps a
   * statement already in flight when the outage was declared from calling it over.
   */
  ok(startedAt = Date.now()): void {
    this.lastOkAt = Date.now();
    if (this.failingSince === null || startedAt < this.failingSince) return;
    this.log.info({ event: 'db_recovered', down_ms: Date.now() - this.failingSince }, 'database reachable again');
    this.failingSince = null;
    this.recoveredAt = Date.now();
    this.failures = 0;
    for (const wake of [...this.waiters]) wake();
  }

  private readonly waiters = new Set<() => void>();

  /**
   * The engine is closing (or destroying) its own pool: statements still pending fail
   * ('Pool is closed.') because of that, not because the database went away. From now on
   * a connection error declares no `db_unavailable` (it is logged at debug, `pool_closed`);
   * the tracker otherwise goes on as before, so writers still waiting wait as they did.
   */
  poolClosing(): void {
    this.poolClosed = true;
  }

  /**
   * Resolves once the database is reachable again (someone's statement succeeded), or
   * after `ms`, or when `signal` aborts; at once when it is healthy (or `signal` already
   * aborted). Lets many waiting writers sit out an outage while one loop probes, instead
   * of each retrying on its own.
   */
  untilHealthy(ms: number, signal?: AbortSignal): Promise<void> {
    if (this.healthy || signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', wake);
        this.waiters.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, Math.max(0, ms));
      signal?.addEventListener('abort', wake, { once: true });
      this.waiters.add(wake);
    });
  }

  /**
   * Records a failed statement in `where`; returns how long the caller should back off.
   * `sentAt` (Date.now() when it was sent): a statement sent before the last outage ended
   * that loses its connection only now (one a partition left hanging until its timeout)
   * belongs to that outage, logged at debug, and declares no new one.
   */
  backoffAfter(error: unknown, where: string, sentAt?: number): number {
    if (!isConnectionError(error)) return this.statementError(error, where);
    this.failures += 1;
    if (this.failingSince === null && sentAt !== undefined && sentAt < this.recoveredAt) {
      this.log.debug({ event: 'db_error', where, error: errorText(error, DB_ERROR_TEXT_MAX) }, 'a statement sent during the outage failed after it ended');
      return retryDelayMs(OUTAGE_BACKOFF, 1);
    }
    if (this.failingSince === null && this.poolClosed) {
      this.failingSince = Date.now();
      this.log.debug({ event: 'db_error', where, error: errorText(error, DB_ERROR_TEXT_MAX), pool_closed: true }, 'statement ended by the stop closing the pool');
    } else if (this.failingSince === null) {
      this.failingSince = Date.now();
      this.log.warn(
        { event: 'db_unavailable', where, error: errorText(error, DB_ERROR_TEXT_MAX) },
        'database error; backing off',
      );
    } else {
      this.log.debug({ event: 'db_error', where, error: errorText(error, DB_ERROR_TEXT_MAX) }, 'database still failing');
    }
    return retryDelayMs(OUTAGE_BACKOFF, this.failures);
  }

  private statementError(error: unknown, where: string): number {
    const now = Date.now();
    if (now - (this.statementErrorLoggedAt.get(where) ?? 0) >= STATEMENT_ERROR_LOG_EVERY_MS) {
      this.statementErrorLoggedAt.set(where, now);
      this.log.warn({ event: 'db_error', where, error: errorText(error, DB_ERROR_TEXT_MAX) }, 'database refused or delayed a statement; backing off');
    }
    return retryDelayMs(STATEMENT_ERROR_BACKOFF, 1);
  }
}

/**
 * The database's trouble, not the caller's: a connection lost (an outage) or a lock
 * race lost (the statement changed nothing and may run again). Worth retrying.
 */
export function isDatabaseTrouble(error: unknown): boolean {
  return isConnectionError(error) || isLockConflict(error);
}

/**
 * The driver's own error readers, for layers that hold no driver (enqueue/): the mysql2
 * error under drizzle's wrapper, that error cut to what a caller may see (no SQL), and
 * "lost a lock race, safe to run again".
 */
export { driverError, driverFailure, isLockConflict, type DriverFailure } from '../db/client.ts';

/** Connection loss: what DbHealth counts as an outage (isConnectionError). */
export function isOutage(error: unknown): boolean {
  return isConnectionError(error);
}

const STATEMENT_ERROR_LOG_EVERY_MS = 60_000;

/** Back-off during an outage: 200 ms after the first failed statement, doubling to 5 s. */
const OUTAGE_BACKOFF: Backoff = { baseMs: 200, maxMs: 5_000 };
/** Back-off after a statement the server refused: about a second, every time. */
const STATEMENT_ERROR_BACKOFF: Backoff = { baseMs: 1_000, maxMs: 1_000 };
