import { parseIntFlag } from '../../config.ts';
import {
  DEAD_LETTER_LIST_LIMIT,
  LISTING_MAX,
  MAX_REASON_LENGTH,
  REVIEW_BATCH_SIZE,
  type BulkReviewResult,
  type BulkTriageOptions,
  type DeadLetterAdmin,
  type DeadLetterFilter,
  type ReviewAction,
  type ReviewOutcome,
} from '../../admin.ts';
import { NotFoundError, UsageError } from '../../errors.ts';
import { longerThanChars } from '../../runtime/chars.ts';
import { instantText, shownInLine } from '../../shownText.ts';
import type { Command, ParsedArgs } from '../command.ts';
import { DATABASE_ONLY_HELP } from '../command.ts';
import { deadLetterDetailJson, deadLetterDetailText, deadLetterGroupTable, deadLetterJson, deadLetterTable } from '../deadLetterText.ts';
import { cliLine } from '../cliLine.ts';
import { openForCommand } from '../open.ts';
import { jsonText } from '../printable.ts';
import { parseIsoInstant } from '../instant.ts';
import { filterFlag } from '../flagValues.ts';

const DEFAULT_LIST_LIMIT = DEAD_LETTER_LIST_LIMIT;

type Sub = 'list' | 'show' | 'requeue' | 'discard';

/** Which flags each subcommand accepts (besides --help); any other is a usage error. */
const FLAGS: Record<Sub, string[]> = {
  list: ['queue', 'kind', 'since', 'all', 'group', 'limit', 'json'],
  show: ['json'],
  requeue: ['reason', 'all-matching', 'queue', 'kind', 'since'],
  discard: ['reason', 'all-matching', 'queue', 'kind', 'since'],
};

/**
 * `cronq dead list|show|requeue|discard`: dead-letter triage. Refusals (unknown id,
 * already reviewed, job no longer dead, missing reason) are one line and exit 64,
 * having changed nothing.
 */
export const deadCommand: Command = {
  name: 'dead',
  summary: 'triage dead letters: list (--group), show, requeue, discard',
  help: `Usage: cronq dead list [--queue Q] [--kind K] [--since ISO] [--all] [--limit N] [--json]
       cronq dead list --group [--queue Q] [--kind K] [--since ISO] [--all] [--json]
       cronq dead show ID [--json]
       cronq dead requeue ID --reason R
       cronq dead requeue --all-matching [--kind K] [--queue Q] [--since ISO] --reason R
       cronq dead discard ID --reason R
       cronq dead discard --all-matching [--kind K] [--queue Q] [--since ISO] --reason R

Triage of cronq_dead_letters, the jobs that failed for good. ID is always the dead
letter's own id (cronq_dead_letters.id), the one 'dead list' prints. Times are UTC.

  list      unreviewed dead letters, oldest first: id, dead at, kind, key, attempts
            and the first line of the failure reason (cut to 300 characters)
  show      one dead letter in full: payload, whole failure reason, the job's status now
  requeue   put the same job row back to 'ready', attempts and lease expiries 0,
            available now (its key stays: no duplicate), and mark the dead letter
            reviewed ('requeued: R').
            Refused if the job is no longer 'dead' or died again since (newer dead letter)
  discard   leave the job dead and mark the dead letter reviewed ('discarded: R')

  --queue Q         only dead letters of this queue
  --kind K          only dead letters of this kind
  --since ISO       only those that died at or after this instant, e.g. 2026-11-01T00:00:00Z
  --all             list: reviewed dead letters too
  --group           list: counts by kind and failure reason instead of rows; reasons are
                    grouped by their first line with UUIDs, hex ids and numbers replaced
                    ("user 42 not found" and "user 43 not found" read "user # not found")
  --limit N         list: at most N rows (1-${LISTING_MAX}, default ${DEFAULT_LIST_LIMIT})
  --json            list, show: JSON instead of text
  --reason R        requeue, discard: why (required, up to ${MAX_REASON_LENGTH} characters)
  --all-matching    requeue, discard: instead of ID, every unreviewed dead letter matching
                    --kind/--queue/--since (all of them when none is given), ${REVIEW_BATCH_SIZE} per
                    transaction; prints how many it resolved, and on stderr how many so
                    far every 2 s. Ctrl-C (SIGINT/SIGTERM) stops it after the batch in
                    progress and prints what it did (exit 130); running it again goes on
                    and resolves none twice

Exit status: 0 done; 64 bad usage, unknown id, already reviewed, job not dead; 75 the
database is busy (another transaction held the rows: nothing changed, run it again);
130 --all-matching stopped by a signal (the batches done stay done); 1 other errors.

${DATABASE_ONLY_HELP}`,
  options: {
    help: { type: 'boolean', short: 'h' },
    queue: { type: 'string' },
    kind: { type: 'string' },
    since: { type: 'string' },
    all: { type: 'boolean' },
    group: { type: 'boolean' },
    limit: { type: 'string' },
    json: { type: 'boolean' },
    reason: { type: 'string' },
    'all-matching': { type: 'boolean' },
  },
  positionals: { min: 1, max: 2, names: 'SUBCOMMAND (list, show, requeue or discard)' },
  subcommands: ['list', 'show', 'requeue', 'discard'],
  async run(args) {
    const [sub, ...rest] = args.positionals;
    if (!isSub(sub)) throw new UsageError(`unknown subcommand '${shownInLine(sub ?? '')}' (list, show, requeue or discard; see cronq dead --help)`);
    for (const [flag, value] of Object.entries(args.values)) {
      if (value !== undefined && flag !== 'help' && !FLAGS[sub].includes(flag)) {
        throw new UsageError(`--${flag} does not apply here (see cronq dead --help)`);
      }
    }
    if (sub === 'list') {
      if (rest.length > 0) throw new UsageError(`unexpected argument '${shownInLine(rest[0])}' (see cronq dead --help)`);
      return list(args);
    }
    if (sub === 'show') {
      if (rest.length !== 1) throw new UsageError('give one dead letter ID (see cronq dead --help)');
      return show(args, parseId(rest[0]));
    }
    return resolve(args, sub, rest);
  },
};

