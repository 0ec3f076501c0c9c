/**
 * The import picture between the top-level folders: which folder imports which, and how often.
 * `npm run imports` prints it and fails, naming the files, when
 * - two folders import each other, directly or round a longer circle, or
 * - `domain/`, the spec's words that every other folder builds on, imports another folder, or
 * - production code imports what is not the product: the simulator (`simulator/`), test support
 *   (`test/`), the benchmarks (`bench/`), what deploys (`deploy/`) or these scripts (`scripts/`).
 *   One file may import the simulator: `capyctl sim`'s command, which is how it is launched.
 * Only relative imports are read (`import`, `import type`, `export … from`, `import()`): a package
 * is not a folder of ours. test/importPicture.test.ts runs the same check.
 */
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { folderOf, PROJECT_ROOT, sourceFiles } from './sourceFiles.js';

/** Folders that are not the product: production code must not import them; they may import it. */
const NOT_PRODUCTION = ['simulator', 'test', 'bench', 'deploy', 'scripts'] as const;

/** The innermost folder: it imports no other. */
const INNERMOST = 'domain';

/** The simulator's launcher (`capyctl sim`), the one production file that loads the simulator. */
const SIMULATOR_LAUNCHER = 'cli/commands/sim.ts';

/** Files at the project's root (vitest.config.ts) count as this folder (`folderOf`). */
const ROOT_FOLDER = '.';

/** One relative import: the file that writes it and the file it names, both from the project root. */
export interface ImportArrow {
  from: string;
  to: string;
}

export interface ImportPicture {
  /** folder -> folder it imports -> the arrows that make that edge */
  folders: Map<string, Map<string, ImportArrow[]>>;
  problems: string[];
}

function relativeImports(root: string, file: string): ImportArrow[] {
  const text = readFileSync(join(root, file), 'utf8');
  return ts
    .preProcessFile(text, true, true)
    .importedFiles.map((imported) => imported.fileName)
    .filter((name) => name.startsWith('./') || name.startsWith('../'))
    .map((name) => ({
      from: file,
      to: relative(root, resolve(root, dirname(file), name))
        .split(sep)
        .join('/'),
    }));
}

function isProduction(folder: string): boolean {
  return !(NOT_PRODUCTION as readonly string[]).includes(folder) && folder !== ROOT_FOLDER;
}

/** The folders on some circle, each circle once (Tarjan's strongly connected components). */
function circles(folders: Map<string, Map<string, ImportArrow[]>>): string[][] {
  const index = new Map<string, number>();
  const lowLink = new Map<string, number>();
  const stack: string[] = [];
  const found: string[][] = [];
  const visit = (folder: string): void => {
    index.set(folder, index.size);
    lowLink.set(folder, index.get(folder)!);
    stack.push(folder);
    for (const next of folders.get(folder)?.keys() ?? []) {
      if (!index.has(next)) {
        visit(next);
        lowLink.set(folder, Math.min(lowLink.get(folder)!, lowLink.get(next)!));
      } else if (stack.includes(next)) {
        lowLink.set(folder, Math.min(lowLink.get(folder)!, index.get(next)!));
      }
    }
    if (lowLink.get(folder) !== index.get(folder)) return;
    const component: string[] = [];
    for (let member = stack.pop(); member !== undefined; member = stack.pop()) {
      component.push(member);
      if (member === folder) break;
    }
    if (component.length > 1) found.push(component.sort());
  };
  for (const folder of [...folders.keys()].sort()) if (!index.has(folder)) visit(folder);
  return found;
}

function describeArrows(arrows: ImportArrow[]): string[] {
  return arrows.map((arrow) => `    ${arrow.from} imports ${arrow.to}`);
}

export function readImportPicture(root = PROJECT_ROOT): ImportPicture {
  const folders = new Map<string, Map<string, ImportArrow[]>>();
  for (const file of sourceFiles(root)) {
    const from = folderOf(file);
    const edges = folders.get(from) ?? new Map<string, ImportArrow[]>();
    folders.set(from, edges);
    for (const arrow of relativeImports(root, file)) {
      const to = folderOf(arrow.to);
      if (to === from) continue;
      edges.set(to, [...(edges.get(to) ?? []), arrow]);
    }
  }
  const problems: string[] = [];
  for (const circle of circles(folders)) {
    const inside = circle.flatMap((from) =>
      circle.flatMap((to) => (from === to ? [] : describeArrows(folders.get(from)?.get(to) ?? []))),
    );
    problems.push(`a circle between ${circle.join(', ')}:\n${inside.join('\n')}`);
  }
  for (const [to, arrows] of folders.get(INNERMOST) ?? []) {
    problems.push(
      `${INNERMOST}/ imports ${to}/; it must import no other folder:\n${describeArrows(arrows).join('\n')}`,
    );
  }
  for (const [from, edges] of folders) {
    if (!isProduction(from)) continue;
    for (const [to, arrows] of edges) {
      if (isProduction(to) || to === ROOT_FOLDER) continue;
      const offending = arrows.filter((arrow) => !(to === 'simulator' && arrow.from === SIMULATOR_LAUNCHER));
      if (offending.length === 0) continue;
      problems.push(
        `production (${from}/) imports ${to}/, which is not the product:\n${describeArrows(offending).join('\n')}`,
      );
    }
  }
  return { folders, problems };
}

export function drawFolders(picture: ImportPicture): string {
  return [...picture.folders.keys()]
    .sort()
    .map((from) => {
      const edges = [...picture.folders.get(from)!.entries()].sort(([a], [b]) => a.localeCompare(b));
      const targets = edges.map(([to, arrows]) => `${to} (${arrows.length})`).join(', ');
      return `${from} -> ${targets || 'nothing'}`;
    })
    .join('\n');
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const picture = readImportPicture();
  console.log(drawFolders(picture));
  if (picture.problems.length > 0) {
    console.error(`\n${picture.problems.length} problem(s) in the import picture:\n\n${picture.problems.join('\n\n')}`);
    process.exitCode = 1;
  }
}
