import { COUNT_CAPS, DEAD_LETTER_COUNT_CAP, describePause, JOB_STATUSES, type AdminStats, type ScheduleHealth, type Stats } from '../../admin.ts';
import { formatDuration } from '../../duration.ts';
import { COMMON_HELP, COMMON_OPTIONS, type Command } from '../command.ts';
import { openForCommand } from '../open.ts';
import { shownPauseName, shownPauseTarget } from './pause.ts';
import { jsonText, printableLine, shellWord } from '../printable.ts';
import { renderTable } from '../textTable.ts';

/** `cronq stats [--json]`: jobs per queue and status, oldest waiting job, dead letters to review. */
export const statsCommand: Command = {
  name: 'stats',
  summary: 'jobs per queue and status, the oldest waiting job, dead letters to review',
  help: `Usage: cronq stats [--json] [--schedules DIR]

Prints, per queue, how many jobs are ready, reserved, done, dead and cancelled, and how long
the oldest ready job has been waiting (since its available_at, by the database
clock; jobs scheduled for later are not waiting). Then how many dead letters
await review ('cronq dead list'), every schedule and queue paused ('cronq pause':
who, since when, why), and each schedule's last tick with how late its last
enqueued tick started. Then, for each schedule in the schedules folder, its
health: the fire time of its last tick whose jobs are all done, and OVERDUE when it
has 'expect: { within }' and a tick's jobs have not all completed within that time
(see "Schedule health" in the README).

Counting stops at ${COUNT_CAPS.ready} ready or reserved jobs per queue, ${COUNT_CAPS.done} done, dead or
cancelled, and ${DEAD_LETTER_COUNT_CAP} dead letters, so stats cost the same on a table of any
size: such a count prints as N+ (at least N).

  --json   one JSON object:
           { "queues": [{ "queue", "ready", "reserved", "done", "dead", "cancelled",
                          "capped" (the statuses counted only up to their cap),
                          "oldestReadyAgeSeconds" (null when nothing waits) }],
             "deadLetters": { "awaitingReview", "capped" },
             "schedules": [{ "schedule", "lastTick": { "scheduledAt", "periodKey",
                             "outcome" (enqueued, skipped or failed), "caughtUp",
                             "note", "finishedAt" }, "latenessMs" }],
             "pauses": [{ "target" (schedule or queue), "name", "reason" (null
                          when none), "pausedBy", "pausedAt" }],
             "unknownStatus": { "jobs", "capped", "exampleIds" } (jobs whose status
                          is the ENUM's '' error value: written by hand, they never run),
             "health": [{ "schedule", "expectWithinMs" (null: no expect),
                          "lastSuccessAt" (null: none among the latest ticks),
                          "overdue" (true|false), "overdueSince" }] }
           More keys may be added; ignore the ones you do not know.
  --schedules DIR   the schedules whose health to show (default ./schedules)

${COMMON_HELP}`,
  options: { ...COMMON_OPTIONS, json: { type: 'boolean' } },
  positionals: { min: 0, max: 0, names: '' },
  async run(args) {
    const cronq = await openForCommand(args);
    let stats: AdminStats;
    try {
      stats = await cronq.admin.stats();
    } finally {
      await cronq.stop();
    }
    args.out(args.values.json ? jsonText(stats) : statsText(stats));
    return 0;
  },
};

/** The line about jobs whose status is none of cronq's, when there are any. */
function unknownStatusText(unknown: Stats['unknownStatus']): string {
  if (!unknown || unknown.jobs === 0) return '';
  const ids = unknown.exampleIds.join(', ');
  return (
    `\njobs with an unknown status (written by hand with strict mode off; they never run): ${unknown.jobs}${unknown.capped ? '+' : ''}, ` +
    `ids ${ids}${unknown.jobs > unknown.exampleIds.length ? ', …' : ''} (SELECT id, job_key FROM cronq_jobs WHERE status = '')`
  );
}

