/**
 * The child side of the peers bench: one worker process per system and run, driven over
 * IPC by the bench (../child.ts). Each system's file (cronq.ts, graphile.ts, bullmq.ts)
 * opens its worker with concurrency 16 and an async no-op handler for 'async-noop' jobs,
 * plus a 'ping' handler that only notes when it started, and hands it to serve():
 *
 *   → { type: 'loaded' }                      imported and connected, not claiming yet
 *   ← { type: 'start' }                       → { type: 'ready' } once told to claim
 *   ← { type: 'pickup', count, gapMs }        → { type: 'pickup', latencies } (ms, in order)
 *   ← { type: 'stop' }                        stops the worker and exits 0
 *
 * Pickup is measured in this process, as the issue asks: `count` sequential enqueues of a
 * 'ping' job from here into the idle worker, each waiting for its handler to start;
 * latency = handler start - enqueue return, then `gapMs` of rest before the next.
 */

/** A system's worker as serve() drives it. */
export interface PeerWorker {
  /** Starts claiming. */
  start(): Promise<void>;
  /** Enqueues one 'ping' job from this process; resolves once the system has stored it. */
  enqueuePing(i: number): Promise<void>;
  /** Stops claiming and closes its connections. */
  stop(): Promise<void>;
}

export const CONCURRENCY = 16;

/** The drained jobs' handler body, the same for every system. */
export async function asyncNoop(payload: unknown): Promise<void> {
  await Promise.resolve(payload);
}

let pinged: ((at: number) => void) | null = null;

/** Called first thing by each system's 'ping' handler. */
export function onPing(): void {
  pinged?.(performance.now());
}

async function pickup(worker: PeerWorker, count: number, gapMs: number): Promise<number[]> {
  const latencies: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = new Promise<number>((resolve) => (pinged = resolve));
    await worker.enqueuePing(i);
    const enqueuedAt = performance.now();
    latencies.push((await started) - enqueuedAt);
    await new Promise((resolve) => setTimeout(resolve, gapMs)); // let it go idle again
  }
  pinged = null;
  return latencies;
}

/** Opens the worker (connected, not claiming), tells the bench, then follows its messages. */
export async function serve(open: () => Promise<PeerWorker>): Promise<void> {
  const worker = await open();
  process.on('message', async (message: { type: string; count?: number; gapMs?: number }) => {
    try {
      if (message.type === 'start') {
        await worker.start();
        process.send!({ type: 'ready' });
      } else if (message.type === 'pickup') {
        process.send!({ type: 'pickup', latencies: await pickup(worker, message.count!, message.gapMs!) });
      } else if (message.type === 'stop') {
        await worker.stop();
        process.exit(0);
      }
    } catch (error) {
      console.error(error);
      process.exit(1);
    }
  });
  process.send!({ type: 'loaded' });
}
