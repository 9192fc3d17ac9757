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
