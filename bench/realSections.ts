/**
 * Bench sections that measure what users run: async handlers, ~100-byte JSON payloads,
 * drains of 20k and 100k jobs with the worker process's peak RSS, the worker's RSS after
 * 100k and after 1M jobs drained, and the cost of a big table (1M done rows, 100k ready;
 * 1M dead rows and 10k dead letters for stats). Scripts that print figures; they assert
 * nothing. The drain and memory sections drain in a worker process of their own
 * (workerProcess.ts) while this process enqueues, so the RSS figures are the worker's.
 */
import mysql from 'mysql2/promise';
import { CronqMetrics } from '../src/http/metrics.ts';
import { createCronq, defineTask, noopObserver } from '../src/index.ts';
import { loadavg } from 'node:os';
import { cpuMeter, databaseServerPid, writeCallsOf } from './cpu.ts';
import { fmt, truncateJobs, type BenchContext, type BenchSection } from './util.ts';
import { prepareWorker, startWorker, workerMode, type WorkerProcess, type WorkerReport } from './workerProcess.ts';

/** A payload like a real one: about 100 bytes of JSON. */
export const payloadOf = (i: number) => ({ userId: i, plan: 'pro-monthly', amountCents: 4900 + (i % 100), currency: 'EUR', region: 'eu-central' });

/**
 * Enqueues `total` jobs with payloads, then drains them in one createCronq at concurrency
 * 16 with an async handler; returns jobs/s from the start to the last completion written.
 */
async function drainAsync(url: string, total: number, keyPrefix: string): Promise<number> {
  // Timed to the last completion written, as the engine reports it (Observer.jobCompleted):
  // a COUNT over the table to find that moment would cost the big table more than the drain.
  let completed = 0;
  let finished!: () => void;
  const allDone = new Promise<void>((r) => (finished = r));
  const observer = {
    ...noopObserver,
    jobCompleted() {
      if (++completed === total) finished();
    },
  };
  const task = defineTask({
    name: 'async-noop',
    handle: async (job) => {
      await Promise.resolve(job.payload);
    },
  });
  const cronq = createCronq({ databaseUrl: url, logger: false, concurrency: 16, observer, tasks: [task] });
  const batch = 50_000;
  for (let from = 0; from < total; from += batch) {
    const rows = Array.from({ length: Math.min(batch, total - from) }, (_, i) => ({ key: `${keyPrefix}:${from + i}`, payload: payloadOf(from + i) }));
    await cronq.enqueueMany(task, rows);
  }
  const started = performance.now();
  await cronq.start();
  await allDone;
  const seconds = (performance.now() - started) / 1000;
  await cronq.stop();
  return total / seconds;
}

function ratioTo(context: BenchContext, rate: number): number | undefined {
  return context.baseline ? rate / context.baseline : undefined;
}

/**
 * Enqueues `total` jobs of the worker's kind with payloads (payloadOf, or `payload`), from
 * this process, in batches of `batch` rows (50k).
 */
export async function enqueueForWorker(url: string, total: number, keyPrefix: string, payload: (i: number) => unknown = payloadOf, batch = 50_000): Promise<void> {
  const cronq = createCronq({ databaseUrl: url, logger: false, workers: false, scheduler: false, allowUnknownKind: true });
  for (let from = 0; from < total; from += batch) {
    const rows = Array.from({ length: Math.min(batch, total - from) }, (_, i) => ({ kind: 'async-noop', key: `${keyPrefix}:${from + i}`, payload: payload(from + i) }));
    await cronq.enqueueMany(rows);
  }
  await cronq.stop();
}

const mb = (bytes: number) => `${Math.round(bytes / 1_048_576)} MB`;
const load = () => `load ${loadavg()[0].toFixed(2)}`;

/** The worker's memory in a line: RSS, and its heap used/total and external (process.memoryUsage()). */
function memoryLine(rss: number, memory: NodeJS.MemoryUsage): string {
  return `RSS ${mb(rss)} (heap ${mb(memory.heapUsed)} used of ${mb(memory.heapTotal)}, external ${mb(memory.external)})`;
}

/**
 * Async handler, ~100-byte payloads: 20,000 and 100,000 jobs, enqueued first, then drained
 * by a fresh worker process at concurrency 16; jobs/s from the moment it is loaded and
 * connected and told to start (process start-up left out, as in the daemons section) to
 * the last completion written, and its peak RSS (VmHWM) over its whole life, start included.
 */
