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

/** The compiler's view of cronq's entry points, read from the sources (nothing is loaded). */
function entryProgram(entries: string[]) {
  const program = ts.createProgram(entries, {
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    allowImportingTsExtensions: true,
    noEmit: true,
    strict: true,
    types: ['node'],
  });
  const checker = program.getTypeChecker();
  /** Each export of `entries` as `[entry, its exported name, the symbol it names]`. */
  const exports = entries.flatMap((entry) =>
    checker.getExportsOfModule(checker.getSymbolAtLocation(program.getSourceFile(entry)!)!).map((exported) => {
      const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      return [entry, exported.name, symbol] as const;
    }),
  );
  return { checker, exports };
}

/** Declared in cronq's own sources: a dependency's type re-exported as it is (pino's Logger was) shows that package's doc, or none. */
const inSources = (node: ts.Node) => node.getSourceFile().fileName.startsWith(resolve(ROOT, 'src'));
const documented = (declaration: ts.Node) =>
  ts.getJSDocCommentsAndTags(declaration).length > 0 || (ts.isVariableDeclaration(declaration) && ts.getJSDocCommentsAndTags(declaration.parent.parent).length > 0);
const where = (node: ts.Node) => `${relative(ROOT, node.getSourceFile().fileName)}:${node.getSourceFile().getLineAndCharacterOfPosition(node.getStart()).line + 1}`;

/** `entry: Name (file)` for each export of `entries` declared without a doc comment. */
function undocumentedExports(entries: string[]): string[] {
  const { exports } = entryProgram(entries);
  const missing: string[] = [];
  for (const [entry, name, symbol] of exports) {
    const declarations = (symbol.declarations ?? []).filter(inSources);
    if (declarations.length === 0 || !declarations.some(documented)) {
      const at = declarations[0] ? relative(ROOT, declarations[0].getSourceFile().fileName) : 'a dependency';
      missing.push(`${relative(ROOT, entry)}: ${name} (${at})`);
    }
  }
  return missing;
}

/**
 * `Owner.member (file:line)` for each public member, declared in cronq's sources, of a
 * class, interface or object type that `entries` export (each variant of a union; the
 * fields of an object type written inline as a member's type too), declared without a doc
 * comment. Private and protected members, and what Error itself declares, are no one's API.
 */
function undocumentedMembers(entries: string[]): string[] {
  const { checker, exports } = entryProgram(entries);
  const seen = new Set<ts.Node>();
  const missing: string[] = [];
  const hidden = (node: ts.Node) => ts.getCombinedModifierFlags(node as ts.Declaration) & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected);
  const visit = (owner: string, type: ts.Type) => {
    for (const part of type.isUnion() ? type.types : [type]) {
      for (const member of checker.getPropertiesOfType(part)) {
        for (const declaration of (member.declarations ?? []).filter(inSources)) {
          if (seen.has(declaration) || hidden(declaration) || ts.isPrivateIdentifier((declaration as ts.NamedDeclaration).name ?? declaration)) continue;
          seen.add(declaration);
          const name = `${owner}.${checker.symbolToString(member)}`;
          if (!documented(declaration)) missing.push(`${name} (${where(declaration)})`);
          // An options field written inline (`expect?: { within }`, `job: { ... } | null`): its fields are part of the contract.
          const written = (declaration as ts.PropertySignature).type;
          const inline = written && ts.isUnionTypeNode(written) ? written.types : written ? [written] : [];
          for (const literal of inline.filter(ts.isTypeLiteralNode)) visit(name, checker.getTypeAtLocation(literal));
        }
      }
    }
  };
  for (const [, name, symbol] of exports) {
    if (symbol.flags & (ts.SymbolFlags.Interface | ts.SymbolFlags.Class | ts.SymbolFlags.TypeAlias)) visit(name, checker.getDeclaredTypeOfSymbol(symbol));
  }
  return missing;
}

describe('the public API', () => {
  it("documents every name 'cronq' and 'cronq/schema' export, in a doc comment its declaration carries", () => {
    expect(undocumentedExports(ENTRIES)).toEqual([]);
  }, 60_000);

  it("documents every public member of the classes, interfaces and object types 'cronq' and 'cronq/schema' export: methods, properties, options' fields", () => {
    expect(undocumentedMembers(ENTRIES)).toEqual([]);
  }, 60_000);
});
