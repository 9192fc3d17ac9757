import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createCronq, defineSchedule, defineTask, type Cronq, type ScheduleOptions } from '../src/index.ts';
import { CronqMetrics } from '../src/http/metrics.ts';
import { systemClock } from '../src/schedule/clock.ts';
import { pausedNote } from '../src/schedule/plan.ts';
import { ScheduleTicker } from '../src/schedule/ticker.ts';
import { runCli } from './support/cli.ts';
import { runMain } from './support/runMain.ts';
import { Store } from '../src/store/index.ts';
import { useTestDatabase } from './support/db.ts';
import { EventLog } from './support/events.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_schedule_ticks', 'cronq_pauses'] });
const silent = pino({ level: 'silent' });
let cronq: Cronq | null = null;

afterEach(async () => {
  await cronq?.stop({ graceMs: 1_000 });
  cronq = null;
});

const report = (options: Partial<ScheduleOptions> = {}) =>
  defineSchedule({ name: 'report', cron: '0 2 * * *', timezone: 'UTC', period: 'day', catchUp: { mode: 'all', window: '40d' }, handle() {}, ...options } as ScheduleOptions);

const ticker = (s: ReturnType<typeof report>) => new ScheduleTicker(s, { store: new Store(t.database), clock: systemClock, log: silent, claimedBy: 'test:1' });

async function ledger(name = 'report') {
  const rows = await t.sql(
    "SELECT DATE_FORMAT(scheduled_at, '%Y-%m-%dT%H:%i:%sZ') AS at, outcome, note FROM cronq_schedule_ticks WHERE schedule_name = ? AND period_key <> 'seed' ORDER BY scheduled_at",
    [name],
  );
  return rows.map((r: any) => ({ at: r.at, outcome: r.outcome, note: r.note }));
}

async function seedTick(name: string, at: Date) {
  await t.sql(
    "INSERT INTO cronq_schedule_ticks (schedule_name, scheduled_at, period_key, outcome, started_at, finished_at) VALUES (?, ?, 'seed', 'enqueued', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
    [name, at.toISOString().replace('T', ' ').replace('Z', '')],
  );
}

const jobKeys = async () => (await t.sql('SELECT job_key FROM cronq_jobs ORDER BY job_key')).map((r: any) => r.job_key);

