import { spawn } from 'node:child_process';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import mysql from 'mysql2/promise';
import { createCronq, defineTask } from '../src/index.ts';
import { consolePages } from './consoleSection.ts';
import { cpuMeter, databaseServerPid } from './cpu.ts';
import { bigTable, drainLarge, drainReal, memory } from './realSections.ts';
import { fanout, periods, tickPrecision } from './scheduleSections.ts';
import { fmt, percentile, truncateJobs, waitForDone, type BenchSection } from './util.ts';

export type { BenchContext, BenchResult, BenchSection } from './util.ts';

const CRONQ_BIN = fileURLToPath(new URL('../bin/cronq.js', import.meta.url));
const BENCH_SCHEDULES = fileURLToPath(new URL('./schedules', import.meta.url));

/** Autocommit single-row UPDATE by primary key from 4 connections for ~8 s: what one durable commit costs here. */
const baseline: BenchSection = {
  name: 'baseline',
  async run(context) {
    const conn = await mysql.createConnection(context.url);
    await conn.query('CREATE TABLE IF NOT EXISTS bench_baseline (id INT PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB');
    await conn.query('INSERT IGNORE INTO bench_baseline (id, n) VALUES (1,0),(2,0),(3,0),(4,0)');
    await conn.end();
    const durationMs = 8_000;
    const deadline = performance.now() + durationMs;
    const started = performance.now();
    const counts = await Promise.all(
      [1, 2, 3, 4].map(async (id) => {
        const c = await mysql.createConnection(context.url);
        let n = 0;
        while (performance.now() < deadline) {
          await c.query('UPDATE bench_baseline SET n = n + 1 WHERE id = ?', [id]);
          n += 1;
        }
        await c.end();
        return n;
      }),
    );
    const perSecond = counts.reduce((a, b) => a + b, 0) / ((performance.now() - started) / 1000);
    context.baseline = perSecond;
    context.results.push({ label: 'raw baseline (4 conns, autocommit UPDATE by PK)', value: `${fmt(perSecond)} commits/s` });
  },
};

/** 20,000 pre-enqueued no-op jobs drained by one process at concurrency 16. */
const drain: BenchSection = {
  name: 'drain',
  async run(context) {
    await truncateJobs(context.url);
    const total = 20_000;
    let done = 0;
    let finished!: () => void;
    const allDone = new Promise<void>((r) => (finished = r));
    const cronq = createCronq({
      databaseUrl: context.url,
      logger: false,
      concurrency: 16,
      tasks: [
        defineTask({
          name: 'noop',
          handle: () => {
            done += 1;
            if (done === total) finished();
          },
        }),
      ],
    });
    await cronq.enqueueMany(Array.from({ length: total }, (_, i) => ({ kind: 'noop', key: `drain:${i}` })));
    const started = performance.now();
    await cronq.start();
    await allDone;
    await waitForDone(context.url, total);
    const seconds = (performance.now() - started) / 1000;
    await cronq.stop();
    const rate = total / seconds;
    context.results.push({
      label: 'drain 20,000 no-op jobs, synchronous handler, no payload, concurrency 16',
      value: `${fmt(rate)} jobs/s`,
      ratio: context.baseline ? rate / context.baseline : undefined,
      target: '≥ 4× baseline',
    });
  },
};

/**
 * 5,000 pre-enqueued no-op jobs of a kind limited to 8 cluster-wide, drained by one
 * process at concurrency 16: what the limit's lock and count cost per claim (each claim
 * takes at most 8 jobs).
 */
