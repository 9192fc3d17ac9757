import { migrationConfig } from '../../config.ts';
import { createCronq } from '../../cronq.ts';
import { createLogger } from '../../logger.ts';
import { cliLine } from '../cliLine.ts';
import { DATABASE_ONLY_HELP, type Command } from '../command.ts';

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
DDL would stay half applied); a second one stops at once. A migration that daemons
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
    // MySQL commits DDL statement by statement: a migration stopped midway stays half
    // applied and every later run fails on it. The first signal waits for the end; a
    // second one (the default handler, restored) stops at once.
    const finishFirst = () => {
      process.stderr.write(`${cliLine('migrate', 'finishing the migration in progress first (stopped midway it would stay half applied); a second signal stops at once')}\n`);
      process.off('SIGINT', finishFirst);
      process.off('SIGTERM', finishFirst);
    };
    process.once('SIGINT', finishFirst);
    process.once('SIGTERM', finishFirst);
    try {
      await cronq.migrate();
      out(`migrated ${cronq.maskedDatabaseUrl}`);
      return 0;
    } finally {
      process.off('SIGINT', finishFirst);
      process.off('SIGTERM', finishFirst);
      await cronq.stop();
    }
  },
};
