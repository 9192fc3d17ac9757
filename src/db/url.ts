import { UsageError } from '../errors.ts';

/** The database every command uses when DATABASE_URL is unset. */
export const DEFAULT_DATABASE_URL = 'mysql://root@127.0.0.1:3306/cronq';

/**
 * The databases a MySQL or MariaDB server keeps for itself: cronq's tables do not belong in
 * them (`migrate` created its tables in `mysql` and `sys`; other commands failed with the
 * driver's ER_UNKNOWN_TABLE or ER_DBACCESS_DENIED_ERROR). Compared without case: on a
 * server with lower_case_table_names these are the same databases, and elsewhere a
 * database of one's own called `MySQL` is a confusion waiting to happen.
 */
const SERVER_DATABASES = new Set(['mysql', 'sys', 'information_schema', 'performance_schema']);

export interface DatabaseTarget {
  /** The host to connect to: an IPv6 address without the URL's brackets. */
  host: string;
  port: number;
  /** `host:port` as a URL writes it (`[::1]:3306`), for messages. */
  address: string;
  user: string;
  password: string;
  database: string;
  /** The URL with its password replaced by `***`: the only form that may be logged or printed. */
  masked: string;
}

/**
 * Parses a `mysql://user:pass@host:port/db` URL; throws UsageError (password masked) when
 * it is not one, or when `db` is one of the server's own databases (SERVER_DATABASES),
 * naming the setting it came from (`name`). Nothing is connected to.
 */
