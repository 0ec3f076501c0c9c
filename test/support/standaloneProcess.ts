/**
 * `capyctl start standalone` as a child process, as an operator runs it: in its own working folder
 * (its data under `.data` there), on the harness's Temporal dev server, with listeners on free ports.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { CAPYCTL } from './capyctl.js';
import { until } from './until.js';

export interface StandaloneProcess {
  managementUrl: string;
  inferenceUrl: string;
  hostId: string;
  adminTokenFile: string;
  /** SIGTERM, and the exit code. */
  stop(): Promise<number | null>;
}

/** The "standalone ready" line's facts, from its JSON log. */
interface Ready {
  managementUrl: string;
  inferenceUrl: string;
  hostId: string;
  adminTokenFile: string;
}

export async function startStandaloneProcess(options: { cwd: string; temporalAddress: string; sets: readonly string[] }): Promise<StandaloneProcess> {
  const sets = [
    `server.temporal.address=${options.temporalAddress}`,
    'server.listen.management=127.0.0.1:0',
    'server.listen.inference=127.0.0.1:0',
    ...options.sets,
  ].flatMap((s) => ['--set', s]);
  const child: ChildProcess = spawn(process.execPath, [CAPYCTL, 'start', 'standalone', ...sets], {
    cwd: options.cwd,
    // The embedded catalogue, not the machine's Postgres.
    env: { ...process.env, DATABASE_URL: '', CAPYCTL_LOG_FORMAT: 'json' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const ready = await until(
    'the standalone to be ready',
    () => {
      if (child.exitCode !== null) throw new Error(`the standalone exited with ${child.exitCode}:\n${output}`);
      const line = output.split('\n').find((l) => l.includes('"adminTokenFile"'));
      return line ? (JSON.parse(line) as Ready) : undefined;
    },
    90_000,
  );
  return {
    managementUrl: ready.managementUrl,
    inferenceUrl: ready.inferenceUrl,
    hostId: ready.hostId,
    adminTokenFile: ready.adminTokenFile,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}
