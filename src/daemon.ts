import type { DaemonConfig } from './config.ts';
import { createCronq, type Cronq } from './cronq.ts';
import { MigrationNotBegunError } from './errors.ts';
import { HealthCheck } from './http/health.ts';
import { CronqMetrics } from './http/metrics.ts';
import { startHttpServer, type HttpServer } from './http/server.ts';
import { ConsoleAuth } from './http/console/auth.ts';
import { createConsole } from './http/console/router.ts';
import type { Logger } from './logger.ts';
import { shownText } from './shownText.ts';
import { scheduleFileImporting } from './schedule/loader.ts';

/**
 * Runs `cronq start`: migrate (unless --no-migrate), then workers and recovery, until
 * SIGTERM, SIGINT or SIGHUP. The first signal stops claiming, releases claimed-but-unstarted
 * jobs, gives running handlers the grace period and resolves with exit code 0; a
 * second signal exits at once with 1. A first signal before the engine has started lets a
 * migration in progress finish, then resolves with 0; one while schedule files are still
 * importing resolves with 0 at once, not waiting for the import.
 *
 * With `config.http`, the address is bound first, before schedules load or anything
 * starts: one it cannot bind is refused at once (UsageError: exit 64), nothing started.
 * Until the engine has started every path answers 503 (starting); from then /healthz,
 * /metrics and the console are served until the engine has stopped (closed last).
 * With `config.pruneDoneOlderThanMs`, the
 * retention is checked against the loaded schedules before migrating (UsageError: exit
 * 64) and pruning runs in the background.
 */
