import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: {
    // Schedule files import from 'cronq'; inside this repo that is our own src.
    alias: { cronq: fileURLToPath(new URL('./src/index.ts', import.meta.url)) },
  },
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/globalSetup.ts'],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    // Two cores: database-heavy files in parallel only fight over fsync.
    maxWorkers: 2,
    pool: 'forks',
  },
});
