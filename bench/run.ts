/**
 * `npm run bench`: prints throughput and latency figures side by side with the raw
 * baseline of this machine's database, in one run. A script, not a test: it asserts
 * nothing, it reports. Uses its own database (cronq_bench by default), dropped first.
 *
 *   BENCH_DATABASE_URL   server and database to use (default mysql://root@127.0.0.1:3306/cronq_bench)
 *   BENCH_ONLY           comma list of sections to run (baseline,drain,enqueue,pickup,...);
 *                        a name that is no section is refused (exit 64), naming the sections
 *   BENCH_WORKER         tsx: run the worker process of drain-async and memory through tsx
 *                        (default: compiled by esbuild first; see workerProcess.ts)
 *
 * drain-async and memory drain in a worker process of their own (drainWorker.ts) while
 * this process enqueues, and report that process's RSS: the worker's, as a peer's would be.
 */
import { loadavg } from 'node:os';
import mysql from 'mysql2/promise';
import { createCronq, defineTask } from '../src/index.ts';
import { sections, type BenchContext } from './sections.ts';

const url = process.env.BENCH_DATABASE_URL ?? 'mysql://root@127.0.0.1:3306/cronq_bench';
const only = process.env.BENCH_ONLY?.split(',').map((s) => s.trim());

async function resetDatabase(): Promise<void> {
  const parsed = new URL(url);
  const name = parsed.pathname.slice(1);
  parsed.pathname = '';
  const admin = await mysql.createConnection(parsed.toString().replace(/\/$/, ''));
  await admin.query(`DROP DATABASE IF EXISTS \`${name}\``);
  await admin.end();
  const cronq = createCronq({ databaseUrl: url, logger: false, tasks: [defineTask({ name: 'noop', handle: () => undefined })] });
  await cronq.migrate();
  await cronq.stop();
}

async function main(): Promise<void> {
  const unknown = only?.filter((name) => !sections.some((section) => section.name === name)) ?? [];
  if (unknown.length > 0) {
    console.error(`bench: BENCH_ONLY names no section ${unknown.map((n) => JSON.stringify(n)).join(', ')}; the sections are ${sections.map((s) => s.name).join(', ')}`);
    process.exit(64);
  }
  await resetDatabase();
  const admin = await mysql.createConnection(url);
  const [[server]] = (await admin.query(
    'SELECT VERSION() AS version, @@innodb_flush_log_at_trx_commit AS flush, @@sync_binlog AS sync_binlog',
  )) as any;
  await admin.end();
  console.log(`cronq bench — ${new Date().toISOString()}`);
  console.log(`server ${server.version}, innodb_flush_log_at_trx_commit=${server.flush}, sync_binlog=${server.sync_binlog}`);
  console.log(`load average before: ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  const context: BenchContext = { url, baseline: null, results: [] };
  for (const section of sections) {
    if (only && !only.includes(section.name)) continue;
    await section.run(context);
  }
  console.log(`load average after: ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  console.log('');
  const width = Math.max(...context.results.map((r) => r.label.length));
  for (const r of context.results) {
    const ratio = r.ratio === undefined ? '' : `   (${r.ratio.toFixed(2)}× baseline)`;
    const target = r.target ? `   target ${r.target}` : '';
    console.log(`${r.label.padEnd(width)}  ${r.value}${ratio}${target}`);
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
