/**
 * A binary a deploy/ script provides: from its variable, a copy on PATH, or built into .tools/bin
 * from its Go module on first use. The script runs beside the test, not in its place: a cold build
 * takes minutes, and a test process that blocks that long leaves vitest's own calls to it
 * unanswered past their fixed 60 s (the run then fails with every test passed).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

export async function deployTool(script: string): Promise<string> {
  const path = fileURLToPath(new URL(`../../deploy/${script}`, import.meta.url));
  // The build's progress goes to the test's stderr; the path is the script's one line of output.
  const child = spawn('bash', [path], { stdio: ['ignore', 'pipe', 'inherit'] });
  let printed = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (printed += chunk));
  const [code] = (await once(child, 'close')) as [number | null];
  if (code !== 0) throw new Error(`deploy/${script} exited with ${code}: no binary`);
  return printed.trim();
}
