/**
 * The code of an earlier commit beside this checkout, for a benchmark's before-and-after in one
 * run: a temporary git worktree sharing this node_modules.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** A checkout of `ref` (its root folder), removed by the returned function. */
export function checkoutOf(ref: string): { dir: string; remove: () => void } {
  const dir = join(mkdtempSync(join(tmpdir(), 'capyctl-before-')), 'checkout');
  execFileSync('git', ['-C', ROOT, 'worktree', 'add', '--detach', dir, ref], { stdio: 'ignore' });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  return { dir, remove: () => execFileSync('git', ['-C', ROOT, 'worktree', 'remove', '--force', dir]) };
}

/**
 * What the benchmark `script` (a path from the root) prints when run from the checkout of `ref`;
 * a commit that predates the script gets this checkout's copy, run against its code.
 */
export function outputAt(ref: string, script: string): string {
  const { dir, remove } = checkoutOf(ref);
  try {
    // A script this checkout's copy brings imports this module too.
    for (const file of [script, 'bench/beforeCheckout.ts'])
      if (!existsSync(join(dir, file))) copyFileSync(join(ROOT, file), join(dir, file));
    return execFileSync(process.execPath, [join(ROOT, 'node_modules/tsx/dist/cli.mjs'), script], {
      cwd: dir,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
  } finally {
    remove();
  }
}
