import { inexactNumber } from '../exactNumbers.ts';
import { cliLine } from '../cliLine.ts';
import { printable } from '../printable.ts';
import { UsageError } from '../../errors.ts';
import type { Cronq } from '../../cronq.ts';
import { shownInLine } from '../../shownText.ts';
import { parseIntFlag, parseQueueFlag } from '../../config.ts';
import { COMMON_HELP, COMMON_OPTIONS, type Command } from '../command.ts';
import { openForCommand } from '../open.ts';
import { validateName } from '../../tasks/define.ts';
import { parseIsoInstant } from '../instant.ts';
import { readPayloadFile } from '../payloadFile.ts';

export const enqueueCommand: Command = {
  name: 'enqueue',
  summary: 'enqueue one job; prints its id (the same id again for the same key)',
  help: `Usage: cronq enqueue KIND --key KEY [--payload JSON | --payload-file FILE|-] [--queue Q]
                     [--max-attempts N] [--run-at ISO] [--allow-unknown-kind]

Enqueues a job of KIND (a task or schedule name from the schedules folder) and
prints its id alone. The key is unique: running this again with the same key
prints the same id, creates nothing, and says so on stderr (exit 0):
  cronq enqueue: key 'K' already present (job ID, STATUS): nothing enqueued

  --key KEY            unique job key, 1-255 characters (required)
  --payload JSON       the job's payload (default {}); a number a double cannot hold
                       as written (1e400, 9007199254740993, 19.999999999999999, -0)
                       is refused rather than stored changed: pass it as a string
  --payload-file FILE  read the payload's JSON from FILE ('-': standard input), for
                       payloads too large for a command line (at most 64 MiB)
  --queue Q            queue (default: the task's queue, else 'default')
  --max-attempts N     attempts before the job goes dead (default: the task's, else 5)
  --run-at ISO         not before this instant, e.g. 2026-12-01T02:00:00Z (1970 to 9999)
  --schedules DIR      where tasks are defined (default ./schedules)
  --allow-unknown-kind enqueue even if no task of that kind is defined here
                       (for a daemon elsewhere with other schedule files)

${COMMON_HELP}`,
  options: {
    ...COMMON_OPTIONS,
    key: { type: 'string' },
    payload: { type: 'string' },
    'payload-file': { type: 'string' },
    queue: { type: 'string' },
    'max-attempts': { type: 'string' },
    'run-at': { type: 'string' },
    'allow-unknown-kind': { type: 'boolean' },
  },
  positionals: { min: 1, max: 1, names: 'KIND' },
  async run({ values, positionals, env, out }) {
    const [kind] = positionals;
    // As enqueue checks it, but first: no daemon runs a kind no task can be named, --allow-unknown-kind or not.
    validateName(kind, "job kind (a task's name)");
    const key = values.key as string | undefined;
    if (key === undefined) throw new UsageError('--key KEY is required');
    if (key === '') throw new UsageError('--key must not be empty (a job key is 1 to 255 characters)');
    const payloadFile = values['payload-file'] as string | undefined;
    if (values.payload !== undefined && payloadFile !== undefined) throw new UsageError('give --payload or --payload-file, not both');
    const payloadFlag = payloadFile === undefined ? '--payload' : '--payload-file';
    const payloadText = payloadFile === undefined ? (values.payload as string | undefined) : await readPayloadFile(payloadFile, '--payload-file');
    let payload: unknown = {};
    if (payloadText !== undefined) {
      try {
        payload = JSON.parse(payloadText);
      } catch (error) {
        throw new UsageError(`${payloadFlag} is not valid JSON: ${(error as Error).message}`);
      }
      const inexact = inexactNumber(payloadText);
      if (inexact) throw new UsageError(`${payloadFlag}: ${inexact}`);
    }
    const runAt = values['run-at'] === undefined ? undefined : parseIsoInstant(values['run-at'] as string, '--run-at');
    const maxAttempts = values['max-attempts'] === undefined ? undefined : parseIntFlag(values['max-attempts'] as string, '--max-attempts', 1, 1000);
    const queue = values.queue === undefined ? undefined : parseQueueFlag(values.queue as string, '--queue');
    const cronq = await openForCommand({ values, positionals, env, out });
    try {
      const registry = await cronq.ready();
      if (!registry.get(kind) && !values['allow-unknown-kind']) {
        throw new UsageError(
          `unknown kind '${shownInLine(kind)}': no task or schedule of that name in the schedules folder (pass --allow-unknown-kind if a daemon elsewhere defines it)`,
        );
      }
      const { id, created } = await cronq.enqueue({ kind, key, payload, queue, maxAttempts, runAt }, { allowUnknownKind: true });
      out(String(id));
      if (!created) process.stderr.write(`${await alreadyPresent(cronq, key, id)}\n`);
      return 0;
    } finally {
      await cronq.stop();
    }
  },
};

/**
 * The stderr line for a key that was already taken: its job's id and status (read after
 * the enqueue, so a status that changed since is shown as it is now; none when the job
 * is gone already, pruned). The key is cut as messages cut a user's value, controls escaped.
 */
async function alreadyPresent(cronq: Cronq, key: string, id: number): Promise<string> {
  const job = await cronq.admin.job({ id }, { payload: false }); // its status alone: none of the payload, nor its size
  return printable(cliLine('enqueue', `key '${shownInLine(key)}' already present (job ${id}${job ? `, ${job.status}` : ''}): nothing enqueued`));
}