const drainReal: BenchSection = {
  name: 'drain-async',
  async run(context) {
    await prepareWorker();
    for (const total of [20_000, 100_000]) {
      await truncateJobs(context.url);
      await enqueueForWorker(context.url, total, `async:${total}`);
      let started = 0;
      let meter: ReturnType<typeof cpuMeter> | null = null;
      let child: number | null = null;
      let writesBefore: number | null = null;
      const server = await databaseServerPid(context.url);
      const worker = await startWorker(context.url, {
        startedAt: (at) => {
          started = at;
          meter = cpuMeter({ mysqld: server, worker: child });
          writesBefore = child === null ? null : writeCallsOf(child);
        },
        spawned: (pid) => (child = pid),
      });
      await worker.completed(total);
      const rate = total / ((performance.now() - started) / 1000);
      const cpu = meter!.perJob(total);
      const writesAfter = child === null ? null : writeCallsOf(child);
      const writes = writesBefore === null || writesAfter === null ? '' : `, worker writes per 1,000 jobs ${((1000 * (writesAfter - writesBefore)) / total).toFixed(1)}`;
      const peak = worker.peak();
      await worker.stop();
      context.results.push({
        label: `drain ${fmt(total)} jobs, async handler, ~100 B payloads, concurrency 16`,
        value: `${fmt(rate)} jobs/s, worker peak RSS ${mb(peak)}, CPU per job: ${cpu}${writes} (${workerMode}; ${load()})`,
        ratio: ratioTo(context, rate),
        target: total === 20_000 ? '≥ 5× baseline' : 'peak RSS ≤ 160 MB',
      });
    }
  },
};

/** A payload of about 64 KB of JSON: a rendered e-mail, a document to index. */
const largePayloadOf = (i: number) => ({ userId: i, template: 'monthly-statement', html: `<p>${'statement line '.repeat(4_360)}</p>` });

/**
 * 2,000 jobs with ~64 KB payloads, drained by a fresh worker process at concurrency 16
 * (async handler): jobs/s and payload MB/s from its start to the last completion, its
 * peak RSS (the read-ahead holds at most PREFETCH_PAYLOAD_CHARS of payload), and the CPU
 * per job. On MariaDB each write to such a row once re-read and re-validated its payload
 * (see README, "Payloads are validated once, when written").
 */
const drainLarge: BenchSection = {
  name: 'drain-large',
  async run(context) {
    await prepareWorker();
    const total = 2_000;
    await truncateJobs(context.url);
    await enqueueForWorker(context.url, total, 'large', largePayloadOf, 200);
    const bytes = JSON.stringify(largePayloadOf(0)).length;
    let started = 0;
    let meter: ReturnType<typeof cpuMeter> | null = null;
    let child: number | null = null;
    const server = await databaseServerPid(context.url);
    const worker = await startWorker(context.url, {
      startedAt: (at) => {
        started = at;
        meter = cpuMeter({ mysqld: server, worker: child });
      },
      spawned: (pid) => (child = pid),
    });
    await worker.completed(total);
    const seconds = (performance.now() - started) / 1000;
    const cpu = meter!.perJob(total);
    const peak = worker.peak();
    await worker.stop();
    context.results.push({
      label: `drain ${fmt(total)} jobs, async handler, ~${Math.round(bytes / 1024)} KB payloads, concurrency 16`,
      value: `${fmt(total / seconds)} jobs/s (${((total * bytes) / 1_048_576 / seconds).toFixed(0)} MB/s of payload), worker peak RSS ${mb(peak)}, CPU per job: ${cpu} (${workerMode}; ${load()})`,
    });
  },
};

/**
 * 100,000 jobs drained by the running worker on an emptied table: enqueued here while it
 * claims. `drainedBefore`: the worker's completions before these.
 */
async function drainThrough(url: string, worker: WorkerProcess, drainedBefore: number, keyPrefix: string): Promise<void> {
  await truncateJobs(url);
  await enqueueForWorker(url, 100_000, keyPrefix);
  await worker.completed(drainedBefore + 100_000);
}

/**
 * One worker process drains 1,000,000 jobs, 100,000 at a time (the table truncated
 * between them, so it stays the same size). After each 100k it prints the worker's RSS
 * (after full GCs in the worker, so garbage not yet collected does not count: the trend
 * over ten points tells growth from noise); the result is its RSS after the first 100k
 * and after all 1M, and its peak RSS (VmHWM) over each stretch.
 */
