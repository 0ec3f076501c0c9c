/**
 * A server and one host agent in this process, on the harness's Temporal dev server and a fresh
 * database, the host running simulator engines on one simulated card: the bench that end-to-end
 * tests drive over sockets (inference requests, the management API, `capyctl` as a child process).
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { inject } from 'vitest';
import { type RunningHostAgent, startHostAgent } from '../../hostAgent/agent.js';
import { type RunningServer, startServer } from '../../server/server.js';
import { loadSettings } from '../../settings/load.js';
import { issueHostToken } from '../../store/hosts.js';
import { simHostYaml } from './simHost.js';
import { type FreshDatabase, freshDatabase } from './postgres.js';

export const ADMIN_TOKEN = 'capy_admin_test';

export interface ServerBenchOptions {
  /** The simulated card, e.g. "8GiB". */
  gpuMemory: string;
  /** More lines of the server document (YAML). */
  serverYaml?: string;
  /** More lines of the host document (YAML). */
  hostYaml?: string;
  /** How the host's token is issued; by default straight from the store. */
  hostToken?: (server: RunningServer, db: FreshDatabase) => Promise<string>;
}

export interface ServerBench {
  fresh: FreshDatabase;
  /** Replaced by a test that restarts the server; `close` stops the one here. */
  server: RunningServer;
  host: RunningHostAgent;
  hostId: string;
  /** The server document's text, for a restart with the same settings. */
  serverSettingsText: string;
  close(): Promise<void>;
}

export async function startServerBench(options: ServerBenchOptions): Promise<ServerBench> {
  const fresh = await freshDatabase(inject('postgresAdminUrl'));
  const serverSettingsText = `listen: { management: "127.0.0.1:0", inference: "127.0.0.1:0" }\ntemporal: { address: "${inject('temporalAddress')}" }\n${options.serverYaml ?? ''}`;
  const server = await startServer({
    settings: loadSettings('server', { env: {}, text: serverSettingsText }),
    serverId: randomUUID().slice(0, 8),
    adminToken: ADMIN_TOKEN,
    db: fresh.db,
    logger: pino({ level: 'warn' }),
  });
  const hostId = `gpu-box-${randomUUID().slice(0, 8)}`;
  const token = await (options.hostToken ?? ((_, f) => issueHostToken(f.db)))(server, fresh);
  const host = await startHostAgent(
    loadSettings('host', {
      env: {},
      text: simHostYaml({
        hostId,
        serverUrl: server.managementUrl,
        token,
        temporalAddress: inject('temporalAddress'),
        dataDir: join(mkdtempSync(join(tmpdir(), 'capyctl-server-')), 'host'),
        gpuMemory: options.gpuMemory,
        extra: options.hostYaml,
      }),
    }),
    pino({ level: 'warn' }),
  );
  const bench: ServerBench = {
    fresh,
    server,
    host,
    hostId,
    serverSettingsText,
    async close() {
      await host.stop();
      await bench.server.stop();
      await fresh.drop();
    },
  };
  return bench;
}
