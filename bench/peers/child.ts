/**
 * The bench's side of one system's worker process (workers/serve.ts is the other side):
 * compiles the system's worker with esbuild (as bench/workerProcess.ts does cronq's, so no
 * worker pays for tsx's loader), forks it, and reads its peak RSS from /proc, so the
 * figure is the worker's alone, not the bench's, which enqueues and polls.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { compileWorker, statusField } from '../workerProcess.ts';

export type SystemName = 'cronq' | 'graphile' | 'bullmq';

// cronq's bundle sits where bench/workerProcess.ts puts drainWorker's, so its packages
// (mysql2, drizzle-orm, ...) resolve from the root node_modules; the peers' bundles sit
// under this folder's node_modules, beside graphile-worker, bullmq, pg and ioredis.
const BUNDLES: Record<SystemName, string> = {
  cronq: '../../node_modules/.cache/cronq-bench/peersCronqWorker.mjs',
  graphile: './node_modules/.cache/peers-bench/graphile.mjs',
  bullmq: './node_modules/.cache/peers-bench/bullmq.mjs',
};

const path = (relative: string) => fileURLToPath(new URL(relative, import.meta.url));

/** Compiles every system's worker (once, before any timing). */
export async function compileWorkers(systems: SystemName[]): Promise<void> {
  await Promise.all(systems.map((system) => compileWorker(path(`./workers/${system}.ts`), path(BUNDLES[system]))));
}

export interface PeerProcess {
  pid: number;
  /** VmHWM: the largest RSS the process has had, in bytes. */
  peak(): number;
  /** Tells the loaded, connected worker to start claiming; resolves when it has. */
  start(): Promise<void>;
  /** Sequential pings from inside the worker process (see serve.ts); latencies in ms. */
  pickup(count: number, gapMs: number): Promise<number[]>;
  /** Asks it to stop and waits for it to exit (killed after `timeoutMs`). */
  stop(timeoutMs?: number): Promise<void>;
  /** Ends it at once. */
  kill(): void;
}

/** Forks `system`'s worker with `env` and resolves once it is loaded and connected. */
export async function forkWorker(system: SystemName, env: Record<string, string>): Promise<PeerProcess> {
  const child: ChildProcess = fork(path(BUNDLES[system]), [], {
    // Not this process's flags (fork's default): its `--import tsx` would load tsx's loader into the worker too.
    execArgv: [],
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const next = (type: string) =>
    new Promise<any>((resolve, reject) => {
      const onMessage = (message: { type: string }) => {
        if (message.type !== type) return;
        child.off('message', onMessage);
        resolve(message);
      };
      child.on('message', onMessage);
      void exited.then((code) => reject(new Error(`${system} worker exited with ${code} while the bench waited for '${type}'`)));
    });
  await next('loaded');
  const pid = child.pid!;
  return {
    pid,
    peak: () => statusField(pid, 'VmHWM'),
    start: async () => {
      const ready = next('ready');
      child.send({ type: 'start' });
      await ready;
    },
    pickup: async (count, gapMs) => {
      const reply = next('pickup');
      child.send({ type: 'pickup', count, gapMs });
      return (await reply).latencies;
    },
    stop: async (timeoutMs = 30_000) => {
      child.send({ type: 'stop' });
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      await exited;
      clearTimeout(timer);
    },
    kill: () => {
      child.kill('SIGKILL');
    },
  };
}
