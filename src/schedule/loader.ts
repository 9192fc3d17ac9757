import { readdir, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ScheduleFileError } from '../errors.ts';
import { isTask } from '../tasks/define.ts';
import type { TaskRegistry } from '../tasks/registry.ts';
import { esmImporterFor } from './esmImport.ts';
import { BoundedImporter, DEFAULT_IMPORT_TIMEOUT_MS, ImportTimeoutError } from './importBound.ts';
import { importFailure, shownPath } from './importFailure.ts';

const LOADABLE = /^(?![._]).*(?<!\.d)\.(ts|mts|js|mjs)$/;
const NOT_SCHEDULES = /\.(test|spec)\.(ts|mts|js|mjs)$/;
/**
 * Names that look meant as schedule files but are not loaded: a loadable extension in
 * the wrong case (`report.TS`). CommonJS files (`.cjs`, `.cts`) are left alone: they are
 * helpers and configs the schedules import, never schedule files themselves.
 */
const LOOKS_LOADABLE = /^(?![._]).*\.(ts|mts|js|mjs)$/i;
const LOOKS_NOT_SCHEDULES = /\.(test|spec|d)\.(ts|mts|js|mjs)$/i;

/** The schedule file being imported now, as messages show it; null between imports. */
let importing: string | null = null;

/**
 * The schedule file whose import is in progress in this process (as messages show its
 * path), or null. For an `exit` listener: code that ends the process while a file
 * imports (`process.exit()` at its top level) can then be blamed on that file. With
 * several folders loading at once, the one whose import began last.
 */
export function scheduleFileImporting(): string | null {
  return importing;
}

export interface LoadOptions {
  /** How long importing one file may take (default 10 s): past it the folder is refused. */
  importTimeoutMs?: number;
}

/**
 * Imports every `.ts`/`.js` file directly inside `dir` (not `_`- or `.`-prefixed, not
 * tests or `.d.ts`), as an ES module whatever the app's package type (see esmImporterFor),
 * and registers each task or schedule it exports. Refuses, with one
 * line naming the file and the problem, a file that does not parse (`file:line:col:
 * message`), throws on import (whatever it throws), has not finished importing within
 * `importTimeoutMs` (a top-level await that never settles, an endless loop), exports
 * nothing cronq can use, or reuses a name (both files named); and a file that looks
 * meant to load but would not, its extension in the wrong case (`report.TS`): skipped,
 * its schedules would never run; and one named like a schedule file that is no regular file
 * (a FIFO, whose read would block for good). A missing folder is an error too, so a typo in --schedules does not start a daemon that schedules nothing.
 */
export async function loadSchedulesDir(dir: string, registry: TaskRegistry, options: LoadOptions = {}): Promise<void> {
  const absolute = resolve(dir);
  let names: string[];
  let unloadable: string[];
  try {
    if (!(await stat(absolute)).isDirectory()) throw new Error('not a directory');
    const listed = await readdir(absolute, { withFileTypes: true });
    // A folder is never a schedule file, whatever its name (`lib.ts/`), nor a link to one; its
    // files load when a schedule imports them. A link to a file loads as the file.
    const folders = new Set<string>();
    for (const entry of listed) {
      if (entry.isDirectory()) folders.add(entry.name);
      else if (entry.isSymbolicLink() && (await stat(join(absolute, entry.name)).catch(() => null))?.isDirectory()) folders.add(entry.name);
    }
    names = listed
      .filter((entry) => !folders.has(entry.name))
      .map((entry) => entry.name)
      .filter((n) => LOADABLE.test(n) && !NOT_SCHEDULES.test(n))
      .sort();
    unloadable = listed
      .filter((entry) => !folders.has(entry.name) && LOOKS_LOADABLE.test(entry.name) && !LOOKS_NOT_SCHEDULES.test(entry.name) && !LOADABLE.test(entry.name))
      .map((entry) => entry.name)
      .sort();
  } catch (error) {
    throw new ScheduleFileError(`schedules folder ${dir}: ${(error as NodeJS.ErrnoException).code === 'ENOENT' ? 'does not exist' : (error as Error).message}`);
  }
  if (unloadable.length > 0) {
    // Skipped silently, its schedules would simply never run.
    throw new ScheduleFileError(
      `${shownPath(join(absolute, unloadable[0]))}: not loaded: schedule files end in .ts, .mts, .js or .mjs in lower case; rename it, or start its name with _ to keep it in the folder unloaded`,
    );
  }
  for (const name of names) {
    // A FIFO (or socket, or device) named x.ts: its read blocks the import's thread in a
    // system call that no timeout ends, and the process could never exit.
    const file = join(absolute, name);
    const found = await stat(file).catch(() => null);
    if (found && !found.isFile()) {
      throw new ScheduleFileError(`${shownPath(file)}: not a regular file (a FIFO, socket or device), which no import reads at once: remove it, or start its name with _ to keep it in the folder unloaded`);
    }
  }
  const boundMs = options.importTimeoutMs ?? DEFAULT_IMPORT_TIMEOUT_MS;
  const importer = new BoundedImporter(boundMs, await esmImporterFor(absolute));
  try {
    for (const name of names) {
      const file = join(absolute, name);
      const shown = shownPath(file);
      let module: Record<string, unknown>;
      importing = shown;
      try {
        module = await importer.import(
          pathToFileURL(file).href,
          `${shown}: not imported within ${boundMs % 1000 === 0 ? `${boundMs / 1000}s` : `${boundMs}ms`}: a top-level await that never settles, or an endless loop? (CRONQ_IMPORT_TIMEOUT sets the bound)`,
        );
      } catch (error) {
        if (error instanceof ImportTimeoutError) throw new ScheduleFileError(error.message);
        throw new ScheduleFileError(await importFailure(error, file, shown), { cause: error });
      } finally {
        if (importing === shown) importing = null;
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
