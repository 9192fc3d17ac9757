import { describePause, type PauseTarget } from '../../admin.ts';
import { parseQueueFlag } from '../../config.ts';
import { UsageError } from '../../errors.ts';
import { shownInLine, shownText } from '../../shownText.ts';
import { COMMON_HELP, COMMON_OPTIONS, type Command, type ParsedArgs } from '../command.ts';
import { openForCommand } from '../open.ts';
import { printableLine } from '../printable.ts';

const WHO_HELP = `  --by NAME         who to record (default user@host of this process)`;

/** `cronq pause (NAME | --queue Q) [--reason R] [--by NAME]`. */
export const pauseCommand: Command = {
  name: 'pause',
  summary: 'stop a schedule\'s ticks or a queue\'s claims on every daemon until resumed',
  help: `Usage: cronq pause NAME [--reason R] [--by NAME]
       cronq pause --queue Q [--reason R] [--by NAME]

Pauses schedule NAME (one of the schedules folder): until 'cronq resume NAME',
every daemon records each of its ticks in the ledger as skipped, with a note
naming who paused it, since when and why, and enqueues nothing. Ticks that fell
while paused are not caught up after the resume.

With --queue, pauses queue Q: no daemon claims from it (within one --poll);
its jobs wait, running ones finish. Any queue name enqueue takes (1-64 letters,
digits, '.', '_' or '-') is accepted, used or not; any other is refused (exit 64).

The pause is a row of cronq_pauses: it holds on every host and across restarts.
'cronq schedules' and 'cronq stats' show it. Pausing what is already paused is
refused (exit 64) and changes nothing.

  --queue Q         pause a queue instead of a schedule
  --reason R        why (at most 255 characters), shown with the pause
${WHO_HELP}
  --schedules DIR   where schedules are defined (default ./schedules)

${COMMON_HELP}`,
  options: { ...COMMON_OPTIONS, queue: { type: 'string' }, reason: { type: 'string' }, by: { type: 'string' } },
  positionals: { min: 0, max: 1, names: 'NAME' },
  async run(args) {
    const { target, name } = targetOf(args, 'pause');
    const cronq = await openForCommand(args, { loadSchedules: target === 'schedule' });
    try {
      const outcome = await cronq.admin.pauses.pause(target, name, {
        reason: args.values.reason as string | undefined,
        by: args.values.by as string | undefined,
      });
      if (outcome.status === 'no_schedule') throw new UsageError(`no schedule named '${shownInLine(name)}' in the schedules folder`);
      if (outcome.status === 'already_paused') throw new UsageError(`${target} '${name}' is already ${shownPause(outcome.pause)}`);
      args.out(`${target} ${name} ${shownPause(outcome.pause)}`);
      return 0;
    } finally {
      await cronq.stop();
    }
  },
};

/** `cronq resume (NAME | --queue Q)`. */
export const resumeCommand: Command = {
  name: 'resume',
  summary: 'end a pause made by cronq pause',
  help: `Usage: cronq resume NAME
       cronq resume --queue Q
       cronq resume --unknown-target NAME

Ends the pause of schedule NAME, or with --queue of queue Q, on every daemon
(within one --poll for a queue, at its next tick for a schedule). A resumed
schedule does not catch up the ticks that fell while it was paused: they stay
in the ledger as skipped. Resuming what is not paused is refused (exit 64).
A pause whose name is empty (written from SQL; 'cronq stats' shows it as '')
is ended by 'cronq resume ""' or 'cronq resume --queue ""'. A row whose target
is none of cronq's ('' in cronq_pauses.target, written from SQL: it pauses
nothing; 'cronq stats' shows it as '(unknown target)') is ended by
'cronq resume --unknown-target NAME' (after --, a NAME starting with -:
'cronq resume --unknown-target -- -x', as 'cronq stats' prints it).

  --queue Q         resume a queue instead of a schedule
  --unknown-target  end a pause row of no known target (see above)
  --schedules DIR   where schedules are defined (default ./schedules)

${COMMON_HELP}`,
  options: { ...COMMON_OPTIONS, queue: { type: 'string' }, 'unknown-target': { type: 'boolean' } },
  positionals: { min: 0, max: 1, names: 'NAME' },
  async run(args) {
    const { target, name } = args.values['unknown-target'] === true ? unknownTargetOf(args) : targetOf(args, 'resume');
    const cronq = await openForCommand(args, { loadSchedules: target === 'schedule' });
    try {
      const outcome = await cronq.admin.pauses.resume(target, name);
      if (outcome.status === 'no_schedule') throw new UsageError(`no schedule named '${shownInLine(name)}' in the schedules folder`);
      if (outcome.status === 'not_paused') throw new UsageError(`${shownPauseTarget(target)} '${shownInLine(name)}' is not paused`);
      args.out(`${shownPauseTarget(target)} ${shownPauseName(name)} resumed (was ${shownPause(outcome.pause)})`);
      return 0;
    } finally {
      await cronq.stop();
    }
  },
};

/**
 * A pause (who, since when, why) as the CLI prints it inside one line: describePause with
 * its tabs and any control character escaped (printableLine: `\x09`), as a table cell
 * shows it, so a reason holding a tab reads as one, and the line stays one line.
 */
export function shownPause(pause: Parameters<typeof describePause>[0]): string {
  return printableLine(describePause(pause));
}

/** A pause's name as the CLI prints it: as it is, or `''` when empty (what `cronq resume` then takes). */
export function shownPauseName(name: string): string {
  return name === '' ? "''" : shownText(name);
}

/** A pause's target as the CLI prints it: `(unknown target)` for a row of none of cronq's (Pause.target ''). */
export function shownPauseTarget(target: PauseTarget | ''): string {
  return target === '' ? '(unknown target)' : target;
}

/** `--unknown-target NAME` (the NAME may be ''), without --queue. */
function unknownTargetOf(args: ParsedArgs): { target: ''; name: string } {
  const [name] = args.positionals;
  if (args.values.queue !== undefined) throw new UsageError('give --unknown-target NAME or --queue Q, not both');
  if (name === undefined) throw new UsageError("--unknown-target needs the NAME of the pause row (as 'cronq stats' lists it)");
  return { target: '', name };
}

/** NAME or --queue Q, exactly one of them; resume also takes an empty one (a pause written from SQL). */
function targetOf(args: ParsedArgs, command: 'pause' | 'resume'): { target: PauseTarget; name: string } {
  const queue = args.values.queue as string | undefined;
  const [name] = args.positionals;
  if (queue !== undefined && name !== undefined) throw new UsageError(`give a schedule NAME or --queue Q, not both`);
  if (queue === '' && command === 'resume') return { target: 'queue', name: '' };
  if (queue !== undefined) return { target: 'queue', name: parseQueueFlag(queue, '--queue') };
  if (name === undefined) throw new UsageError(`missing NAME (a schedule) or --queue Q (see cronq ${command} --help)`);
  return { target: 'schedule', name };
}
