/**
 * The length of every function in the product: its lines of code (not blank, not only a comment),
 * the closures it holds included. A closure is the function's own code: a factory whose returned
 * steps share its locals, or a start function that wires a process as closures over shared state,
 * is as long as all of it. Functions declared outside it (a class's methods, a module's functions)
 * are not. `npm run lint` runs it and fails, naming each function over the bound with its file and
 * line; test/functionLengths.test.ts runs the same check.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { folderOf, PROJECT_ROOT, sourceFiles } from './sourceFiles.js';

/** The most lines a function of the product may have. */
export const MAX_LINES = 120;

/** Folders that are not the product: their functions are not checked (the simulator is: `capyctl sim` runs it). */
const UNCHECKED = new Set(['.', 'test', 'bench', 'deploy', 'scripts']);

export interface FunctionLength {
  file: string;
  /** 1-based line where the function starts. */
  line: number;
  name: string;
  lines: number;
}

/** Lines (0-based) that hold code: not blank and not inside or made only of a comment. */
function codeLines(source: ts.SourceFile): Set<number> {
  const lines = new Set<number>();
  const scanner = ts.createScanner(ts.ScriptTarget.Latest, false, source.languageVariant, source.text);
  for (let token = scanner.scan(); token !== ts.SyntaxKind.EndOfFileToken; token = scanner.scan()) {
    if (token === ts.SyntaxKind.NewLineTrivia || token === ts.SyntaxKind.WhitespaceTrivia) continue;
    if (token === ts.SyntaxKind.SingleLineCommentTrivia || token === ts.SyntaxKind.MultiLineCommentTrivia) continue;
    const first = source.getLineAndCharacterOfPosition(scanner.getTokenStart()).line;
    const last = source.getLineAndCharacterOfPosition(scanner.getTokenEnd()).line;
    for (let line = first; line <= last; line++) lines.add(line);
  }
  return lines;
}

function nameOf(node: ts.FunctionLikeDeclaration, source: ts.SourceFile): string {
  if (node.name) return node.name.getText(source);
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) {
    return parent.name.getText(source);
  }
  return '(anonymous)';
}

/** Every function in one file with its lines. */
export function functionLengthsOf(file: string, text: string): FunctionLength[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const code = codeLines(source);
  const found: FunctionLength[] = [];
  const lineOf = (position: number) => source.getLineAndCharacterOfPosition(position).line;

  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      let lines = 0;
      for (let line = lineOf(node.getStart(source)); line <= lineOf(node.getEnd()); line++) if (code.has(line)) lines++;
      found.push({ file, line: lineOf(node.getStart(source)) + 1, name: nameOf(node, source), lines });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

export function readFunctionLengths(root = PROJECT_ROOT): FunctionLength[] {
  return sourceFiles(root)
    .filter((file) => !UNCHECKED.has(folderOf(file)) && !file.endsWith('.d.ts'))
    .flatMap((file) => functionLengthsOf(file, readFileSync(join(root, file), 'utf8')));
}

/** The functions over the bound, longest first. */
export function tooLong(lengths: FunctionLength[], bound = MAX_LINES): FunctionLength[] {
  return lengths.filter((entry) => entry.lines > bound).sort((a, b) => b.lines - a.lines);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const lengths = readFunctionLengths();
  const over = tooLong(lengths);
  const longest = [...lengths].sort((a, b) => b.lines - a.lines).slice(0, process.argv.includes('--top') ? 15 : 0);
  for (const entry of longest)
    console.log(`${String(entry.lines).padStart(4)}  ${entry.file}:${entry.line} ${entry.name}`);
  if (over.length > 0) {
    console.error(`${over.length} function(s) of the product over ${MAX_LINES} lines:`);
    for (const entry of over) console.error(`  ${entry.file}:${entry.line} ${entry.name}: ${entry.lines} lines`);
    process.exitCode = 1;
  }
}
