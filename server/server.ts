/**
 * The server (`capyctl start server`): the management and inference listeners, the request queue
 * and the routing table it routes by, and Temporal workers running every workflow with the
 * server-side activities (the store's, and the gateway's switch steps, which must run where the
 * queue lives). Each part is a file of its own, with what it starts and stops; this one builds them
 * and runs them, in the order they start and the order they stop.
 */
import type { Client } from '@temporalio/client';
import type { Logger } from 'pino';
import type { SaveResult } from '../api/catalogue.js';
import type { InstanceRef } from '../api/lifecycle.js';
import { type SchedulerRef, schedulerSettings, withdrawDemandsOf } from '../gateway/lifecycleClient.js';
import { LoadBoard } from '../gateway/loadBoard.js';
import { RequestQueue } from '../gateway/requestQueue.js';
import { RoutingTable } from '../gateway/routingTable.js';
import { SchedulerOwnership } from '../gateway/schedulerOwnership.js';
import type { DeploymentSpec } from '../settings/deploymentDocument.js';
import type { ServerSettings } from '../settings/serverDocument.js';
import type { Db } from '../store/db.js';
import { migrate } from '../store/migrate.js';
import { buildInfo } from '../processes/build.js';
import { findServer, storeId } from '../store/servers.js';
import { taskQueues } from '../workflows/definitions.js';
import { DemandDelivery } from './demandDelivery.js';
import { Deploys } from './deploys.js';
import { EngineExits } from './engineExits.js';
import { EngineLoss } from './engineLoss.js';
import { HostDirectory } from './hostDirectory.js';
import { hostEvents } from './hostEvents.js';
import { engineRoutes, Listeners } from './listeners.js';
import { ServerMetrics } from './metrics.js';
import { StatusHistory } from '../gateway/statusHistory.js';
import { operatorLifecycle } from './operatorLifecycle.js';
import { RegistryBeat } from './registryBeat.js';
import { createServerActivities, serveRecorded } from './serverActivities.js';
import { storePorts } from './storePorts.js';
import { TemporalConnections } from './temporal.js';
import { Workers } from './workers.js';

export { ListenRefused } from './listeners.js';

export interface ServerDeps {
  settings: ServerSettings;
  /** Names this server's task queue; several servers on one Temporal each have their own. */
  serverId: string;
  adminToken: string;
  db: Db;
  logger: Logger;
  /**
   * Engines this process reaches directly (a standalone's own host): their requests skip the host
   * ingress. An instance it does not know goes through the ingress as on any host.
   */
  localEngines?: { urlOf(instance: InstanceRef): string | undefined };
  /** The inference listener's own bearer token (CAPYCTL_INFERENCE_TOKEN); none by default. */
  inferenceToken?: string;
}

export interface RunningServer {
  inferenceUrl: string;
  managementUrl: string;
  /** This server's own queue: its gateway's steps. */
  serverTaskQueue: string;
  /** The queue every server on this store runs the lifecycle's workflows on. */
  workflowTaskQueue: string;
  client: Client;
  queue: RequestQueue;
  table: RoutingTable;
  board: LoadBoard;
  /** The scheduler of a host, as commands and demands reach it. */
  schedulerRef(hostId: string): SchedulerRef;
  /** Saves a deployment document; a new revision's checkpoint is measured on the host it would run on. */
  deploy(spec: DeploymentSpec): Promise<SaveResult>;
  stop(): Promise<void>;
}

/** The store, and what this server learns of it as it starts: its own queues, the routing table. */
async function openStore(db: Db, serverId: string) {
  await migrate(db);
  const store = storePorts(db);
  const table = new RoutingTable();
  await table.loadFrom(store);
  const storeName = await storeId(db);
  return {
    store,
    table,
    serverTaskQueue: taskQueues.server(storeName, serverId),
    workflowTaskQueue: taskQueues.workflows(storeName),
    // The queue a killed previous run of this server reported its demands from, when its name was
    // another (before queues were named by the store): they are withdrawn with this queue's.
    previousQueue: (await findServer(db, serverId))?.taskQueue,
  };
}

/**
 * The parts that hold the server's memory and act on it, built and wired: the hosts, the request
 * queue and where its demands go, engines lost, deploys, and the activities the workers run.
 */
