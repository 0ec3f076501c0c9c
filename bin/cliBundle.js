/**
 * The CLI as JavaScript, built from cli/main.ts by esbuild on the first call after the code
 * changed and kept in .cli/. Transpiling TypeScript at every start (tsx) cost more than the
 * commands themselves. The chunks keep each command's own imports lazy (a `list` never loads
 * the Temporal worker), and all files sit in one folder one level below the root, as every
 * source does, so a path a module makes from its own URL (`../deploy/examples/`) means the same
 * in the sources and in the build.
 */
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { PROJECT_ROOT, sourceKey } from './sourceKey.js';

const OUT_DIR = join(PROJECT_ROOT, '.cli');
/** Builds of earlier code are removed after this: a process still running one has loaded it by then. */
const KEEP_OLD_BUILDS_MS = 24 * 60 * 60 * 1000;

/**
 * The URL of the built CLI for the code as it is now, building it first if needed.
 * @returns {Promise<string>}
 */
export async function cliEntry() {
  const entryName = `capyctl-${sourceKey('cli/main.ts')}`;
  const entry = join(OUT_DIR, `${entryName}.js`);
  if (!existsSync(entry)) await build(entryName);
  return pathToFileURL(entry).href;
}

/** @param {string} entryName */
async function build(entryName) {
  // Loaded only to build: a call with a build at hand does not pay for it.
  const { buildSync } = await import('esbuild');
  // Processes starting together may build at once: each writes into a folder of its own, then
  // moves the files in, the shared chunks (named by their content) first and the entry last. The
  // build is laid out for OUT_DIR itself: a source map names its sources relative to where it is
  // written, so one made in the staging folder would resolve them a level too high once moved
  // (a stack naming `<checkout>/../gateway/…`, files that do not exist).
  const staging = join(OUT_DIR, `.staging-${process.pid}`);
  mkdirSync(staging, { recursive: true });
  try {
    const { outputFiles } = buildSync({
      entryPoints: { [entryName]: join(PROJECT_ROOT, 'cli/main.ts') },
      outdir: OUT_DIR,
      write: false,
      bundle: true,
      splitting: true,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      packages: 'external',
      chunkNames: 'chunk-[hash]',
      sourcemap: 'linked',
      logLevel: 'error',
    });
    for (const file of outputFiles) writeFileSync(join(staging, basename(file.path)), file.contents);
    const files = readdirSync(staging);
    const isEntry = (/** @type {string} */ file) => file.startsWith(entryName);
    // The entry last: a reader that finds it finds its chunks already in place.
    for (const file of [...files.filter((f) => !isEntry(f)), ...files.filter(isEntry)]) {
      renameSync(join(staging, file), join(OUT_DIR, file));
    }
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  const removeBefore = Date.now() - KEEP_OLD_BUILDS_MS;
  for (const file of readdirSync(OUT_DIR)) {
    const path = join(OUT_DIR, file);
    if (statSync(path).mtimeMs < removeBefore) rmSync(path, { recursive: true, force: true });
  }
}
