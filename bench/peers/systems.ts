/**
 * The three systems as the bench's own process sees them: where each keeps its jobs, how
 * its store is made fresh, how N jobs go in through its bulk API, and how the bench tells
 * from its store that all N are completed. The workers that drain them are in workers/.
 *
 * "Completed" is what each system writes: cronq marks a job done (status 'done'),
 * graphile-worker deletes it, BullMQ moves it to its completed set. While draining, each
 * is checked with a query that stays cheap on a 100k-job store, every PEERS_POLL_MS:
 * cronq, that no job is left ready or reserved; graphile-worker, that its job table is
 * empty; BullMQ, its completed count. Then `confirm` checks the outcome exactly once
 * (cronq: COUNT of done rows = N; BullMQ: completed = N and none failed).
 */
import mysql from 'mysql2/promise';
import { makeWorkerUtils, type AddJobsJobSpec } from 'graphile-worker';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import pg from 'pg';
import { enqueueForWorker, payloadOf } from '../realSections.ts';
import type { SystemName } from './child.ts';

export interface Urls {
  mysql: string;
  pg: string;
  redis: string;
}

/** The store of one run, opened after its jobs are in; `close` ends the bench's connections. */
export interface RunStore {
  /** True once the store shows no job of the N left to complete (a cheap check, polled). */
  drained(): Promise<boolean>;
  /** null when exactly N jobs are recorded as completed, else what is wrong. */
  confirm(): Promise<string | null>;
  close(): Promise<void>;
}

export interface System {
  name: SystemName;
  /** What the worker process is given: where its store is. */
  env: Record<string, string>;
  /** The server's version and durability settings, in a line; throws when it is down. */
  probe(): Promise<string>;
  /** Drops and creates the store (database or keyspace) and its schema. */
  reset(): Promise<void>;
  /** Enqueues `total` jobs with the shared payload through the system's bulk API. */
  enqueue(total: number): Promise<void>;
  /** Opens the bench's view of the store once its `total` jobs are in. */
  open(total: number): Promise<RunStore>;
}

const CONNECT_TIMEOUT_MS = 3_000;

/** The same URL on another database (path), for server-level statements. */
function onDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = database ? `/${database}` : '';
  return parsed.toString().replace(/\/$/, '');
}

const databaseOf = (url: string) => decodeURIComponent(new URL(url).pathname.slice(1));

export function cronqSystem(url: string): System {
  const name = databaseOf(url);
  return {
    name: 'cronq',
    env: { PEERS_MYSQL_URL: url },
    async probe() {
      const conn = await mysql.createConnection({ uri: onDatabase(url, ''), connectTimeout: CONNECT_TIMEOUT_MS });
      try {
        const [[row]] = (await conn.query(
          'SELECT VERSION() AS version, @@innodb_flush_log_at_trx_commit AS flush, @@sync_binlog AS sync_binlog, @@log_bin AS log_bin',
        )) as any;
        return `MariaDB/MySQL ${row.version}, innodb_flush_log_at_trx_commit=${row.flush}, sync_binlog=${row.sync_binlog}, log_bin=${row.log_bin}`;
      } finally {
        await conn.end();
      }
    },
    async reset() {
      const conn = await mysql.createConnection(onDatabase(url, ''));
      await conn.query(`DROP DATABASE IF EXISTS \`${name}\``);
      await conn.end();
      const { createCronq } = await import('../../src/index.ts');
      const cronq = createCronq({ databaseUrl: url, logger: false, workers: false, scheduler: false });
      await cronq.migrate();
      await cronq.stop();
    },
    enqueue: (total) => enqueueForWorker(url, total, `peers:${total}`),
    async open(total) {
      const conn = await mysql.createConnection(url);
      return {
        async drained() {
          const [rows] = (await conn.query("SELECT 1 FROM cronq_jobs WHERE status IN ('ready', 'reserved') LIMIT 1")) as any;
          return rows.length === 0;
        },
        async confirm() {
          const [[row]] = (await conn.query("SELECT COUNT(*) AS n FROM cronq_jobs WHERE status = 'done'")) as any;
          return Number(row.n) === total ? null : `${row.n} of ${total} jobs done`;
        },
        close: () => conn.end(),
      };
    },
  };
}

