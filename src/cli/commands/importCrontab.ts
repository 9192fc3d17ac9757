import { importCrontab } from '../../crontab/import.ts';
import { isValidTimeZone } from '../../schedule/period.ts';
import { UsageError } from '../../errors.ts';
import { shownInLine } from '../../shownText.ts';
import { cliLine } from '../cliLine.ts';
import type { Command } from '../command.ts';
import { printable } from '../printable.ts';

export const importCrontabCommand: Command = {
  name: 'import-crontab',
  summary: 'translate a crontab into schedule files (command schedules, same commands)',
  help: `Usage: cronq import-crontab FILE|- [--out DIR] [--system] [--skip-invalid] [--force] [--timezone TZ]

Reads a crontab (at most 1 MiB, UTF-8; - reads standard input) and writes one schedule file per line into DIR, keeping each
command exactly, the environment lines in force for it (SHELL, PATH, TZ, ...) and its
time zone (CRON_TZ, else --timezone, else this host's zone; as in cron, TZ= sets only the
command's clock). Prints each file written. Understands five-field lines, @hourly @daily
@weekly @monthly @yearly @annually @midnight, comments, blank lines, NAME=value lines,
cron's % rule (text after an unescaped % is the command's standard input, ended by a
newline) and cronie's '-' line prefix and -n option (dropped: cronq neither syslogs nor
mails).

Refused, with the line number: lines it cannot translate, and @reboot (cronq runs
schedules, not start-up hooks: use the service manager, e.g. systemd ExecStartPre).
Nothing is written then (exit 64) unless --skip-invalid. MAILTO has no equivalent:
failed jobs land in the dead-letter table instead (cronq dead list); the generated
file says so.

Schedules are named after their commands, with -2, -3... for a name an earlier
line or a file already in DIR defines (DIR is loaded, as every command loads
it), so DIR still loads afterwards; with --force, a name defined in its own
NAME.ts is reused, that file overwritten. A DIR that does not load is refused
with the reason, nothing written (exit 64).

Each line becomes period 'tick' with catchUp { mode: 'latest', window: '1d' }: the
most recent missed run is made up once, within a day (cron itself never does).

  --out DIR         where to write (default CRONQ_SCHEDULES, else ./schedules)
  --system          /etc/crontab format: a user column before the command
  --skip-invalid    write the translatable lines; report the others
  --force           overwrite existing files
  --timezone TZ     zone for lines without CRON_TZ (default this host's; needed when its
                    TZ has no IANA name, JST-9 say)`,
  options: {
    out: { type: 'string' },
    system: { type: 'boolean' },
    'skip-invalid': { type: 'boolean' },
    force: { type: 'boolean' },
    timezone: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
  positionals: { min: 1, max: 1, names: 'FILE' },
  async run({ values, positionals, env, out }) {
    const timezone = values.timezone as string | undefined;
    if (timezone !== undefined && !isValidTimeZone(timezone)) throw new UsageError(`--timezone: unknown time zone '${shownInLine(timezone)}'`);
    const { written, errors } = await importCrontab(positionals[0], {
      outDir: (values.out as string | undefined) ?? (env.CRONQ_SCHEDULES || './schedules'),
      system: Boolean(values.system),
      skipInvalid: Boolean(values['skip-invalid']),
      force: Boolean(values.force),
      defaultTimezone: timezone,
    });
    for (const path of written) out(`wrote ${path}`);
    if (written.length === 0 && errors.length === 0) {
      // Not a failure (a user without a crontab: `crontab -l` prints nothing), but never a silent success.
      const source = positionals[0] === '-' ? 'standard input' : positionals[0];
      process.stderr.write(`${printable(cliLine('import-crontab', `nothing written: ${source} holds no job lines`))}\n`);
    }
    for (const { line, reason } of errors) process.stderr.write(`${printable(cliLine('import-crontab', `skipped ${positionals[0]}:${line}: ${reason}`))}\n`);
    return 0;
  },
};
