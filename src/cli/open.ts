import { baseConfig } from '../config.ts';
import { createCronq, type Cronq } from '../cronq.ts';
import { createLogger } from '../logger.ts';
import type { ParsedArgs } from './command.ts';

/**
 * Opens cronq for a one-shot command: schedules folder loaded (so job defaults
 * and names are known), database pinged so an unreachable server fails fast, and its
 * schema checked so a database not (fully) migrated is refused with the hint to migrate.
 * `beforeDatabase` runs once the schedules are loaded and before the one ping: a check
 * that refuses there leaves the database untouched.
 * Logs go to stderr; stdout is the command's result. The caller must `stop()`.
 */
export async function openForCommand(
  args: ParsedArgs,
  { loadSchedules = true, beforeDatabase }: { loadSchedules?: boolean; beforeDatabase?: (cronq: Cronq) => Promise<void> } = {},
): Promise<Cronq> {
  const config = baseConfig(args.env, { schedules: args.values.schedules as string | undefined }, { loadsSchedules: loadSchedules });
  const cronq = createCronq({
    databaseUrl: config.databaseUrl,
    schedulesDir: loadSchedules ? config.schedulesDir : null,
    importTimeoutMs: config.importTimeoutMs,
    logger: createLogger(config.logLevel === 'info' ? 'warn' : config.logLevel, 2),
    workers: false,
    concurrency: 1,
  });
  try {
    await cronq.ready();
    await beforeDatabase?.(cronq);
    await cronq.admin.ping();
    // Before any statement: a database never migrated would fail with ER_NO_SUCH_TABLE,
    // one migrated by an older cronq with a missing column, neither saying what to do.
    await cronq.admin.checkSchema();
  } catch (error) {
    await cronq.stop();
    throw error;
  }
  return cronq;
}
