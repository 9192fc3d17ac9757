import { readdir, readFile, stat } from 'node:fs/promises';
import { extname, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ScheduleFileError } from '../errors.ts';
import { isTask } from '../tasks/define.ts';
import type { TaskRegistry } from '../tasks/registry.ts';
import { thrownText } from '../thrown.ts';
import { BoundedImporter, DEFAULT_IMPORT_TIMEOUT_MS, ImportTimeoutError } from './importBound.ts';

const LOADABLE = /^(?![._]).*(?<!\.d)\.(ts|mts|js|mjs)$/;
const NOT_SCHEDULES = /\.(test|spec)\.(ts|mts|js|mjs)$/;

export interface LoadOptions {
  /** How long importing one file may take (default 10 s): past it the folder is refused. */
  importTimeoutMs?: number;
}

/**
 * Imports every `.ts`/`.js` file directly inside `dir` (not `_`- or `.`-prefixed, not
 * tests or `.d.ts`) and registers each task or schedule it exports. Refuses, with one
 * line naming the file and the problem, a file that does not parse (`file:line:col:
 * message`), throws on import (whatever it throws), has not finished importing within
 * `importTimeoutMs` (a top-level await that never settles, an endless loop), exports
 * nothing cronq can use, or reuses a name (both files named). A missing folder is an
 * error too, so a typo in --schedules does not start a daemon that schedules nothing.
 */
export async function loadSchedulesDir(dir: string, registry: TaskRegistry, options: LoadOptions = {}): Promise<void> {
  const absolute = resolve(dir);
  let names: string[];
  try {
    if (!(await stat(absolute)).isDirectory()) throw new Error('not a directory');
    names = (await readdir(absolute)).filter((n) => LOADABLE.test(n) && !NOT_SCHEDULES.test(n)).sort();
  } catch (error) {
    throw new ScheduleFileError(`schedules folder ${dir}: ${(error as NodeJS.ErrnoException).code === 'ENOENT' ? 'does not exist' : (error as Error).message}`);
  }
  const boundMs = options.importTimeoutMs ?? DEFAULT_IMPORT_TIMEOUT_MS;
  const importer = new BoundedImporter(boundMs);
  try {
    for (const name of names) {
      const file = join(absolute, name);
      const shown = shownPath(file);
      let module: Record<string, unknown>;
      try {
        module = await importer.import(
          pathToFileURL(file).href,
          `${shown}: not imported within ${boundMs % 1000 === 0 ? `${boundMs / 1000}s` : `${boundMs}ms`}: a top-level await that never settles, or an endless loop? (CRONQ_IMPORT_TIMEOUT sets the bound)`,
        );
      } catch (error) {
        if (error instanceof ImportTimeoutError) throw new ScheduleFileError(error.message);
        throw new ScheduleFileError(await importFailure(error, file, shown), { cause: error });
      }
      const found = Object.values(module).filter(isTask);
      if (found.length === 0) {
        throw new ScheduleFileError(`${shown}: exports no task or schedule (export default defineSchedule(...) or defineTask(...))`);
      }
      for (const task of new Set(found)) {
        try {
          registry.add(task, shown);
        } catch (error) {
          throw new ScheduleFileError((error as Error).message);
        }
      }
    }
  } finally {
    importer.close();
  }
}

function shownPath(file: string): string {
  return relative(process.cwd(), file) || file;
}

/** esbuild's `file:line:col: ERROR: text`, as tsx's TransformError carries it in its message. */
const ESBUILD_ERROR = /^(.+?):(\d+):(\d+): ERROR: (.*)$/;
const MAX_LINE = 2_000;

/**
 * One line for a file that failed to import: `file:line:col: message` for a syntax error
 * (column from 1), with ` (imported by FILE)` when the bad file is one the schedule file
 * imports; else `FILE: ` and what was thrown.
 */
async function importFailure(error: unknown, file: string, shown: string): Promise<string> {
  const at = syntaxLocation(error) ?? (error instanceof SyntaxError ? await locateWithEsbuild(file) : null);
  if (at) return `${shownPath(at.file)}:${at.line}:${at.column + 1}: ${at.text}${resolve(at.file) === file ? '' : ` (imported by ${shown})`}`;
  return `${shown}: ${thrownText(error)}`;
}

interface SyntaxLocation {
  file: string;
  line: number;
  /** From 0, as esbuild counts. */
  column: number;
  text: string;
}

/** Where esbuild (through tsx) says a file does not parse, or null when it is not such an error. */
function syntaxLocation(error: unknown): SyntaxLocation | null {
  try {
    const first = (error as { errors?: Array<{ text: string; location?: { file: string; line: number; column: number } }> }).errors?.[0];
    if (first?.location) return { ...first.location, text: first.text };
    // Across tsx's loader thread only the message survives: find esbuild's line in it.
    const message = (error as Error).message;
    if (typeof message !== 'string' || !message.startsWith('Transform failed')) return null;
    for (const line of message.slice(0, 10 * MAX_LINE).split('\n').slice(1, 4)) {
      const match = ESBUILD_ERROR.exec(line.slice(0, MAX_LINE));
      if (match) return { file: match[1], line: Number(match[2]), column: Number(match[3]), text: thrownText(new Error(match[4])) };
    }
  } catch {
    // A hostile error object: fall back to describing it.
  }
  return null;
}

/**
 * Node's own SyntaxError (a `.js` file, which tsx leaves to Node) names no line: ask
 * esbuild, which tsx brings along, to parse the file and say where. Null when esbuild
 * finds nothing wrong with that file (the error is in one it imports) or is missing.
 */
async function locateWithEsbuild(file: string): Promise<SyntaxLocation | null> {
  try {
    const { transform } = await import('esbuild');
    const source = await readFile(file, 'utf8');
    const ext = extname(file);
    await transform(source, { loader: ext === '.ts' || ext === '.mts' ? 'ts' : 'js', format: 'esm', sourcefile: file, logLevel: 'silent' });
  } catch (error) {
    const first = (error as { errors?: Array<{ text: string; location?: { file: string; line: number; column: number } | null }> }).errors?.[0];
    if (first?.location) return { file, line: first.location.line, column: first.location.column, text: thrownText(new Error(first.text)) };
  }
  return null;
}
