import { printable } from '../printable.ts';
import { cliLine } from '../cliLine.ts';
import { checkTickInstant, type TickNowOutcome } from '../../admin.ts';
import { TickFanoutError, UsageError } from '../../errors.ts';
import { shownInLine, shownText } from '../../shownText.ts';
import { COMMON_HELP, COMMON_OPTIONS, type Command } from '../command.ts';
import { openForCommand } from '../open.ts';
import { shownPause } from './pause.ts';
import { parseIsoInstant } from '../instant.ts';

/** Exit status of a tick stopped by SIGINT or SIGTERM (128 + SIGINT). */
const EXIT_INTERRUPTED = 130;

/** Why a tick stopped on a signal: its message ends the one line printed. */
class Interrupted extends Error {
  override name = 'Interrupted';
}

export const tickCommand: Command = {
  name: 'tick',
  summary: "enqueue a schedule's jobs for its latest fire time now (harmless to repeat)",
  help: `Usage: cronq tick NAME [--at ISO] [--force]

Runs now the fan-out of schedule NAME for its latest fire time at or before --at
(default: now) and prints how many jobs were enqueued and how many were already
there. Keys make it harmless to repeat. It does not write the tick ledger: the
scheduler still records that tick when it reaches it.

Keys held by jobs this schedule did not enqueue (a job enqueued by hand under one
of its keys) are counted apart and named on stderr, and the exit is 1: those
jobs of the period were not written as the schedule's. So are entities refused
(a payload the database cannot store, a key too long): their jobs were not
written; fix what jobs() yields and run the tick again.

--at is now or earlier (by this host's clock and the database's; 5s ahead allowed for clock skew): a
later fire time ticked now would take its period's key, and its real run would
find the key taken and never run, so a later --at is refused (exit 64).

A paused schedule ('cronq pause NAME') is refused (exit 64), naming who paused it
and why: resume it first ('cronq resume NAME'), or run it anyway with --force (it
stays paused: the scheduler goes on skipping its ticks).

A fan-out that fails midway (its jobs() throws) prints one line naming the tick
and how many jobs were enqueued before it, then the error's first line (exit 1);
those jobs stay, and running the tick again enqueues the rest. So does one that
makes no progress (no entity from jobs(), no batch written) for 60 s, the
scheduler's fan-out lease (exit 1), and one stopped by Ctrl-C (SIGINT) or
SIGTERM (exit 130): the jobs gathered by then are written first.

  --at ISO          e.g. 2026-11-01T02:00:00Z (default now; not later than now)
  --force           run it even while the schedule is paused
  --schedules DIR   where the schedule is defined (default ./schedules)

${COMMON_HELP}`,
  options: { ...COMMON_OPTIONS, at: { type: 'string' }, force: { type: 'boolean' } },
  positionals: { min: 1, max: 1, names: 'NAME' },
  async run(args) {
    const [name] = args.positionals;
    // Checked here too, before the database is opened; admin.tick checks it by the database's clock.
    const asked = args.values.at === undefined ? undefined : checkTickInstant(parseIsoInstant(args.values.at as string, '--at'), '--at');
    const cronq = await openForCommand(args);
    // The first SIGINT or SIGTERM stops the fan-out (its gathered jobs written); a second, the default handler restored, at once.
    const stop = new AbortController();
    const onSignal = (signal: NodeJS.Signals) => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      stop.abort(new Interrupted(`interrupted by ${signal}`));
    };
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    try {
      let result: TickNowOutcome;
      try {
        result = await cronq.admin.tick(name, { ...(asked === undefined ? {} : { at: asked }), force: args.values.force === true, signal: stop.signal });
      } catch (error) {
        if (!stop.signal.aborted || !(error instanceof TickFanoutError)) throw error;
        process.stderr.write(`${printable(cliLine('tick', error.message))}\n`);
        return EXIT_INTERRUPTED;
      }
      if (result.status === 'no_schedule') throw new UsageError(`no schedule named '${shownInLine(name)}' in the schedules folder`);
      if (result.status === 'paused') {
        throw new UsageError(`schedule '${name}' is ${shownPause(result.pause)}; --force runs it anyway, or 'cronq resume ${name}' first`);
      }
      if (result.status === 'no_fire_time') throw new UsageError(`schedule '${shownInLine(name)}' has no fire time at or before ${(asked ?? result.at).toISOString()}`);
      const taken = result.firstConflict;
      args.out(
        `${name} tick ${result.fireAt.toISOString()} (period ${result.periodKey}): ${result.inserted} enqueued, ${result.existing} already present${
          result.conflicting > 0 ? `, ${result.conflicting} held by jobs this schedule did not enqueue` : ''
        }${result.refusedCount > 0 ? `, ${result.refusedCount} refused (first ${result.refused[0].key}: ${result.refused[0].reason})` : ''}`,
      );
      if (result.conflicting === 0 && result.refusedCount === 0) return 0;
      // Part of the period did not run: its jobs were never written under those keys.
      const say = (line: string) => process.stderr.write(`${printable(cliLine('tick', line))}\n`);
      if (result.conflicting > 0) {
        say(
          `${result.conflicting} of this tick's keys are held by jobs this schedule did not enqueue${taken ? ` (first ${shownText(taken.key)}: kind ${shownText(taken.kind)}, job ${taken.jobId})` : ''}: their schedule jobs were not enqueued, and those keys stay taken until the holders' rows are deleted`,
        );
      }
      if (result.refusedCount > 0) {
        const [first] = result.refused;
        const one = result.refusedCount === 1;
        say(
          `${result.refusedCount} of this tick's entities ${one ? 'was' : 'were'} refused (first ${shownText(first.key)}: ${first.reason}): ${one ? 'its job was' : 'their jobs were'} not enqueued; fix what jobs() yields, then run the tick again`,
        );
      }
      return 1;
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      await cronq.stop();
    }
  },
};
