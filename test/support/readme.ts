/**
 * README.md's commands as a person runs them: the `sh` blocks of one of its sections, and a shell
 * that runs a command line in its own process group (so a run that never finished can be stopped
 * whole), collecting what it prints.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = fileURLToPath(new URL('../..', import.meta.url));

/** The `sh` blocks of the README section under `heading` (to the next heading of its level or above), trimmed. */
export function readmeShBlocks(heading: string): string[] {
  const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
  const start = readme.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`README.md has no heading ${heading}`);
  const level = /^#+/.exec(heading)![0];
  const end = readme.slice(start + 1).search(new RegExp(`\\n#{1,${level.length}} `));
  const section = end < 0 ? readme.slice(start) : readme.slice(start, start + 1 + end);
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!.trim());
}

export interface Shell {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

/** Runs a command line as a person types it, in `cwd`, with `env`. */
export function shell(command: string, cwd: string, env: NodeJS.ProcessEnv): Shell {
  const child = spawn('bash', ['-c', command], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  return { child, output: () => output, exited: new Promise((resolve) => child.once('exit', resolve)) };
}
