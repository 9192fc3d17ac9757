import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runMain } from './support/runMain.ts';
import { useTestDatabase } from './support/db.ts';

const t = useTestDatabase();

/** A schedules folder holding one schedule: Nuuk at 23:30, whose 28 March 2026 is skipped by a midnight jump. */
function nuukFolder(cron = '30 23 * * *'): string {
  const dir = mkdtempSync(join(tmpdir(), 'cronq-schedules-'));
  writeFileSync(
    join(dir, 'nuuk.ts'),
    `import { defineSchedule } from '${join(process.cwd(), 'src/index.ts')}';
export default defineSchedule({ name: 'nuuk', cron: ${JSON.stringify(cron)}, timezone: 'America/Nuuk', period: 'day', handle: () => {} });
`,
  );
  return dir;
}

describe('cronq schedules', () => {
  it('names the zone data its fire times come from, and lists a time skipped across midnight at the jump', async () => {
    const env = { DATABASE_URL: t.url, CRONQ_SCHEDULES: nuukFolder() };
    const args = ['schedules', '--from', '2026-03-27T12:00:00Z', '--count', '3'];
    const text = await runMain(args, env);
    expect(text).toMatchObject({ code: 0, stderr: '' });
    expect(text.stdout.split('\n')[0]).toBe(`zone data: tz ${process.versions.tz} (Node ${process.version})`);
    expect(text.stdout).toContain('next: 2026-03-28T01:30:00.000Z, 2026-03-29T01:00:00.000Z, 2026-03-30T00:30:00.000Z');
    const json = await runMain([...args, '--json'], env);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject([{ name: 'nuuk', timezone: 'America/Nuuk', tzdata: process.versions.tz, next: [expect.any(String), '2026-03-29T01:00:00.000Z', expect.any(String)] }]);
  });

  it('shows a cron written with tabs and runs of blanks with one space between its fields, so its line keeps its columns', async () => {
    const cron = ' 30\t23  *\t\t* * ';
    const env = { DATABASE_URL: t.url, CRONQ_SCHEDULES: nuukFolder(cron) };
    const text = await runMain(['schedules', '--from', '2026-03-27T12:00:00Z', '--count', '1'], env);
    expect(text).toMatchObject({ code: 0, stderr: '' });
    expect(text.stdout.split('\n')[1]).toBe('nuuk  30 23 * * *  America/Nuuk  period day');
    // --json gives the cron as the schedule defines it (JSON escapes its tabs).
    const json = await runMain(['schedules', '--from', '2026-03-27T12:00:00Z', '--count', '1', '--json'], env);
    expect(JSON.parse(json.stdout)).toMatchObject([{ name: 'nuuk', cron }]);
  });
});

describe('user text in cronq schedules and cronq stats', () => {
  it('a pause reason, its author, a pause name and a ledger note holding tabs, line breaks or escapes print as visible escapes, each on its line', async () => {
    const env = { DATABASE_URL: t.url, CRONQ_SCHEDULES: nuukFolder() };
    await t.sql(
      `INSERT INTO cronq_pauses (target, name, reason, paused_by, paused_at) VALUES
        ('schedule', 'nuuk', ?, 'ann\tops', '2026-03-27 10:00:00'), ('queue', 'mail\tbulk', NULL, 'bob', '2026-03-27 10:00:00')`,
      ['deploy\tv2 \x1b[2J\r\nnow'],
    );
    await t.sql(
      `INSERT INTO cronq_schedule_ticks (schedule_name, scheduled_at, period_key, outcome, note, started_at, finished_at)
       VALUES ('nuuk', '2026-03-27 02:30:00', '2026-03-26', 'failed', 'failed after 1 attempt: Error: a\tb\nc', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`,
    );
    try {
      const schedules = await runMain(['schedules', '--from', '2026-03-27T12:00:00Z', '--count', '1'], env);
      expect(schedules).toMatchObject({ code: 0, stderr: '' });
      const lines = schedules.stdout.split('\n');
      expect(lines[2]).toBe('  paused by ann\\x09ops since 2026-03-27T10:00:00.000Z: deploy\\x09v2 \\x1b[2J now (its ticks are skipped)');
      expect(lines[4]).toBe('  last tick: 2026-03-27T02:30:00.000Z failed — failed after 1 attempt: Error: a\\x09b\\x0ac');
      expect(schedules.stdout).not.toMatch(/\t/);

      const stats = await runMain(['stats'], env);
      expect(stats).toMatchObject({ code: 0, stderr: '' });
      expect(stats.stdout).toContain('\nschedule nuuk paused by ann\\x09ops since 2026-03-27T10:00:00.000Z: deploy\\x09v2 \\x1b[2J now\n');
      expect(stats.stdout).toContain('\nqueue mail\\x09bulk paused by bob since 2026-03-27T10:00:00.000Z\n');
      expect(stats.stdout).toMatch(/\nnuuk +2026-03-27T02:30:00\.000Z +failed: failed after 1 attempt: Error: a\\x09b\\x0ac +- *\n/);
      expect(stats.stdout).not.toMatch(/\t/);
    } finally {
      await t.sql('DELETE FROM cronq_pauses');
      await t.sql('DELETE FROM cronq_schedule_ticks');
    }
  });
});
