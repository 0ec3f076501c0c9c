/**
 * `capyctl start standalone` as a child process, as an operator runs it: on its embedded defaults
 * (the example models on a simulated GPU), in a data folder of its own, on free ports, and against
 * the harness's Temporal dev server (starting one per standalone would cost each test seconds)
 * unless told to run its own.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { closeSync, createWriteStream, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CAPYCTL } from './capyctl.js';
import { until } from './until.js';

export interface StandaloneProcess {
  child: ChildProcess;
  /** Its cwd: `.data` under it holds the catalogue and the admin token. */
  dir: string;
  hostId: string;
  inferenceUrl: string;
  managementUrl: string;
  adminToken: string;
  adminTokenFile: string;
  /** Everything it printed so far. */
  output(): string;
  /** Resolves with the exit code once it exited. */
  exited: Promise<number | null>;
  /** SIGTERM, then its exit code. */
  stop(): Promise<number | null>;
}

export interface StandaloneOptions {
  /** Absent: the standalone runs a Temporal dev server of its own (`temporal_dev_server`). */
  temporalAddress?: string;
  /** Its working directory; a restart passes the same one. */
  dir: string;
  /** Keeps the host ID (and so its scheduler) across a restart. */
  hostId?: string;
  /** More `--set path=value` overrides. */
  sets?: string[];
  /** A `--file` document, over the embedded defaults. */
  file?: string;
  /** Options for node itself, e.g. `--cpu-prof`. */
  nodeArgs?: string[];
  /**
   * Its output goes straight to standalone.log, not through this process: a benchmark's load
   * generator then does not pay for reading the gateway's logs. `output()` reads the file.
   */
  outputToFile?: boolean;
}

/** What the standalone's JSON "standalone ready" line says, once it printed it. */
export interface ReadyLine {
  pid: number;
  inferenceUrl: string;
  managementUrl: string;
  adminTokenFile: string;
  temporalAddress: string;
  temporalUiUrl?: string;
}

export function readyLineOf(output: string): ReadyLine | undefined {
  const line = output.split('\n').find((l) => l.includes('"standalone ready'));
  return line === undefined ? undefined : (JSON.parse(line) as ReadyLine);
}

export async function startStandaloneProcess(options: StandaloneOptions): Promise<StandaloneProcess> {
  const hostId = options.hostId ?? `box-${randomUUID().slice(0, 8)}`;
  // Port 0: the standalone says in its ready line where it listens. A port picked free here could be
  // taken by another test's process before the standalone binds it.
  const sets = [
    ...(options.temporalAddress === undefined ? [] : [`server.temporal.address=${options.temporalAddress}`]),
    'server.listen.inference=127.0.0.1:0',
    'server.listen.management=127.0.0.1:0',
    `host.id=${hostId}`,
    ...(options.sets ?? []),
  ];
  const logFile = join(options.dir, 'standalone.log');
  const direct = options.outputToFile ? openSync(logFile, 'w') : undefined;
  const child = spawn(
    process.execPath,
    [
      ...(options.nodeArgs ?? []),
      CAPYCTL,
      'start',
      'standalone',
      ...(options.file ? ['--file', options.file] : []),
      ...sets.flatMap((s) => ['--set', s]),
    ],
    {
      cwd: options.dir,
      env: { ...process.env, CAPYCTL_LOG_FORMAT: 'json', DATABASE_URL: '' },
      stdio: direct === undefined ? ['ignore', 'pipe', 'pipe'] : ['ignore', direct, direct],
    },
  );
  let kept = '';
  if (direct === undefined) {
    // Also kept in its folder, to read after a failed test.
    const log = createWriteStream(logFile, { flags: 'a' });
    for (const stream of [child.stdout!, child.stderr!]) {
      stream.on('data', (d) => (kept += d));
      stream.pipe(log);
    }
  } else {
    closeSync(direct);
  }
  const output = () => (direct === undefined ? kept : readFileSync(logFile, 'utf8'));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const ready = await until(
    'the standalone to be ready',
    () => {
      if (child.exitCode !== null) throw new Error(`the standalone exited with ${child.exitCode}:\n${output()}`);
      return readyLineOf(output());
    },
    90_000,
  );
  return {
    child,
    dir: options.dir,
    hostId,
    inferenceUrl: ready.inferenceUrl,
    managementUrl: ready.managementUrl,
    adminToken: readFileSync(ready.adminTokenFile, 'utf8').trim(),
    adminTokenFile: ready.adminTokenFile,
    output,
    exited,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}
