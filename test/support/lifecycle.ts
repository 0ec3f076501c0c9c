/**
 * The lifecycle's test bench: real Temporal (the harness's dev server), real Postgres (a fresh
 * database), a real host agent in this process running simulator engines on a simulated GPU, the
 * server's workflow worker with the store's activities, and the gateway's real request queue with
 * simulated clients.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { LoadBoard } from '../../gateway/loadBoard.js';
import { buildManagementApp } from '../../gateway/managementApp.js';
import { type RunningHostAgent, startHostAgent } from '../../hostAgent/agent.js';
import { installTemporalRuntime } from '../../logging/temporalRuntime.js';
import { loadSettings } from '../../settings/load.js';
import { tightestOfHosts } from '../../settings/queue.js';
import { gpuUsage } from '../../hostAgent/simulatedGpu.js';
import type { Db } from '../../store/db.js';
import { type Deployment, saveDeployment } from '../../store/deployments.js';
import { issueHostToken } from '../../store/hosts.js';
import { migrate } from '../../store/migrate.js';
import { taskQueues } from '../../workflows/definitions.js';
import { workflowBundle } from '../../server/workflowBundle.js';
import { EngineExits } from '../../server/engineExits.js';
import { createServerActivities } from '../../server/serverActivities.js';
import { storePorts } from '../../server/storePorts.js';
import { RoutingTable } from '../../gateway/routingTable.js';
import { simHostYaml } from './simHost.js';
import { freshDatabase, type FreshDatabase } from './postgres.js';
import { QueueGateway } from './queueGateway.js';

export interface LifecycleOptions {
  /** The simulated GPU's memory, e.g. "12GiB" (one card). */
  gpuMemory?: string;
  /** How many such cards; one unless said. */
  gpuCount?: number;
  memoryKind?: 'discrete' | 'unified';
  hostRam?: string;
  /** Extra lines of the host document (YAML), e.g. `lifecycle: { activation: explicit }`. */
  hostYaml?: string;
  /** Called with each demand the gateway reports; the tests wire it to the scheduler. */
  onDemand?: ConstructorParameters<typeof QueueGateway>[1];
  /** The dev server and Postgres to use; the test harness's when absent (a benchmark outside vitest passes its own). */
  services?: LifecycleServices;
}

export interface LifecycleServices {
  temporalAddress: string;
  postgresAdminUrl: string;
}

/** The harness's services; vitest is imported only here, so a script can use the bench with its own. */
export async function harnessServices(): Promise<LifecycleServices> {
  const { inject } = await import('vitest');
  return { temporalAddress: inject('temporalAddress'), postgresAdminUrl: inject('postgresAdminUrl') };
}

export interface Lifecycle {
  db: Db;
  /** For a worker in another process: the fresh database and the Temporal frontend. */
  databaseUrl: string;
  temporalAddress: string;
  client: Client;
  hostId: string;
  serverTaskQueue: string;
  gateway: QueueGateway;
  host: RunningHostAgent;
  gpuDir: string;
  /** Deploys a deployment document (YAML) into the store. */
  deploy(yaml: string): Promise<Deployment>;
  gpuUsedBytes(): Promise<number>;
  /** Stops the server's worker and starts a new one, as a restarted server would. */
  restartServerWorker(): Promise<void>;
  close(): Promise<void>;
}

/** A simulator deployment document: small, fast timings unless `extra` says otherwise. */
/** What one model of `simDeployment` holds on its GPU: 4 GiB of weights and 1 GiB of KV cache. */
export const SIM_MODEL_BYTES = 5 * 2 ** 30;

export function simDeployment(name: string, engine = 'vllm', extra: string[] = [], more = ''): string {
  const args = [
    '--sim-weights',
    '4GiB',
    '--sim-kv',
    '1GiB',
    '--sim-load-ms',
    '200',
    '--sim-park-ms',
    '50',
    '--sim-wake-ms',
    '50',
    '--sim-reload-ms',
    '100',
    ...extra,
  ];
  return `name: ${name}\nengine: ${engine}\nmodel: sim/${name}\nextra_args: ${JSON.stringify(args)}\n${more}`;
}

export async function startLifecycle(options: LifecycleOptions = {}): Promise<Lifecycle> {
  const dir = mkdtempSync(join(tmpdir(), 'capyctl-lifecycle-'));
  const hostId = `host-${randomUUID().slice(0, 8)}`;
  const serverTaskQueue = taskQueues.server(randomUUID(), 'test');
  const services = options.services ?? (await harnessServices());
  // Worker logs at WARN and above, once per process (a host agent in the same process shares it).
  const workerConnection = () => {
    installTemporalRuntime(pino({ level: 'warn' }));
    return NativeConnection.connect({ address: services.temporalAddress });
  };
  const fresh: FreshDatabase = await freshDatabase(services.postgresAdminUrl);
  await migrate(fresh.db);

  const management: FastifyInstance = await buildManagementApp({
    store: storePorts(fresh.db),
    board: new LoadBoard(),
    hostEvents: { registered: async () => {}, engineExited: async () => {} },
    logger: pino({ level: 'silent' }),
  });
  const serverUrl = await management.listen({ host: '127.0.0.1', port: 0 });
  const token = await issueHostToken(fresh.db);
  const hostSettings = loadSettings('host', {
    env: {},
    text: simHostYaml({
      hostId,
      serverUrl,
      token,
      temporalAddress: services.temporalAddress,
      dataDir: join(dir, 'host'),
      gpuMemory: options.gpuMemory ?? '12GiB',
      gpuCount: options.gpuCount,
      memoryKind: options.memoryKind,
      hostRam: options.hostRam,
      extra: options.hostYaml,
    }),
  });
  const hostQueue = hostSettings.resource_policy.queue;
  const gateway = new QueueGateway(tightestOfHosts([hostQueue], hostQueue), options.onDemand);
  await workerConnection();
  const host = await startHostAgent(hostSettings, pino({ level: 'warn' }));

  const client = new Client({ connection: await Connection.connect({ address: services.temporalAddress }) });
  // The routing table the server keeps: the bench's deployments reach it through the store's rows.
  const table = new RoutingTable();
  const startWorker = async () => {
    const worker = await Worker.create({
      connection: await workerConnection(),
      taskQueue: serverTaskQueue,
      workflowBundle: await workflowBundle(),
      activities: gateway.recorded(
        createServerActivities({ db: fresh.db, queue: gateway.queue, table, exits: new EngineExits() }),
      ),
      shutdownGraceTime: '1s',
      // A restarted worker picks its workflows up at once instead of after the default 10 s, when
      // the server gives up on the old worker's sticky queue.
      stickyQueueScheduleToStartTimeout: '1s',
    });
    return { worker, running: worker.run() };
  };
  let server = await startWorker();
  const gpuDir = join(dir, 'host', 'sim-gpus');

  return {
    db: fresh.db,
    databaseUrl: fresh.url,
    temporalAddress: services.temporalAddress,
    client,
    hostId,
    serverTaskQueue,
    gateway,
    host,
    gpuDir,
    async deploy(yaml) {
      const saved = await saveDeployment(fresh.db, loadSettings('deployment', { text: yaml }));
      table.putDeployment(saved.deployment);
      return saved.deployment;
    },
    async gpuUsedBytes() {
      return (await gpuUsage(gpuDir, 0)).usedBytes;
    },
    async restartServerWorker() {
      server.worker.shutdown();
      await server.running;
      server = await startWorker();
    },
    async close() {
      server.worker.shutdown();
      await server.running;
      await host.stop();
      await management.close();
      await client.connection.close();
      await fresh.drop();
    },
  };
}
