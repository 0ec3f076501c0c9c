/**
 * Child processes that end with the capyctl process that started them, even one killed outright
 * (SIGKILL, the OOM killer): an engine left behind holds GPU memory no agent knows of, and a dev
 * server left behind holds the port the next standalone needs.
 *
 * util-linux's setpriv asks the kernel to send SIGTERM when the parent dies, then runs the command
 * in its own place (the same process), so the child still shuts down its own workers. Where there
 * is no setpriv (not Linux), a child outlives a killed parent as before.
 */
import { type ChildProcess, type SpawnOptions, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';

const setpriv =
  process.platform === 'linux'
    ? (process.env.PATH ?? '')
        .split(delimiter)
        .map((dir) => join(dir, 'setpriv'))
        .find((path) => existsSync(path))
    : undefined;

/** Spawns `argv` so that it is sent SIGTERM when this process dies. */
export function spawnEndingWithThisProcess(argv: readonly string[], options: SpawnOptions): ChildProcess {
  const [command, ...args] = setpriv === undefined ? argv : [setpriv, '--pdeathsig', 'SIGTERM', '--', ...argv];
  return spawn(command!, args, options);
}
