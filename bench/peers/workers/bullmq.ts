/**
 * BullMQ's worker for the peers bench: a Worker on queue 'peers', concurrency 16,
 * autorun off until told to start, every other option at its default (completed jobs
 * kept: no removeOnComplete). Pings go in through a Queue in this process.
 *
 *   PEERS_REDIS_URL   the bench keyspace (redis://127.0.0.1:6379/5)
 */
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { asyncNoop, CONCURRENCY, onPing, serve } from './serve.ts';

await serve(async () => {
  // BullMQ requires maxRetriesPerRequest null on a worker's connection.
  const connection = new Redis(process.env.PEERS_REDIS_URL!, { maxRetriesPerRequest: null });
  const worker = new Worker(
    'peers',
    async (job) => {
      if (job.name === 'ping') onPing();
      else await asyncNoop(job.data);
    },
    { connection, concurrency: CONCURRENCY, autorun: false },
  );
  worker.on('error', (error) => console.error('bullmq worker:', error));
  const queue = new Queue('peers', { connection });
  await worker.waitUntilReady();
  await queue.waitUntilReady();
  return {
    // run() resolves only once the worker closes: start it and go on.
    start: async () => {
      void worker.run().catch((error) => console.error('bullmq worker:', error));
    },
    enqueuePing: async (i) => {
      await queue.add('ping', { i });
    },
    stop: async () => {
      await worker.close();
      await queue.close();
      connection.disconnect();
    },
  };
});
