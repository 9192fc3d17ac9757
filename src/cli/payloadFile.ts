import { createReadStream } from 'node:fs';
import type { Readable } from 'node:stream';
import { UsageError } from '../errors.ts';

/** The most `--payload-file` reads: above any server's max_allowed_packet default (MySQL 8: 64 MiB). */
export const MAX_PAYLOAD_FILE_BYTES = 64 * 1024 * 1024;

/**
 * Reads the text of `--payload-file FILE` (`-`: standard input) as UTF-8. Stops reading,
 * and refuses, past `maxBytes`, so a wrong file (or `/dev/zero`) costs bounded memory;
 * refuses a file that is missing, unreadable or not UTF-8, naming `flag`.
 */
export async function readPayloadFile(file: string, flag: string, maxBytes = MAX_PAYLOAD_FILE_BYTES): Promise<string> {
  const shown = file === '-' ? 'standard input' : file;
  const source: Readable = file === '-' ? process.stdin : createReadStream(file);
  const chunks: Buffer[] = [];
  let bytes = 0;
  try {
    for await (const chunk of source) {
      bytes += (chunk as Buffer).length;
      if (bytes > maxBytes) throw new UsageError(`${flag}: ${shown} is larger than ${maxBytes / 1024 / 1024} MiB`);
      chunks.push(chunk as Buffer);
    }
  } catch (error) {
    if (error instanceof UsageError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    throw new UsageError(`${flag}: cannot read ${shown}: ${code === 'ENOENT' ? 'no such file' : (code ?? (error as Error).message)}`);
  } finally {
    if (file === '-') process.stdin.pause();
    else source.destroy();
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks));
  } catch {
    throw new UsageError(`${flag}: ${shown} is not UTF-8 text`);
  }
}
