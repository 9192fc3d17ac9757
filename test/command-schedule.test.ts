import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createCronq, defineSchedule, type Cronq } from '../src/index.ts';
import { useTestDatabase } from './support/db.ts';
import { EventLog } from './support/events.ts';
import { isGone } from './support/process.ts';

const t = useTestDatabase();
let cronq: Cronq | null = null;
const dir = mkdtempSync(join(tmpdir(), 'cronq-cmd-'));

afterEach(async () => {
  await cronq?.stop({ graceMs: 1_000 });
  cronq = null;
});

async function runTick(options: Parameters<typeof defineSchedule>[0], at = '2026-11-30T02:30:00Z') {
  const schedule = defineSchedule(options);
  const log = new EventLog();
  cronq = createCronq({ databaseUrl: t.url, tasks: [schedule], logger: log.logger, scheduler: false, pollInterval: '50ms' });
  await cronq.start();
  const ticked = await cronq.admin.tick(schedule.name, { at: new Date(at) });
  if (ticked.status !== 'enqueued') throw new Error(`tick of ${schedule.name} at ${at}: ${ticked.status}`);
  const { periodKey } = ticked;
  return { log, periodKey, key: `${schedule.name}:${periodKey}` };
}

describe('command schedules run by the worker', () => {
  it('succeed with the job in their environment', async () => {
    const out = join(dir, 'ok.txt');
    const { log, key } = await runTick({
      name: 'env-report',
      cron: '30 2 * * *',
      period: 'day',
      command: 'printf "%s %s %s %s" "$CRONQ_JOB_KEY" "$CRONQ_PERIOD_KEY" "$CRONQ_SCHEDULED_AT" "$CRONQ_ATTEMPT" > "$OUT"',
      env: { OUT: out },
    });
    await log.waitFor('job_completed');
    expect(readFileSync(out, 'utf8')).toBe(`${key} 2026-11-30 2026-11-30T02:30:00.000Z 1`);
    const [job] = await t.sql('SELECT status FROM cronq_jobs WHERE job_key = ?', [key]);
    expect(job.status).toBe('done');
  });

  it('fail with the exit code and stderr tail, retry, and go dead when attempts run out', async () => {
    const { log, key } = await runTick({
      name: 'failing-report',
      cron: '30 2 * * *',
      period: 'day',
      maxAttempts: 2,
      backoff: { base: '10ms', max: '20ms' },
      command: 'echo "upstream said 503" >&2; exit 3',
    });
    await log.waitFor('job_dead');
    expect(log.named('job_failed').map((e) => e.attempt)).toEqual([1, 2]);
    const [letter] = await t.sql('SELECT failure_reason, attempts FROM cronq_dead_letters WHERE job_key = ?', [key]);
    expect(letter).toEqual({ failure_reason: 'Error: command exited with code 3: upstream said 503', attempts: 2 });
  });

  it('keep the end of a long stderr in the dead letter, where the command says why it failed', async () => {
    const { log, key } = await runTick({
      name: 'noisy-report',
      cron: '30 2 * * *',
      period: 'day',
      maxAttempts: 1,
      command: "seq 1 400 | sed 's/^/noise line /' >&2; echo 'FATAL: disk full on /var' >&2; exit 1",
    });
    await log.waitFor('job_dead');
    const [letter] = await t.sql('SELECT failure_reason FROM cronq_dead_letters WHERE job_key = ?', [key]);
    expect(letter.failure_reason).toMatch(/^Error: command exited with code 1: ….*noise line 400\nFATAL: disk full on \/var$/s);
    const [job] = await t.sql('SELECT last_error FROM cronq_jobs WHERE job_key = ?', [key]);
    expect(job.last_error).toBe(letter.failure_reason);
  });

  it('are killed and fail when they run past their timeout', async () => {
    const pidFile = join(dir, 'slow.pid');
    const { log, key } = await runTick({
      name: 'slow-report',
      cron: '30 2 * * *',
      period: 'day',
      maxAttempts: 1,
      timeout: '300ms',
      command: `echo $$ > ${pidFile}; exec sleep 30`,
    });
    await log.waitFor('job_dead', 1, 10_000);
    const [job] = await t.sql('SELECT last_error FROM cronq_jobs WHERE job_key = ?', [key]);
    expect(job.last_error).toMatch(/command timed out after 300ms/);
    const pid = Number(readFileSync(pidFile, 'utf8'));
    expect(isGone(pid)).toBe(true);
  });
});
