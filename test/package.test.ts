import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { REPO_ROOT, runProcess, type CliResult } from './support/cli.ts';

/**
 * cronq as a user meets it: `npm pack` of this repository installed into a fresh app
 * outside it (`npm install TARBALL`, a default npm project: no "type"), then used from
 * plain Node ESM, CommonJS, TypeScript compiled by tsc with an app's strict settings, and
 * the installed CLI. Each case runs against a database of its own, dropped afterwards.
 */
const run = promisify(execFile);
const serverUrl = inject('serverUrl');
const FIXTURE = join(REPO_ROOT, 'test', 'fixtures', 'package-app');
let root: string;
let app: string;
let admin: mysql.Connection;
const databases: string[] = [];

/** A database URL whose database does not exist yet (cronq migrate creates it); dropped after the file. */
function freshDatabase(): string {
  const name = `cronq_test_pkg_${randomBytes(4).toString('hex')}`;
  databases.push(name);
  return `${serverUrl}/${name}`;
}

/** Runs `command args` in the app with `env` added; resolves with its output whatever its exit code. */
function inApp(command: string, args: string[], env: Record<string, string> = {}, timeoutMs = 60_000): Promise<CliResult> {
  return runProcess(command, args, { cwd: app, env: { LOG_LEVEL: 'info', ...env }, timeoutMs });
}

const resultOf = (stdout: string) => JSON.parse(stdout.split('\n').find((l) => l.startsWith('RESULT '))!.slice('RESULT '.length));
const cronqBin = () => join(app, 'node_modules', '.bin', 'cronq');

beforeAll(async () => {
  admin = await mysql.createConnection({ uri: serverUrl });
  root = mkdtempSync(join(tmpdir(), 'cronq-package-'));
  app = join(root, 'app');
  // A module an earlier build left in dist/ (its source renamed or deleted since) must not ship.
  mkdirSync(join(REPO_ROOT, 'dist'), { recursive: true });
  writeFileSync(join(REPO_ROOT, 'dist', 'left-by-an-earlier-build.js'), 'export {};\n');
  // `npm pack` runs prepack, which builds dist/.
  const packed = await run('npm', ['pack', '--json', '--pack-destination', root], { cwd: REPO_ROOT, maxBuffer: 16 * 1024 * 1024 });
  const [{ filename, files }] = JSON.parse(packed.stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
  const paths = files.map((f) => f.path);
  expect(paths).toEqual(expect.arrayContaining(['LICENSE', 'README.md', 'bin/cronq.js', 'dist/index.js', 'dist/index.d.ts', 'dist/schema.js', 'drizzle/meta/_journal.json', 'docs/deploy.md', 'deploy/cronq.service']));
  expect(paths.filter((p) => /^(src|test|bench|schedules)\//.test(p))).toEqual([]);
  expect(paths).not.toContain('dist/left-by-an-earlier-build.js');
  cpSync(FIXTURE, app, { recursive: true });
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true }, null, 2));
  await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error', join(root, filename), '@types/node@^20.19'], {
    cwd: app,
    maxBuffer: 16 * 1024 * 1024,
  });
}, 240_000);

afterAll(async () => {
  for (const name of databases) await admin?.query(`DROP DATABASE IF EXISTS \`${name}\``);
  await admin?.end();
  if (root) rmSync(root, { recursive: true, force: true });
});

