import { parseRetention } from '../../config.ts';
import { PRUNE_DEFAULTS } from '../../defaults.ts';
import { COMMON_HELP, COMMON_OPTIONS, type Command } from '../command.ts';
import { openForCommand } from '../open.ts';
import { jsonText } from '../printable.ts';

// Covers a monthly period with a 40-day catch-up window (72d), as the example renewal
// schedule has: the default must work with the schedules shipped beside it.
const DEFAULT_RETENTION = '90d';

/**
 * `cronq prune [--done-older-than D] [--dry-run] [--json]`: deletes done and cancelled jobs (and old
 * tick-ledger rows) past the retention, in small batches; prints what it deleted, or
 * with --dry-run what it would. Refuses (exit 64) a retention under 1h or shorter than a
 * loaded schedule's catch-up window plus one period, having deleted nothing.
 */
export const pruneCommand: Command = {
  name: 'prune',
  summary: 'delete done and cancelled jobs (and old tick-ledger rows) past a retention, in small batches',
  help: `Usage: cronq prune [--done-older-than D] [--dry-run] [--json]

Deletes jobs with status 'done' or 'cancelled' whose finished_at is more than D ago by the
database clock (default ${DEFAULT_RETENTION}), ${PRUNE_DEFAULTS.batchSize} rows per DELETE with a short pause between,
so no lock is held for long. Ready, reserved and dead jobs and every dead letter
are never touched. Tick-ledger rows (cronq_schedule_ticks) finished more than
D ago go too, except each schedule's latest row, where catch-up resumes, and any
fan-out still in progress. Prints how many rows it deleted.

A done (or cancelled) job is the memory that its key was taken: once pruned, the same key can be
enqueued again. So D must be at least 1h and at least every schedule's catch-up
window plus one period (for period 'tick': the longest gap between two fire times);
a shorter D is refused naming the schedule that needs the most and the D
that covers every schedule. Only the schedules in the schedules
folder are checked: prune with the folder your daemons run.

  --done-older-than D   the retention (default ${DEFAULT_RETENTION}); durations read as 36h, 30d, 8w
  --dry-run             count what would be deleted; delete nothing
  --json                { "dryRun", "cutoff", "jobs", "ticks", "batches" }
  --schedules DIR       the schedules to check D against (default ./schedules)

'cronq start --prune-done-older-than D' runs the same pruning every 5 minutes.

${COMMON_HELP}`,
  options: {
    ...COMMON_OPTIONS,
    'done-older-than': { type: 'string' },
    'dry-run': { type: 'boolean' },
    json: { type: 'boolean' },
  },
  positionals: { min: 0, max: 0, names: '' },
  async run(args) {
    const retentionMs = parseRetention((args.values['done-older-than'] as string | undefined) ?? DEFAULT_RETENTION, '--done-older-than');
    const dryRun = args.values['dry-run'] === true;
    // A too-short retention is refused before the database is touched.
    const cronq = await openForCommand(args, { beforeDatabase: (c) => c.admin.checkRetention(retentionMs, '--done-older-than') });
    try {
      const result = await cronq.admin.prune({ olderThanMs: retentionMs, dryRun });
      if (args.values.json) {
        args.out(jsonText({ ...result, cutoff: result.cutoff.toISOString() }));
      } else {
        const verb = dryRun ? 'would delete' : 'deleted';
        const batches = dryRun ? '' : ` (${result.batches} ${result.batches === 1 ? 'batch' : 'batches'})`;
        args.out(
          `${verb} ${result.jobs} done or cancelled ${result.jobs === 1 ? 'job' : 'jobs'} and ${result.ticks} tick ledger ${result.ticks === 1 ? 'row' : 'rows'} ` +
            `finished before ${result.cutoff.toISOString()}${batches}`,
        );
      }
      return 0;
    } finally {
      await cronq.stop();
    }
  },
};
