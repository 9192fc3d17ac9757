import { driverError, isConnectionError } from '../db/client.ts';
import { maskUrl } from '../db/url.ts';
import type { Logger } from '../logger.ts';

/**
 * Tracks whether the database answers, so an outage is logged once (`db_unavailable`)
 * and its end once (`db_recovered`) instead of once per failed statement, and hands
 * out a jittered, growing delay for loops to back off with meanwhile.
 */
export class DbHealth {
  private failingSince: number | null = null;
  private failures = 0;
  lastOkAt = Date.now();

  constructor(private readonly log: Logger) {}

  get healthy(): boolean {
    return this.failingSince === null;
  }

  ok(): void {
    this.lastOkAt = Date.now();
    if (this.failingSince === null) return;
    this.log.info({ event: 'db_recovered', down_ms: Date.now() - this.failingSince }, 'database reachable again');
    this.failingSince = null;
    this.failures = 0;
  }

  /** Records a failed statement in `where`; returns how long the caller should back off. */
  trouble(error: unknown, where: string): number {
    this.failures += 1;
    if (this.failingSince === null) {
      this.failingSince = Date.now();
      this.log.warn(
        { event: 'db_unavailable', where, error: describeDbError(error), connection: isConnectionError(error) },
        'database error; backing off',
      );
    } else {
      this.log.debug({ event: 'db_error', where, error: describeDbError(error) }, 'database still failing');
    }
    const ceiling = Math.min(5_000, 100 * 2 ** Math.min(this.failures, 10));
    return Math.round(ceiling / 2 + (Math.random() * ceiling) / 2);
  }
}

/** One line about a database error: the driver's code and message (not drizzle's SQL and params), any URL password masked. */
export function describeDbError(error: unknown): string {
  const e = driverError(error) as { code?: string; message?: string };
  return maskUrl([e?.code, e?.message ?? String(error)].filter(Boolean).join(': ')).slice(0, 500);
}
