import { spawn } from 'node:child_process';
import { beforeAll, describe, expect, it } from 'vitest';
import { resolveMatching, type BulkReviewResult } from '../src/store/deadLetters.ts';
import { CRONQ_BIN, REPO_ROOT } from './support/cli.ts';
import { useTestDatabase } from './support/db.ts';
import { eventually } from './support/events.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_dead_letters'] });
let env: Record<string, string>;

beforeAll(() => {
  env = { DATABASE_URL: t.url, CRONQ_SCHEDULES: '', LOG_LEVEL: 'info' };
});

/** `n` dead jobs of kind 'bulk', each with one unreviewed dead letter, oldest first by id. */
async function deadJobs(n: number): Promise<void> {
  await t.sql(`SET SESSION max_recursive_iterations = ${n + 1}`);
  await t.sql(
    `INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, attempts, max_attempts, last_error, finished_time)
     WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
     SELECT 'default', 'bulk', CONCAT('bulk:', i), '{}', 'dead', 3, 3, 'Error: boom', UTC_TIMESTAMP(6) FROM n`,
    [n],
  );
  await t.sql(
    `INSERT INTO cronq_dead_letters (job_id, queue, kind, job_key, payload, failure_reason, attempts, dead_at)
     SELECT id, queue, kind, job_key, payload, last_error, 3, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR + INTERVAL id MICROSECOND FROM cronq_jobs ORDER BY id`,
  );
}

const counts = async () =>
  (await t.sql(`SELECT SUM(reviewed_at IS NULL) AS open, SUM(reviewed_at IS NOT NULL) AS reviewed FROM cronq_dead_letters`)).map((r) => ({
    open: Number(r.open),
    reviewed: Number(r.reviewed),
  }))[0];

describe('interrupting a bulk requeue', () => {
  it('stops between batches when its signal aborts, reports progress per batch, and a second run finishes without resolving any twice', async () => {
    await deadJobs(25);
    const stop = new AbortController();
    const seen: BulkReviewResult[] = [];
    const first = await resolveMatching(t.database.db, {}, 'requeue', 'first', {
      batchSize: 10,
      signal: stop.signal,
      onBatch: (soFar) => {
        seen.push(soFar);
        stop.abort();
      },
    });
    expect(first).toEqual({ touched: 10, skippedJobNotDead: 0, skippedSuperseded: 0, interrupted: true });
    expect(seen).toEqual([{ touched: 10, skippedJobNotDead: 0, skippedSuperseded: 0 }]);
    expect(await counts()).toEqual({ open: 15, reviewed: 10 });
    const second = await resolveMatching(t.database.db, {}, 'requeue', 'second', { batchSize: 10 });
    expect(second).toEqual({ touched: 15, skippedJobNotDead: 0, skippedSuperseded: 0, skippedHeld: 0 });
    expect(await t.sql(`SELECT resolution, COUNT(*) AS n FROM cronq_dead_letters GROUP BY resolution ORDER BY resolution`)).toEqual([
      { resolution: 'requeued: first', n: 10 },
      { resolution: 'requeued: second', n: 15 },
    ]);
    expect(await t.sql(`SELECT status, COUNT(*) AS n FROM cronq_jobs GROUP BY status`)).toEqual([{ status: 'ready', n: 25 }]);
  });

  it('cronq dead requeue --all-matching finishes the batch in flight on SIGINT, says what it did, and exits 130', async () => {
    await deadJobs(20_000);
    const child = spawn(process.execPath, [CRONQ_BIN, 'dead', 'requeue', '--all-matching', '--reason', 'back'], {
      cwd: REPO_ROOT,
      env: { ...process.env, ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    await eventually(async () => (await counts()).reviewed > 0, 30_000, 'the first batch to commit');
    child.kill('SIGINT');
    expect(await exited).toBe(130);
    expect(stderr).toContain('cronq dead requeue: stopping after the batch in progress (a second signal stops at once)');
    const done = /^interrupted: requeued (\d+) dead letters; the rest are unreviewed \(run the same command again to go on: it never resolves a dead letter twice\)$/.exec(stdout.trim());
    expect(done, stdout).not.toBeNull();
    const touched = Number(done![1]);
    expect(touched % 500).toBe(0);
    expect(touched).toBeLessThan(20_000);
    expect(await counts()).toEqual({ open: 20_000 - touched, reviewed: touched });
    expect(Number((await t.sql(`SELECT COUNT(*) AS n FROM cronq_jobs WHERE status = 'ready'`))[0].n)).toBe(touched);
  }, 60_000);
});
