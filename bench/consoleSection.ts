/**
 * `console`: each web-console page's response time with 1M job rows (990k done, 10k
 * dead), 10k dead letters and 10k ledger rows of one schedule, over HTTP with a token (payloads shown), 5 runs each.
 */
import { sql } from 'drizzle-orm';
import mysql from 'mysql2/promise';
import { connect } from '../src/db/client.ts';
import { markDead } from '../src/store/fenced.ts';
import { ConsoleAuth } from '../src/http/console/auth.ts';
import { createConsole } from '../src/http/console/router.ts';
import { startHttpServer } from '../src/http/server.ts';
import { createCronq, defineSchedule } from '../src/index.ts';
import { silentLogger } from '../src/logger.ts';
import { fill } from './realSections.ts';
import { truncateJobs, type BenchSection } from './util.ts';

const SECRET = 'bench-secret-bench-secret';

/**
 * Sends the `count` ready rows dead the way a failed attempt or lease recovery does
 * (markDead: the job row, its dead letter and its reason group, in one transaction per
 * thousand), each with its own reason text: `Error: upstream 503 for request ID`.
 */
async function deadLettersAsTheWorkerWrites(url: string, count: number): Promise<void> {
  const database = connect(url);
  try {
    const ids = ((await database.pool.query("SELECT id FROM cronq_jobs WHERE status = 'ready' ORDER BY id LIMIT ?", [count])) as any)[0].map(
      (r: { id: number }) => Number(r.id),
    );
    for (let from = 0; from < ids.length; from += 1000) {
      await database.db.transaction((tx) => markDead(tx, ids.slice(from, from + 1000), sql`CONCAT('Error: upstream 503 for request ', id)`));
    }
  } finally {
    await database.close();
  }
}

export const consolePages: BenchSection = {
  name: 'console',
  async run(context) {
    await truncateJobs(context.url);
    const conn = await mysql.createConnection({ uri: context.url, multipleStatements: true });
    await fill(conn, 'done', 990_000);
    await fill(conn, 'ready', 10_000);
    await deadLettersAsTheWorkerWrites(context.url, 10_000);
    const [[letter]] = (await conn.query('SELECT MAX(id) AS id, MAX(job_id) AS job FROM cronq_dead_letters')) as any;
    const [[job]] = (await conn.query("SELECT job_key FROM cronq_jobs WHERE status = 'done' ORDER BY id DESC LIMIT 1")) as any;
    const schedule = 'bench-hourly';
    await conn.query('DELETE FROM cronq_schedule_ticks WHERE schedule_name = ?', [schedule]);
    await conn.query(`INSERT INTO cronq_schedule_ticks (schedule_name, scheduled_at, period_key, outcome, jobs_enqueued, started_at, finished_at)
      SELECT ?, UTC_TIMESTAMP() - INTERVAL n HOUR, CONCAT('h', n), 'enqueued', 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) FROM bench_seq WHERE n < 10000`, [schedule]);
    await conn.end();
    const hourly = defineSchedule({ name: schedule, cron: '0 * * * *', timezone: 'UTC', period: 'hour', handle() {} });
    const cronq = createCronq({ databaseUrl: context.url, tasks: [hourly], workers: false, scheduler: false, logger: false });
    const server = await startHttpServer(
      { host: '127.0.0.1', port: 0 },
      {
        health: async () => ({ status: 'ok' }) as never,
        metrics: async () => ({ contentType: 'text/plain', body: '' }),
        console: createConsole({ admin: cronq.admin, auth: new ConsoleAuth({ name: 'bench', secret: SECRET }), log: silentLogger() }),
      },
      silentLogger(),
    );
    const pages = ['/', '/schedules', `/schedules/${schedule}`, '/dead', `/dead/${letter.id}`, `/jobs/${letter.job}`, `/jobs/${encodeURIComponent(job.job_key)}`];
    for (const path of pages) {
      const times: number[] = [];
      for (let i = 0; i < 5; i++) {
        const started = performance.now();
        const res = await fetch(`http://127.0.0.1:${server.port}${path}`, { headers: { Authorization: `Bearer bench:${SECRET}` } });
        await res.text();
        if (res.status !== 200) throw new Error(`console ${path}: HTTP ${res.status}`);
        times.push(performance.now() - started);
      }
      times.sort((a, b) => a - b);
      context.results.push({ label: `console ${path.replace(/\/[0-9]+$/, '/ID')} (1M jobs, 10k dead letters; 5 runs)`, value: `${times.map((t) => t.toFixed(0)).join(', ')} ms`, target: '< 200 ms' });
    }
    await server.close();
    await cronq.stop();
  },
};
