import { defineConfig } from 'drizzle-kit';

// `npm run generate` writes a new migration into drizzle/ from src/db/schema.ts.
// Apply migrations with `cronq migrate` (drizzle-orm's migrate()), not `drizzle-kit push`,
// which is unreliable on MariaDB once tables exist.
export default defineConfig({
  dialect: 'mysql',
  schema: './src/db/schema.ts',
  out: './drizzle',
  dbCredentials: { url: process.env.MIGRATION_DATABASE_URL ?? process.env.DATABASE_URL ?? 'mysql://root@127.0.0.1:3306/cronq' },
});
