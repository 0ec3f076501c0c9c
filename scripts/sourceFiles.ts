/** The project's TypeScript sources, read by the scripts that check the tree (imports, function lengths). */
import { readdirSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

export const PROJECT_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

const SKIPPED_DIRECTORIES = new Set(['node_modules']);

/** Every `.ts` file under `directory`, as a path from `root` with forward slashes. */
export function sourceFiles(root: string, directory = root): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    // Dot folders hold data, tools and build output, not sources.
    if (entry.name.startsWith('.') || SKIPPED_DIRECTORIES.has(entry.name)) return [];
    const path = join(directory, entry.name);
    if (entry.isDirectory()) return sourceFiles(root, path);
    return entry.name.endsWith('.ts') ? [relative(root, path).split(sep).join('/')] : [];
  });
}

/** The top-level folder a source file is in; files at the root count as `.`. */
export function folderOf(file: string): string {
  const slash = file.indexOf('/');
  return slash === -1 ? '.' : file.slice(0, slash);
}
