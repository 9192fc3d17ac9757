import { daemonConfig } from '../../config.ts';
import { runDaemon } from '../../daemon.ts';
import { createLogger } from '../../logger.ts';
import { COMMON_HELP, COMMON_OPTIONS, type Command } from '../command.ts';

export const startCommand: Command = {
  name: 'start',
  summary: 'run the daemon: workers, lease recovery and the scheduler',
  help: `Usage: cronq start [--schedules DIR] [--concurrency N] [--prefetch N] [--queues a,b]
                   [--grace D] [--poll D] [--no-migrate] [--no-scheduler] [--no-workers]
                   [--http HOST:PORT] [--console-token-file F] [--prune-done-older-than D] [--unknown-kind-grace D]

Runs the daemon in the foreground until SIGTERM, SIGINT or SIGHUP: loads the
task and schedule files, applies pending migrations, then enqueues each schedule's ticks
(catching up ticks missed while no daemon ran) and claims and runs jobs. Run one
per host, on as many hosts as you like, against the same database: each tick is
enqueued once and each job runs once at a time.

  --schedules DIR    task and schedule files (default ./schedules, or CRONQ_SCHEDULES)
  --concurrency N    handlers running at once in this process (default 10)
  --prefetch N       most jobs claimed ahead of free handlers, 0-10000 (default 1000).
                     Only handlers that finish faster than a claim round trip get any:
                     about what they use up in two claims' time, so claims stay large,
                     and at most about 16 MB of payload ahead.
                     A job that waits a third of its lease is released. 0: claim only
                     for free handlers
  --queues a,b       claim only from these queues, each named once (default: all)
  --grace D          on SIGTERM, how long running handlers may take to finish before
                     their signal aborts (default 10s, at most 24h; keep it well below the lease)
  --poll D           how often an idle worker looks for jobs enqueued elsewhere (default 200ms,
                     10ms to 60s)
  --no-migrate       do not apply migrations (run 'cronq migrate' separately, e.g. with
                     an administrative MIGRATION_DATABASE_URL)
  --no-scheduler     run workers only: do not enqueue schedule ticks
  --no-workers       run the scheduler only: enqueue ticks, run no handlers
  --http HOST:PORT   serve GET /healthz and GET /metrics (Prometheus) there, e.g.
                     127.0.0.1:9464 or [::1]:9464; port 0 picks a free one (logged as
                     http_listening). Off by default. Bound before anything starts:
                     an address that cannot be bound (in use, not this host's) exits 64
                     at once; until the engine runs every path answers 503 (starting).
                     /healthz answers 200 when the database, the claim loop and the
                     scheduler are alive, else 503. The web console is served there
                     too, under / (read-only unless a console token is configured)
  --console-token-file F
                     enable console actions with the NAME:SECRET token in file F
                     (else CRONQ_CONSOLE_TOKEN); actions are recorded as console:NAME
  --prune-done-older-than D
                     every 5 minutes, delete done jobs finished more than D ago (and
                     tick-ledger rows as old, except each schedule's latest), 500 rows
                     per statement, as 'cronq prune' does. Off by default. Refused
                     when D is under 1h or shorter than a schedule's catch-up window
                     plus one period: done rows are what stop a key running twice
  --unknown-kind-grace D
                     a job of a kind this daemon does not run goes back, attempt
                     restored, for a daemon that does (rolling deploys); it goes dead
                     only once no daemon has served its kind for D (default 15m),
                     counted from the last heartbeat of one that did, else from the
                     job's creation

Durations read as 100ms, 2s, 5m, 1h, 40d, without spaces.
On SIGTERM/SIGINT/SIGHUP: no new claims; jobs claimed but not started are released with
their attempt restored; running handlers get the grace period; exit 0. Whatever
the database does, the stop takes at most the grace plus 3s (then one
shutdown_cut_short line names what was left unwritten, for lease recovery). While
schedule files are still importing: exit 0 at once, nothing started. A second
signal exits at once.

${COMMON_HELP}`,
  options: {
    ...COMMON_OPTIONS,
    concurrency: { type: 'string' },
    prefetch: { type: 'string' },
    queues: { type: 'string' },
    grace: { type: 'string' },
    poll: { type: 'string' },
    'no-migrate': { type: 'boolean' },
    'no-scheduler': { type: 'boolean' },
    'no-workers': { type: 'boolean' },
    http: { type: 'string' },
    'console-token-file': { type: 'string' },
    'prune-done-older-than': { type: 'string' },
    'unknown-kind-grace': { type: 'string' },
  },
  positionals: { min: 0, max: 0, names: '' },
  async run({ values, env }) {
    const config = daemonConfig(env, values as Parameters<typeof daemonConfig>[1]);
    return runDaemon(config, createLogger(config.logLevel, 1));
  },
};
