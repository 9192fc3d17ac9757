import { access, mkdir, open, stat, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { UsageError } from '../errors.ts';
import { loadSchedulesDir } from '../schedule/loader.ts';
import { isValidTimeZone } from '../schedule/period.ts';
import { shownInLine } from '../shownText.ts';
import { shownPath } from '../schedule/importFailure.ts';
import { TaskRegistry } from '../tasks/registry.ts';
import { generateScheduleFile } from './generate.ts';
import { parseCrontab, type CrontabError } from './parse.ts';

/** What `importCrontab` is told. */
export interface ImportCrontabOptions {
  /** Directory for the schedule files; created when missing. */
  outDir: string;
  /** The file is `/etc/crontab` style, with a user column. */
  system?: boolean;
  /** Write the translatable lines and return the others as `errors`, instead of refusing. */
  skipInvalid?: boolean;
  /** Overwrite schedule files that already exist in `outDir`. */
  force?: boolean;
  /** Zone for lines without CRON_TZ; defaults to this machine's (`hostTimezone()`). */
  defaultTimezone?: string;
}

/**
 * This machine's IANA zone: what cron would have used here for a line without CRON_TZ; or,
 * when Node cannot name it, why. A TZ that is no IANA zone name (a POSIX rule, `JST-9` or
 * `EST5EDT,M3.2.0,M11.1.0`; a file path) is read by the C library, cron's clock, but Node's
 * Intl names no zone for it, or UTC: taking UTC then would run every line hours off.
 */
export function hostTimezone(env: NodeJS.ProcessEnv = process.env): string | { unknown: string } {
  const tz = env.TZ ?? '';
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  if ((tz !== '' && !isValidTimeZone(tz.replace(/^:/, ''))) || !zone || zone === 'Etc/Unknown') {
    return { unknown: `this host's time zone has no IANA name (TZ ${env.TZ === undefined ? 'unset' : `'${shownInLine(tz)}'`}): pass --timezone Area/City (the zone this crontab ran in), or set CRON_TZ` };
  }
  return zone;
}

/**
 * Translates the crontab at `filePath` into one schedule file per line in `outDir`, all or
 * nothing: every check happens before the first write. Names the folder's files define
 * already are avoided as names within the import are (`fan` becomes `fan-2`), so the folder
 * still loads; a folder that does not load is refused. Throws UsageError when the file
 * cannot be read; when a line cannot be translated and `skipInvalid` is off (the message has
 * one `FILE:LINE: reason` per bad line); when a file to write exists and `force` is off;
 * or, with one line naming it, when `outDir` is not a folder or cannot be written to.
 * Returns the paths written, in crontab order, and the lines skipped.
 */
export async function importCrontab(
  filePath: string,
  options: ImportCrontabOptions,
): Promise<{ written: string[]; errors: CrontabError[] }> {
  const text = await readCrontab(filePath);

  const { entries, errors } = parseCrontab(text, {
    system: options.system,
    defaultTimezone: options.defaultTimezone ?? hostTimezone(),
    taken: await namesInFolder(options.outDir, options.force === true),
  });
  if (errors.length > 0 && !options.skipInvalid) {
    throw new UsageError(
      [
        ...errors.map(({ line, reason }) => `${filePath}:${line}: ${reason}`),
        `nothing written: fix ${errors.length === 1 ? 'that line' : 'those lines'}, or pass --skip-invalid to import the others`,
      ].join('\n'),
    );
  }

  const files = entries.map((entry) => {
    const file = generateScheduleFile(entry);
    return { path: join(options.outDir, file.fileName), source: file.source };
  });
  if (!options.force) {
    for (const file of files) {
      if (await exists(file.path)) {
        throw new UsageError(`${file.path} already exists: nothing written (pass --force to overwrite)`);
      }
    }
  }

  const written: string[] = [];
  try {
    await makeFolders(options.outDir);
    for (const file of files) {
      // 'wx' still refuses a file that appeared since the check above.
      await writeFile(file.path, file.source, { flag: options.force ? 'w' : 'wx' });
      written.push(file.path);
    }
  } catch (error) {
    throw new UsageError(`${writeRefusal(options.outDir, error)}${written.length > 0 ? ` (${written.length} of ${files.length} files written)` : ''}`);
  }
  return { written, errors };
}

/**
 * The names `outDir`'s schedule and task files define, found as every command finds them:
 * by loading the folder (importing its files). Generated names avoid them, so the folder
 * still loads after the import ('duplicate name' otherwise). With `force`, a name defined
 * in its own `<name>.ts` is left free: an import that generates it overwrites that file,
 * replacing the definition. Nothing when `outDir` is no folder (yet); a folder that does
 * not load is refused (UsageError with the loader's reason): nothing is written into it.
 */
async function namesInFolder(outDir: string, force: boolean): Promise<string[]> {
  // Missing (made at the write) or not a folder (refused at the write, naming it): nothing defined there.
  if (!(await stat(outDir).then((s) => s.isDirectory(), () => false))) return [];
  const registry = new TaskRegistry();
  try {
    await loadSchedulesDir(outDir, registry);
  } catch (error) {
    throw new UsageError(`nothing written: schedules folder ${outDir} does not load, so its names cannot be avoided: ${(error as Error).message}`);
  }
  const ownFile = (name: string) => shownPath(resolve(outDir, `${name}.ts`));
  return registry
    .sources()
    .filter(({ name, source }) => !(force && source === ownFile(name)))
    .map(({ name }) => name);
}

/**
 * `mkdir -p`, a level at a time: Node 20's recursive mkdir never returns (at full CPU) for a
 * path under /proc, where each level it cannot create reads as missing again.
 */
async function makeFolders(dir: string): Promise<void> {
  const missing: string[] = [];
  for (let at = resolve(dir); !(await exists(at)); at = dirname(at)) {
    missing.push(at);
    if (dirname(at) === at) break;
  }
  for (const folder of missing.reverse()) {
    await mkdir(folder).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') throw error; // made meanwhile: fine
    });
  }
}

