import { migrationConfig } from '../../config.ts';
import { createCronq } from '../../cronq.ts';
import { MigrationNotBegunError } from '../../errors.ts';
import { createLogger } from '../../logger.ts';
import { cliLine } from '../cliLine.ts';
import { DATABASE_ONLY_HELP, type Command } from '../command.ts';

/** A migration stopped by a signal before it began (128 + SIGINT, as a shell reports Ctrl-C). */
const EXIT_INTERRUPTED = 130;

export const migrateCommand: Command = {
  name: 'migrate',
  summary: 'create the database if missing and apply pending migrations',
  help: `Usage: cronq migrate

Creates the database named in the URL if it does not exist, then applies every
pending migration in drizzle/, recorded in cronq's own table cronq_migrations (an
app's drizzle-kit migrations in the same database, in __drizzle_migrations, are
neither hidden nor touched). Needs an administrative user (CREATE, ALTER, INDEX);
the daemon itself then runs with SELECT, INSERT, UPDATE, DELETE only (cronq start --no-migrate).
A first Ctrl-C or SIGTERM lets the migration in progress finish (stopped midway, its
DDL would stay half applied); a second one stops at once. One while it still connects
(a database that does not answer) stops at once, nothing changed (exit 130). A migration that daemons
of an older cronq cannot run beside (0007) is refused, applying nothing of it, while
any daemon in cronq_daemons beat its heartbeat within 30 s and did not stop: stop
every daemon, migrate, then start them on the new version (docs/deploy.md).

  MIGRATION_DATABASE_URL   used instead of DATABASE_URL when set

${DATABASE_ONLY_HELP}`,
  options: { help: { type: 'boolean', short: 'h' } },
  positionals: { min: 0, max: 0, names: '' },
  async run({ env, out }) {
    const config = migrationConfig(env);
    const cronq = createCronq({ databaseUrl: config.databaseUrl, logger: createLogger(config.logLevel, 2), workers: false });
    let notBegun = false;
    const migrating = cronq.migrate().catch((error: unknown) => {
      if (error instanceof MigrationNotBegunError) notBegun = true;
      throw error;
    });
    // MySQL commits DDL statement by statement: a migration stopped midway stays half
    // applied and every later run fails on it. The first signal stops the engine, which
    // ends a migration still connecting (nothing applied yet) and waits for one under way;
    // a second one (the default handler, restored) stops at once.
    const finishFirst = () => {
      process.off('SIGINT', finishFirst);
      process.off('SIGTERM', finishFirst);
      cronq.stop().catch(() => undefined); // its error, if any, is reported by the stop in finally
      // Once the stop has reached the migration: said only when it goes on.
      setImmediate(() => {
        if (!notBegun) process.stderr.write(`${cliLine('migrate', 'finishing the migration in progress first (stopped midway it would stay half applied); a second signal stops at once')}\n`);
      });
    };
    process.once('SIGINT', finishFirst);
    process.once('SIGTERM', finishFirst);
    try {
      try {
        await migrating;
      } catch (error) {
        if (!notBegun) throw error;
        process.stderr.write(`${cliLine('migrate', 'stopped before migrating: no migration was applied')}\n`);
        return EXIT_INTERRUPTED;
      }
      out(`migrated ${cronq.maskedDatabaseUrl}`);
      return 0;
    } finally {
      process.off('SIGINT', finishFirst);
      process.off('SIGTERM', finishFirst);
      await cronq.stop();
    }
  },
};
