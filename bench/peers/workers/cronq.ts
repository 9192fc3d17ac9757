/**
 * cronq's worker for the peers bench: createCronq at concurrency 16 (prefetch and every
 * other option at their defaults), the same 'async-noop' task as bench/drainWorker.ts,
 * and a 'ping' task for pickup. Enqueues its pings with cronq.enqueue from this process.
 *
 *   PEERS_MYSQL_URL   the bench database (mysql://root@127.0.0.1:3306/peers_bench)
 */
import { createCronq, defineTask } from '../../../src/index.ts';
import { asyncNoop, CONCURRENCY, onPing, serve } from './serve.ts';

await serve(async () => {
  const cronq = createCronq({
    databaseUrl: process.env.PEERS_MYSQL_URL,
    logger: false,
    concurrency: CONCURRENCY,
    tasks: [
      defineTask({ name: 'async-noop', handle: (job) => asyncNoop(job.payload) }),
      defineTask({ name: 'ping', handle: () => onPing() }),
    ],
  });
  await cronq.admin.ping();
  return {
    start: () => cronq.start(),
    enqueuePing: async (i) => {
      await cronq.enqueue({ kind: 'ping', key: `ping:${i}` });
    },
    stop: async () => {
      await cronq.stop();
    },
  };
});
