/**
 * The standalone (`capyctl start standalone`): the server and one host agent in one process, with
 * zero set-up. Unless a Temporal address is configured it runs a local Temporal dev server that
 * keeps its workflows in the data folder and serves the Web UI; unless a database is configured it
 * keeps the catalogue in an embedded Postgres (PGlite) there too, with the same migrations.
 */
import { mkdirSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import { type DevServer, startDevServer } from './temporalDevServer.js';
import { hostIdOf, type RunningHostAgent, startHostAgent } from '../hostAgent/agent.js';
import { type RunningServer, startServer } from '../server/server.js';
import { loadSettingsFile } from '../settings/load.js';
import type { StandaloneSettings } from '../settings/standaloneDocument.js';
import { type Db, embeddedDb, postgresDb } from '../store/db.js';
import { listDeployments } from '../store/deployments.js';
import { issueHostToken, revokeHostToken } from '../store/hosts.js';
import { adminTokenIn } from './adminToken.js';

const EXAMPLES_DIR = fileURLToPath(new URL('../deploy/examples/', import.meta.url));

export interface RunningStandalone {
  inferenceUrl: string;
  managementUrl: string;
  temporalAddress: string;
  /** The Temporal Web UI, when this standalone runs the dev server. */
  temporalUiUrl: string | undefined;
  adminTokenFile: string;
  hostId: string;
  server: RunningServer;
  /** Waits for running answers up to the drain bound, then stops the host's engines and the rest. */
  stop(): Promise<void>;
}

/**
 * The standalone is the operator of its own host: each start re-binds the host ID to a new token
 * (revoke, then issue), the act a server's operator does by hand to move a host to a new token.
 */
async function rebindOwnHost(db: Db, hostId: string): Promise<string> {
  await revokeHostToken(db, hostId);
  return issueHostToken(db);
}

export async function startStandalone(settings: StandaloneSettings, logger: Logger): Promise<RunningStandalone> {
  const dataDir = resolve(settings.data_dir);
  mkdirSync(dataDir, { recursive: true });
  const admin = adminTokenIn(dataDir, logger);
  const { namespace } = settings.server.temporal;

  // Each part started is stopped again, in reverse order, when a later one fails to start.
  const started: Array<() => Promise<void>> = [];
  const unwind = async () => {
    for (const stop of started.splice(0).reverse()) await stop();
  };
  try {
    let devServer: DevServer | undefined;
    let temporalAddress = settings.server.temporal.address;
    if (temporalAddress === undefined) {
      devServer = await startDevServer({
        dbFile: join(dataDir, 'temporal.db'),
        logFile: join(dataDir, 'temporal.log'),
        namespace,
        // The Temporal CLI's own by default, so its documentation and `temporal workflow list` work as they say.
        port: settings.temporal_dev_server.port,
        uiPort: settings.temporal_dev_server.ui_port,
      });
      started.push(() => devServer!.stop());
      temporalAddress = devServer.address;
    }
    const temporal = { address: temporalAddress, namespace };
    // The status page links each switch to the Web UI of the dev server this standalone runs.
    const webUi = devServer?.uiUrl ?? settings.server.temporal.web_ui;

    const databaseUrl = settings.server.database_url ?? process.env.DATABASE_URL;
    const db: Db = databaseUrl ? postgresDb(databaseUrl) : await embeddedDb(join(dataDir, 'catalogue'));
    started.push(() => db.close());

    // Named after its one host, so standalones sharing a Temporal keep to their own task queues.
    const serverId = `standalone-${hostIdOf(settings.host)}`;
    // The gateway forwards to the host's engines directly, so the host counts the gateway's requests
    // as those in flight to an instance (`ingress_in_flight`, and what keeps a busy engine from parking).
    let local: RunningHostAgent | undefined;
    const server = await startServer({
      settings: { ...settings.server, temporal: { ...temporal, web_ui: webUi } },
      serverId,
      adminToken: admin.token,
      db,
      logger,
      localEngines: { urlOf: (instance) => local?.engineUrl(instance) },
      inferenceToken: process.env.CAPYCTL_INFERENCE_TOKEN || undefined,
    });
    started.push(() => server.stop());

    const host: RunningHostAgent = await startHostAgent(
      {
        ...settings.host,
        server: { url: server.managementUrl, token: await rebindOwnHost(db, hostIdOf(settings.host)) },
        temporal,
        // The host registers one, but this process reaches its engines without it.
        ingress: { listen: '127.0.0.1:0' },
        data_dir: join(dataDir, 'host'),
      },
      logger,
      { inFlightOf: (key) => server.queue.instanceInFlight(key.deploymentId, key.instanceIndex) },
    );
    local = host;
    started.push(() => host.stop());

    if (settings.examples && (await listDeployments(db)).length === 0) {
      for (const file of readdirSync(EXAMPLES_DIR)
        .filter((f) => f.endsWith('.yaml'))
        .sort()) {
        const { deployment } = await server.deploy(loadSettingsFile('deployment', join(EXAMPLES_DIR, file)));
        logger.info({ deploymentId: deployment.id, name: deployment.name }, `deployed the example ${deployment.name}`);
      }
    }

    const running: RunningStandalone = {
      inferenceUrl: server.inferenceUrl,
      managementUrl: server.managementUrl,
      temporalAddress,
      temporalUiUrl: devServer?.uiUrl,
      adminTokenFile: admin.file,
      hostId: host.hostId,
      server,
      async stop() {
        // The server first: its running answers finish on the host's engines, which stop after it.
        await server.stop();
        await host.stop();
        await db.close();
        await devServer?.stop();
      },
    };
    logger.info(
      { ...running, server: undefined, adminTokenCreated: admin.created },
      `standalone ready: inference on ${running.inferenceUrl}, management on ${running.managementUrl}` +
        (running.temporalUiUrl ? `, Temporal Web UI on ${running.temporalUiUrl}` : '') +
        `; the admin token is kept in ${admin.file}`,
    );
    return running;
  } catch (e) {
    await unwind();
    throw e;
  }
}
