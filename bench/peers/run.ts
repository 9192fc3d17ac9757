/**
 * `npm run bench:peers` (or `npm start` here): cronq beside graphile-worker (batched) and
 * BullMQ on issue 14's workload, side by side. A script that prints figures; it asserts
 * nothing. For each run, size and system, in that order (so the systems take turns):
 *
 *   1. a fresh store: MariaDB database peers_bench (cronq), PostgreSQL database
 *      peers_bench (graphile-worker), Redis db 5 flushed (BullMQ);
 *   2. N jobs with a ~100-byte JSON payload, enqueued from this process with the
 *      system's bulk API (timed: the "enqueue s" column);
 *   3. one worker process (workers/), concurrency 16, async no-op handler; timed from
 *      the moment it is loaded, connected and told to start, to the last of the N jobs
 *      recorded as completed by its system (systems.ts); its peak RSS (VmHWM);
 *   4. pickup in that worker process, right after the drain: 200 sequential enqueues
 *      from it, each waiting for its handler to start, 5 ms apart; p50/p99/max;
 *   5. the 1-minute load average before step 1 and after step 4.
 *
 *   PEERS_SIZES      comma list of N (default 20000,60000,100000)
 *   PEERS_RUNS       repeats of the whole set (default 1)
 *   PEERS_ONLY       comma list of cronq,graphile,bullmq (default all three)
 *   PEERS_MYSQL_URL  default mysql://root@127.0.0.1:3306/peers_bench
 *   PEERS_PG_URL     default postgres://postgres@127.0.0.1:5432/peers_bench
 *   PEERS_REDIS_URL  default redis://127.0.0.1:6379/5 (flushed: never point it at a db in use)
 *   PEERS_POLL_MS    how often the store is checked while draining (default 5)
 *   PEERS_SETTLE_MS  pause before each run, for the servers' background work (default 2000)
 *   PEERS_TIMEOUT_S  a drain still unfinished after this is reported and skipped (default 600)
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { fmt, percentile } from '../util.ts';
import { compileWorkers, forkWorker, type SystemName } from './child.ts';
import { bullmqSystem, cronqSystem, graphileSystem, type System } from './systems.ts';

const list = (value: string | undefined, fallback: string) => (value ?? fallback).split(',').map((s) => s.trim()).filter(Boolean);
const sizes = list(process.env.PEERS_SIZES, '20000,60000,100000').map(Number);
const runs = Number(process.env.PEERS_RUNS ?? 1);
const only = list(process.env.PEERS_ONLY, 'cronq,graphile,bullmq');
const pollMs = Number(process.env.PEERS_POLL_MS ?? 5);
const settleMs = Number(process.env.PEERS_SETTLE_MS ?? 2000);
const timeoutMs = Number(process.env.PEERS_TIMEOUT_S ?? 600) * 1000;
const PICKUPS = 200;
const PICKUP_GAP_MS = 5;

const all: System[] = [
  cronqSystem(process.env.PEERS_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/peers_bench'),
  graphileSystem(process.env.PEERS_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/peers_bench'),
  bullmqSystem(process.env.PEERS_REDIS_URL ?? 'redis://127.0.0.1:6379/5'),
];

const LABELS: Record<SystemName, string> = { cronq: 'cronq', graphile: 'graphile-worker', bullmq: 'BullMQ' };
const load1 = () => loadavg()[0].toFixed(2);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function packageVersion(dir: string): string {
  return JSON.parse(readFileSync(fileURLToPath(new URL(`${dir}/package.json`, import.meta.url)), 'utf8')).version;
}

function cronqVersion(): string {
  let commit = '';
  try {
    commit = execFileSync('git', ['describe', '--always', '--dirty'], { cwd: fileURLToPath(new URL('.', import.meta.url)), encoding: 'utf8' }).trim();
  } catch {
    // Not a checkout: the package version alone.
  }
  return `cronq ${packageVersion('../..')}${commit ? ` (${commit})` : ''}`;
}

interface Row {
  system: SystemName;
  size: number;
  run: number;
  enqueueS: number;
  rate: number | null;
  peakMb: number | null;
  pickup: number[] | null;
  loadBefore: string;
  loadAfter: string;
  note: string;
}

const COLUMNS = ['system', 'N', 'run', 'enqueue s', 'jobs/s', 'peak RSS MB', 'pickup p50 ms', 'p99 ms', 'max ms', 'load 1m before→after'];
const WIDTHS = [16, 8, 4, 10, 9, 12, 14, 8, 8, 22];
const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(WIDTHS[i]) : c.padStart(WIDTHS[i]))).join(' ').trimEnd();

function format(row: Row): string {
  const ms = (p: number) => (row.pickup ? (p === 100 ? row.pickup[row.pickup.length - 1] : percentile(row.pickup, p)).toFixed(2) : '-');
  return line([
    LABELS[row.system],
    fmt(row.size),
    String(row.run),
    row.enqueueS.toFixed(1),
    row.rate === null ? '-' : fmt(row.rate),
    row.peakMb === null ? '-' : String(Math.round(row.peakMb)),
    ms(50),
    ms(99),
    ms(100),
    `${row.loadBefore}→${row.loadAfter}`,
  ]) + (row.note ? `   ${row.note}` : '');
}

/** One system, one size: fresh store, enqueue, drain in a fresh worker process, pickup. */
async function measure(system: System, size: number, run: number): Promise<Row> {
  await sleep(settleMs);
  const row: Row = { system: system.name, size, run, enqueueS: 0, rate: null, peakMb: null, pickup: null, loadBefore: load1(), loadAfter: '', note: '' };
  await system.reset();
  const enqueueStarted = performance.now();
  await system.enqueue(size);
  row.enqueueS = (performance.now() - enqueueStarted) / 1000;
  const store = await system.open(size);
  const worker = await forkWorker(system.name, system.env);
  try {
    // Loaded, connected and idle: the clock starts here, process start-up left out.
    const started = performance.now();
    await worker.start();
    while (!(await store.drained())) {
      if (performance.now() - started > timeoutMs) throw new Error(`not drained after ${timeoutMs / 1000} s`);
      await sleep(pollMs);
    }
    const seconds = (performance.now() - started) / 1000;
    row.peakMb = worker.peak() / 1_048_576;
    const problem = await store.confirm();
    if (problem) row.note = `(${problem})`;
    else row.rate = size / seconds;
    row.pickup = (await worker.pickup(PICKUPS, PICKUP_GAP_MS)).sort((a, b) => a - b);
    await worker.stop();
  } catch (error) {
    worker.kill();
    row.note = `(failed: ${error instanceof Error ? error.message : String(error)})`;
  } finally {
    await store.close();
  }
  row.loadAfter = load1();
  return row;
}

