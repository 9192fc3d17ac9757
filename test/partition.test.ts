import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, isConnectionError } from '../src/db/client.ts';
import { ping } from '../src/store/health.ts';
import { BlackholeProxy } from './support/blackholeProxy.ts';
import { useTestDatabase } from './support/db.ts';

const t = useTestDatabase();
let proxy: BlackholeProxy;

beforeAll(async () => {
  proxy = await BlackholeProxy.before(t.url);
});
afterAll(async () => {
  await proxy.close();
});

describe('a network that silently drops packets', () => {
  it('fails a statement within the client-side timeout instead of waiting on TCP, and the pool recovers', async () => {
    const database = connect(proxy.urlFor(t.url), { poolSize: 2, queryTimeoutMs: 500 });
    try {
      await database.db.execute(sql`SELECT 1`);
      proxy.blackhole = true;
      const started = Date.now();
      const error = await database.db.execute(sql`SELECT 1`).then(
        () => null,
        (e: unknown) => e,
      );
      expect(Date.now() - started).toBeLessThan(3_000);
      expect(error).not.toBeNull();
      expect(isConnectionError(error)).toBe(true);
      proxy.blackhole = false;
      const [rows] = (await database.db.execute(sql`SELECT 2 AS two`)) as unknown as [Array<{ two: number }>];
      expect(rows[0].two).toBe(2);
    } finally {
      await database.close();
    }
  });

  it('costs a ping that timed out its connection only: once the network is back, the pool is whole again', async () => {
    const database = connect(proxy.urlFor(t.url), { poolSize: 2 });
    try {
      await Promise.all([database.db.execute(sql`SELECT 1`), database.db.execute(sql`SELECT 1`)]); // two connections open
      proxy.blackhole = true;
      // As many pings as the pool has connections (the health endpoint's, say), each timing out.
      const pings = await Promise.all([ping(database), ping(database)].map((p) => p.then(() => 'answered', () => 'failed')));
      expect(pings).toEqual(['failed', 'failed']);
      proxy.blackhole = false;
      // A connection a ping kept for its unanswered statement would never come back to the pool.
      const answered = await Promise.race([
        database.db.execute(sql`SELECT 2 AS two`).then(() => 'answered'),
        new Promise((resolve) => setTimeout(() => resolve('still waiting for a connection'), 2_000)),
      ]);
      expect(answered).toBe('answered');
    } finally {
      await database.close();
    }
  }, 20_000);
});
