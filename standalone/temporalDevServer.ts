/**
 * The Temporal CLI's dev server: a real Temporal server (SQLite persistence, Web UI) for the
 * standalone and for the test suite. The CLI comes from deploy/temporal.sh.
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync, openSync, readFileSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Connection } from '@temporalio/client';
import { parse as parseYaml } from 'yaml';
import { SearchAttributeType } from '@temporalio/common';
import { searchAttributes } from '../workflows/definitions.js';
import { deployTool } from '../processes/deployTool.js';
import { spawnEndingWithThisProcess } from '../processes/endingWithThisProcess.js';
import { freePort } from '../processes/freePort.js';

/** The path of a Temporal CLI, building it on first use (see deploy/temporal.sh). */
export const resolveTemporalCli = (): Promise<string> => deployTool('temporal.sh');

/** capyctl's dynamic configuration of Temporal, shared with the servers the deploy files run. */
export const DYNAMIC_CONFIG_FILE = fileURLToPath(new URL('../deploy/temporal/dynamicconfig.yaml', import.meta.url));

/**
 * The dev server's defaults cost a switch about 100 ms per step (bench/stepLatency): Temporal's
 * transfer-task reads (DYNAMIC_CONFIG_FILE says why), and its SQLite file syncing to disk on every
 * commit. Write-ahead logging with `synchronous=normal` keeps every commit across a crash of the
 * process (SIGKILL); only a power cut may lose the last ones, which a dev server may.
 */
function lowLatencyArgs(): string[] {
  const dynamic = parseYaml(readFileSync(DYNAMIC_CONFIG_FILE, 'utf8')) as Record<string, Array<{ value: unknown }>>;
  return [
    ...Object.entries(dynamic).flatMap(([key, values]) => [
      '--dynamic-config-value',
      `${key}=${JSON.stringify(values[0]!.value)}`,
    ]),
    ...['journal_mode=wal', 'synchronous=normal'].flatMap((pragma) => ['--sqlite-pragma', pragma]),
  ];
}

const cliTypeNames: Record<SearchAttributeType, string> = {
  [SearchAttributeType.TEXT]: 'Text',
  [SearchAttributeType.KEYWORD]: 'Keyword',
  [SearchAttributeType.INT]: 'Int',
  [SearchAttributeType.DOUBLE]: 'Double',
  [SearchAttributeType.BOOL]: 'Bool',
  [SearchAttributeType.DATETIME]: 'Datetime',
  [SearchAttributeType.KEYWORD_LIST]: 'KeywordList',
};

export interface DevServerOptions {
  /** The SQLite file that keeps workflows across restarts. */
  dbFile: string;
  port?: number;
  /** The Web UI's port; without it the server runs headless. */
  uiPort?: number;
  ip?: string;
  namespace?: string;
  /** Where the server's own output goes; discarded when absent. */
  logFile?: string;
  readyTimeoutMs?: number;
  /** Temporal's own defaults instead of lowLatencyArgs (bench/stepLatency compares the two). */
  temporalDefaults?: boolean;
}

export interface DevServer {
  address: string;
  namespace: string;
  uiUrl: string | undefined;
  process: ChildProcess;
  stop(): Promise<void>;
}

/**
 * Another process may take a free port between our choosing it and the server binding it (the
 * server also picks its own internal ports that way), so a server on ports of our choosing that
 * exits during start is tried again on fresh ones, this many times in all.
 */
const FREE_PORT_TRIES = 3;

class ExitedDuringStart extends Error {}

/** Starts the dev server with the project's search attributes and resolves once it serves them. */
export async function startDevServer(options: DevServerOptions): Promise<DevServer> {
  if (options.port !== undefined) return startOn(options.port, options);
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOn(await freePort(), options);
    } catch (e) {
      if (!(e instanceof ExitedDuringStart) || attempt === FREE_PORT_TRIES) throw e;
    }
  }
}

async function startOn(port: number, options: DevServerOptions): Promise<DevServer> {
  const ip = options.ip ?? '127.0.0.1';
  const namespace = options.namespace ?? 'default';
  const args = [
    'server',
    'start-dev',
    '--ip',
    ip,
    '--port',
    String(port),
    '--db-filename',
    options.dbFile,
    '--namespace',
    namespace,
  ];
  args.push(...(options.uiPort === undefined ? ['--headless'] : ['--ui-port', String(options.uiPort)]));
  for (const key of Object.values(searchAttributes))
    args.push('--search-attribute', `${key.name}=${cliTypeNames[key.type]}`);
  args.push('--log-level', 'warn', ...(options.temporalDefaults ? [] : lowLatencyArgs()));

  const logStart = options.logFile && existsSync(options.logFile) ? statSync(options.logFile).size : 0;
  const output = options.logFile ? openSync(options.logFile, 'a') : 'ignore';
  const child = spawnEndingWithThisProcess([await resolveTemporalCli(), ...args], {
    stdio: ['ignore', output, output],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const address = `${ip}:${port}`;
  const server: DevServer = {
    address,
    namespace,
    uiUrl: options.uiPort === undefined ? undefined : `http://${ip}:${options.uiPort}`,
    process: child,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(killer);
    },
  };
  try {
    await awaitReady(address, namespace, options.readyTimeoutMs ?? 60_000, () => child.exitCode !== null);
  } catch (e) {
    await server.stop();
    if (e instanceof ExitedDuringStart && options.logFile) e.message += `: ${lastLines(options.logFile, logStart)}`;
    throw e;
  }
  return server;
}

/** What the server wrote to its log since `from`, its last few lines: why it exited. */
function lastLines(file: string, from: number): string {
  const lines = readFileSync(file).subarray(from).toString('utf8').trim().split('\n');
  return lines.slice(-5).join(' | ') || '(it wrote nothing)';
}

async function awaitReady(
  address: string,
  namespace: string,
  timeoutMs: number,
  hasExited: () => boolean,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const wanted = Object.values(searchAttributes).map((k) => k.name);
  let last: unknown;
  while (Date.now() < deadline) {
    if (hasExited()) throw new ExitedDuringStart(`the Temporal dev server at ${address} exited during start`);
    try {
      const connection = await Connection.connect({ address, connectTimeout: 1_000 });
      try {
        const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
        if (wanted.every((name) => customAttributes && name in customAttributes)) return;
      } finally {
        await connection.close();
      }
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`the Temporal dev server at ${address} was not ready within ${timeoutMs} ms: ${String(last)}`);
}
