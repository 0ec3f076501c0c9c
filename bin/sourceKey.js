/**
 * The version of the code as it is on disk: a hash of every source (TypeScript, and the launcher's
 * JavaScript) and the lockfile.
 * Built artefacts (the CLI's bundle, the worker's workflow bundle) are kept per version, so an
 * edited source is never run from a stale build. Plain JavaScript: the launcher runs it before
 * anything can read TypeScript.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The checkout's root folder. */
export const PROJECT_ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Folders that no production code is built from, at any depth. */
export const NOT_SOURCES = new Set(['node_modules', 'test', 'bench', '.git', '.data', '.tools', '.cli']);

/**
 * Every source of the checkout, and the lockfile that pins what they import.
 * @param {string} [dir]
 * @returns {string[]}
 */
function sources(dir = PROJECT_ROOT) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return NOT_SOURCES.has(entry.name) ? [] : sources(path);
    return /\.(ts|js)$/.test(entry.name) || entry.name === 'package-lock.json' ? [path] : [];
  });
}

/**
 * A short hex key of the sources as they are now, and of `salt` (what is built from them).
 * Files are named relative to the root, so clones of the same code share one key.
 * @param {string} salt
 * @returns {string}
 */
export function sourceKey(salt) {
  const hash = createHash('sha256').update(salt);
  for (const file of sources().sort()) hash.update(relative(PROJECT_ROOT, file)).update(readFileSync(file));
  return hash.digest('hex').slice(0, 24);
}
