import type { DaemonConfig } from './config.ts';
import { createCronq, type Cronq } from './cronq.ts';
import { HealthCheck } from './http/health.ts';
import { CronqMetrics } from './http/metrics.ts';
import { startHttpServer, type HttpServer } from './http/server.ts';
import { ConsoleAuth } from './http/console/auth.ts';
import { createConsole } from './http/console/router.ts';
import type { Logger } from './logger.ts';

/**
 * Runs `cronq start`: migrate (unless --no-migrate), then workers and recovery, until
 * SIGTERM or SIGINT. The first signal stops claiming, releases claimed-but-unstarted
 * jobs, gives running handlers the grace period and resolves with exit code 0; a
 * second signal exits at once with 1.
 *
 * With `config.http`, /healthz and /metrics are served from once the engine has
 * started until it has stopped (closed last). With `config.pruneDoneOlderThanMs`, the
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
      process.exit(1);
    }
    log.info({ event: 'shutdown_requested', signal, grace_ms: config.graceMs }, 'stopping');
    stopping = cronq.stop({ graceMs: config.graceMs });
    stopRequested();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    const registry = await cronq.ready();
    if (config.pruneDoneOlderThanMs !== null) await cronq.admin.checkRetention(config.pruneDoneOlderThanMs, '--prune-done-older-than');
    if (config.migrate) await cronq.migrate();
    else {
      await cronq.admin.ping();
      await cronq.admin.checkSchema();
    }
    if (stopping) {
      // A signal during the checks above: the instance is stopped for good, nothing to start.
      await stopping;
      return 0;
    }
    await cronq.start();
    if (config.http && metrics) {
      const health = new HealthCheck({
        health: () => cronq.health(),
        ping: () => cronq.admin.ping().then(() => true),
        pollMs: config.pollMs,
      });
      const webConsole = createConsole({ admin: cronq.admin, auth: new ConsoleAuth(config.consoleToken), log });
      http = await startHttpServer(config.http, { health: () => health.report(), metrics: () => metrics.scrape(), console: webConsole }, log);
    }
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
  }
}