const memory: BenchSection = {
  name: 'memory',
  async run(context) {
    const worker = await startWorker(context.url);
    let drained = 0;
    const after: Record<string, { rss: number; peak: number; memory: NodeJS.MemoryUsage }> = {};
    const points: number[] = [];
    for (const [label, count] of [
      ['100k', 100_000],
      ['1M', 900_000],
    ] as const) {
      worker.resetPeak();
      let rss = 0;
      let report!: WorkerReport;
      for (let left = count; left > 0; left -= 100_000) {
        await drainThrough(context.url, worker, drained, `mem:${drained}`);
        drained += 100_000;
        report = await worker.report(true);
        rss = worker.rss();
        points.push(rss);
        console.log(`memory: ${fmt(drained)} drained: ${memoryLine(rss, report.memory)} (${load()})`);
      }
      after[label] = { rss, peak: worker.peak(), memory: report.memory };
    }
    await worker.stop();
    const a = after['100k'];
    const b = after['1M'];
    context.results.push({
      label: 'worker RSS after 100k jobs drained, after 1M',
      // One point against one is at the mercy of the allocator (RSS after full GCs moves
      // by ±10 % from one 100k to the next here): the heap in use and the range over all
      // ten points tell growth from noise.
      value: `${mb(a.rss)}, ${mb(b.rss)} (${((b.rss / a.rss - 1) * 100).toFixed(1)} %); heap used ${mb(a.memory.heapUsed)}, ${mb(b.memory.heapUsed)}; RSS over the ten points ${mb(Math.min(...points))}–${mb(Math.max(...points))}; peak ${mb(a.peak)} in the first 100k, ${mb(b.peak)} in the next 900k (${workerMode}; ${load()})`,
      target: 'within 10 %',
    });
  },
};

/**
 * Waits (up to 60 s) until InnoDB has purged and flushed what a fill just wrote: the
 * history list under 1,000 and dirty pages under 10 % of the buffer pool. A table that
 * grew over weeks has no such write burst behind it; returns the seconds waited.
 */
