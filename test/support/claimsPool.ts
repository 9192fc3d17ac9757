import type { Pool } from 'mysql2/promise';

/**
 * Sends one packet of a claim (its SQL, possibly rewritten; with `timeoutMs`, under that
 * client-side timeout instead of the caller's) and resolves with the driver's answer.
 */
export type SendPacket = (sql: string, timeoutMs?: number) => Promise<unknown>;

/**
 * The claim pool `claims` (Database.claims), each packet a claim sends passed through
 * `around`: to record it, rewrite it, wait before or after it, or read its answer. A
 * claim's every round trip is one `query` call, so one call of `around`. Works the same
 * on any pool whose callers take a connection and `query` it (Database.overlapLocks).
 */
export function interceptedClaims(claims: Pool, around: (sql: string, send: SendPacket) => Promise<unknown>): Pool {
  return {
    getConnection: async () => {
      const conn = await claims.getConnection();
      return new Proxy(conn, {
        get(target, prop) {
          const value = Reflect.get(target, prop);
          if (prop === 'query') {
            return (options: { sql: string }, ...rest: unknown[]) =>
              around(options.sql, (sql, timeoutMs) =>
                (value as (...args: unknown[]) => Promise<unknown>).call(target, { ...options, sql, ...(timeoutMs === undefined ? {} : { timeout: timeoutMs }) }, ...rest),
              );
          }
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
    },
  } as unknown as Pool;
}
