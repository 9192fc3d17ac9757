import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * What an app's editor shows on hover: every name 'cronq' and 'cronq/schema' export has a
 * doc comment where it is declared (tsc copies them into the published .d.ts). Read from
 * the sources with the compiler's own symbol tables; nothing is loaded.
 */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const ENTRIES = ['src/index.ts', 'src/schema.ts'].map((path) => resolve(ROOT, path));

/** `entry: Name (file)` for each export of `entries` declared without a doc comment. */
function undocumentedExports(entries: string[]): string[] {
  const program = ts.createProgram(entries, {
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    allowImportingTsExtensions: true,
    noEmit: true,
    strict: true,
    types: ['node'],
  });
  const checker = program.getTypeChecker();
  const documented = (declaration: ts.Declaration) =>
    ts.getJSDocCommentsAndTags(declaration).length > 0 || (ts.isVariableDeclaration(declaration) && ts.getJSDocCommentsAndTags(declaration.parent.parent).length > 0);
  const missing: string[] = [];
  for (const entry of entries) {
    const module = checker.getSymbolAtLocation(program.getSourceFile(entry)!)!;
    for (const exported of checker.getExportsOfModule(module)) {
      const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      // Declared in cronq's own sources: a dependency's type re-exported as it is (pino's Logger was) shows that package's doc, or none.
      const declarations = (symbol.declarations ?? []).filter((d) => d.getSourceFile().fileName.startsWith(resolve(ROOT, 'src')));
      if (declarations.length === 0 || !declarations.some(documented)) {
        const where = declarations[0] ? relative(ROOT, declarations[0].getSourceFile().fileName) : 'a dependency';
        missing.push(`${relative(ROOT, entry)}: ${exported.name} (${where})`);
      }
    }
  }
  return missing;
}

describe('the public API', () => {
  it("documents every name 'cronq' and 'cronq/schema' export, in a doc comment its declaration carries", () => {
    expect(undocumentedExports(ENTRIES)).toEqual([]);
  }, 60_000);
});
