import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { validateQueueList } from '../src/tasks/define.ts';
import { REPO_ROOT, runProcess } from './support/cli.ts';

const SYSTEMD_ANALYZE = '/usr/bin/systemd-analyze';
const template = readFileSync(join(REPO_ROOT, 'deploy/cronq@.service'), 'utf8');
const dirs: string[] = [];
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

/** What cronq@.service's ExecStart writes after --queues (a systemd specifier). */
function queuesSpecifier(): string {
  const execStart = template.split('\n').find((line) => line.startsWith('ExecStart='));
  const match = /--queues (\S+)/.exec(execStart ?? '');
  if (!match) throw new Error('cronq@.service: no --queues in ExecStart');
  return match[1];
}

/**
 * What systemd makes of that specifier for `instance`: a probe unit whose executable path
 * holds it, which `systemd-analyze verify` names, expanded, in its complaint.
 */
async function expandedFor(instance: string): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'cronq-units-'));
  dirs.push(dir);
  const probe = `[Service]\nExecStart=/nonexistent/queues=${queuesSpecifier()}\n`;
  writeFileSync(join(dir, 'probe@.service'), probe);
  writeFileSync(join(dir, `probe@${instance}.service`), probe);
  const r = await runProcess(SYSTEMD_ANALYZE, ['verify', join(dir, `probe@${instance}.service`)], { cwd: dir, timeoutMs: 30_000 });
  const match = /\/nonexistent\/queues=(\S+?)(?: is not executable|$)/m.exec(r.stderr);
  if (!match) throw new Error(`systemd-analyze said nothing about the probe: ${r.stderr}`);
  return match[1];
}

describe('deploy/cronq@.service', () => {
  it.skipIf(!existsSync(SYSTEMD_ANALYZE))(
    'claims the queues its instance names once unescaped: cronq@billing, and several escaped by systemd-escape (cronq@billing\\x2creports)',
    async () => {
      for (const [instance, queues] of [
        ['billing', ['billing']],
        ['billing\\x2creports', ['billing', 'reports']],
        ['my\\x2dqueue', ['my-queue']],
      ] as const) {
        const value = await expandedFor(instance);
        expect(validateQueueList(value.split(','), '--queues'), instance).toEqual(queues);
      }
    },
  );
});
