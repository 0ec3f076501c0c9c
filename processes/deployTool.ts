/**
 * The path of a binary a deploy/ script provides: the file its variable names, a copy on PATH, or
 * one built into .tools/bin from its Go module on first use (deploy/goTool.sh). The script runs
 * beside its caller, not in its place: a cold build takes minutes, and a process blocked that long
 * answers nothing meanwhile (a test worker misses vitest's own calls, which wait 60 s, and the run
 * fails with every test passed).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

export async function deployTool(script: string): Promise<string> {
  // From the root's level, not this folder's: the same in the sources and in the CLI's build (bin/cliBundle.js).
  const path = fileURLToPath(new URL(`../deploy/${script}`, import.meta.url));
  // The build's progress goes to stderr; the path is the script's one line of output.
  const child = spawn('bash', [path], { stdio: ['ignore', 'pipe', 'inherit'] });
  let printed = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (printed += chunk));
  const [code] = (await once(child, 'close')) as [number | null];
  if (code !== 0) throw new Error(`deploy/${script} exited with ${code}: no binary`);
  return printed.trim();
}
