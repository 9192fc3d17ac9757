import { describe, expect, it } from 'vitest';
import { servingOf } from '../src/store/daemons.ts';
import { useTestDatabase } from './support/db.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_daemons'] });

describe('how long a kind went unserved, for a job whose created_at was set to NULL by hand', () => {
  it('reads the zero date as long ago, never as NaN', async () => {
    const job: any = await t.sql(`INSERT INTO cronq_jobs (queue, kind, job_key, payload) VALUES ('default', 'gone', 'zero:created', '{}')`);
    await t.sql(`SET SESSION sql_mode = ''`);
    try {
      await t.sql('UPDATE cronq_jobs SET created_at = NULL WHERE id = ?', [job.insertId]);
    } finally {
      await t.sql(`SET SESSION sql_mode = DEFAULT`);
    }
    expect((await t.sql('SELECT CAST(created_at AS CHAR) AS c FROM cronq_jobs WHERE id = ?', [job.insertId]))[0].c).toMatch(/^0000-00-00/);
    const serving = await servingOf(t.database.db, { jobId: job.insertId, kind: 'gone', queue: 'default', aliveMs: 30_000 });
    expect(serving.alive).toBe(false);
    expect(Number.isFinite(serving.unservedForMs)).toBe(true);
    expect(serving.unservedForMs).toBeGreaterThan(15 * 60_000);
  });
});
