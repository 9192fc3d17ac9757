import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { compileProblems } from './support/typecheck.ts';

/**
 * The type-level tests (define-types, library-api's `@ts-expect-error` lines) are checked by
 * the compiler, not at run time: this runs it as `npm run typecheck` does (tsconfig.json,
 * every file it includes), so `npm test` fails when one of them no longer holds.
 */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

describe('the type-level tests', () => {
  it('hold: the project compiles as npm run typecheck compiles it, each @ts-expect-error meeting its error and no other line one', () => {
    const config = ts.readConfigFile(resolve(ROOT, 'tsconfig.json'), ts.sys.readFile);
    const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, ROOT);
    expect(parsed.fileNames.some((file) => file.endsWith('test/define-types.test.ts'))).toBe(true);
    expect(compileProblems(resolve(ROOT, 'tsconfig.json'))).toEqual([]);
  }, 180_000);

  it('fail as tsc fails: on an unused @ts-expect-error, and on an error of the tsconfig itself (an unknown option)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cronq-typecheck-'));
    try {
      writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { strict: true, noEmit: true, types: [], strictNullCheks: true }, include: ['*.ts'] }));
      writeFileSync(join(dir, 'a.ts'), '// @ts-expect-error nothing wrong below\nexport const fine: number = 1;\n');
      expect(compileProblems(join(dir, 'tsconfig.json'))).toEqual([
        "(no file): Unknown compiler option 'strictNullCheks'. Did you mean 'strictNullChecks'?",
        "a.ts:1: Unused '@ts-expect-error' directive.",
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
