import { baseConfig } from '../../config.ts';
import { createCronq } from '../../cronq.ts';
import { createLogger } from '../../logger.ts';
import { COMMON_HELP, type Command } from '../command.ts';

export const migrateCommand: Command = {
  name: 'migrate',
  summary: 'create the database if missing and apply pending migrations',
  help: `Usage: cronq migrate

Creates the database named in the URL if it does not exist, then applies every
pending migration in drizzle/, recorded in cronq's own table cronq_migrations (an
app's drizzle-kit migrations in the same database, in __drizzle_migrations, are
neither hidden nor touched). Needs an administrative user (CREATE, ALTER, INDEX);
the daemon itself then runs with SELECT, INSERT, UPDATE, DELETE only (cronq start --no-migrate).

  MIGRATION_DATABASE_URL   used instead of DATABASE_URL when set

${COMMON_HELP}`,
  options: { help: { type: 'boolean', short: 'h' } },
  positionals: { min: 0, max: 0, names: '' },
  async run({ env, out }) {
    const config = baseConfig({ ...env, DATABASE_URL: env.MIGRATION_DATABASE_URL || env.DATABASE_URL });
    const cronq = createCronq({ databaseUrl: config.databaseUrl, logger: createLogger(config.logLevel, 2), workers: false });
    try {
      await cronq.migrate();
      out(`migrated ${cronq.maskedDatabaseUrl}`);
      return 0;
    } finally {
      await cronq.stop();
    }
  },
};