export function graphileSystem(url: string): System {
  const name = databaseOf(url);
  const admin = onDatabase(url, 'postgres');
  const client = async (target: string) => {
    const c = new pg.Client({ connectionString: target, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
    await c.connect();
    return c;
  };
  return {
    name: 'graphile',
    env: { PEERS_PG_URL: url },
    async probe() {
      const c = await client(admin);
      try {
        const setting = async (s: string) => (await c.query(`SHOW ${s}`)).rows[0][s];
        return `PostgreSQL ${await setting('server_version')}, synchronous_commit=${await setting('synchronous_commit')}, fsync=${await setting('fsync')}`;
      } finally {
        await c.end();
      }
    },
    async reset() {
      const c = await client(admin);
      await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await c.query(`CREATE DATABASE "${name}"`);
      await c.end();
    },
    async enqueue(total) {
      // makeWorkerUtils installs graphile-worker's schema (its migrations) before it returns.
      const utils = await makeWorkerUtils({ connectionString: url });
      try {
        for (let from = 0; from < total; from += 10_000) {
          const specs: AddJobsJobSpec[] = Array.from({ length: Math.min(10_000, total - from) }, (_, i) => ({
            identifier: 'async-noop',
            payload: payloadOf(from + i),
          }));
          await utils.addJobs(specs);
        }
      } finally {
        await utils.release();
      }
    },
    async open() {
      const c = await client(url);
      return {
        async drained() {
          return (await c.query('SELECT NOT EXISTS (SELECT 1 FROM graphile_worker._private_jobs) AS empty')).rows[0].empty;
        },
        // Completed jobs are deleted: an empty table is N completed (a failed job would stay).
        confirm: async () => null,
        close: () => c.end(),
      };
    },
  };
}

export function bullmqSystem(url: string): System {
  const connect = () => new Redis(url, { maxRetriesPerRequest: null, connectTimeout: CONNECT_TIMEOUT_MS });
  return {
    name: 'bullmq',
    env: { PEERS_REDIS_URL: url },
    async probe() {
      const redis = new Redis(url, { lazyConnect: true, connectTimeout: CONNECT_TIMEOUT_MS, maxRetriesPerRequest: 0, retryStrategy: () => null });
      let refused: Error | null = null;
      redis.on('error', (error) => (refused = error));
      try {
        await redis.connect().catch((error) => {
          throw refused ?? error;
        });
        const version = (await redis.info('server')).match(/^redis_version:(\S+)/m)?.[1];
        const [, appendonly] = (await redis.config('GET', 'appendonly')) as string[];
        const [, save] = (await redis.config('GET', 'save')) as string[];
        return `Redis ${version}, appendonly=${appendonly}, save='${save}' (db ${new URL(url).pathname.slice(1) || '0'})`;
      } finally {
        redis.disconnect();
      }
    },
    async reset() {
      const redis = connect();
      await redis.flushdb();
      redis.disconnect();
    },
    async enqueue(total) {
      const connection = connect();
      const queue = new Queue('peers', { connection });
      for (let from = 0; from < total; from += 1_000) {
        await queue.addBulk(Array.from({ length: Math.min(1_000, total - from) }, (_, i) => ({ name: 'async-noop', data: payloadOf(from + i) })));
      }
      await queue.close();
      connection.disconnect();
    },
    async open(total) {
      const connection = connect();
      const queue = new Queue('peers', { connection });
      return {
        async drained() {
          const counts = await queue.getJobCounts('completed', 'failed');
          return counts.completed + counts.failed >= total;
        },
        async confirm() {
          const counts = await queue.getJobCounts('completed', 'failed');
          return counts.completed === total && counts.failed === 0 ? null : `${counts.completed} completed, ${counts.failed} failed of ${total}`;
        },
        close: async () => {
          await queue.close();
          connection.disconnect();
        },
      };
    },
  };
}
