/**
 * graphile-worker's worker for the peers bench, in its batched mode as its performance
 * docs configure it: localQueue of 500 jobs, completeJobBatchDelay and failJobBatchDelay
 * 0; concurrentJobs 16 and a pool of 18 (its own advice: concurrentJobs + 2 when over 10).
 * The pool is connected and the schema checked before 'loaded', so start() only builds the
 * runner. Pings go in with the runner's own addJob.
 *
 *   PEERS_PG_URL   the bench database (postgres://postgres@127.0.0.1:5432/peers_bench)
 */
import { Logger, run, runMigrations, type Runner } from 'graphile-worker';
import pg from 'pg';
import { asyncNoop, CONCURRENCY, onPing, serve } from './serve.ts';

/** Errors only: its info lines (one per job batch) would cost the worker time the others don't spend. */
const logger = new Logger(() => (level, message) => {
  if (level === 'error') console.error(`graphile-worker: ${message}`);
});

await serve(async () => {
  const pgPool = new pg.Pool({ connectionString: process.env.PEERS_PG_URL, max: CONCURRENCY + 2 });
  // A client's error (a server restart) must not crash the process: the handlers graphile-worker asks a given pool for.
  pgPool.on('error', (error) => console.error('graphile-worker idle client:', error.message));
  pgPool.on('connect', (client) => client.on('error', (error) => console.error('graphile-worker client:', error.message)));
  const preset = {
    worker: {
      concurrentJobs: CONCURRENCY,
      localQueue: { size: 500 },
      completeJobBatchDelay: 0,
      failJobBatchDelay: 0,
    },
  };
  // Connect the whole pool now, as the other systems connect before 'loaded'.
  const clients = await Promise.all(Array.from({ length: CONCURRENCY + 2 }, () => pgPool.connect()));
  for (const client of clients) client.release();
  await runMigrations({ pgPool, logger, preset });
  let runner: Runner | null = null;
  return {
    start: async () => {
      runner = await run({
        pgPool,
        logger,
        preset,
        noHandleSignals: true,
        taskList: {
          'async-noop': (payload) => asyncNoop(payload),
          ping: async () => onPing(),
        },
      });
    },
    enqueuePing: async (i) => {
      await runner!.addJob('ping', { i });
    },
    stop: async () => {
      await runner?.stop();
      await pgPool.end();
    },
  };
});
