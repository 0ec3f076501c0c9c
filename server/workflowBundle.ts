/**
 * The workflow code a worker runs, bundled once for each version of the code: webpack takes seconds
 * of CPU, and every server start (a standalone's, each test's) would otherwise pay them again.
 */
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import { sourceKey } from '../bin/sourceKey.js';

export const WORKFLOWS_PATH = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));

/** The path of the bundle of `workflowsPath` for the code as it is now, made on first use. */
export async function workflowBundle(workflowsPath = WORKFLOWS_PATH): Promise<{ codePath: string }> {
  const dir = join(tmpdir(), 'capyctl-workflow-bundles');
  // Keyed by the checkout's place as well as its code: the bundle's source map names the files it was
  // made from by their absolute paths, so another copy's bundle of the same code would have this
  // worker's stacks name that copy's files (gone, once it is deleted).
  const codePath = join(dir, `${sourceKey(workflowsPath)}.js`);
  if (!existsSync(codePath)) {
    // Webpack's statistics are for whoever works on the bundling, not for an operator's start-up.
    // The workflow modules are evaluated once per worker thread, not once per run: evaluating them
    // (zod's enums above all) was 5 of a new switch's first 9 ms in the workflow thread. Every run
    // shares them, so they keep nothing at module level that a run could change (eslint.config.js;
    // test/workflowBundle.test.ts), and the SDK freezes what they export.
    const { code } = await bundleWorkflowCode({
      workflowsPath,
      logger: new DefaultLogger('WARN'),
      preloadModules: [workflowsPath],
    });
    mkdirSync(dir, { recursive: true });
    // Processes starting together may bundle at once: each renames its own file into place.
    const partial = `${codePath}.${process.pid}`;
    writeFileSync(partial, code);
    renameSync(partial, codePath);
  }
  return { codePath };
}
