/** Which capyctl this is: package.json's version, and the commit of the git checkout it runs from. */
import { execFileSync } from 'node:child_process';
import { readFileSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../bin/sourceKey.js';

export interface BuildInfo {
  version: string;
  /** Undefined when the code is no git checkout of its own (a copy in an image) or git is not installed. */
  commit: string | undefined;
}

export function buildInfo(): BuildInfo {
  const { version } = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as { version: string };
  return { version, commit: checkoutCommit() };
}

function checkoutCommit(): string | undefined {
  const root = realpathSync(PROJECT_ROOT);
  try {
    const [top, commit] = execFileSync('git', ['-C', root, 'rev-parse', '--show-toplevel', 'HEAD'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    })
      .trim()
      .split('\n');
    // Code copied into another repository's tree is not that repository's commit.
    return top !== undefined && realpathSync(top) === root ? commit : undefined;
  } catch {
    return undefined;
  }
}