describe('pausing a schedule', () => {
  it('records its ticks as skipped naming who paused it and why, and after the resume does not catch them up', async () => {
    const s = report();
    cronq = createCronq({ databaseUrl: t.url, tasks: [s], workers: false, scheduler: false, logger: false });
    await seedTick('report', new Date('2020-11-01T02:00:00Z'));
    const paused = await cronq.admin.pauses.pause('schedule', 'report', { reason: 'ledger migration', by: 'alice@ops' });
    expect(paused).toMatchObject({ status: 'paused', pause: { target: 'schedule', name: 'report', reason: 'ledger migration', pausedBy: 'alice@ops' } });
    const note = `paused by alice@ops since ${paused.status === 'paused' && paused.pause.pausedAt.toISOString()}: ledger migration`;

    await ticker(s).catchUp(new Date('2020-11-02T02:00:00.100Z'));
    await ticker(s).catchUp(new Date('2020-11-03T02:00:05Z'));
    expect(await jobKeys()).toEqual([]);
    expect(await cronq.admin.pauses.pause('schedule', 'report', { by: 'bob@ops' })).toMatchObject({ status: 'already_paused', pause: { pausedBy: 'alice@ops' } });
    expect(await cronq.admin.pauses.resume('schedule', 'report')).toMatchObject({ status: 'resumed', pause: { pausedBy: 'alice@ops' } });
    expect(await cronq.admin.pauses.resume('schedule', 'report')).toEqual({ status: 'not_paused' });

    await ticker(s).catchUp(new Date('2020-11-04T02:00:00.100Z'));
    expect(await ledger()).toEqual([
      { at: '2020-11-02T02:00:00Z', outcome: 'skipped', note },
      { at: '2020-11-03T02:00:00Z', outcome: 'skipped', note },
      { at: '2020-11-04T02:00:00Z', outcome: 'enqueued', note: null },
    ]);
    expect(await jobKeys()).toEqual(['report:2020-11-04']);
  });

  it('marks a tick skipped while paused as caught up only when it was handled late, as an enqueued one', async () => {
    const s = report();
    cronq = createCronq({ databaseUrl: t.url, tasks: [s], workers: false, scheduler: false, logger: false });
    await cronq.admin.pauses.pause('schedule', 'report', { by: 'alice@ops' });
    const caughtUp = async () =>
      (await t.sql("SELECT DATE_FORMAT(scheduled_at, '%m-%dT%H:%i') AS at, outcome, caught_up FROM cronq_schedule_ticks WHERE schedule_name = 'report' ORDER BY scheduled_at")).map(
        (r: any) => [r.at, r.outcome, Boolean(r.caught_up)],
      );

    // No row yet: the anchor, on time.
    await ticker(s).catchUp(new Date('2020-11-01T02:00:00.100Z'));
    // The next one on time; then one an hour late beside one on time.
    await ticker(s).catchUp(new Date('2020-11-02T02:00:05Z'));
    await ticker(s).catchUp(new Date('2020-11-04T02:00:05Z'));
    await ticker(s).catchUp(new Date('2020-11-05T03:00:00Z'));
    expect(await caughtUp()).toEqual([
      ['11-01T02:00', 'skipped', false],
      ['11-02T02:00', 'skipped', false],
      ['11-03T02:00', 'skipped', true],
      ['11-04T02:00', 'skipped', false],
      ['11-05T02:00', 'skipped', true],
    ]);
  });

  it('resumed after a pause no scheduler saw, it does not catch up the ticks that fell while paused', async () => {
    const s = report({ cron: '* * * * * *', period: 'tick', catchUp: { mode: 'all', window: '1h' } });
    cronq = createCronq({ databaseUrl: t.url, tasks: [s], workers: false, scheduler: false, logger: false });
    const start = Date.now();
    await seedTick('report', new Date(Math.floor(start / 1000) * 1000 - 120_000)); // two minutes of ticks to catch up
    await cronq.admin.pauses.pause('schedule', 'report', { by: 'alice@ops' });
    // Until a fire time falls inside the pause (at most a second).
    while (Math.floor(Date.now() / 1000) * 1000 <= start + 1) await new Promise((resolve) => setTimeout(resolve, 50));
    const resumed = await cronq.admin.pauses.resume('schedule', 'report');
    expect(resumed.status).toBe('resumed');
    const [anchor] = await ledger();
    expect(anchor).toMatchObject({ outcome: 'skipped', note: expect.stringMatching(/^paused by alice@ops since /) });
    // Written at the resume, within a second of its instant: on time, not caught up.
    expect(await t.sql("SELECT caught_up FROM cronq_schedule_ticks WHERE schedule_name = 'report' AND period_key <> 'seed'")).toEqual([{ caught_up: 0 }]);

    await ticker(s).catchUp(new Date());
    const enqueued = await t.sql("SELECT COUNT(*) AS n, MIN(scheduled_at) AS first FROM cronq_jobs");
    expect(Number(enqueued[0].n)).toBeLessThanOrEqual(2); // the second or two since the resume, not two minutes
    if (Number(enqueued[0].n) > 0) expect(new Date(`${enqueued[0].first.replace(' ', 'T')}Z`).getTime()).toBeGreaterThan(new Date(anchor.at).getTime());
  });

  it('refuses an unknown schedule and bad text, changing nothing', async () => {
    cronq = createCronq({ databaseUrl: t.url, tasks: [report()], workers: false, scheduler: false, logger: false });
    expect(await cronq.admin.pauses.pause('schedule', 'nightly')).toEqual({ status: 'no_schedule', name: 'nightly' });
    expect(await cronq.admin.pauses.resume('schedule', 'nightly')).toEqual({ status: 'no_schedule', name: 'nightly' });
    await expect(cronq.admin.pauses.pause('schedule', 'report', { reason: 'x'.repeat(256) })).rejects.toThrow('the reason is longer than 255 characters');
    await expect(cronq.admin.pauses.pause('queue', ' ')).rejects.toThrow(`the queue name must be 1-64 letters, digits, '.', '_' or '-' (got " ")`);
    await expect(cronq.admin.pauses.pause('schedule', 'report', { by: '' })).rejects.toThrow('by must not be empty');
    expect(await cronq.admin.pauses.list()).toEqual([]);
  });
});

