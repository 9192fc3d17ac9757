/**
 * The layering of src/, read from its import statements (no module is loaded): which
 * folder may import which, and that the folders form no cycle. README, "How the code is
 * laid out", says the same in prose; this test is what keeps it true.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../src');

interface Import {
  /** The importing file, relative to src/ ("worker/pool.ts"). */
  from: string;
  /** The imported file relative to src/ ("store/index.ts"), or the package name ("mysql2"). */
  to: string;
  typeOnly: boolean;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? sourceFiles(path) : path.endsWith('.ts') ? [path] : [];
  });
}

/** Every static `import … from` / `export … from` / `import('…')` of every file under src/. */
function readImports(): Import[] {
  const found: Import[] = [];
  const statement = /(?:^|\n)\s*(?:import|export)\s+(type\s+)?(?:[^'";]*?\sfrom\s+)?'([^']+)'|import\(\s*'([^']+)'\s*\)/g;
  for (const file of sourceFiles(SRC)) {
    const from = relative(SRC, file);
    for (const m of readFileSync(file, 'utf8').matchAll(statement)) {
      const spec = m[2] ?? m[3];
      const to = spec.startsWith('.') ? relative(SRC, resolve(dirname(file), spec)) : spec.startsWith('node:') ? 'node:' : spec.split('/')[0];
      found.push({ from, to, typeOnly: m[1] !== undefined });
    }
  }
  return found;
}

/** The folder a file belongs to ("worker"), or the file itself for top-level modules ("cronq.ts"). */
const part = (path: string) => (path.includes('/') ? path.split('/')[0] : path);
const isPackage = (to: string) => !to.includes('/') && !to.endsWith('.ts');

const imports = readImports();
const crossing = imports.filter((i) => !isPackage(i.to) && part(i.from) !== part(i.to));

/** The imports out of `from` (a folder or top-level file) that `allowed` does not accept. */
function breaking(from: string, allowed: (i: Import) => boolean): string[] {
  return imports.filter((i) => part(i.from) === from && part(i.to) !== from && !allowed(i)).map((i) => `${i.from} -> ${i.to}`);
}

const DRIVERS = ['mysql2', 'drizzle-orm'];

describe('the layering of src/', () => {
  it('reads the imports it checks (a guard against a parser that finds nothing)', () => {
    expect(imports.length).toBeGreaterThan(300);
    expect(imports).toContainEqual({ from: 'worker/pool.ts', to: 'store/index.ts', typeOnly: false });
  });

  it('db/ is the driver layer: it imports nothing of cronq but errors.ts', () => {
    expect(breaking('db', (i) => isPackage(i.to) || i.to === 'errors.ts')).toEqual([]);
  });

  it('shownText.ts is a leaf: it imports nothing, so logger.ts and duration.ts (which runtime/ imports) may use it', () => {
    expect(imports.filter((i) => i.from === 'shownText.ts').map((i) => i.to)).toEqual([]);
  });

  it('runtime/ (health, wake-ups, backoff, error text) knows the driver and nothing above it', () => {
    expect(breaking('runtime', (i) => isPackage(i.to) || ['db', 'errors.ts', 'duration.ts', 'logger.ts'].includes(part(i.to)))).toEqual([]);
  });

  it('store/ holds the SQL and knows none of its callers', () => {
    expect(breaking('store', (i) => isPackage(i.to) || ['db', 'runtime', 'errors.ts', 'defaults.ts'].includes(part(i.to)))).toEqual([]);
  });

  it('only db/ and store/ use the driver packages', () => {
    const users = imports.filter((i) => DRIVERS.includes(i.to) && !['db', 'store'].includes(part(i.from)) && i.from !== 'schema.ts');
    expect(users.map((i) => `${i.from} -> ${i.to}`)).toEqual([]);
  });

  it('the worker talks to one store object: store/index.ts, never db/', () => {
    expect(breaking('worker', (i) => part(i.to) !== 'db' && (part(i.to) !== 'store' || i.to === 'store/index.ts'))).toEqual([]);
  });

  it('the scheduler talks to the store object: schedule/ imports from store/ only store/index.ts types, never db/', () => {
    expect(breaking('schedule', (i) => part(i.to) !== 'db' && (part(i.to) !== 'store' || (i.to === 'store/index.ts' && i.typeOnly)))).toEqual([]);
  });

  it('enqueue/ writes through a JobWriter: it never imports db/', () => {
    expect(breaking('enqueue', (i) => part(i.to) !== 'db')).toEqual([]);
  });

  it('the CLI and the HTTP server use the public API, never the store, the driver or the engine parts', () => {
    const engine = ['db', 'store', 'worker', 'maintenance', 'enqueue'];
    expect(breaking('cli', (i) => !engine.includes(part(i.to)))).toEqual([]);
    expect(breaking('cli.ts', (i) => !engine.includes(part(i.to)))).toEqual([]);
    expect(breaking('http', (i) => ![...engine, 'schedule'].includes(part(i.to)))).toEqual([]);
  });

  it('schedules, tasks and shell commands know nothing of the worker, the CLI, HTTP or the wiring', () => {
    const above = ['worker', 'cli', 'cli.ts', 'http', 'cronq.ts', 'admin.ts', 'daemon.ts', 'index.ts'];
    for (const from of ['schedule', 'tasks', 'shell', 'enqueue', 'maintenance']) {
      expect(breaking(from, (i) => !above.includes(part(i.to))), from).toEqual([]);
    }
  });

  it('nothing imports the entry points (the CLI, its config, the daemon, the HTTP server) but the entry points', () => {
    const entries = ['cli', 'cli.ts', 'config.ts', 'daemon.ts', 'http'];
    const into = crossing.filter((i) => entries.includes(part(i.to)) && !entries.includes(part(i.from)));
    expect(into.map((i) => `${i.from} -> ${i.to}`)).toEqual([]);
  });

  it('the folders and top-level modules form no import cycle', () => {
    const edges = new Map<string, Set<string>>();
    for (const i of crossing) {
      if (!edges.has(part(i.from))) edges.set(part(i.from), new Set());
      edges.get(part(i.from))!.add(part(i.to));
    }
    // Depth-first search; a node met again while on the stack closes a cycle.
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const visit = (node: string, path: string[]) => {
      if (state.get(node) === 'done') return;
      if (state.get(node) === 'open') {
        cycles.push([...path.slice(path.indexOf(node)), node].join(' -> '));
        return;
      }
      state.set(node, 'open');
      for (const next of edges.get(node) ?? []) visit(next, [...path, node]);
      state.set(node, 'done');
    };
    for (const node of edges.keys()) visit(node, []);
    expect(cycles).toEqual([]);
  });
});
