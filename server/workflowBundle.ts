/**
 * The workflow code a worker runs, bundled once for each version of the code: webpack takes seconds
 * of CPU, and every server start (a standalone's, each test's) would otherwise pay them again.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode } from '@temporalio/worker';

export const WORKFLOWS_PATH = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));

const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** Folders no workflow imports from. */
const OUTSIDE = new Set(['node_modules', 'test', 'bench', '.git', '.data', '.tools']);

/** Every TypeScript source a workflow could import, and the lockfile that pins the SDK. */
function sources(dir = ROOT): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return OUTSIDE.has(entry.name) ? [] : sources(path);
    return entry.name.endsWith('.ts') || entry.name === 'package-lock.json' ? [path] : [];
  });
}

/** The path of the bundle of `workflowsPath` for the code as it is now, made on first use. */
export async function workflowBundle(workflowsPath = WORKFLOWS_PATH): Promise<{ codePath: string }> {
  const hash = createHash('sha256').update(relative(ROOT, workflowsPath));
  // Named relative to the checkout, so clones of the same code share one bundle.
  for (const file of sources().sort()) hash.update(relative(ROOT, file)).update(readFileSync(file));
  const dir = join(tmpdir(), 'capyctl-workflow-bundles');
  const codePath = join(dir, `${hash.digest('hex').slice(0, 24)}.js`);
  if (!existsSync(codePath)) {
    const { code } = await bundleWorkflowCode({ workflowsPath });
    mkdirSync(dir, { recursive: true });
    // Processes starting together may bundle at once: each renames its own file into place.
    const partial = `${codePath}.${process.pid}`;
    writeFileSync(partial, code);
    renameSync(partial, codePath);
  }
  return { codePath };
}
