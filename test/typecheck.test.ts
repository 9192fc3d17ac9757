import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * The type-level tests (define-types, library-api's `@ts-expect-error` lines) are checked by
 * the compiler, not at run time: this runs it as `npm run typecheck` does (tsconfig.json,
 * every file it includes), so `npm test` fails when one of them no longer holds.
 */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

describe('the type-level tests', () => {
  it('hold: the project compiles as npm run typecheck compiles it, each @ts-expect-error meeting its error and no other line one', () => {
    const config = ts.readConfigFile(resolve(ROOT, 'tsconfig.json'), ts.sys.readFile);
    expect(config.error).toBeUndefined();
    const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, ROOT);
    expect(parsed.fileNames.some((file) => file.endsWith('test/define-types.test.ts'))).toBe(true);
    const program = ts.createProgram(parsed.fileNames, parsed.options);
    const problems = ts.getPreEmitDiagnostics(program).map((diagnostic) => {
      const at = diagnostic.file && diagnostic.start !== undefined ? diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start) : null;
      const where = diagnostic.file ? `${relative(ROOT, diagnostic.file.fileName)}${at ? `:${at.line + 1}` : ''}` : '(no file)';
      return `${where}: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, ' ')}`;
    });
    expect(problems).toEqual([]);
  }, 180_000);
});
