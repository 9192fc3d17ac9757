import { createServer, connect as tcpConnect, type Server, type Socket } from 'node:net';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, isConnectionError } from '../src/db/client.ts';
import { ping } from '../src/store/health.ts';
import { useTestDatabase } from './support/db.ts';

/**
 * A TCP proxy in front of the test server that can turn into a black hole: it keeps
 * every socket open but stops forwarding, like a network that silently drops packets.
 */
class BlackholeProxy {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  blackhole = false;
  port = 0;

  constructor(target: { host: string; port: number }) {
    this.server = createServer((client) => {
      const upstream = tcpConnect(target.port, target.host);
      this.sockets.add(client).add(upstream);
      client.on('data', (d) => this.blackhole || upstream.write(d));
      upstream.on('data', (d) => this.blackhole || client.write(d));
      const close = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on('close', close).on('error', close);
      upstream.on('close', close).on('error', close);
    });
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as { port: number }).port;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

const t = useTestDatabase();
let proxy: BlackholeProxy;

beforeAll(async () => {
  const url = new URL(t.url);
  proxy = new BlackholeProxy({ host: url.hostname, port: Number(url.port || 3306) });
  await proxy.listen();
});
afterAll(async () => {
  await proxy.close();
});

describe('a network that silently drops packets', () => {
  it('fails a statement within the client-side timeout instead of waiting on TCP, and the pool recovers', async () => {
    const url = new URL(t.url);
    url.host = `127.0.0.1:${proxy.port}`;
    const database = connect(url.toString(), { poolSize: 2, queryTimeoutMs: 500 });
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
    const url = new URL(t.url);
    url.host = `127.0.0.1:${proxy.port}`;
    const database = connect(url.toString(), { poolSize: 2 });
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