const limited: BenchSection = {
  name: 'limited',
  async run(context) {
    await truncateJobs(context.url);
    const total = 5_000;
    let done = 0;
    let finished!: () => void;
    const allDone = new Promise<void>((r) => (finished = r));
    const task = defineTask({
      name: 'noop-limited',
      concurrency: 8,
      handle: () => {
        done += 1;
        if (done === total) finished();
      },
    });
    const cronq = createCronq({ databaseUrl: context.url, logger: false, concurrency: 16, tasks: [task] });
    await cronq.enqueueMany(task, Array.from({ length: total }, (_, i) => ({ key: `limited:${i}`, payload: null })));
    const started = performance.now();
    await cronq.start();
    await allDone;
    await waitForDone(context.url, total);
    const seconds = (performance.now() - started) / 1000;
    await cronq.stop();
    const rate = total / seconds;
    context.results.push({
      label: 'drain 5,000 no-op jobs of a kind limited to 8, concurrency 16',
      value: `${fmt(rate)} jobs/s`,
      ratio: context.baseline ? rate / context.baseline : undefined,
    });
  },
};

/** enqueueMany of 100,000 keyed jobs. */
const enqueue: BenchSection = {
  name: 'enqueue',
  async run(context) {
    await truncateJobs(context.url);
    const cronq = createCronq({ databaseUrl: context.url, logger: false, allowUnknownKind: true });
    const total = 100_000;
    function* jobs() {
      for (let i = 0; i < total; i++) yield { kind: 'noop', key: `bulk:user:${i}:2026-11`, payload: { userId: i } };
    }
    const started = performance.now();
    const { inserted } = await cronq.enqueueMany(jobs());
    const seconds = (performance.now() - started) / 1000;
    await cronq.stop();
    const rate = inserted / seconds;
    context.results.push({
      label: 'enqueueMany 100,000 keyed jobs',
      value: `${fmt(rate)} jobs/s (${inserted} inserted in ${seconds.toFixed(2)} s)`,
      ratio: context.baseline ? rate / context.baseline : undefined,
      target: '≥ 35,000 jobs/s',
    });
  },
};

/**
 * 200 sequential enqueues into an idle in-process daemon (enqueue return → handler start):
 * on a fresh daemon; on the same daemon right after its handlers ran the last of 20,000
 * jobs (async handler, payloads), while it still writes their completions; and after a
 * second drain of 20,000 once those completions are all written (idle again, its claim
 * lanes and cursors busy a moment ago, InnoDB's purge still behind).
 */
const pickup: BenchSection = {
  name: 'pickup',
  async run(context) {
    await truncateJobs(context.url);
    let onStart: ((at: number) => void) | null = null;
    let drained = 0;
    let drainDone: () => void = () => undefined;
    const bulk = defineTask({
      name: 'bulk',
      handle: async () => {
        await Promise.resolve();
        if (++drained % 20_000 === 0) drainDone();
      },
    });
    const drain = async (pass: string) => {
      const finished = new Promise<void>((r) => (drainDone = r));
      await cronq.enqueueMany(bulk, Array.from({ length: 20_000 }, (_, i) => ({ key: `pickup-bulk:${pass}:${i}`, payload: { userId: i, plan: 'pro-monthly' } })));
      await finished;
    };
    const cronq = createCronq({
      databaseUrl: context.url,
      logger: false,
      concurrency: 16,
      tasks: [defineTask({ name: 'ping', handle: () => onStart?.(performance.now()) }), bulk],
    });
    await cronq.start();
    const measure = async (pass: string) => {
      const latencies: number[] = [];
      for (let i = 0; i < 200; i++) {
        const startedAt = new Promise<number>((r) => (onStart = r));
        await cronq.enqueue({ kind: 'ping', key: `pickup:${pass}:${i}` });
        const enqueuedAt = performance.now();
        latencies.push((await startedAt) - enqueuedAt);
        await new Promise((r) => setTimeout(r, 5)); // let it go idle again
      }
      return latencies.sort((a, b) => a - b);
    };
    const fresh = await measure('fresh');
    await drain('a');
    const afterDrain = await measure('after-drain');
    await drain('b');
    await waitForDone(context.url, 20_000, 'pickup-bulk:b:');
    const afterWritten = await measure('after-written');
    await cronq.stop();
    for (const [label, latencies] of [
      ['pickup latency, same process (200 jobs)', fresh],
      ['pickup latency right after a 20k drain, completions still being written (200 jobs)', afterDrain],
      ['pickup latency right after a 20k drain, completions written (200 jobs)', afterWritten],
    ] as const) {
      context.results.push({
        label,
        value: `p50 ${percentile(latencies, 50).toFixed(2)} ms, p99 ${percentile(latencies, 99).toFixed(2)} ms, max ${latencies[latencies.length - 1].toFixed(2)} ms`,
        target: 'p50 ≤ 2 ms, p99 ≤ 10 ms',
      });
    }
  },
};