async function settle(conn: mysql.Connection): Promise<number> {
  const started = performance.now();
  while (performance.now() - started < 60_000) {
    const [[status]] = (await conn.query('SHOW ENGINE INNODB STATUS')) as any;
    const history = Number(/History list length (\d+)/.exec(status.Status)?.[1] ?? 0);
    const [pages] = (await conn.query(
      "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_buffer_pool_pages_dirty', 'Innodb_buffer_pool_pages_total')",
    )) as any;
    const value = (name: string) => Number(pages.find((r: { Variable_name: string }) => r.Variable_name === name)?.Value ?? 0);
    if (history < 1_000 && value('Innodb_buffer_pool_pages_dirty') < value('Innodb_buffer_pool_pages_total') / 10) break;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return (performance.now() - started) / 1000;
}

/** Drains 20,000 jobs `runs` times (keys `prefix:run:i`); the rates, slowest first. */
/** Timed 20k drains per table in the bigtable section: their spread (about ±15 % here) needs this many for a steady median. */
const RUNS_EACH = 9;

/** A database named `<this one>_<suffix>` on the same server, made afresh and migrated; its URL. */
async function databaseBeside(url: string, suffix: string): Promise<string> {
  const parsed = new URL(url);
  const name = `${parsed.pathname.slice(1)}_${suffix}`;
  parsed.pathname = '';
  const admin = await mysql.createConnection(parsed.toString().replace(/\/$/, ''));
  await admin.query(`DROP DATABASE IF EXISTS \`${name}\``);
  await admin.end();
  parsed.pathname = `/${name}`;
  const beside = parsed.toString();
  const cronq = createCronq({ databaseUrl: beside, logger: false, tasks: [defineTask({ name: 'noop', handle: () => undefined })] });
  await cronq.migrate();
  await cronq.stop();
  return beside;
}

/**
 * The claim's plan and 20k drains (RUNS_EACH each, alternating between the two tables after one not counted, compared by median) on a table holding 1M
 * done rows and 100k ready rows due tomorrow, beside the same drains on an empty table,
 * once InnoDB has settled after the fill (settle).
 */
const bigTable: BenchSection = {
  name: 'bigtable',
  async run(context) {
    // The empty table is a second database beside this one, and the drains alternate
    // between the two (big first, then empty first, and so on): the drains run in this
    // process, whose first drains are the slowest (code not yet optimised, caches cold),
    // so timing all of one table's drains before the other's favoured whichever came last.
    const emptyUrl = await databaseBeside(context.url, 'empty');
    await truncateJobs(context.url);
    const conn = await mysql.createConnection({ uri: context.url, multipleStatements: true });
    // 1M done rows, 100k ready for tomorrow (and, below, 1M dead rows and 10k dead letters), made in SQL in batches.
    await fill(conn, 'done', 1_000_000);
    await fill(conn, 'ready', 100_000, { dueInSeconds: 86_400 });
    const waited = await settle(conn);
    const plan = (await conn.query(
      `EXPLAIN SELECT id, available_at FROM cronq_jobs FORCE INDEX (cronq_jobs_claim) WHERE status = 'ready' AND queue = 'default' AND available_at <= UTC_TIMESTAMP(6) ORDER BY available_at, id LIMIT 100 FOR UPDATE SKIP LOCKED`,
    )) as any;
    await drainAsync(emptyUrl, 20_000, 'warm-up'); // not counted
    const big: number[] = [];
    const empty: number[] = [];
    for (let run = 0; run < RUNS_EACH; run++) {
      const pair = run % 2 === 0 ? (['big', 'empty'] as const) : (['empty', 'big'] as const);
      for (const which of pair) {
        if (which === 'big') big.push(await drainAsync(context.url, 20_000, `big:${run}`));
        else empty.push(await drainAsync(emptyUrl, 20_000, `empty:${run}`));
      }
    }
    big.sort((a, b) => a - b);
    empty.sort((a, b) => a - b);
    const row = plan[0][0];
    const middle = Math.floor(RUNS_EACH / 2);
    context.results.push({ label: 'claim plan with 1M done rows, 100k ready for tomorrow', value: `${row.type} on ${row.key}, rows ${row.rows}, ${row.Extra}` });
    const list = (rates: number[]) => rates.map(fmt).join(', ');
    context.results.push({
      label: `drain 20k with 1M done + 100k later rows vs empty (median of ${RUNS_EACH}, alternating)`,
      value: `${fmt(big[middle])} vs ${fmt(empty[middle])} jobs/s (${((big[middle] / empty[middle] - 1) * 100).toFixed(1)} %; big ${list(big)}, empty ${list(empty)}; ${waited.toFixed(0)} s settling after the fill; ${load()})`,
      target: 'within 10 %',
    });
    await fill(conn, 'dead', 1_000_000);
    await conn.query(`INSERT INTO cronq_dead_letters (job_id, queue, kind, job_key, payload, failure_reason, attempts)
      SELECT id, queue, kind, job_key, payload, 'Error: upstream 503', attempts FROM cronq_jobs WHERE status = 'dead' ORDER BY id LIMIT 10000`);
    await conn.end();
    const cronq = createCronq({ databaseUrl: context.url, logger: false });
    const metrics = new CronqMetrics({ collect: () => cronq.admin.stats(), oldestRunningJobAgeSeconds: () => 0 });
    for (const [label, read] of [
      ['stats', () => cronq.admin.stats()],
      ['/metrics scrape', () => metrics.scrape()],
    ] as const) {
      const times: number[] = [];
      for (let i = 0; i < 5; i++) {
        const started = performance.now();
        await read();
        times.push(performance.now() - started);
      }
      times.sort((a, b) => a - b);
      context.results.push({ label: `${label} with 1M done, 1M dead, 10k dead letters (5 runs)`, value: `${times.map((t) => t.toFixed(0)).join(', ')} ms`, target: '< 200 ms' });
    }
    await cronq.stop();
  },
};

/** Inserts `count` rows of `status` in batches of 50k, generated by the server; `dueInSeconds` sets available_at that far ahead. */
export async function fill(conn: mysql.Connection, status: 'ready' | 'done' | 'dead', count: number, { dueInSeconds = 0 } = {}): Promise<void> {
  await conn.query('CREATE TABLE IF NOT EXISTS bench_seq (n INT PRIMARY KEY)');
  const [[have]] = (await conn.query('SELECT COUNT(*) AS n FROM bench_seq')) as any;
  if (Number(have.n) < 50_000) {
    await conn.query('TRUNCATE bench_seq');
    const values = Array.from({ length: 50_000 }, (_, i) => `(${i})`).join(',');
    await conn.query(`INSERT INTO bench_seq (n) VALUES ${values}`);
  }
  for (let from = 0; from < count; from += 50_000) {
    await conn.query(
      // A finished row as a daemon leaves it: its token, its holder padded to the stored width, its finish time.
      `INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, attempts, available_at, finished_time, lease_fence, lease_holder)
       SELECT 'default', 'async-noop', CONCAT(?, ':', ? + n), '{"userId":1,"plan":"pro-monthly","amountCents":4900,"currency":"EUR"}', ?, 1,
         UTC_TIMESTAMP(6) + INTERVAL ? SECOND, IF(? = 'ready', '1970-01-01 00:00:00', UTC_TIMESTAMP(6)),
         IF(? = 'ready', '', LPAD(HEX(? + n), 32, '0')), IF(? = 'ready', REPEAT(' ', 48), RPAD('bench-host:4242', 48, ' '))
       FROM bench_seq WHERE n < ?`,
      [`fill-${status}`, from, status, dueInSeconds, status, status, from, status, Math.min(50_000, count - from)],
    );
  }
}

export { bigTable, drainLarge, drainReal, memory };
