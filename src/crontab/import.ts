import { access, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { UsageError } from '../errors.ts';
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
  /** Zone for lines without CRON_TZ/TZ; defaults to this machine's (`hostTimezone()`). */
  defaultTimezone?: string;
}

/** This machine's IANA zone: what cron would have used here for a line without CRON_TZ/TZ. */
export function hostTimezone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
}

/**
 * Translates the crontab at `filePath` into one schedule file per line in `outDir`, all or
 * nothing: every check happens before the first write. Throws UsageError when the file
 * cannot be read; when a line cannot be translated and `skipInvalid` is off (the message has
 * one `FILE:LINE: reason` per bad line); or when a file to write exists and `force` is off.
 * Returns the paths written, in crontab order, and the lines skipped.
 */
export async function importCrontab(
  filePath: string,
  options: ImportCrontabOptions,
): Promise<{ written: string[]; errors: CrontabError[] }> {
  let text: string;
  try {
    text = await readFile(filePath, 'utf8');
  } catch (error) {
    throw new UsageError(`cannot read crontab ${filePath}: ${(error as Error).message}`);
  }

  const { entries, errors } = parseCrontab(text, {
    system: options.system,
    defaultTimezone: options.defaultTimezone ?? hostTimezone(),
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

  await mkdir(options.outDir, { recursive: true });
  const written: string[] = [];
  for (const file of files) {
    // 'wx' still refuses a file that appeared since the check above.
    await writeFile(file.path, file.source, { flag: options.force ? 'w' : 'wx' });
    written.push(file.path);
  }
  return { written, errors };
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}