/**
 * 20,000 pre-enqueued no-op jobs drained by `cronq start` processes (concurrency 16 each,
 * LOG_LEVEL=warn) against one database: one process, then two. Timed from the first claim
 * (so process start-up is left out) until no job is left ready or reserved, polling the
 * database every 20 ms, with the CPU per job of the server and of each process (/proc).
 */
const daemons: BenchSection = {
  name: 'daemons',
  async run(context) {
    const total = 20_000;
    const rates: number[] = [];
    const cpu: string[] = [];
    for (const processes of [1, 2]) {
      await truncateJobs(context.url);
      const cronq = createCronq({ databaseUrl: context.url, logger: false, allowUnknownKind: true });
      await cronq.enqueueMany(Array.from({ length: total }, (_, i) => ({ kind: 'noop', key: `daemons:${processes}:${i}` })));
      await cronq.stop();
      const conn = await mysql.createConnection(context.url);
      const count = async (where: string) => Number(((await conn.query(`SELECT COUNT(*) AS n FROM cronq_jobs WHERE ${where}`)) as any)[0][0].n);
      const children = Array.from({ length: processes }, () =>
        spawn(process.execPath, [CRONQ_BIN, 'start', '--no-migrate', '--concurrency', '16', '--schedules', BENCH_SCHEDULES], {
          env: { ...process.env, DATABASE_URL: context.url, LOG_LEVEL: 'warn' },
          stdio: ['ignore', 'inherit', 'inherit'],
        }),
      );
      const exited = children.map((child) => new Promise((resolve) => child.once('exit', resolve)));
      const poll = () => new Promise((r) => setTimeout(r, 20));
      const server = await databaseServerPid(context.url);
      try {
        while ((await count("status <> 'ready'")) === 0) await poll();
        const started = performance.now();
        const meter = cpuMeter({ mysqld: server, ...Object.fromEntries(children.map((child, i) => [`process ${i + 1}`, child.pid ?? null])) });
        // Until no job is left ready or reserved: one index dive a poll, where a count of the
        // done ones would read up to 20,000 index entries every 20 ms, taking server CPU from the drain.
        const left = async () => ((await conn.query("SELECT 1 FROM cronq_jobs WHERE status IN ('ready', 'reserved') LIMIT 1")) as any)[0].length > 0;
        while (await left()) await poll();
        rates.push(total / ((performance.now() - started) / 1000));
        const done = await count("status = 'done'");
        if (done !== total) throw new Error(`daemons: ${done} of ${total} jobs done after the drain`);
        cpu.push(`${meter.perJob(total)}; load ${loadavg()[0].toFixed(2)}`);
      } finally {
        for (const child of children) child.kill('SIGTERM');
        await Promise.all(exited);
        await conn.end();
      }
    }
    for (const [i, rate] of rates.entries()) {
      context.results.push({
        label: `drain 20,000 no-op jobs, ${i + 1} cronq start process${i === 0 ? '' : 'es'} (concurrency 16${i === 0 ? '' : ' each'})`,
        value: `${fmt(rate)} jobs/s, CPU per job: ${cpu[i]}`,
        ratio: context.baseline ? rate / context.baseline : undefined,
      });
    }
    context.results.push({ label: '2 processes vs 1', value: `${(rates[1] / rates[0]).toFixed(2)}× the drain rate` });
  },
};

export const sections: BenchSection[] = [baseline, drain, drainReal, drainLarge, limited, enqueue, pickup, daemons, fanout, tickPrecision, periods, memory, bigTable, consolePages];
