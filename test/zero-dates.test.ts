import { beforeAll, describe, expect, it } from 'vitest';
import { runCli } from './support/cli.ts';
import { useTestDatabase } from './support/db.ts';

/**
 * A NULL written by hand into a NOT NULL DATETIME with strict mode off is stored as the
 * zero date, `0000-00-00 00:00:00`, which reads as no instant at all. The triage and
 * limits commands print such a time as 'not a valid time' instead of failing whole.
 */
const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_dead_letters', 'cronq_kind_limits', 'cronq_pauses'] });
let env: Record<string, string>;

beforeAll(() => {
  env = { DATABASE_URL: t.url, CRONQ_SCHEDULES: '', LOG_LEVEL: 'info' };
});

/** A dead letter whose dead_at an operator set to NULL with sql_mode='' (the job row is gone). */
async function zeroDatedLetter(key: string): Promise<number> {
  const r: any = await t.sql(
    `INSERT INTO cronq_dead_letters (job_id, queue, kind, job_key, payload, failure_reason, attempts)
     VALUES (999999, 'default', 'report', ?, '{}', 'Error: boom', 1)`,
    [key],
  );
  await t.sql(`SET SESSION sql_mode = ''`);
  try {
    await t.sql('UPDATE cronq_dead_letters SET dead_at = NULL WHERE id = ?', [r.insertId]);
    return r.insertId;
  } finally {
    await t.sql(`SET SESSION sql_mode = DEFAULT`);
  }
}

describe('times written as NULL by hand with strict mode off', () => {
  it('dead list, list --group and show print the zero date as not a valid time and still list every row', async () => {
    const id = await zeroDatedLetter('zero:1');
    expect((await t.sql('SELECT CAST(dead_at AS CHAR) AS d FROM cronq_dead_letters WHERE id = ?', [id]))[0].d).toMatch(/^0000-00-00/);
    const list = await runCli(['dead', 'list'], env);
    expect(list).toMatchObject({ code: 0, stderr: '' });
    expect(list.stdout).toMatch(new RegExp(`^\\s*${id}\\s+not a valid time\\s+report\\s+zero:1\\s+1\\s+Error: boom$`, 'm'));
    const json = await runCli(['dead', 'list', '--json'], env);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject([{ id, deadAt: 'not a valid time' }]);
    const groups = await runCli(['dead', 'list', '--group'], env);
    expect(groups).toMatchObject({ code: 0, stderr: '' });
    expect(groups.stdout).toContain('not a valid time');
    const groupsJson = await runCli(['dead', 'list', '--group', '--json'], env);
    expect(JSON.parse(groupsJson.stdout)).toMatchObject([{ count: 1, firstDeadAt: 'not a valid time', lastDeadAt: 'not a valid time' }]);
    const shown = await runCli(['dead', 'show', String(id)], env);
    expect(shown).toMatchObject({ code: 0, stderr: '' });
    expect(shown.stdout).toContain('  dead at:   not a valid time');
  });

  it('the zero-dated dead letter can still be discarded', async () => {
    const id = await zeroDatedLetter('zero:2');
    const r = await runCli(['dead', 'discard', '--all-matching', '--reason', 'hand-written'], env);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout.trim()).toBe('discarded 1 dead letter');
    expect((await t.sql('SELECT resolution FROM cronq_dead_letters WHERE id = ?', [id]))[0].resolution).toBe('discarded: hand-written');
  });

  it('cronq limits prints a limit whose updated_at is the zero date', async () => {
    await t.sql(`INSERT INTO cronq_kind_limits (kind, max_running) VALUES ('report', 2)`);
    await t.sql(`SET SESSION sql_mode = ''`);
    try {
      await t.sql(`UPDATE cronq_kind_limits SET updated_at = NULL`);
    } finally {
      await t.sql(`SET SESSION sql_mode = DEFAULT`);
    }
    const r = await runCli(['limits'], env);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout).toMatch(/^report\s+2\s+0\s+not a valid time$/m);
  });

  it('cronq stats prints a pause whose paused_at is the zero date, and cronq resume ends it and says so with exit 0', async () => {
    await t.sql(`INSERT INTO cronq_pauses (target, name, reason, paused_by) VALUES ('queue', 'mail', 'smtp down', 'ops')`);
    await t.sql(`SET SESSION sql_mode = ''`);
    try {
      await t.sql(`UPDATE cronq_pauses SET paused_at = NULL`);
    } finally {
      await t.sql(`SET SESSION sql_mode = DEFAULT`);
    }
    const stats = await runCli(['stats'], env);
    expect(stats).toMatchObject({ code: 0, stderr: '' });
    expect(stats.stdout).toContain('mail paused by ops since not a valid time: smtp down');
    const resumed = await runCli(['resume', '--queue', 'mail'], env);
    expect(resumed).toMatchObject({ code: 0, stderr: '' });
    expect(resumed.stdout.trim()).toBe('queue mail resumed (was paused by ops since not a valid time: smtp down)');
    expect(await t.sql('SELECT * FROM cronq_pauses')).toEqual([]);
  });
});
