import { UsageError } from '../errors.ts';

/** The database every command uses when DATABASE_URL is unset. */
export const DEFAULT_DATABASE_URL = 'mysql://root@127.0.0.1:3306/cronq';

export interface DatabaseTarget {
  host: string;
  port: number;
  user: string;
  password: string;
  database: string;
  /** The URL with its password replaced by `***`: the only form that may be logged or printed. */
  masked: string;
}

/** Parses a `mysql://user:pass@host:port/db` URL; throws UsageError (password masked) when it is not one. */
export function parseDatabaseUrl(url: string): DatabaseTarget {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UsageError(`DATABASE_URL is not a URL: ${maskUrl(url)}`);
  }
  if (parsed.protocol !== 'mysql:' && parsed.protocol !== 'mariadb:') {
    throw new UsageError(`DATABASE_URL must start with mysql:// (got ${parsed.protocol}//)`);
  }
  const database = decodeURIComponent(parsed.pathname.replace(/^\//, ''));
  if (!/^[A-Za-z0-9_$-]{1,64}$/.test(database)) {
    throw new UsageError(`DATABASE_URL must name a database (letters, digits, _ $ -): ${maskUrl(url)}`);
  }
  return {
    host: parsed.hostname || '127.0.0.1',
    port: parsed.port ? Number(parsed.port) : 3306,
    user: decodeURIComponent(parsed.username || 'root'),
    password: decodeURIComponent(parsed.password),
    database,
    masked: maskUrl(url),
  };
}

/** Replaces the password of any URL-looking `scheme://user:pass@` in `text` by `***`. */
export function maskUrl(text: string): string {
  return text.replace(/([a-z][a-z0-9+.-]*:\/\/[^:/@\s]*:)[^@\s]*@/gi, '$1***@');
}