function isSub(value: string | undefined): value is Sub {
  return value === 'list' || value === 'show' || value === 'requeue' || value === 'discard';
}

function parseId(value: string): number {
  if (!/^[1-9]\d{0,15}$/.test(value) || !Number.isSafeInteger(Number(value))) {
    throw new UsageError(`ID must be a dead letter id, a whole number from 1 as 'cronq dead list' prints it (got '${shownInLine(value)}')`);
  }
  return Number(value);
}

function parseFilter(values: ParsedArgs['values']): DeadLetterFilter {
  const filter: DeadLetterFilter = {};
  for (const flag of ['queue', 'kind'] as const) {
    const value = values[flag] as string | undefined;
    if (value !== undefined) filter[flag] = filterFlag(value, flag);
  }
  if (values.since !== undefined) filter.since = parseIsoInstant(values.since as string, '--since');
  return filter;
}

async function withDeadLetters<T>(args: ParsedArgs, work: (deadLetters: DeadLetterAdmin) => Promise<T>): Promise<T> {
  const cronq = await openForCommand(args, { loadSchedules: false });
  try {
    return await work(cronq.admin.deadLetters);
  } finally {
    await cronq.stop();
  }
}

async function list(args: ParsedArgs): Promise<number> {
  const { values, out } = args;
  const filter = parseFilter(values);
  const includeReviewed = values.all === true;
  if (values.group && values.limit !== undefined) throw new UsageError(`--limit does not apply to --group`);
  const limit = values.limit === undefined ? DEFAULT_LIST_LIMIT : parseIntFlag(values.limit as string, '--limit', 1, LISTING_MAX);
  const which = includeReviewed ? 'dead letters' : 'unreviewed dead letters';
  if (values.group) {
    const groups = await withDeadLetters(args, (dead) => dead.groups({ ...filter, includeReviewed }));
    if (values.json) out(jsonText(groups.map((g) => ({ ...g, firstDeadAt: instantText(g.firstDeadAt), lastDeadAt: instantText(g.lastDeadAt) }))));
    else out(groups.length === 0 ? `no ${which}${filtered(filter)}` : deadLetterGroupTable(groups));
    return 0;
  }
  const { letters, more } = await withDeadLetters(args, (dead) => dead.list({ ...filter, includeReviewed, limit }));
  const note = `more ${which} match: showing the oldest ${limit} (${limit < LISTING_MAX ? 'raise --limit, ' : ''}narrow with --kind/--queue/--since, or use --group)`;
  if (values.json) {
    out(jsonText(letters.map(deadLetterJson)));
    if (more) process.stderr.write(`${cliLine('dead list', note)}\n`);
    return 0;
  }
  if (letters.length === 0) out(`no ${which}${filtered(filter)}`);
  else out(deadLetterTable(letters, { withResolution: includeReviewed }));
  if (more) out(`… ${note}`);
  return 0;
}

function filtered(filter: DeadLetterFilter): string {
  const parts = [
    filter.queue !== undefined && `queue ${filter.queue}`,
    filter.kind !== undefined && `kind ${filter.kind}`,
    filter.since !== undefined && `since ${filter.since.toISOString()}`,
  ].filter(Boolean);
  return parts.length === 0 ? '' : ` (${parts.join(', ')})`;
}

async function show(args: ParsedArgs, id: number): Promise<number> {
  const letter = await withDeadLetters(args, (dead) => dead.get(id));
  if (!letter) throw notFound(id);
  args.out(args.values.json ? jsonText(deadLetterDetailJson(letter)) : deadLetterDetailText(letter));
  return 0;
}

function notFound(id: number): NotFoundError {
  return new NotFoundError(`no dead letter with id ${id} (ids are the ones 'cronq dead list' prints)`);
}

