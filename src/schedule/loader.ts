import { readdir, stat } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ScheduleFileError } from '../errors.ts';
import { isTask } from '../tasks/define.ts';
import type { TaskRegistry } from '../tasks/registry.ts';

const LOADABLE = /^(?![._]).*(?<!\.d)\.(ts|mts|js|mjs)$/;
const NOT_SCHEDULES = /\.(test|spec)\.(ts|mts|js|mjs)$/;

/**
 * Imports every `.ts`/`.js` file directly inside `dir` (not `_`- or `.`-prefixed, not
 * tests or `.d.ts`) and registers each task or schedule it exports. Refuses, with one
 * line naming the file and the problem, a file that throws on import, exports nothing
 * cronq can use, or reuses a name (both files named). A missing folder is an error too,
 * so a typo in --schedules does not start a daemon that schedules nothing.
 */
export async function loadSchedulesDir(dir: string, registry: TaskRegistry): Promise<void> {
  const absolute = resolve(dir);
  let names: string[];
  try {
    if (!(await stat(absolute)).isDirectory()) throw new Error('not a directory');
    names = (await readdir(absolute)).filter((n) => LOADABLE.test(n) && !NOT_SCHEDULES.test(n)).sort();
  } catch (error) {
    throw new ScheduleFileError(`schedules folder ${dir}: ${(error as NodeJS.ErrnoException).code === 'ENOENT' ? 'does not exist' : (error as Error).message}`);
  }
  for (const name of names) {
    const file = join(absolute, name);
    const shown = relative(process.cwd(), file) || file;
    let module: Record<string, unknown>;
    try {
      module = await import(pathToFileURL(file).href);
    } catch (error) {
      throw new ScheduleFileError(`${shown}: ${firstLine(error)}`, { cause: error });
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
}

function firstLine(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.split('\n')[0];
}
