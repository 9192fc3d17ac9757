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