async function resolve(args: ParsedArgs, sub: 'requeue' | 'discard', rest: string[]): Promise<number> {
  const { values, out } = args;
  const action: ReviewAction = sub;
  const bulk = values['all-matching'] === true;
  const hasFilter = values.queue !== undefined || values.kind !== undefined || values.since !== undefined;
  if (rest.length > 0 && bulk) throw new UsageError(`give an ID or --all-matching, not both`);
  if (rest.length === 0 && !bulk) {
    throw new UsageError(`give a dead letter ID, or --all-matching (with --kind/--queue/--since to narrow it)`);
  }
  if (!bulk && hasFilter) throw new UsageError(`--kind, --queue and --since select dead letters only with --all-matching`);
  const reason = values.reason as string | undefined;
  if (reason === undefined || reason.trim() === '') throw new UsageError(`--reason R is required (it is recorded in the resolution)`);
  if (longerThanChars(reason.trim(), MAX_REASON_LENGTH)) throw new UsageError(`--reason is longer than ${MAX_REASON_LENGTH} characters`);
  const past = action === 'requeue' ? 'requeued' : 'discarded';

  if (bulk) {
    const filter = parseFilter(values);
    const result = await untilSignalled(`dead ${sub}`, past, (options) =>
      withDeadLetters(args, (dead) => (action === 'requeue' ? dead.requeueMatching(filter, reason, options) : dead.discardMatching(filter, reason, options))),
    );
    const skipped = [
      result.skippedJobNotDead > 0 && `${result.skippedJobNotDead} whose job is no longer dead`,
      result.skippedSuperseded > 0 && `${result.skippedSuperseded} whose job died again later (see its newer dead letter)`,
      (result.skippedHeld ?? 0) > 0 && `${result.skippedHeld} held by another transaction as it passed (run it again for those)`,
    ].filter(Boolean);
    const tail = skipped.length === 0 ? '' : `; left unreviewed: ${skipped.join(', ')}`;
    const summary = `${past} ${result.touched} dead letter${result.touched === 1 ? '' : 's'}${filtered(filter)}${tail}`;
    if (result.interrupted) {
      out(`interrupted: ${summary}; the rest are unreviewed (run the same command again to go on: it never resolves a dead letter twice)`);
      return EXIT_INTERRUPTED;
    }
    out(summary);
    return 0;
  }

  const id = parseId(rest[0]);
  const outcome = await withDeadLetters(args, (dead) => (action === 'requeue' ? dead.requeue(id, reason) : dead.discard(id, reason)));
  if (outcome.status !== 'done') throw refusal(outcome);
  out(
    action === 'requeue'
      ? `requeued dead letter ${id}: job ${outcome.jobId} (key ${outcome.key}) is ready again with attempts 0`
      : `discarded dead letter ${id}: job ${outcome.jobId} (key ${outcome.key}) stays dead`,
  );
  return 0;
}

/** Exit status of a bulk triage stopped by SIGINT or SIGTERM between two batches (128 + SIGINT). */
const EXIT_INTERRUPTED = 130;
/** How often a bulk triage says on stderr how far it got. */
const PROGRESS_EVERY_MS = 2000;

/**
 * Runs a bulk triage so that the first SIGINT or SIGTERM stops it after the batch in
 * flight (which commits or rolls back whole) instead of killing it with its count
 * unknown; a second signal (the default handler, restored) stops at once. Says on stderr
 * how many it resolved so far, every PROGRESS_EVERY_MS.
 */
async function untilSignalled(
  command: string,
  past: string,
  work: (options: BulkTriageOptions) => Promise<BulkReviewResult>,
): Promise<BulkReviewResult> {
  const stop = new AbortController();
  const onSignal = () => {
    process.stderr.write(`${cliLine(command, 'stopping after the batch in progress (a second signal stops at once)')}\n`);
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    stop.abort();
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  let shownAt = Date.now();
  const onBatch = (soFar: BulkReviewResult) => {
    if (Date.now() - shownAt < PROGRESS_EVERY_MS) return;
    shownAt = Date.now();
    process.stderr.write(`${cliLine(command, `${past} ${soFar.touched} so far…`)}\n`);
  };
  try {
    return await work({ onBatch, signal: stop.signal });
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

function refusal(outcome: Exclude<ReviewOutcome, { status: 'done' }>): UsageError {
  const id = outcome.deadLetterId;
  switch (outcome.status) {
    case 'not_found':
      return notFound(id);
    case 'already_reviewed':
      return new UsageError(
        `dead letter ${id} was already reviewed at ${outcome.reviewedAt.toISOString()} (${outcome.resolution ?? 'no resolution recorded'}); nothing changed`,
      );
    case 'job_not_dead':
      return new UsageError(
        outcome.jobStatus === null
          ? `job ${outcome.jobId} of dead letter ${id} no longer exists; nothing changed (close it with 'cronq dead discard ${id} --reason R')`
          : `job ${outcome.jobId} of dead letter ${id} is '${outcome.jobStatus}', not 'dead' (changed by other means); nothing changed (close it with 'cronq dead discard ${id} --reason R')`,
      );
    case 'superseded':
      return new UsageError(
        `job ${outcome.jobId} died again after dead letter ${id}; act on its latest dead letter, ${outcome.latestDeadLetterId} (close ${id} with 'cronq dead discard'); nothing changed`,
      );
  }
}