/** One line for a schedules folder that cannot be created or written to. */
function writeRefusal(outDir: string, error: unknown): string {
  const { code, path } = error as NodeJS.ErrnoException;
  if (code === 'EEXIST' && path === outDir) return `schedules folder ${outDir}: not a directory`;
  if (code === 'ENOTDIR') return `schedules folder ${outDir}: not a directory`;
  if (code === 'EEXIST') return `${path} already exists: pass --force to overwrite`;
  return `schedules folder ${outDir}: cannot write ${path ?? ''} (${code ?? (error as Error).message})`;
}

/** The most of a crontab file read: real ones are a few KiB. */
export const MAX_CRONTAB_BYTES = 1024 * 1024;

/** Reads a crontab as UTF-8, refusing (UsageError) one that cannot be read or is over MAX_CRONTAB_BYTES, without reading past that. */
async function readCrontab(filePath: string): Promise<string> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  const tooLarge = () => new UsageError(`cannot read crontab ${shownSource(filePath)}: larger than 1 MiB, not a crontab?`);
  try {
    if (filePath === '-') {
      if (process.stdin.isTTY) throw new UsageError("cannot read crontab from standard input: it is a terminal; pipe one in (crontab -l | cronq import-crontab -)");
      for await (const chunk of process.stdin as AsyncIterable<Buffer>) {
        bytes += chunk.length;
        if (bytes > MAX_CRONTAB_BYTES) throw tooLarge();
        chunks.push(chunk);
      }
    } else {
      const file = await open(filePath);
      try {
        for (;;) {
          const { bytesRead, buffer } = await file.read({ buffer: Buffer.alloc(64 * 1024) });
          if (bytesRead === 0) break;
          bytes += bytesRead;
          if (bytes > MAX_CRONTAB_BYTES) throw tooLarge();
          chunks.push(buffer.subarray(0, bytesRead));
        }
      } finally {
        await file.close();
      }
    }
  } catch (error) {
    if (error instanceof UsageError) throw error;
    throw new UsageError(`cannot read crontab ${shownSource(filePath)}: ${(error as Error).message}`);
  }
  return utf8Text(Buffer.concat(chunks), filePath);
}

/** How a crontab's source is named in messages: `-` is standard input. */
function shownSource(filePath: string): string {
  return filePath === '-' ? 'from standard input' : filePath;
}

/**
 * The crontab's text, or a UsageError naming the first line that is not UTF-8: decoded
 * leniently, its bytes would become U+FFFD and the command written would not be the
 * command cron ran. One pass over the bytes.
 */
function utf8Text(bytes: Buffer, filePath: string): string {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    const strict = new TextDecoder('utf-8', { fatal: true });
    let line = 1;
    for (let start = 0; start <= bytes.length; ) {
      const end = bytes.indexOf(0x0a, start);
      const stop = end === -1 ? bytes.length : end;
      try {
        strict.decode(bytes.subarray(start, stop));
      } catch {
        break;
      }
      line += 1;
      start = stop + 1;
    }
    throw new UsageError(
      `${filePath === '-' ? 'standard input' : filePath}:${line}: not UTF-8 text: what the line holds would be stored changed; convert the file first (iconv -f LATIN1 -t UTF-8, say)`,
    );
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}