// Child processes (Node, tsc, the CLI) on a shared machine: generous bounds, not timing assertions.
describe('the packed cronq, installed into a fresh app', { timeout: 60_000 }, () => {
  it('runs a plain Node ESM app that migrates, enqueues and runs a job, and logs a failing job as JSON without being given a logger', async () => {
    const r = await inApp(process.execPath, ['app.mjs'], { DATABASE_URL: freshDatabase() });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(resultOf(r.stdout)).toEqual({ name: 'Ada' });
    const lines = r.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
    expect(lines.find((l) => l.event === 'job_dead')).toMatchObject({ level: 'error', kind: 'broken', error: 'Error: broken on purpose' });
  });

  it('publishes no test hook in its declarations', async () => {
    const dist = join(app, 'node_modules', 'cronq', 'dist');
    const declarations = readdirSync(dist).filter((name) => name.endsWith('.d.ts'));
    expect(declarations).toEqual(expect.arrayContaining(['index.d.ts', 'cronq.d.ts', 'admin.d.ts']));
    expect(declarations.filter((name) => /postClaimPause/i.test(readFileSync(join(dist, name), 'utf8')))).toEqual([]);
    expect(readFileSync(join(app, 'node_modules', 'cronq', 'README.md'), 'utf8')).not.toMatch(/postClaimPause/i);
  });

  it("takes drizzle-orm as a peer: cronq/schema's tables and ctx.effect's tx are typed by the app's own drizzle-orm, one copy", () => {
    // As a dependency, an app on another drizzle-orm got a second copy nested under cronq,
    // and tsc refused the app's tables in ctx.effect, its tx in enqueue and cronq/schema in its queries.
    const manifest = JSON.parse(readFileSync(join(app, 'node_modules', 'cronq', 'package.json'), 'utf8'));
    expect(manifest.dependencies).not.toHaveProperty('drizzle-orm');
    expect(manifest.peerDependencies).toEqual({ 'drizzle-orm': expect.stringMatching(/^\^0\.45\./) });
    expect(existsSync(join(app, 'node_modules', 'drizzle-orm', 'package.json'))).toBe(true); // npm installs a peer
    expect(existsSync(join(app, 'node_modules', 'cronq', 'node_modules', 'drizzle-orm'))).toBe(false);
  });

  it('imports at run time only packages its package.json declares (dependencies and peers), none it has only for development', () => {
    // An undeclared package resolves only while npm happens to hoist another package's copy
    // of it: under pnpm, or beside an app's own other version, it is missing or another one.
    const root = join(app, 'node_modules', 'cronq');
    const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
    const declared = Object.keys({ ...manifest.dependencies, ...manifest.peerDependencies });
    const imported = new Set<string>();
    for (const file of readdirSync(join(root, 'dist'), { recursive: true, encoding: 'utf8' }).filter((name) => name.endsWith('.js'))) {
      const code = readFileSync(join(root, 'dist', file), 'utf8');
      // tsc writes each static import and re-export from the start of a line.
      for (const [, from, bare, dynamic] of code.matchAll(/^(?:import|export)\b[^;'"]*?\bfrom\s*'([^'.][^']*)'|^import\s*'([^'.][^']*)'|\bimport\('([^'.][^']*)'\)/gm)) {
        const specifier = from ?? bare ?? dynamic!;
        if (specifier.startsWith('node:') || specifier === manifest.name || specifier.startsWith(`${manifest.name}/`)) continue;
        imported.add(specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0]);
      }
    }
    expect(imported.size).toBeGreaterThan(4);
    expect([...imported].filter((name) => !declared.includes(name))).toEqual([]);
  });

  it('can be required from CommonJS', async () => {
    const r = await inApp(process.execPath, ['app.cjs']);
    expect(r.code).toBe(0);
    expect(resultOf(r.stdout)).toEqual({ createCronq: 'function', task: 'from-cjs', deadLetters: 'object', PermanentError: 'function' });
  });

  it('type-checks in a CommonJS TypeScript app on moduleResolution node10 ("node"), and under bundler, cronq/schema included', async () => {
    // node10 reads no "exports": it needs package.json's main/types and typesVersions.
    for (const config of ['tsconfig.node10.json', 'tsconfig.bundler.json']) {
      const tsc = await inApp(process.execPath, [join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', config], {}, 150_000);
      expect({ config, out: tsc.stdout + tsc.stderr, code: tsc.code }).toEqual({ config, out: '', code: 0 });
    }
  }, 180_000);

  it('compiles under tsc NodeNext strict (noUncheckedIndexedAccess, exactOptionalPropertyTypes), its .d.ts clean even without skipLibCheck, and the compiled app queries cronq/schema', async () => {
    // One pass without skipLibCheck (tsc still emits): drizzle-orm's own declarations fail
    // it, so only their errors are tolerated; cronq's declarations and the app must be clean.
    const tsc = await inApp(process.execPath, [join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json', '--skipLibCheck', 'false'], {}, 150_000);
    const errors = tsc.stdout.split('\n').filter((line) => /error TS/.test(line));
    expect(errors.filter((line) => !line.startsWith('node_modules/drizzle-orm/'))).toEqual([]);
    expect(tsc.stderr).toBe('');
    const r = await inApp(process.execPath, ['out/main.mjs'], { DATABASE_URL: freshDatabase() });
    expect(r.stderr).toBe('');
    expect(resultOf(r.stdout)).toEqual({
      done: 2,
      dead: { key: 'invoice:-1', reason: 'PermanentError: no such invoice', deadAt: true },
      effects: [
        { invoiceId: 7, jobKey: 'invoice:7' },
        { invoiceId: 8, jobKey: 'invoice:8' },
      ],
    });
  }, 180_000); // tsc over drizzle-orm's declarations: 15-30 s on a quiet 2-core machine, over 60 s at load 9

  it('runs its CLI in a default npm project, loading a .ts schedule file (top-level await, import from cronq) as an ES module', async () => {
    const env = { DATABASE_URL: freshDatabase(), CRONQ_SCHEDULES: 'schedules' };
    expect(await inApp(cronqBin(), ['migrate'], env)).toMatchObject({ code: 0, stderr: '' });
    const r = await inApp(cronqBin(), ['schedules', '--json', '--count', '1'], env);
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toEqual([expect.objectContaining({ name: 'heartbeat', cron: '*/5 * * * *' })]);
    const enqueued = await inApp(cronqBin(), ['enqueue', 'hello', '--key', 'hello:ada', '--payload', '{"name":"Ada"}'], env);
    expect(enqueued).toMatchObject({ code: 0, stderr: '' });
  });

  it('cronq migrate creates its tables after the app’s own drizzle-kit migration, leaving the app’s ledger alone', async () => {
    const url = freshDatabase();
    const name = new URL(url).pathname.slice(1);
    await admin.query(`CREATE DATABASE \`${name}\``);
    await admin.query(`CREATE TABLE \`${name}\`.__drizzle_migrations (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at bigint)`);
    await admin.query(`INSERT INTO \`${name}\`.__drizzle_migrations (hash, created_at) VALUES ('app', ?)`, [Date.now()]);
    expect(await inApp(cronqBin(), ['migrate'], { DATABASE_URL: url })).toMatchObject({ code: 0, stderr: '' });
    const stats = await inApp(cronqBin(), ['stats', '--json'], { DATABASE_URL: url, CRONQ_SCHEDULES: 'schedules' });
    expect(stats).toMatchObject({ code: 0, stderr: '' });
    const [ledger] = await admin.query(`SELECT hash FROM \`${name}\`.__drizzle_migrations`);
    expect(ledger).toEqual([{ hash: 'app' }]);
  });
});
