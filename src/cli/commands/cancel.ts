import { CANCEL_BATCH_SIZE, MAX_CANCEL_TEXT_LENGTH, type CancelFilter, type CancelOutcome, type CancelTarget } from '../../admin.ts';
import { NotFoundError, UsageError } from '../../errors.ts';
import { longerThanChars } from '../../runtime/chars.ts';
import { sliceChars } from '../../runtime/errorText.ts';
import { DATABASE_ONLY_HELP, type Command, type ParsedArgs } from '../command.ts';
import { openForCommand } from '../open.ts';
import { filterFlag } from '../flagValues.ts';

/**
 * `cronq cancel ID | --key KEY | --all-matching [--kind K] [--queue Q] --reason R [--by NAME]`:
 * an operator stops jobs that have not finished. Refusals (unknown id or key, a job
 * already finished, a missing reason) are one line and exit 64, having changed nothing.
 */
export const cancelCommand: Command = {
  name: 'cancel',
  summary: 'cancel a waiting or running job (by id, by key, or all matching --kind/--queue)',
  help: `Usage: cronq cancel ID --reason R [--by NAME]
       cronq cancel --key KEY --reason R [--by NAME]
       cronq cancel --all-matching [--kind K] [--queue Q] --reason R [--by NAME]

Cancels a job that has not finished. Its row becomes status 'cancelled' with
cancelled_by, cancel_reason and finished_at (it stays queryable from SQL until
'cronq prune' removes it like a done job), and its key stays taken, so a schedule
does not enqueue that period again.

  a ready job       never runs
  a running job     its handler's ctx.signal aborts at the next lease renewal (within
                    a third of its lease) with JobCancelledError, the daemon logs
                    job_cancelled, and whatever the handler returns is discarded

ID is cronq_jobs.id. A job already done, dead or cancelled is refused (exit 64).

  --key KEY         the job with this key instead of an ID
  --all-matching    every ready or running job matching --kind/--queue (all of them
                    when neither is given) that exists now, ${CANCEL_BATCH_SIZE} per transaction;
                    prints how many it cancelled
  --kind K          with --all-matching: only jobs of this kind
  --queue Q         with --all-matching: only jobs of this queue
  --reason R        why (required, up to ${MAX_CANCEL_TEXT_LENGTH} characters), stored in cancel_reason
  --by NAME         who, stored in cancelled_by (default user@host of this process)

Exit status: 0 done; 64 bad usage, unknown id or key, job already finished; 75 the
database is busy (another transaction held the rows: nothing changed, run it again);
1 other errors.

${DATABASE_ONLY_HELP}`,
  options: {
    help: { type: 'boolean', short: 'h' },
    key: { type: 'string' },
    'all-matching': { type: 'boolean' },
    kind: { type: 'string' },
    queue: { type: 'string' },
    reason: { type: 'string' },
    by: { type: 'string' },
  },
  positionals: { min: 0, max: 1, names: 'ID' },
  async run(args) {
    const { values, positionals, out } = args;
    const bulk = values['all-matching'] === true;
    const key = values.key as string | undefined;
    const chosen = [positionals.length > 0, key !== undefined, bulk].filter(Boolean).length;
    if (chosen === 0) throw new UsageError(`give a job ID, --key KEY or --all-matching (see cronq cancel --help)`);
    if (chosen > 1) throw new UsageError(`give only one of a job ID, --key KEY and --all-matching`);
    if (!bulk && (values.kind !== undefined || values.queue !== undefined)) {
      throw new UsageError(`--kind and --queue select jobs only with --all-matching`);
    }
    const reason = checkedText(values.reason as string | undefined, '--reason R', 'it is recorded in cancel_reason');
    const by = values.by === undefined ? undefined : checkedText(values.by as string, '--by NAME', 'who cancels');

    if (bulk) {
      const filter = parseFilter(values);
      const result = await withCronq(args, (cronq) => cronq.admin.cancelMatching(filter, { reason, by }));
      const count = result.ready + result.running;
      const held = result.skippedHeld ?? 0;
      out(
        `cancelled ${count} job${count === 1 ? '' : 's'}${described(filter)}: ${result.ready} waiting, ${result.running} running (their handlers stop at the next lease renewal)` +
          (held > 0 ? `; left: ${held} held by another transaction as it passed (run it again for those)` : ''),
      );
      return 0;
    }
    // A key is compared byte for byte: one of blanks is a key like any other, only an empty one is none.
    if (key === '') throw new UsageError('--key must not be empty (a job key is 1 to 255 characters)');
    const target: CancelTarget = key !== undefined ? { key } : { id: parseId(positionals[0]) };
    const outcome = await withCronq(args, (cronq) => cronq.admin.cancel(target, { reason, by }));
    if (outcome.status !== 'cancelled') throw refusal(outcome);
    out(
      outcome.was === 'ready'
        ? `cancelled job ${outcome.jobId} (key ${outcome.key}): it will not run`
        : `cancelled job ${outcome.jobId} (key ${outcome.key}) while it ran: its handler stops at the next lease renewal and its result is discarded`,
    );
    return 0;
  },
};

async function withCronq<T>(args: ParsedArgs, work: (cronq: Awaited<ReturnType<typeof openForCommand>>) => Promise<T>): Promise<T> {
  const cronq = await openForCommand(args, { loadSchedules: false });
  try {
    return await work(cronq);
  } finally {
    await cronq.stop();
  }
}

function checkedText(value: string | undefined, flag: string, why: string): string {
  if (value === undefined || value.trim() === '') throw new UsageError(`${flag} is required (${why})`);
  if (longerThanChars(value.trim(), MAX_CANCEL_TEXT_LENGTH)) throw new UsageError(`${flag.split(' ')[0]} is longer than ${MAX_CANCEL_TEXT_LENGTH} characters`);
  return value.trim();
}

function parseId(value: string): number {
  if (!/^[1-9]\d{0,15}$/.test(value) || !Number.isSafeInteger(Number(value))) {
    throw new UsageError(`ID must be a job id (cronq_jobs.id), a whole number from 1 (got '${sliceChars(value, 40)}')`);
  }
  return Number(value);
}

function parseFilter(values: ParsedArgs['values']): CancelFilter {
  const filter: CancelFilter = {};
  for (const flag of ['queue', 'kind'] as const) {
    const value = values[flag] as string | undefined;
    if (value !== undefined) filter[flag] = filterFlag(value, flag);
  }
  return filter;
}

function described(filter: CancelFilter): string {
  const parts = [filter.queue !== undefined && `queue ${filter.queue}`, filter.kind !== undefined && `kind ${filter.kind}`].filter(Boolean);
  return parts.length === 0 ? '' : ` (${parts.join(', ')})`;
}

function refusal(outcome: Exclude<CancelOutcome, { status: 'cancelled' }>): UsageError {
  if (outcome.status === 'not_found') {
    return new NotFoundError(
      'id' in outcome.target ? `no job with id ${outcome.target.id}; nothing changed` : `no job with key '${sliceChars(outcome.target.key, 200)}'; nothing changed`,
    );
  }
  const by = outcome.jobStatus === 'cancelled' ? ` by ${outcome.cancelledBy ?? 'an operator'} (${outcome.cancelReason ?? 'no reason'})` : '';
  return new UsageError(`job ${outcome.jobId} (key ${sliceChars(outcome.key, 200)}) is already '${outcome.jobStatus}'${by}; nothing changed`);
}