export function parseDatabaseUrl(url: string, name = 'DATABASE_URL'): DatabaseTarget {
  const masked = maskedSetting(url);
  // An unencoded '/', '?' or '#' before the last '@' ends the authority early: the URL
  // would parse with pieces of the password read as host and database, or (the usual
  // case: what precedes it is no port) not parse at all. Said before parsing, so both
  // get the reason rather than "not a URL" beside a masked URL that looks right.
  const afterScheme = url.slice(url.indexOf('//') + 2);
  if (/[/?#]/.test(afterScheme.slice(0, Math.max(0, afterScheme.lastIndexOf('@'))))) {
    throw new UsageError(
      `${name} has '/', '?' or '#' before its last '@': percent-encode them in the password (%2F, %3F, %23): ${masked}`,
    );
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    // The usual cause past the scheme: a port that is no number from 1 to 65535. The host and
    // port follow the last '@' (a password may hold anything); the port is not quoted, as a
    // password's pieces could be read as one: the URL is shown masked.
    const rest = url.slice(url.indexOf('//') + 2);
    const hostPort = rest.slice(rest.lastIndexOf('@') + 1).split(/[/?#]/)[0];
    const port = /^(?:\[[^\]]*\]|[^:[\]]*):(.*)$/.exec(hostPort)?.[1];
    if (port !== undefined && port !== '' && (!/^[0-9]{1,5}$/.test(port) || Number(port) > 65535)) {
      throw new UsageError(`${name} has a port that is not a number from 1 to 65535: ${masked}`);
    }
    throw new UsageError(`${name} is not a URL: ${masked}`);
  }
  if (parsed.protocol !== 'mysql:' && parsed.protocol !== 'mariadb:') {
    throw new UsageError(`${name} must start with mysql:// (got ${parsed.protocol}//)`);
  }
  // mysql://user:pass@host:port/db is all cronq reads: parameters (?ssl=true, say) would be
  // dropped silently, and a connection the URL asks to encrypt would run in the clear.
  if (parsed.search !== '' || parsed.hash !== '') {
    const names = [...new Set(parsed.searchParams.keys())].map((key) => `'${key.slice(0, 40)}'`);
    if (parsed.hash !== '') names.push(`'${parsed.hash.slice(0, 40)}'`);
    throw new UsageError(
      `${name} takes no parameters after the database name (got ${names.slice(0, 5).join(', ') || "'?'"}): cronq reads the user, password, host, port and database alone, and does not configure TLS to the database (docs/deploy.md): ${masked}`,
    );
  }
  const decode = (part: string) => {
    try {
      return decodeURIComponent(part);
    } catch {
      throw new UsageError(`${name} has a '%' not followed by two hex digits: percent-encode '%' itself as %25: ${masked}`);
    }
  };
  const database = decode(parsed.pathname.replace(/^\//, ''));
  if (database.length > 64) throw new UsageError(`${name} names a database of ${database.length} characters; MySQL allows at most 64: ${masked}`);
  if (!/^[A-Za-z0-9_$-]{1,64}$/.test(database)) {
    throw new UsageError(`${name} must name a database (letters, digits, _ $ -): ${masked}`);
  }
  if (SERVER_DATABASES.has(database.toLowerCase())) {
    throw new UsageError(
      `${name} names '${database}', one of the server's own databases: cronq needs a database of its own, such as ${DEFAULT_DATABASE_URL} (created by 'cronq migrate'): ${masked}`,
    );
  }
  const password = decode(parsed.password);
  rememberPassword(password);
  rememberPassword(parsed.password);
  const host = parsed.hostname || '127.0.0.1';
  // The URL parser keeps ':0'; the driver would read port 0 as its default, 3306.
  if (parsed.port === '0') throw new UsageError(`${name} has port 0; give a port from 1 to 65535, or none for 3306: ${masked}`);
  const port = parsed.port ? Number(parsed.port) : 3306;
  return {
    host: host.replace(/^\[(.*)\]$/, '$1'), // the driver takes an IPv6 address bare
    port,
    address: `${host}:${port}`,
    user: decode(parsed.username || 'root'),
    password,
    database,
    masked,
  };
}

/**
 * `url`, a database setting's whole value, with its password masked even where it is no
 * well-formed URL for maskUrl to recognise (`mysql:/user:pw@host`, `mysql//user:pw@host`):
 * from the first ':' after `://` (or, without one, the first ':' of all, the scheme's,
 * so the user is masked too) to the last '@'. Masks too much sooner than too little.
 */
function maskedSetting(url: string): string {
  const at = url.lastIndexOf('@');
  const separator = url.indexOf('://');
  const colon = url.indexOf(':', separator < 0 ? 0 : separator + 3);
  if (at < 0 || colon < 0 || colon > at) return maskUrl(url);
  return maskUrl(`${url.slice(0, colon + 1)}***${url.slice(at)}`);
}

/** How far past `scheme://user:` the masker looks for the `@` that ends a password. */
export const MASK_WINDOW = 256;
/** Passwords of the database URLs parsed in this process, masked wherever they appear. */
const knownPasswords = new Set<string>();

function rememberPassword(password: string): void {
  // Shorter ones would mask ordinary words; their URL form is still masked by shape.
  if (password.length >= 3 && knownPasswords.size < 16) knownPasswords.add(password);
}

/**
 * Masks URL passwords in `text`: in every `scheme://user:pass@` the password becomes
 * `***`, whatever it holds (spaces, `@`, `/`, `:`, `#`: it runs to the last `@` on its
 * line within MASK_WINDOW characters, so a few characters too many may be masked, never
 * too few), and the password of any database URL parsed in this process (DATABASE_URL,
 * MIGRATION_DATABASE_URL), raw or percent-encoded, is masked wherever it appears.
 *
 * Linear in `text`'s length: each `://` is found by one forward search and looked past
 * by at most MASK_WINDOW characters. Callers holding text of unbounded length cut it
 * first (see boundedText).
 */
export function maskUrl(text: string): string {
  let out = '';
  let copied = 0;
  let searchFrom = 0;
  const at = new NextIndex(text, '@');
  const newline = new NextIndex(text, '\n');
  const carriageReturn = new NextIndex(text, '\r');
  for (;;) {
    const separator = text.indexOf('://', searchFrom);
    if (separator === -1) break;
    searchFrom = separator + 3;
    const colon = userEnd(text, searchFrom);
    if (colon === -1) continue;
    const passwordStart = colon + 1;
    const windowEnd = Math.min(passwordStart + MASK_WINDOW, newline.from(passwordStart), carriageReturn.from(passwordStart));
    if (at.from(passwordStart) >= windowEnd) continue;
    const end = text.lastIndexOf('@', windowEnd - 1);
    out += `${text.slice(copied, passwordStart)}***`;
    copied = end;
    searchFrom = end + 1;
  }
  out = copied === 0 ? text : out + text.slice(copied);
  for (const password of knownPasswords) {
    out = out.split(password).join('***');
    const encoded = encodeURIComponent(password);
    if (encoded !== password) out = out.split(encoded).join('***');
  }
  return out;
}

/** The next index of one character at or after a position that only moves forward: each search resumes where the last stopped. */
class NextIndex {
  private found = -1;

  constructor(
    private readonly text: string,
    private readonly char: string,
  ) {}

  /** The index of the next `char` at or after `position` (text.length when none). */
  from(position: number): number {
    if (this.found < position && this.found !== this.text.length) {
      const i = this.text.indexOf(this.char, position);
      this.found = i === -1 ? this.text.length : i;
    }
    return this.found;
  }
}

/** The index of the `:` ending a URL's user name that starts at `from`, or -1 when there is none. */
function userEnd(text: string, from: number): number {
  const end = Math.min(text.length, from + MASK_WINDOW);
  for (let i = from; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c === 58) return i; // ':'
    if (c === 47 || c === 64 || c <= 32) return -1; // '/', '@', space or control
  }
  return -1;
}
