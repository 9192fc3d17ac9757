import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import mysql from 'mysql2/promise';
import { answers } from './answers.ts';

/**
 * A throwaway MariaDB (or MySQL) server owned by one test file, which it may stop,
 * crash and start again: the shared server on 3306 must never be stopped, so tests of
 * database outages run against one of these instead.
 *
 * The binary is `CRONQ_TEST_MYSQLD` when set, else `mariadbd` or `mysqld` from PATH,
 * /usr/sbin or /usr/local/mysql/bin. The datadir is initialised once per instance in a
 * temporary folder (`mariadb-install-db`, or `mysqld --initialize-insecure` for MySQL)
 * with a root account that has an empty password; the server listens on 127.0.0.1 on a
 * free port, and every restart reuses the same port and datadir.
 */
export class PrivateServer {
  private child: ChildProcess | null = null;
  private exited: Promise<void> = Promise.resolve();
  private stderr = '';
  private readonly onExit = () => this.child?.kill('SIGKILL');

  private constructor(
    private readonly binary: Binary,
    readonly dir: string,
    readonly port: number,
    private readonly serverArgs: string[],
  ) {}

  /** Server URL without a database: `mysql://root@127.0.0.1:PORT`. */
  get url(): string {
    return `mysql://root@127.0.0.1:${this.port}`;
  }

  /** The running server's process id, or null while it is stopped. */
  get pid(): number | null {
    return this.child?.exitCode === null ? (this.child.pid ?? null) : null;
  }

  /**
   * Finds a server binary (see `findServerBinary`), initialises a datadir and starts the
   * server, with `serverArgs` (e.g. `--sql-mode=...`) added on every start.
   */
  static async create({ serverArgs = [] }: { serverArgs?: string[] } = {}): Promise<PrivateServer> {
    const binary = findServerBinary();
    if (!binary) throw new Error(NO_BINARY);
    const dir = mkdtempSync(join(tmpdir(), 'cronq-private-db-'));
    const server = new PrivateServer(binary, dir, await freePort(), serverArgs);
    try {
      server.initialise();
      await server.start();
    } catch (error) {
      await server.destroy();
      throw error;
    }
    return server;
  }

  private initialise(): void {
    const datadir = join(this.dir, 'data');
    const result = this.binary.flavour === 'mariadb'
      ? spawnSync(this.binary.installDb!, [
          '--no-defaults', `--datadir=${datadir}`, '--user=root', '--auth-root-authentication-method=normal',
          '--skip-test-db', '--skip-name-resolve',
        ], { encoding: 'utf8', timeout: 60_000 })
      : spawnSync(this.binary.server, ['--no-defaults', '--initialize-insecure', `--datadir=${datadir}`, '--user=root'], {
          encoding: 'utf8',
          timeout: 60_000,
        });
    if (result.status !== 0) {
      throw new Error(`could not initialise a private datadir with ${this.binary.installDb ?? this.binary.server}: ${result.error?.message ?? ''}\n${result.stdout}\n${result.stderr}`);
    }
  }

  /** Starts the server on its port and datadir; resolves once it accepts a login (at most `timeoutMs`). */
  async start(timeoutMs = 30_000): Promise<void> {
    if (this.pid !== null) throw new Error('private server is already running');
    this.stderr = '';
    const child = spawn(this.binary.server, [
      '--no-defaults',
      '--user=root', // the tests run as root in containers; mariadbd refuses root without it
      `--datadir=${join(this.dir, 'data')}`,
      `--port=${this.port}`,
      '--bind-address=127.0.0.1',
      `--socket=${join(this.dir, 'sock')}`,
      `--pid-file=${join(this.dir, 'pid')}`,
      '--skip-name-resolve',
      '--innodb-buffer-pool-size=64M',
      '--max-connections=200',
      ...(this.binary.flavour === 'mysql' ? ['--mysqlx=OFF'] : []),
      ...this.serverArgs,
    ], { stdio: ['ignore', 'ignore', 'pipe'] });
    child.stderr!.on('data', (d) => (this.stderr = (this.stderr + d).slice(-20_000)));
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    process.once('exit', this.onExit);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`private server exited during start (code ${child.exitCode}):\n${this.stderr}`);
      if (await answers(this.url, 1_000)) return;
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`private server did not accept a login within ${timeoutMs} ms:\n${this.stderr}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** A clean shutdown (SIGTERM), as `systemctl stop mariadb` does; resolves once the process is gone. */
  async stop(timeoutMs = 30_000): Promise<void> {
    await this.halt('SIGTERM', timeoutMs);
  }

  /** A crash (SIGKILL): no shutdown, InnoDB recovers from its redo log on the next start. */
  async crash(): Promise<void> {
    await this.halt('SIGKILL', 10_000);
  }

  private async halt(signal: NodeJS.Signals, timeoutMs: number): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    child.kill(signal);
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    await this.exited;
    clearTimeout(timer);
    process.off('exit', this.onExit);
    this.child = null;
  }

  /** Stops the server (crash: it is thrown away anyway) and deletes its datadir. */
  async destroy(): Promise<void> {
    await this.crash();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

interface Binary {
  server: string;
  flavour: 'mariadb' | 'mysql';
  /** mariadb-install-db (MariaDB only; MySQL initialises with the server binary). */
  installDb?: string;
}

const NO_BINARY =
  'this test starts, stops and restarts a private database server, and found no mariadbd or mysqld binary ' +
  '(looked at CRONQ_TEST_MYSQLD, PATH, /usr/sbin, /usr/local/mysql/bin). Install the MariaDB or MySQL server ' +
  'package (e.g. apt-get install mariadb-server) or set CRONQ_TEST_MYSQLD=/path/to/mariadbd. ' +
  'It never stops the shared server that DATABASE_URL or 127.0.0.1:3306 points at.';

/** Where a server binary is, and which flavour; null when there is none on this machine. */
export function findServerBinary(): Binary | null {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/sbin', '/usr/local/sbin', '/usr/local/mysql/bin'].filter(Boolean);
  const find = (name: string) => dirs.map((d) => join(d, name)).find((p) => existsSync(p));
  const server = process.env.CRONQ_TEST_MYSQLD || find('mariadbd') || find('mysqld');
  if (!server || !existsSync(server)) return null;
  const version = spawnSync(server, ['--version'], { encoding: 'utf8' }).stdout ?? '';
  if (/mariadb/i.test(version)) {
    const installDb = find('mariadb-install-db') ?? find('mysql_install_db');
    return installDb ? { server, flavour: 'mariadb', installDb } : null;
  }
  return { server, flavour: 'mysql' };
}


function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * Runs one statement on a connection of its own to `url`, closed after: it sees the
 * server's settings as they are now (a global changed since applies), and no pool
 * outlives a server the test stops.
 */
export async function queryOnce<T = any>(url: string, statement: string, values: unknown[] = []): Promise<T[]> {
  const conn = await mysql.createConnection({ uri: url, connectTimeout: 2_000 });
  try {
    const [rows] = await conn.query(statement, values);
    return rows as T[];
  } finally {
    await conn.end();
  }
}
