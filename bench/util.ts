import mysql from 'mysql2/promise';

export interface BenchResult {
  label: string;
  value: string;
  ratio?: number;
  target?: string;
}

export interface BenchContext {
  url: string;
  /** Raw commits/s of the baseline section, once it ran. */
  baseline: number | null;
  results: BenchResult[];
}

export interface BenchSection {
  name: string;
  run(context: BenchContext): Promise<void>;
}

export const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

export function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

export async function truncateJobs(url: string): Promise<void> {
  const conn = await mysql.createConnection(url);
  await conn.query('TRUNCATE cronq_jobs');
  await conn.query('TRUNCATE cronq_dead_letters');
  await conn.end();
}

/**
 * Resolves once at least `total` jobs are done (those whose key starts with `keyPrefix`,
 * when given): handlers can have run before their batched completions are written.
 */
export async function waitForDone(url: string, total: number, keyPrefix?: string): Promise<void> {
  const conn = await mysql.createConnection(url);
  try {
    const where = keyPrefix === undefined ? '' : ' AND job_key LIKE ?';
    for (;;) {
      const [[row]] = (await conn.query(`SELECT COUNT(*) AS n FROM cronq_jobs WHERE status = 'done'${where}`, keyPrefix === undefined ? [] : [`${keyPrefix}%`])) as any;
      if (Number(row.n) >= total) return;
      await new Promise((r) => setTimeout(r, 5));
    }
  } finally {
    await conn.end();
  }
}
