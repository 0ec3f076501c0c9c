/** Runs the built `capyctl` as a child process, as an operator would. */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const CAPYCTL = fileURLToPath(new URL('../../bin/capyctl.js', import.meta.url));

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function capyctl(args: readonly string[], env: NodeJS.ProcessEnv = {}, cwd?: string): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CAPYCTL, ...args],
      { env: { ...process.env, ...env }, cwd },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}
