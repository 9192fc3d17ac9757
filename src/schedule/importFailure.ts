import { readFile } from 'node:fs/promises';
import { extname, relative, resolve } from 'node:path';
import { sliceChars, thrownText } from '../runtime/errorText.ts';

/** `file` relative to the working directory, as every message about schedule files shows it. */
export function shownPath(file: string): string {
  return relative(process.cwd(), file) || file;
}

/** esbuild's `file:line:col: ERROR: text`, as tsx's TransformError carries it in its message. */
const ESBUILD_ERROR = /^(.+?):(\d+):(\d+): ERROR: (.*)$/;
const MAX_LINE = 2_000;

/**
 * One bounded line for a schedule file (`file`, shown as `shown`) that failed to import:
 * `file:line:col: message` for a syntax error (column from 1), with ` (imported by FILE)`
 * when the bad file is one the schedule file imports; else `FILE: ` and what was thrown.
 */
export async function importFailure(error: unknown, file: string, shown: string): Promise<string> {
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
      const match = ESBUILD_ERROR.exec(sliceChars(line, MAX_LINE));
      if (match) return { file: match[1], line: Number(match[2]), column: Number(match[3]), text: thrownText(new Error(match[4])) };
    }
  } catch {
    // A hostile error object: fall back to describing it.
  }
  return null;
}

/**
 * Node's own SyntaxError (a `.js` file, which tsx leaves to Node) names no line: ask
 * esbuild (a dependency of ours, not only tsx's: an undeclared one is missing under pnpm)
 * to parse the file and say where. Null when esbuild finds nothing wrong with that file
 * (the error is in one it imports) or is missing.
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