export async function runDaemon(config: DaemonConfig, log: Logger): Promise<number> {
  // Created first so the engine reports to it from the start; it reads the database
  // through `cronq` only when scraped.
  const metrics = config.http
    ? new CronqMetrics({
        collect: () => cronq.admin.stats(),
        oldestRunningJobAgeSeconds: () => (cronq.health().oldestRunningJobAgeMs ?? 0) / 1000,
      })
    : null;
  let http: HttpServer | null = null;
  const cronq: Cronq = createCronq({
    databaseUrl: config.databaseUrl,
    schedulesDir: config.schedulesDir,
    importTimeoutMs: config.importTimeoutMs,
    concurrency: config.concurrency,
    prefetch: config.prefetch,
    queues: config.queues,
    logger: log,
    pollInterval: config.pollMs,
    workers: config.workers,
    scheduler: config.scheduler,
    postClaimPauseMs: config.postClaimPauseMs,
    observer: metrics ?? undefined,
    pruneDoneOlderThan: config.pruneDoneOlderThanMs ?? undefined,
    unknownKindGraceMs: config.unknownKindGraceMs,
    catchUncaught: true,
  });
  let stopping: Promise<unknown> | null = null;
  let stopRequested!: () => void;
  const untilSignal = new Promise<void>((resolve) => (stopRequested = resolve));
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      log.warn({ event: 'shutdown_forced', signal }, 'second signal: exiting at once');
      process.off('exit', onForeignExit);
      process.exit(1);
    }
    log.info({ event: 'shutdown_requested', signal, grace_ms: config.graceMs }, 'stopping');
    stopping = cronq.stop({ graceMs: config.graceMs });
    stopRequested();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  // Its terminal or ssh session closed: a stop like any other. Node's default would end the
  // process at once, nothing released, even under nohup (Node resets the ignore it inherits).
  process.on('SIGHUP', onSignal);
  process.on('exit', onForeignExit);
  let engineStarted = false;
  try {
    if (config.http && metrics) {
      const health = new HealthCheck({
        health: () => cronq.health(),
        ping: () => cronq.admin.ping().then(() => true),
        pollMs: config.pollMs,
      });
      const webConsole = createConsole({ admin: cronq.admin, auth: new ConsoleAuth(config.consoleToken), log });
      http = await startHttpServer(
        config.http,
        { health: () => health.report(), metrics: () => metrics.scrape(), console: webConsole, starting: () => !engineStarted },
        log,
      );
    }
    // A signal while schedule files import stops at once: an import cannot be cancelled, but
    // the daemon need not wait for it (the process exits; bin/cronq.js leaves lingering work).
    const registry = await Promise.race([cronq.ready(), untilSignal.then(() => null)]);
    if (registry === null) return await stoppedBeforeStart(stopping!);
    if (registry.list().length === 0) {
      log.warn(
        { event: 'nothing_loaded', schedules_dir: config.schedulesDir },
        config.schedulesDir === null
          ? 'no schedules folder (./schedules does not exist; --schedules DIR or CRONQ_SCHEDULES names one): this daemon will schedule and run nothing'
          : `no task or schedule loaded from ${config.schedulesDir}: this daemon will schedule and run nothing (is it the right folder?)`,
      );
    }
    if (config.pruneDoneOlderThanMs !== null) await cronq.admin.checkRetention(config.pruneDoneOlderThanMs, '--prune-done-older-than');
    // A signal before the engine starts: stop (a migration in progress finishes first), start nothing.
    if (stopping) return await stoppedBeforeStart(stopping);
    if (config.migrate) {
      // A signal while it still connects ends it at once, nothing applied: stopped as asked.
      const migrated = await cronq.migrate().then(
        () => true,
        (error: unknown) => {
          if (error instanceof MigrationNotBegunError && stopping) return false;
          throw error;
        },
      );
      if (!migrated) return await stoppedBeforeStart(stopping!);
    } else {
      // Checks change nothing: a signal need not wait for a database that does not answer them
      // (the stop closes the pool under them; what they then say is our own stop, not the database).
      const checks = (async () => {
        await cronq.admin.ping();
        await cronq.admin.checkSchema();
      })();
      if ((await Promise.race([checks.then(() => true), untilSignal.then(() => false)])) === false) {
        checks.catch(() => undefined);
        return await stoppedBeforeStart(stopping!);
      }
    }
    if (stopping) return await stoppedBeforeStart(stopping);
    await cronq.start();
    engineStarted = true;
    log.info(
      { event: 'daemon_started', database: cronq.maskedDatabaseUrl, tasks: registry.list().map((t) => t.name) },
      'cronq running',
    );
    await untilSignal;
    await stopping;
    return 0;
  } catch (error) {
    await cronq.stop({ graceMs: 0 }).catch(() => undefined);
    throw error;
  } finally {
    await http?.close();
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    process.off('SIGHUP', onSignal);
    process.off('exit', onForeignExit);
  }

  /**
   * The process is exiting while the daemon runs and not by its own stop: code in a
   * schedule file or a handler called process.exit(). Logged (the logger writes
   * synchronously), and an exit code of 0 becomes EXIT_FOREIGN_EXIT, so a supervisor that
   * restarts on failure (systemd's Restart=on-failure) restarts the daemon.
   */
  function onForeignExit(code: number | string | undefined): void {
    // A schedule file ending the process as it imports is refused by the CLI, naming the file.
    if (scheduleFileImporting() !== null) return;
    // What the process would exit with: the code's low 8 bits (256 is 0; '0' is 0).
    const status = Number(code) & 0xff;
    const reported = status === 0 ? EXIT_FOREIGN_EXIT : status;
    process.exitCode = reported;
    log.fatal(
      { event: 'daemon_exit_unexpected', exit_code: status, reported_exit_code: reported },
      `process.exit(${shownText(String(code), 20)}) was called while the daemon was running, not by its stop (a schedule file or handler?): exiting with ${reported}, its running jobs return through lease recovery`,
    );
  }
}

/** The exit code when code other than cronq's ends the daemon's process with 0 (BSD sysexits EX_SOFTWARE). */
export const EXIT_FOREIGN_EXIT = 70;

/** The exit code of a daemon stopped by a signal before its engine started: 0 once the stop is done. */
async function stoppedBeforeStart(stopping: Promise<unknown>): Promise<number> {
  await stopping;
  return 0;
}
