/**
 * The bench's worker process (bench/drainWorker.ts) as the parent sees it: started as a
 * child, asked for its memory over IPC, its RSS read from /proc/PID/status, stopped.
 * So a drain's memory figures are the worker's own, not the bench process's (which
 * enqueues 50k-row batches and runs MySQL clients of its own).
 *
 * By default the worker runs as compiled JavaScript, as an installed cronq does: the
 * TypeScript is bundled by esbuild (tsx's own compiler; packages stay external) into
 * node_modules/.cache/cronq-bench/ right before, so it is never stale. BENCH_WORKER=tsx
 * runs the sources through tsx instead, as `npm start` in a checkout does; tsx's loader
 * thread costs about 40 MB of RSS more (an idle process: 78 MB under tsx, 39 MB without).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const SOURCE = fileURLToPath(new URL('./drainWorker.ts', import.meta.url));
const BUNDLE = fileURLToPath(new URL('../node_modules/.cache/cronq-bench/drainWorker.mjs', import.meta.url));

export const workerMode = process.env.BENCH_WORKER === 'tsx' ? 'tsx' : 'compiled';

/** What the worker reports about itself. */
export interface WorkerReport {
  handled: number;
  memory: NodeJS.MemoryUsage;
}

export interface WorkerProcess {
  pid: number;
  /** VmRSS now, in bytes. */
  rss(): number;
  /** VmHWM: the largest RSS since the start or the last resetPeak, in bytes. */
  peak(): number;
  /** Starts VmHWM over from the current RSS (Linux: /proc/PID/clear_refs). */
  resetPeak(): void;
  /** The worker's own count and process.memoryUsage(), after a full GC when `gc`. */
  report(gc?: boolean): Promise<WorkerReport>;
  /**
   * Resolves once the worker has written `total` completions since it started (its own
   * count, told over IPC: nothing polls the database meanwhile).
   */
  completed(total: number): Promise<void>;
  /** Stops its engine (graceful) and waits for it to exit. */
  stop(): Promise<void>;
}

let built: Promise<void> | null = null;

/** Compiles the worker (once per bench run; nothing to do under tsx): call before timing a drain. */
export function prepareWorker(): Promise<void> {
  return workerMode === 'compiled' ? bundle() : Promise.resolve();
}

function bundle(): Promise<void> {
  built ??= compileWorker(SOURCE, BUNDLE);
  return built;
}

/**
 * Bundles a worker's TypeScript entry into one ESM file with esbuild (tsx's own compiler),
 * packages left external: they load from the node_modules above `outfile`, as installed.
 * cronq's sources come in through the 'cronq-source' condition. Also used by bench/peers.
 */
export function compileWorker(source: string, outfile: string): Promise<void> {
  return build({
    entryPoints: [source],
    outfile,
    bundle: true,
    packages: 'external',
    platform: 'node',
    format: 'esm',
    target: 'node20',
    conditions: ['cronq-source'],
    logLevel: 'warning',
  }).then(() => undefined);
}

/** A size field of /proc/PID/status (VmRSS now, VmHWM the peak), in bytes. */
export function statusField(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const match = readFileSync(`/proc/${pid}/status`, 'utf8').match(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm'));
  if (!match) throw new Error(`no ${field} in /proc/${pid}/status`);
  return Number(match[1]) * 1024;
}

/** Starts a worker on `url` (concurrency 16) and resolves once it claims. */
/**
 * Starts the worker process and its engine; resolves once it claims. `startedAt` is
 * called with performance.now() when the process is loaded and connected, right before
 * it is told to start: a drain timed from there leaves process start-up out.
 */
export async function startWorker(url: string, options: { startedAt?: (at: number) => void; spawned?: (pid: number) => void } = {}): Promise<WorkerProcess> {
  await prepareWorker();
  const child: ChildProcess = fork(workerMode === 'compiled' ? BUNDLE : SOURCE, [], {
    execArgv: [...(workerMode === 'compiled' ? ['--expose-gc'] : ['--expose-gc', '--import', 'tsx']), ...(process.env.BENCH_WORKER_NODE_ARGS?.split(' ').filter(Boolean) ?? [])],
    env: { ...process.env, BENCH_DATABASE_URL: url },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  if (child.pid !== undefined) options.spawned?.(child.pid);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const replies: Array<(report: WorkerReport) => void> = [];
  let ready: (() => void) | null = null;
  const completions: Array<() => void> = [];
  child.on('message', (message: { type: string } & WorkerReport) => {
    if (message.type === 'report') replies.shift()?.({ handled: message.handled, memory: message.memory });
    if (message.type === 'ready') ready?.();
    if (message.type === 'completed') completions.shift()?.();
  });
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('exit', (code) => reject(new Error(`bench worker exited with ${code} before it was loaded`)));
  });
  // Loaded, connected and idle: the caller's clock starts here, process start-up left out.
  if (options.startedAt) options.startedAt(performance.now());
  await new Promise<void>((resolve) => {
    ready = resolve;
    child.send({ type: 'start' });
  });
  const pid = child.pid!;
  return {
    pid,
    rss: () => statusField(pid, 'VmRSS'),
    peak: () => statusField(pid, 'VmHWM'),
    resetPeak: () => writeFileSync(`/proc/${pid}/clear_refs`, '5'),
    report: (gc = false) =>
      new Promise((resolve) => {
        replies.push(resolve);
        child.send({ type: 'report', gc });
      }),
    completed: (total) =>
      new Promise((resolve) => {
        completions.push(resolve);
        child.send({ type: 'expect', total });
      }),
    stop: async () => {
      child.send({ type: 'stop' });
      await exited;
    },
  };
}