async function buildCore({ settings, db, logger }: ServerDeps, opened: Awaited<ReturnType<typeof openStore>>) {
  const { store, table, serverTaskQueue, workflowTaskQueue } = opened;
  const board = new LoadBoard();
  const { address, namespace } = settings.temporal;
  if (address === undefined) throw new Error('server.temporal.address is not set');
  const temporal = await TemporalConnections.connect({ address, namespace });
  const { client } = temporal;
  // Whose each host's scheduler is: a host another installation on this namespace schedules is refused.
  const ownership = new SchedulerOwnership({
    client,
    ownTaskQueue: workflowTaskQueue,
    temporal: { address, namespace },
    logger,
  });
  const directory: HostDirectory = new HostDirectory({
    hosts: store.hosts,
    ownership,
    downAfterMs: settings.hosts.down_after,
    onDown: (hostId) => engineLoss.goneOn(hostId),
    logger,
  });
  await directory.load();
  const schedulerRef = (hostId: string): SchedulerRef => ({
    hostId,
    serverTaskQueue: workflowTaskQueue,
    settings: schedulerSettings(settings, directory.queueOf(hostId)),
  });
  const queue: RequestQueue = new RequestQueue({
    limits: () => directory.limits(),
    onDemand: (demand) => delivery.demanded(demand),
    // A request goes to the least loaded serving instance, the engine's own fresh figures counted.
    engineLoad: (deploymentId, instanceIndex) => board.freshEngine(deploymentId, instanceIndex, Date.now()),
  });
  const delivery = new DemandDelivery({
    store,
    table,
    queue,
    directory,
    ownership,
    client,
    schedulerRef,
    serverTaskQueue,
    logger,
  });
  const metrics = new ServerMetrics({
    table,
    queue,
    board,
    db,
    hosts: () => directory.ids().map((host) => ({ host, up: directory.liveness.stateOf(host, false) !== 'down' })),
    build: buildInfo(),
  });
  const history = new StatusHistory(
    () => queue.waitingTotal(),
    () => metrics.errorsByCode(),
  );
  for (const d of table.list()) for (const i of d.instances) serveRecorded(queue, { deploymentId: d.id, ...i });
  const exits = EngineExits.fromRecorded(table.list());
  const activities = createServerActivities({
    db,
    serverTaskQueue,
    queue,
    table,
    exits,
    // Requests a host cannot make room for go to another host that can serve them, else are refused.
    sendElsewhere: (hostId, deploymentId) => delivery.sendElsewhere(hostId, deploymentId),
    switchEnded: (receipt) => metrics.switchEnded(receipt),
    // Requests that waited for the measurement are refused if no GPU could hold what it found.
    measured: (deploymentId) => delivery.measured(deploymentId),
  });
  const engineLoss: EngineLoss = new EngineLoss({
    exits,
    queue,
    table,
    saveInstance: activities.saveInstance,
    ownership,
    client,
  });
  const deploys = new Deploys({
    catalogue: store.catalogue,
    table,
    placement: (deployment) => delivery.placement(deployment),
    client,
    workflowTaskQueue,
  });
  return {
    ...opened,
    board,
    temporal,
    client,
    ownership,
    directory,
    schedulerRef,
    queue,
    delivery,
    metrics,
    history,
    activities,
    engineLoss,
    deploys,
  };
}

type Core = Awaited<ReturnType<typeof buildCore>>;

/** The management listener (host agents, and operators with the admin token) and the inference one. */
function listenersOf(core: Core, { settings, adminToken, logger, localEngines, inferenceToken }: ServerDeps) {
  const { store, board, table, queue, metrics, history, directory, ownership, client, schedulerRef } = core;
  const { engineLoss, deploys, delivery } = core;
  return Listeners.build({
    listen: settings.listen,
    drainMs: settings.switching.drain_timeout,
    logger,
    management: {
      store,
      board,
      logger,
      hostEvents: hostEvents({
        directory,
        ownership,
        client,
        schedulerRef,
        table,
        engineLoss,
        deploys,
        delivery,
        metrics,
        recordProblem: store.catalogue.recordProblem,
      }),
      metricsToken: settings.metrics.token,
      admin: {
        adminToken,
        table,
        figures: queue,
        lifecycle: operatorLifecycle({
          hosts: store.hosts,
          directory,
          ownership,
          client,
          schedulerRef,
          delivery,
          deploys,
        }),
        metrics: metrics.registry,
        webUi: { url: settings.temporal.web_ui, namespace: settings.temporal.namespace },
        history,
      },
    },
    inference: {
      table,
      queue,
      metrics,
      logger,
      token: inferenceToken,
      routeTo: engineRoutes(table, directory, localEngines),
    },
  });
}

function registryBeatOf(core: Core, { serverId, logger }: ServerDeps) {
  const { store, directory, table, ownership, client, engineLoss, delivery } = core;
  return new RegistryBeat({
    self: { id: serverId, taskQueue: core.serverTaskQueue },
    store,
    directory,
    table,
    withdrawDemands: (hostId, taskQueue) => ownership.ifOwn(hostId, () => withdrawDemandsOf(client, hostId, taskQueue)),
    learnStopped: (instance) => engineLoss.learnStopped(instance),
    reportAgain: () => delivery.reportAgain(),
    logger,
  });
}

export async function startServer(deps: ServerDeps): Promise<RunningServer> {
  const core = await buildCore(deps, await openStore(deps.db, deps.serverId));
  const { temporal, directory, delivery, serverTaskQueue, workflowTaskQueue } = core;
  const listeners = await listenersOf(core, deps);
  const beat = registryBeatOf(core, deps);
  const workers = new Workers({
    temporal,
    activities: core.activities,
    drainMs: deps.settings.switching.drain_timeout,
    workflowTaskQueue,
    serverTaskQueue,
    logger: deps.logger,
  });

  // Both listeners bind before the worker takes any task: a second server started on the same
  // addresses (and task queue) refuses to start instead of running this one's switches.
  let urls: { managementUrl: string; inferenceUrl: string };
  try {
    urls = await listeners.start();
  } catch (e) {
    await temporal.close();
    throw e;
  }
  // Listed as soon as its listeners are its own: a switch that begins from now on reaches its requests.
  await beat.enlist();
  await workers.start();
  // Until the schedulers have forgotten the previous run's demands, this run's wait: sent before,
  // they would be forgotten with them.
  await delivery.open(core.previousQueue);
  directory.start();
  beat.start();
  core.history.start();

  return {
    ...urls,
    serverTaskQueue,
    workflowTaskQueue,
    client: core.client,
    queue: core.queue,
    table: core.table,
    board: core.board,
    schedulerRef: core.schedulerRef,
    deploy: (spec) => core.deploys.deploy(spec),
    /**
     * Takes no more requests (new and waiting ones are answered 503 dispatch closed), lets the
     * running answers finish within the drain bound, then stops the listeners and the worker.
     */
    async stop() {
      core.history.stop();
      await directory.stop();
      await listeners.stop();
      await beat.stop();
      await workers.stop();
      await beat.leave();
      await temporal.close();
    },
  };
}
