/**
 * Every module the workflows take a value from outside workflows/ is preloaded into the bundle
 * (`SHARED_MODULES`): one that is not is evaluated again for every workflow run, on the first task of
 * every switch. Type-only imports cost nothing at run time and are not counted.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { SHARED_MODULES } from '../server/workflowBundle.js';

const WORKFLOWS = fileURLToPath(new URL('../workflows', import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    return entry.isDirectory() ? sources(path) : entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** The files outside workflows/ that `file` imports a value from. */
function valueImportsOutside(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest);
  return source.statements.flatMap((statement) => {
    if (!ts.isImportDeclaration(statement) || !ts.isStringLiteral(statement.moduleSpecifier)) return [];
    const specifier = statement.moduleSpecifier.text;
    const clause = statement.importClause;
    const named = clause?.namedBindings;
    const typesOnly =
      clause?.isTypeOnly === true ||
      (clause?.name === undefined &&
        named !== undefined &&
        ts.isNamedImports(named) &&
        named.elements.every((e) => e.isTypeOnly));
    if (typesOnly || !specifier.startsWith('.')) return [];
    const target = resolve(dirname(file), specifier.replace(/\.js$/, '.ts'));
    return target.startsWith(`${WORKFLOWS}/`) ? [] : [target];
  });
}

describe('the workflow bundle', () => {
  it('preloads every module the workflows import a value from outside workflows/, and no other', () => {
    const outside = new Set(sources(WORKFLOWS).flatMap(valueImportsOutside));
    expect([...outside].sort()).toEqual([...SHARED_MODULES].sort());
  });
});
