import type { TestProject } from 'vitest/node';
import { answers } from './answers.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Server URL without a database; each test file creates its own database there. */
    serverUrl: string;
  }
}

const LOCAL = 'mysql://root@127.0.0.1:3306';

/**
 * Finds the server tests run against: DATABASE_URL's server when set, else the local
 * server on 127.0.0.1:3306, else (Docker answering) a throwaway MySQL 8 container.
 */
export default async function setup(project: TestProject) {
  let stopContainer: (() => Promise<unknown>) | undefined;
  let serverUrl: string;
  if (process.env.DATABASE_URL) {
    const url = new URL(process.env.DATABASE_URL);
    url.pathname = '';
    serverUrl = url.toString().replace(/\/$/, '');
  } else if (await answers(LOCAL)) {
    serverUrl = LOCAL;
  } else {
    const { MySqlContainer } = await import('@testcontainers/mysql');
    const container = await new MySqlContainer('mysql:8.0').withRootPassword('cronq').start();
    serverUrl = `mysql://root:cronq@${container.getHost()}:${container.getPort()}`;
    stopContainer = () => container.stop();
  }
  project.provide('serverUrl', serverUrl);
  return async () => {
    await stopContainer?.();
  };
}

