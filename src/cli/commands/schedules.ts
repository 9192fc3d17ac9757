import { describePause, FIRE_TIME_HORIZON, LISTING_MAX, type TickRow } from '../../admin.ts';
import { baseConfig, parseIntFlag } from '../../config.ts';
import { formatDuration } from '../../duration.ts';
import { normalisedCron } from '../../schedule/tickSource.ts';
import { instantText, shownInLine } from '../../shownText.ts';
import { COMMON_HELP, COMMON_OPTIONS, type Command } from '../command.ts';
import { openForCommand } from '../open.ts';
import { jsonText, printableLine } from '../printable.ts';
import { parseIsoInstant } from '../instant.ts';
import { UsageError } from '../../errors.ts';

/** The IANA time-zone data release this runtime computes fire times with, e.g. `2025c`. */
const TZDATA = process.versions.tz ?? 'unknown';

export const schedulesCommand: Command = {
  name: 'schedules',
  summary: 'list schedules with their next fire times and last tick',
  help: `Usage: cronq schedules [--json] [--from ISO] [--count N]

Lists every schedule in the schedules folder: name, cron (one space between
its fields; --json gives it as defined), time zone, its next N fire instants
(UTC) after --from (default now), its last tick ledger row and, when paused
('cronq pause'), who paused it, since when and why; after the version of the
zone data fire times come from (Node's process.versions.tz).
Then its health: the fire time of its last tick whose jobs are all done, and, with
'expect: { within }', OVERDUE when a later tick's jobs have not all completed within
that time (see "Schedule health" in the README).

  --json            [{ name, cron, timezone, tzdata, period, next: [ISO...], lastTick,
                       paused: null or { by, at (ISO), reason (null when none) },
                       expectWithinMs, lastSuccessAt, overdue (true|false), overdueSince }]
  --from ISO        list fire times after this instant (default now; before the year 3000)
  --count N         how many fire times (default 5, at most 1000)
  --schedules DIR   where schedules are defined (default ./schedules)

${COMMON_HELP}`,
  options: { ...COMMON_OPTIONS, json: { type: 'boolean' }, from: { type: 'string' }, count: { type: 'string' } },
  positionals: { min: 0, max: 0, names: '' },
  async run(args) {
    const from = args.values.from === undefined ? new Date() : parseIsoInstant(args.values.from as string, '--from');
    if (from.getTime() >= FIRE_TIME_HORIZON) {
      // Said here, naming the flag as typed, before the database is opened.
      throw new UsageError(`--from must be before the year 3000: cron fire times are computed up to the end of 2999 (got '${shownInLine(args.values.from as string)}')`);
    }
    const count = args.values.count === undefined ? 5 : parseIntFlag(args.values.count as string, '--count', 1, LISTING_MAX);
    baseConfig(args.env, { schedules: args.values.schedules as string | undefined });
    const cronq = await openForCommand(args);
    try {
      const schedules = await cronq.admin.schedules({ from, count });
      const listed = schedules.map((s) => ({
        name: s.name,
        cron: s.cron,
        timezone: s.timezone,
        tzdata: TZDATA,
        period: s.period,
        next: s.next.map((d) => d.toISOString()),
        lastTick: s.lastTick ? tickJson(s.lastTick) : null,
        paused: s.paused && { by: s.paused.pausedBy, at: instantText(s.paused.pausedAt), reason: s.paused.reason },
        expectWithinMs: s.health.expectWithinMs,
        lastSuccessAt: s.health.lastSuccessAt?.toISOString() ?? null,
        overdue: s.health.overdue,
        overdueSince: s.health.overdueSince?.toISOString() ?? null,
      }));
      if (args.values.json) {
        args.out(jsonText(listed, 2));
      } else if (listed.length === 0) {
        args.out('no schedules');
      } else {
        // Every line through printableLine: a pause's reason and author and a tick's note (an
        // error's line, a refused key) hold whatever was written, and their tabs and line
        // breaks show as escapes (`\x09`), as in a table cell, so each line keeps its columns.
        // The cron shows with one space between its fields, as the ledger records it (--json
        // gives it as defined).
        const line = (text: string) => args.out(printableLine(text));
        line(`zone data: tz ${TZDATA} (Node ${process.version})`);
        for (const [i, s] of listed.entries()) {
          const paused = schedules[i].paused;
          line(`${s.name}  ${normalisedCron(s.cron)}  ${s.timezone}  period ${s.period}`);
          if (paused) line(`  ${describePause(paused)} (its ticks are skipped)`);
          line(`  next: ${s.next.join(', ') || '(never)'}`);
          const t = s.lastTick;
          line(
            t
              ? `  last tick: ${t.scheduledAt} ${t.outcome}${t.outcome === 'enqueued' ? ` (${t.jobsEnqueued} new, ${t.jobsExisting} existing${t.finishedAt ? '' : ', fan-out unfinished'})` : ''}${t.note ? ` — ${t.note}` : ''}`
              : '  last tick: none yet',
          );
          if (s.expectWithinMs !== null || s.lastSuccessAt !== null) {
            const verdict = s.expectWithinMs === null ? '' : s.overdue ? `; OVERDUE since ${s.overdueSince} (expect within ${formatDuration(s.expectWithinMs)})` : `; ok (expect within ${formatDuration(s.expectWithinMs)})`;
            line(`  last success: ${s.lastSuccessAt ?? 'none among the latest ticks'}${verdict}`);
          }
        }
      }
      return 0;
    } finally {
      await cronq.stop();
    }
  },
};

function tickJson(t: TickRow) {
  return {
    scheduledAt: t.scheduledAt.toISOString(),
    periodKey: t.periodKey,
    outcome: t.outcome,
    jobsEnqueued: t.jobsEnqueued,
    jobsExisting: t.jobsExisting,
    caughtUp: t.caughtUp,
    note: t.note,
    startedAt: t.startedAt.toISOString(),
    finishedAt: t.finishedAt ? t.finishedAt.toISOString() : null,
  };
}
