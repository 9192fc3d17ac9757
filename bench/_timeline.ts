import { createCronq, defineTask, noopObserver } from '../src/index.ts';
import { truncateJobs } from './util.ts';
import { enqueueForWorker } from './realSections.ts';
const url = 'mysql://root@127.0.0.1:3306/cronq_bench';
const total = Number(process.env.N ?? 20000);
if (!process.env.SKIP) { await truncateJobs(url);
await enqueueForWorker(url, total, "tl"); if (process.env.ONLY) process.exit(0); }
let t0 = 0; let claimed = 0; let completed = 0; let firstClaim = 0; let firstDone = 0;
const marks: string[] = [];
let finished!: () => void; const all = new Promise<void>((r) => (finished = r));
const observer = { ...noopObserver,
  jobClaimed(n: number) { if (!firstClaim) firstClaim = performance.now() - t0; claimed += n; },
  jobCompleted() { completed++; if (!firstDone) firstDone = performance.now() - t0; if (completed % (total/10) === 0) marks.push(`${completed}@${(performance.now()-t0).toFixed(0)}`); if (completed === total) finished(); } };
const task = defineTask({ name: 'async-noop', handle: async (job) => { await Promise.resolve(job.payload); } });
const cronq = createCronq({ databaseUrl: url, logger: false, concurrency: 16, observer, tasks: [task] });
await cronq.admin.ping();
t0 = performance.now();
const cpu0 = process.cpuUsage();
const samples: string[] = [];
const iv = setInterval(() => { const c = process.cpuUsage(cpu0); samples.push(`${(performance.now()-t0).toFixed(0)}:c${claimed}/d${completed}/cpu${((c.user+c.system)/1000).toFixed(0)}`); }, 20);
await cronq.start();
const startMs = performance.now() - t0;
await all;
const ms = performance.now() - t0;
clearInterval(iv); console.log(samples.slice(0,12).join(' '));
console.log(`start ${startMs.toFixed(1)} firstClaim ${firstClaim.toFixed(1)} firstDone ${firstDone.toFixed(1)} total ${ms.toFixed(0)} ms rate ${(total/ms*1000).toFixed(0)} | ${marks.join(' ')}`);
await cronq.stop();