/** The text `cronq stats` prints: a table of queues, then the dead-letter line. */
export function statsText(stats: Stats & { health?: ScheduleHealth[] }): string {
  const queues =
    stats.queues.length === 0
      ? 'no jobs'
      : renderTable(
          [
            { header: 'QUEUE' },
            { header: 'READY', align: 'right' },
            { header: 'RESERVED', align: 'right' },
            { header: 'DONE', align: 'right' },
            { header: 'DEAD', align: 'right' },
            { header: 'CANCELLED', align: 'right' },
            { header: 'OLDEST READY', align: 'right' },
          ],
          stats.queues.map((q) => [q.queue, ...JOB_STATUSES.map((s) => `${q[s]}${q.capped.includes(s) ? '+' : ''}`), age(q.oldestReadyAgeSeconds)]),
        );
  const capped = stats.queues.some((q) => q.capped.length > 0) ? '\n(N+: at least N; counting stops there)' : '';
  const review = `${stats.deadLetters.awaitingReview}${stats.deadLetters.capped ? '+' : ''}`;
  const text = `${queues}${capped}\n\ndead letters awaiting review: ${review}${unknownStatusText(stats.unknownStatus)}${pausesText(stats.pauses)}`;
  if (stats.schedules.length === 0) return `${text}${healthText(stats.health)}`;
  const schedules = renderTable(
    [{ header: 'SCHEDULE' }, { header: 'LAST TICK' }, { header: 'OUTCOME' }, { header: 'LATENESS', align: 'right' }],
    stats.schedules.map((s) => [
      s.schedule,
      s.lastTick.scheduledAt,
      `${s.lastTick.outcome}${s.lastTick.outcome === 'enqueued' && s.lastTick.finishedAt === null ? ' (fan-out running)' : ''}${s.lastTick.outcome === 'failed' && s.lastTick.note ? `: ${s.lastTick.note}` : ''}`,
      s.latenessMs === null ? '-' : `${s.latenessMs} ms`,
    ]),
  );
  return `${text}\n\n${schedules}${healthText(stats.health)}`;
}

/** The health table (loaded schedules with an expectation or a success): expectation, last success, overdue or not. */
function healthText(health: ScheduleHealth[] | undefined): string {
  // A schedule with neither an expectation nor a success yet has nothing to say.
  const shown = (health ?? []).filter((h) => h.expectWithinMs !== null || h.lastSuccessAt !== null);
  if (shown.length === 0) return '';
  return `\n\n${renderTable(
    [{ header: 'SCHEDULE' }, { header: 'EXPECT WITHIN' }, { header: 'LAST SUCCESS' }, { header: 'HEALTH' }],
    shown.map((h) => [
      h.schedule,
      h.expectWithinMs === null ? '-' : formatDuration(h.expectWithinMs),
      h.lastSuccessAt?.toISOString() ?? '-',
      h.overdue ? `OVERDUE since ${h.overdueSince!.toISOString()}` : h.expectWithinMs === null ? '-' : 'ok',
    ]),
  )}`;
}

/**
 * One line per pause in force (nothing when none): what, who, since when, why; tabs and
 * line breaks of a name, an author or a reason shown as escapes (printableLine), as in a
 * table cell, so each pause stays one line that reads as written.
 */
function pausesText(pauses: Stats['pauses']): string {
  return pauses
    .map(
      (p) =>
        `\n${printableLine(`${shownPauseTarget(p.target)} ${shownPauseName(p.name)} ${describePause(p)}${p.target === '' ? ` (pauses nothing; ended by: ${unknownTargetResume(p.name)})` : ''}`)}`,
    )
    .join('');
}

/**
 * The command that ends a pause row of no known target named `name`, to paste as it is:
 * the name quoted for the shell, after `--` when it starts with `-` (else cronq would
 * read it as a flag: `cronq resume --unknown-target -x` is refused, Unknown option '-x').
 */
function unknownTargetResume(name: string): string {
  return `cronq resume --unknown-target ${name.startsWith('-') ? '-- ' : ''}${shellWord(name)}`;
}

/** 0.4s, 42s, 3m 12s, 5h 02m, 2d 03h: coarse enough to read at a glance. */
export function age(seconds: number | null): string {
  if (seconds === null) return '-';
  if (seconds < 10) return `${seconds.toFixed(1)}s`;
  const s = Math.floor(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
  return `${Math.floor(s / 86_400)}d ${String(Math.floor((s % 86_400) / 3600)).padStart(2, '0')}h`;
}
