import type { DaemonConfig } from './config.ts';
import { createCronq, type Cronq } from './cronq.ts';
import { assertSchemaCurrent } from './db/migrate.ts';
import { ping } from './db/client.ts';
import type { Logger } from './logger.ts';

/**
 * Runs `cronq start`: migrate (unless --no-migrate), then workers and recovery, until
 * SIGTERM or SIGINT. The first signal stops claiming, releases claimed-but-unstarted
 * jobs, gives running handlers the grace period and resolves with exit code 0; a
 * second signal exits at once with 1.
 */
export async function runDaemon(config: DaemonConfig, log: Logger): Promise<number> {
  const cronq: Cronq = createCronq({
    databaseUrl: config.databaseUrl,
    schedulesDir: config.schedulesDir,
    concurrency: config.concurrency,
    queues: config.queues,
    logger: log,
    pollInterval: config.pollMs,
    workers: config.workers,
    scheduler: config.scheduler,
    postClaimPauseMs: config.postClaimPauseMs,
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
    if (config.migrate) await cronq.migrate();
    else {
      await ping(cronq.database);
      await assertSchemaCurrent(cronq.database);
    }
    await cronq.start();
    log.info(
      { event: 'daemon_started', database: cronq.database.target.masked, tasks: registry.list().map((t) => t.name) },
      'cronq running',
    );
    await untilSignal;
    await stopping;
    return 0;
  } catch (error) {
    await cronq.stop({ graceMs: 0 }).catch(() => undefined);
    throw error;
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
}
