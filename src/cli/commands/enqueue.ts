import { UsageError } from '../../errors.ts';
import { parseIntFlag } from '../../config.ts';
import { COMMON_HELP, COMMON_OPTIONS, type Command } from '../command.ts';
import { openForCommand } from '../open.ts';

export const enqueueCommand: Command = {
  name: 'enqueue',
  summary: 'enqueue one job; prints its id (the same id again for the same key)',
  help: `Usage: cronq enqueue KIND --key KEY [--payload JSON] [--queue Q] [--max-attempts N] [--run-at ISO]

Enqueues a job of KIND (a task or schedule name from the schedules folder) and
prints its id alone. The key is unique: running this again with the same key
prints the same id and creates nothing.

  --key KEY            unique job key, 1-255 characters (required)
  --payload JSON       the job's payload (default {})
  --queue Q            queue (default: the task's queue, else 'default')
  --max-attempts N     attempts before the job goes dead (default: the task's, else 5)
  --run-at ISO         not before this instant, e.g. 2026-12-01T02:00:00Z
  --schedules DIR      where tasks are defined (default ./schedules)
  --allow-unknown-kind enqueue even if no task of that kind is defined here
                       (for a daemon elsewhere with other schedule files)

${COMMON_HELP}`,
  options: {
    ...COMMON_OPTIONS,
    key: { type: 'string' },
    payload: { type: 'string' },
    queue: { type: 'string' },
    'max-attempts': { type: 'string' },
    'run-at': { type: 'string' },
    'allow-unknown-kind': { type: 'boolean' },
  },
  positionals: { min: 1, max: 1, names: 'KIND' },
  async run({ values, positionals, env, out }) {
    const [kind] = positionals;
    const key = values.key as string | undefined;
    if (key === undefined || key === '') throw new UsageError('cronq enqueue: --key KEY is required');
    let payload: unknown = {};
    if (values.payload !== undefined) {
      try {
        payload = JSON.parse(values.payload as string);
      } catch (error) {
        throw new UsageError(`cronq enqueue: --payload is not valid JSON: ${(error as Error).message}`);
      }
    }
    const runAt = values['run-at'] === undefined ? undefined : parseIsoInstant(values['run-at'] as string, '--run-at');
    const maxAttempts = values['max-attempts'] === undefined ? undefined : parseIntFlag(values['max-attempts'] as string, '--max-attempts', 1, 1000);
    const cronq = await openForCommand({ values, positionals, env, out });
    try {
      const registry = await cronq.ready();
      if (!registry.get(kind) && !values['allow-unknown-kind']) {
        throw new UsageError(
          `cronq enqueue: unknown kind '${kind}': no task or schedule of that name in the schedules folder (pass --allow-unknown-kind if a daemon elsewhere defines it)`,
        );
      }
      const { id } = await cronq.enqueue({ kind, key, payload, queue: values.queue as string | undefined, maxAttempts, runAt });
      out(String(id));
      return 0;
    } finally {
      await cronq.stop();
    }
  },
};

/** Parses an ISO 8601 instant with a date; refuses anything Date would guess at. */
export function parseIsoInstant(value: string, flag: string): Date {
  // A time needs its zone: a bare local time would mean different instants on different hosts.
  const iso = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2}))?$/;
  const date = new Date(value);
  if (!iso.test(value) || Number.isNaN(date.getTime())) {
    throw new UsageError(`${flag} must be an ISO 8601 instant with a zone, such as 2026-12-01T02:00:00Z (got '${value}')`);
  }
  return date;
}