async function main(): Promise<void> {
  console.log(`cronq peers bench — ${new Date().toISOString()}, Node ${process.version}`);
  const systems: System[] = [];
  for (const system of all.filter((s) => only.includes(s.name))) {
    try {
      console.log(`${LABELS[system.name].padEnd(16)} ${await system.probe()}`);
      systems.push(system);
    } catch (error) {
      console.log(`${LABELS[system.name].padEnd(16)} server down (${error instanceof Error ? error.message : String(error)}): skipped`);
    }
  }
  console.log(`packages: ${cronqVersion()}, graphile-worker ${packageVersion('./node_modules/graphile-worker')}, bullmq ${packageVersion('./node_modules/bullmq')}, pg ${packageVersion('./node_modules/pg')}, ioredis ${packageVersion('./node_modules/ioredis')}`);
  console.log('workers: concurrency 16, async no-op handler; cronq defaults (prefetch 1000); graphile-worker localQueue 500, completeJobBatchDelay 0, failJobBatchDelay 0, pool 18; BullMQ defaults (completed jobs kept)');
  console.log(`sizes ${sizes.map(fmt).join(', ')}; runs ${runs}; load average ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  if (systems.length === 0) return;
  await compileWorkers(systems.map((s) => s.name));
  console.log('');
  console.log(line(COLUMNS));
  const rows: Row[] = [];
  for (let run = 1; run <= runs; run++) {
    for (const size of sizes) {
      for (const system of systems) {
        const row = await measure(system, size, run);
        rows.push(row);
        console.log(format(row));
      }
    }
  }
  if (runs > 1) {
    console.log('');
    console.log('median jobs/s over the runs (the lower middle one for an even count):');
    for (const size of sizes) {
      const medians = systems.map((system) => {
        const rates = rows.filter((r) => r.system === system.name && r.size === size && r.rate !== null).map((r) => r.rate!).sort((a, b) => a - b);
        return `${LABELS[system.name]} ${rates.length ? fmt(percentile(rates, 50)) : '-'}`;
      });
      console.log(`  ${fmt(size).padStart(7)}: ${medians.join(', ')}`);
    }
  }
  console.log(`load average after: ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
