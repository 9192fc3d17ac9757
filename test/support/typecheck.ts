import { dirname, relative } from 'node:path';
import ts from 'typescript';

/**
 * What `tsc --noEmit -p <config>` reports, one line each (`file:line: message`, paths
 * relative to the config's folder): the config's own errors (an unknown option, a bad
 * value, no input files) as well as every file's. Emits nothing.
 */
export function compileProblems(configPath: string): string[] {
  const root = dirname(configPath);
  const config = ts.readConfigFile(configPath, ts.sys.readFile);
  if (config.error) return [lineOf(config.error, root)];
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, root, undefined, configPath);
  const program = ts.createProgram({ rootNames: parsed.fileNames, options: parsed.options, configFileParsingDiagnostics: parsed.errors });
  return ts.getPreEmitDiagnostics(program).map((diagnostic) => lineOf(diagnostic, root));
}

function lineOf(diagnostic: ts.Diagnostic, root: string): string {
  const at = diagnostic.file && diagnostic.start !== undefined ? diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start) : null;
  const where = diagnostic.file ? `${relative(root, diagnostic.file.fileName)}${at ? `:${at.line + 1}` : ''}` : '(no file)';
  return `${where}: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, ' ')}`;
}
