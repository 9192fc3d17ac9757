import type { KindLimitStatus } from '../../admin.ts';
import { DATABASE_ONLY_HELP, type Command } from '../command.ts';
import { openForCommand } from '../open.ts';
import { jsonText } from '../printable.ts';
import { renderTable } from '../textTable.ts';
import { instantText } from '../../shownText.ts';

/** `cronq limits [--json]`: every cluster-wide concurrency limit and how many of its kind run now. */
export const limitsCommand: Command = {
  name: 'limits',
  summary: 'cluster-wide concurrency limits per kind, and how many of each run now',
  help: `Usage: cronq limits [--json]

Prints every kind with a cluster-wide concurrency limit (a task's or schedule's
'concurrency' option), the limit in force, how many of its jobs are running now
(reserved with a lease that has not run out: jobs claimed ahead of a free
handler count too), and when the limit was last written. Each daemon writes its
limits when its workers start, so the latest daemon's value is the one in force.
A limit set to 0 by hand shows as '0 (held)': nothing of its kind is claimed.

  --json   one JSON array: [{ "kind", "maxRunning", "running", "updatedAt" }]
           More keys may be added; ignore the ones you do not know.

${DATABASE_ONLY_HELP}`,
  options: {
    help: { type: 'boolean', short: 'h' },
    json: { type: 'boolean' },
  },
  positionals: { min: 0, max: 0, names: '' },
  async run(args) {
    const cronq = await openForCommand(args, { loadSchedules: false });
    let limits: KindLimitStatus[];
    try {
      limits = await cronq.admin.limits();
    } finally {
      await cronq.stop();
    }
    args.out(args.values.json ? jsonText(limits) : limitsText(limits));
    return 0;
  },
};

/** The text `cronq limits` prints: one row per limited kind. */
export function limitsText(limits: KindLimitStatus[]): string {
  if (limits.length === 0) return 'no concurrency limits';
  return renderTable(
    [{ header: 'KIND' }, { header: 'LIMIT', align: 'right' }, { header: 'RUNNING', align: 'right' }, { header: 'SET AT' }],
    // 0 (set by hand): nothing of the kind is claimed until the row is raised or a daemon rewrites it.
    limits.map((l) => [l.kind, l.maxRunning === 0 ? '0 (held)' : String(l.maxRunning), String(l.running), instantText(l.updatedAt)]),
  );
}