describe('pause names', () => {
  it('are refused unless enqueue (a queue) or defineSchedule (a schedule) takes them, so "default " cannot stand in for default', async () => {
    cronq = createCronq({ databaseUrl: t.url, tasks: [report()], workers: false, scheduler: false, logger: false });
    const bad = ['default ', ' default', 'q'.repeat(65), 'q'.repeat(128), 'café', '.hidden', 'a b', ''];
    for (const name of bad) {
      await expect(cronq.admin.pauses.pause('queue', name), name).rejects.toThrow(/^the queue name must be 1-64 letters, digits, '\.', '_' or '-'(, starting with a letter or digit)? \(got /);
      // '' is taken by resume alone, for a pause written from SQL (see "a pause with an empty name"): here there is none.
      if (name === '') expect(await cronq.admin.pauses.resume('queue', name)).toEqual({ status: 'not_paused' });
      else await expect(cronq.admin.pauses.resume('queue', name), name).rejects.toThrow(/^the queue name must be 1-64 letters/);
      // No schedule can have such a name: there is none to pause or resume.
      expect(await cronq.admin.pauses.pause('schedule', name), name).toEqual({ status: 'no_schedule', name });
      expect(await cronq.admin.pauses.resume('schedule', name), name).toEqual({ status: 'no_schedule', name });
    }
    expect(await cronq.admin.pauses.list()).toEqual([]);
    // The longest name a job can have, and the real queue, pause as ever; 'report ' neither pauses nor ends the pause of 'report'.
    expect(await cronq.admin.pauses.pause('queue', 'q'.repeat(64))).toMatchObject({ status: 'paused' });
    expect(await cronq.admin.pauses.pause('queue', 'default')).toMatchObject({ status: 'paused', pause: { name: 'default' } });
    expect(await cronq.admin.pauses.pause('schedule', 'report')).toMatchObject({ status: 'paused' });
    expect(await cronq.admin.pauses.pause('schedule', 'report ')).toEqual({ status: 'no_schedule', name: 'report ' });
    expect(await cronq.admin.pauses.resume('schedule', 'report ')).toEqual({ status: 'no_schedule', name: 'report ' });
    expect((await cronq.admin.pauses.list()).map((p) => `${p.target}:${p.name}`)).toEqual(['schedule:report', 'queue:default', `queue:${'q'.repeat(64)}`]);
  });

  it('cronq pause --queue refuses one in one line naming the flag, exit 64, writing nothing', async () => {
    const result = await runCli(['pause', '--queue', 'default '], { DATABASE_URL: t.url });
    expect(result).toEqual({ code: 64, stdout: '', stderr: `cronq pause: --queue must be 1-64 letters, digits, '.', '_' or '-' (got "default ")\n` });
    expect(await runCli(['resume', '--queue', 'é'], { DATABASE_URL: t.url })).toMatchObject({ code: 64, stderr: expect.stringMatching(/^cronq resume: --queue must be 1-64 letters[^\n]*\n$/) });
    expect(await t.sql('SELECT name FROM cronq_pauses')).toEqual([]);
  });
});

describe('pausing a queue', () => {
  it.each([
    ['every queue with work', undefined],
    ['a configured queue list', ['mail', 'default']],
  ])('stops claims from it on %s while the running job finishes, and resuming starts its jobs', async (_, queues) => {
    const log = new EventLog('info');
    let releaseSlow!: () => void;
    const gate = new Promise<void>((resolve) => (releaseSlow = resolve));
    let slowStarted!: () => void;
    const started = new Promise<void>((resolve) => (slowStarted = resolve));
    const mail = defineTask({
      name: 'mail',
      queue: 'mail',
      async handle(job) {
        if (job.key !== 'mail:slow') return;
        slowStarted();
        await gate;
      },
    });
    const other = defineTask({ name: 'other', handle() {} });
    cronq = createCronq({ databaseUrl: t.url, tasks: [mail, other], logger: log.logger, scheduler: false, pollInterval: '50ms', ...(queues ? { queues } : {}) });
    await cronq.start();
    await cronq.enqueue(mail, { key: 'mail:slow', payload: null });
    await started;
    expect(await cronq.admin.pauses.pause('queue', 'mail', { reason: 'smtp down', by: 'ops' })).toMatchObject({ status: 'paused' });
    await log.waitFor('queue_paused'); // within one poll
    await cronq.enqueue(mail, { key: 'mail:waiting', payload: null });
    // Several claim rounds on the other queue, each after the pause, none of them takes the mail job.
    for (const [i, key] of ['other:1', 'other:2', 'other:3'].entries()) {
      await cronq.enqueue(other, { key, payload: null });
      await log.waitFor('job_completed', i + 1, 15_000, (e) => e.kind === 'other');
    }
    releaseSlow();
    await log.waitFor('job_completed', 1, 15_000, (e) => e.kind === 'mail');
    const [waiting] = await t.sql("SELECT status, attempts FROM cronq_jobs WHERE job_key = 'mail:waiting'");
    expect(waiting).toMatchObject({ status: 'ready', attempts: 0 });
    expect((await cronq.admin.stats()).pauses).toMatchObject([{ target: 'queue', name: 'mail', reason: 'smtp down', pausedBy: 'ops' }]);
    const metrics = new CronqMetrics({ collect: () => cronq!.admin.stats() });
    expect((await metrics.scrape()).body).toContain('cronq_paused{target="queue",name="mail"} 1');

    expect(await cronq.admin.pauses.resume('queue', 'mail')).toMatchObject({ status: 'resumed' });
    await log.waitFor('queue_resumed');
    await log.waitFor('job_completed', 2, 15_000, (e) => e.kind === 'mail');
  });
});

describe('cronq pause and resume', () => {
  function folder(): string {
    const dir = mkdtempSync(join(tmpdir(), 'cronq-pause-'));
    writeFileSync(
      join(dir, 'report.ts'),
      `import { defineSchedule } from '${join(process.cwd(), 'src/index.ts')}';
export default defineSchedule({ name: 'report', cron: '0 2 * * *', timezone: 'UTC', period: 'day', handle: () => {} });
`,
    );
    return dir;
  }

  it('pauses and resumes a schedule and a queue, shows the pauses, and refuses bad input with one line and exit 64', async () => {
    const env = { DATABASE_URL: t.url, CRONQ_SCHEDULES: folder() };
    const pauses = async () => (await t.sql('SELECT target, name, reason, paused_by FROM cronq_pauses ORDER BY target, name')) as any[];

    const unknown = await runCli(['pause', 'nightly', '--reason', 'x'], env);
    expect(unknown).toMatchObject({ code: 64, stdout: '', stderr: "cronq pause: no schedule named 'nightly' in the schedules folder\n" });
    const both = await runMain(['pause', 'report', '--queue', 'mail'], env);
    expect(both).toMatchObject({ code: 64, stderr: 'cronq pause: give a schedule NAME or --queue Q, not both\n' });
    const notPaused = await runCli(['resume', 'report'], env);
    expect(notPaused).toMatchObject({ code: 64, stderr: "cronq resume: schedule 'report' is not paused\n" });
    expect(await pauses()).toEqual([]);

    const paused = await runMain(['pause', 'report', '--reason', 'quarter close', '--by', 'alice'], env);
    expect(paused.code).toBe(0);
    expect(paused.stdout).toMatch(/^schedule report paused by alice since \d{4}-\d\d-\d\dT[\d:.]+Z: quarter close\n$/);
    const queue = await runMain(['pause', '--queue', 'mail'], env);
    expect(queue.code).toBe(0);
    expect(queue.stdout).toMatch(/^queue mail paused by [^@\s]+@\S+ since /);
    const again = await runCli(['pause', 'report'], env);
    expect(again).toMatchObject({ code: 64, stdout: '' });
    expect(again.stderr).toMatch(/^cronq pause: schedule 'report' is already paused by alice since .*: quarter close\n$/);
    expect(await pauses()).toEqual([
      { target: 'schedule', name: 'report', reason: 'quarter close', paused_by: 'alice' },
      { target: 'queue', name: 'mail', reason: null, paused_by: expect.stringMatching(/@/) },
    ]);

    const listed = JSON.parse((await runMain(['schedules', '--json'], env)).stdout);
    expect(listed[0].paused).toEqual({ by: 'alice', at: expect.any(String), reason: 'quarter close' });
    const stats = await runMain(['stats'], env);
    expect(stats.stdout).toMatch(/\nschedule report paused by alice since .*: quarter close\nqueue mail paused by /);

    expect(await runMain(['resume', 'report'], env)).toMatchObject({ code: 0, stdout: expect.stringMatching(/^schedule report resumed \(was paused by alice since /) });
    expect(await runMain(['resume', '--queue', 'mail'], env)).toMatchObject({ code: 0 });
    expect(await pauses()).toEqual([]);
  });
});

describe('a pause with an empty name, written from SQL', () => {
  it("is listed as '' by cronq stats and ended by cronq resume '' or --queue '', which pause still refuses", async () => {
    const env = { DATABASE_URL: t.url };
    await t.sql("INSERT INTO cronq_pauses (target, name, reason, paused_by) VALUES ('queue', '', 'by hand', 'dba'), ('schedule', '', NULL, 'dba')");
    const stats = await runMain(['stats'], env);
    expect(stats.stdout).toMatch(/\nschedule '' paused by dba since [^\n]*\nqueue '' paused by dba since .*: by hand\n/);
    expect(await runMain(['resume', '--queue', ''], env)).toMatchObject({ code: 0, stdout: expect.stringMatching(/^queue '' resumed \(was paused by dba since .*: by hand\)\n$/) });
    expect(await runMain(['resume', ''], env)).toMatchObject({ code: 0, stdout: expect.stringMatching(/^schedule '' resumed \(was paused by dba since /) });
    expect(await t.sql('SELECT * FROM cronq_pauses')).toEqual([]);
    expect(await runCli(['resume', '--queue', ''], env)).toMatchObject({ code: 64, stderr: "cronq resume: queue '' is not paused\n" });
    const refused = await runCli(['pause', '--queue', ''], env);
    expect(refused.code).toBe(64);
    expect(refused.stderr.split('\n')).toHaveLength(2);
    expect(await t.sql('SELECT * FROM cronq_pauses')).toEqual([]);
    // And the help says how such a NAME is given, as stats prints it.
    expect((await runMain(['resume', '--help'], env)).stdout.replace(/\n/g, ' ')).toContain("'cronq resume --unknown-target -- -x'");
  });

  it('is left out of cronq_paused (it pauses nothing) and counted in cronq_pauses_empty_name, 0 when there is none', async () => {
    cronq = createCronq({ databaseUrl: t.url, logger: false, workers: false, scheduler: false });
    const metrics = new CronqMetrics({ collect: () => cronq!.admin.stats() });
    expect((await metrics.scrape()).body).toContain('\ncronq_pauses_empty_name 0\n');
    await t.sql("INSERT INTO cronq_pauses (target, name, paused_by) VALUES ('queue', '', 'dba'), ('schedule', '', 'dba')");
    // A row of no known target and no name is counted once, as of no known target.
    await t.sql("SET STATEMENT sql_mode = '' FOR INSERT INTO cronq_pauses (target, name, paused_by) VALUES ('mailq', '', 'dba')");
    await cronq.admin.pauses.pause('queue', 'mail', { by: 'ops' });
    const body = (await metrics.scrape()).body;
    const paused = body.split('\n').filter((line) => line.startsWith('cronq_paused'));
    // An empty name label is no label to Prometheus: the row would read as a pause of the whole target.
    expect(paused).toEqual(['cronq_paused{target="queue",name="mail"} 1']);
    expect(body).toContain('\ncronq_pauses_empty_name 2\n');
    expect(body).toContain('\ncronq_pauses_unknown_target 1\n');
  });
});

describe('a pause row of no known target, written from SQL', () => {
  it("is listed as '(unknown target)' with the command that ends it, cronq resume --unknown-target NAME", async () => {
    const env = { DATABASE_URL: t.url };
    // Strict mode off: the ENUM stores its error value '' for a target none of cronq's.
    await t.sql("SET STATEMENT sql_mode = '' FOR INSERT INTO cronq_pauses (target, name, paused_by) VALUES ('mailq', 'mail', 'dba'), ('', '', 'dba')");
    expect((await t.sql('SELECT target, name FROM cronq_pauses ORDER BY name')).map((r: any) => `${r.target}/${r.name}`)).toEqual(['/', '/mail']);
    const stats = await runMain(['stats'], env);
    expect(stats.stdout).toMatch(/\n\(unknown target\) '' paused by dba since \S+ \(pauses nothing; ended by: cronq resume --unknown-target ''\)\n/);
    expect(stats.stdout).toMatch(/\n\(unknown target\) mail paused by dba since \S+ \(pauses nothing; ended by: cronq resume --unknown-target mail\)\n/);
    // Not a queue's pause: --queue mail leaves it.
    expect(await runCli(['resume', '--queue', 'mail'], env)).toMatchObject({ code: 64, stderr: "cronq resume: queue 'mail' is not paused\n" });
    expect(await runMain(['resume', '--unknown-target', 'mail'], env)).toMatchObject({ code: 0, stdout: expect.stringMatching(/^\(unknown target\) mail resumed \(was paused by dba since /) });
    expect(await runMain(['resume', '--unknown-target', ''], env)).toMatchObject({ code: 0 });
    expect(await t.sql('SELECT * FROM cronq_pauses')).toEqual([]);
    expect(await runCli(['resume', '--unknown-target', 'mail'], env)).toMatchObject({ code: 64, stderr: "cronq resume: (unknown target) 'mail' is not paused\n" });
    expect(await runCli(['resume', '--unknown-target'], env)).toMatchObject({ code: 64, stderr: expect.stringMatching(/^cronq resume: --unknown-target needs the NAME/) });
  });

  it('names one with control characters or quotes in its name as a word the shell reads back exactly', async () => {
    const env = { DATABASE_URL: t.url };
    const names = ['mail\tbulk', "it's", 'back\\slash\r\n', 'bidi\u202eeviL', 'c1\u0085x', 'two words'];
    for (const name of names) await t.sql("SET STATEMENT sql_mode = '' FOR INSERT INTO cronq_pauses (target, name, paused_by) VALUES ('mailq', ?, 'dba')", [name]);
    const stats = await runMain(['stats'], env);
    const hints = [...stats.stdout.matchAll(/ended by: cronq resume --unknown-target (.*)\)$/gm)].map((m) => m[1]);
    expect(hints).toHaveLength(names.length);
    expect(hints).toContain("$'mail\\tbulk'");
    expect(hints).toContain("'two words'");
    for (const hint of hints) expect(hint).not.toMatch(/[\x00-\x1f\x7f-\x9f\u202e]/); // nothing a terminal acts on
    // Pasted into a shell, each reads back as the stored name.
    const read = hints.map((hint) => spawnSync('bash', ['-c', `printf %s ${hint}`], { encoding: 'utf8' }).stdout);
    expect(read.sort()).toEqual([...names].sort());
  });

  it('names one whose name starts with - (or zsh’s =) by a command that, pasted, ends that row rather than reading the name as a flag', async () => {
    const env = { DATABASE_URL: t.url };
    const names = ['-x', '--queue', '-', '=ls'];
    for (const name of names) await t.sql("SET STATEMENT sql_mode = '' FOR INSERT INTO cronq_pauses (target, name, paused_by) VALUES ('mailq', ?, 'dba')", [name]);
    const stats = await runMain(['stats'], env);
    const commands = [...stats.stdout.matchAll(/ended by: (cronq resume --unknown-target .*)\)$/gm)].map((m) => m[1]);
    expect(commands).toHaveLength(names.length);
    // zsh expands a word starting with = to a command's path (=ls is /usr/bin/ls): quoted.
    expect(commands).toContain("cronq resume --unknown-target '=ls'");
    for (const command of commands) {
      // The words a shell reads from the line, as the command's argv.
      const argv = spawnSync('bash', ['-c', `printf '%s\\0' ${command}`], { encoding: 'utf8' }).stdout.split('\0').slice(1, -1);
      expect(await runMain(argv, env)).toMatchObject({ code: 0, stderr: '' });
    }
    expect(await t.sql('SELECT * FROM cronq_pauses')).toEqual([]);
    // And the help says how such a NAME is given, as stats prints it.
    expect((await runMain(['resume', '--help'], env)).stdout.replace(/\n/g, ' ')).toContain("'cronq resume --unknown-target -- -x'");
  });

  it('is left out of cronq_paused (it pauses nothing) and counted in cronq_pauses_unknown_target, 0 when there is none', async () => {
    cronq = createCronq({ databaseUrl: t.url, logger: false, workers: false, scheduler: false });
    const metrics = new CronqMetrics({ collect: () => cronq!.admin.stats() });
    expect((await metrics.scrape()).body).toContain('\ncronq_pauses_unknown_target 0\n');
    await t.sql("SET STATEMENT sql_mode = '' FOR INSERT INTO cronq_pauses (target, name, paused_by) VALUES ('mailq', 'mail', 'dba'), ('', 'x\"y', 'dba')");
    await cronq.admin.pauses.pause('queue', 'mail', { by: 'ops' });
    const body = (await metrics.scrape()).body;
    const paused = body.split('\n').filter((line) => line.startsWith('cronq_paused'));
    // An empty target label is no label to Prometheus: the row would read as a pause of nothing in particular.
    expect(paused).toEqual(['cronq_paused{target="queue",name="mail"} 1']);
    expect(body).toContain('\ncronq_pauses_unknown_target 2\n');
  });
});

describe('a pause as a line of text', () => {
  it('keeps to one line whatever line breaks its reason holds, so it cannot read as other output', () => {
    const note = pausedNote({ pausedBy: 'ops\nroot', pausedAt: new Date('2026-12-01T00:00:00Z'), reason: 'db upgrade\r\nqueue default 0 ready' });
    expect(note).toBe('paused by ops root since 2026-12-01T00:00:00.000Z: db upgrade queue default 0 ready');
  });
});
