/**
 * The server (`capyctl start server`): the management listener, the request queue and the routing
 * table it routes by, and a Temporal worker running every workflow with the server-side activities
 * (the store's, and the gateway's switch steps, which must run where the queue lives).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import {
  configureScheduler,
  ensureScheduler,
  type SchedulerRef,
  reportDemand,
  schedulerSettings,
  sendCommand,
  startMeasurement,
  switchResult,
  withdrawDemandsOf,
} from '../gateway/lifecycleClient.js';
import type { OperatorLifecycle } from '../gateway/management/operatorLifecycle.js';
import { latestInOrder } from '../gateway/demandReports.js';
import { LoadBoard } from '../gateway/loadBoard.js';
import { buildInferenceApp } from '../gateway/inferenceApp.js';
import { buildManagementApp } from '../gateway/managementApp.js';
import { RequestQueue } from '../gateway/requestQueue.js';
import { SchedulerOwnership } from '../gateway/schedulerOwnership.js';
import { type RoutedDeployment, RoutingTable } from '../gateway/routingTable.js';
import { installTemporalRuntime } from '../logging/temporalRuntime.js';
import { INGRESS_SECRET_HEADER } from '../domain/hostIngress.js';
import { apiErrors, CapyError } from '../domain/catalogue.js';
import { type QueueSettings, queueSettings, REQUEST_DEADLINE_DEFAULT_MS, tightestOfHosts } from '../settings/queue.js';
import type { ServerSettings } from '../settings/serverDocument.js';
import { isLoopback, listenAddress } from '../settings/listenAddress.js';
import type { DeploymentSpec } from '../settings/deploymentDocument.js';
import type { Db } from '../store/db.js';
import { listDeployments, recordMeasureFailure, type SaveResult, saveDeployment } from '../store/deployments.js';
import { findHost, type Host, ingressSecrets, listHosts, markHostSeen, setHostDraining } from '../store/hosts.js';
import { type Instance, listInstances } from '../store/instances.js';
import { migrate } from '../store/migrate.js';
import { storePorts } from './storePorts.js';
import {
  findServer,
  forgetServer,
  markServerSeen,
  SERVER_BEAT_MS,
  storeId,
  takeGoneServers,
} from '../store/servers.js';
import { signals, STICKY_QUEUE_TIMEOUT_MS, taskQueues, workflowIds } from '../workflows/definitions.js';
import { instanceRow } from '../workflows/ledger.js';
import type { Demand, InstanceRef } from '../api/lifecycle.js';
import type { InstanceState } from '../domain/vocabulary.js';
import { EngineExits } from './engineExits.js';
import { HostLiveness } from './hostLiveness.js';
import { createServerActivities, learnInstance, serveRecorded } from './serverActivities.js';
import { ServerMetrics } from './metrics.js';
import { heldOn, instanceIndexes, mayRunOn, placeByLoad } from '../gateway/placement.js';
import { instanceCount } from '../engines/rules.js';
import { workflowBundle } from './workflowBundle.js';

/** A listener's address is taken (another server runs there) or not this machine's: the server does not start. */
export class ListenRefused extends Error {}

const LISTEN_FAILURES: Record<string, string> = {
  EADDRINUSE: 'address already in use',
  EADDRNOTAVAIL: 'address not available on this machine',
  EACCES: 'permission denied',
};

async function listen(app: FastifyInstance, address: string): Promise<string> {
  try {
    return await app.listen(listenAddress(address));
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new ListenRefused(`cannot listen on ${address}: ${(code && LISTEN_FAILURES[code]) ?? (e as Error).message}`);
  }
}

/** How often a stopping server looks whether its running answers have finished. */
const STOP_POLL_MS = 50;
/**
 * How long a stopping listener waits for its replies to leave once nothing runs any more: enough
 * to write the 503s just given to the waiters. A connection still open then (one that never sent
 * its request, say) would hold the stop for ever.
 */
const REPLIES_OUT_MS = 1_000;

/** A host's queue settings before it has told them: the host document's defaults. */
const HOST_QUEUE_DEFAULTS: QueueSettings = queueSettings(REQUEST_DEADLINE_DEFAULT_MS.server).parse({});

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

/** Closes a listener: its replies in progress may finish within `ms`, then every connection is cut. */
async function closeWithin(app: FastifyInstance, ms: number): Promise<void> {
  const cut = setTimeout(() => app.server.closeAllConnections(), ms);
  try {
    await app.close();
  } finally {
    clearTimeout(cut);
  }
}

export async function startServer({
  settings,
  serverId,
  adminToken,
  db,
  logger,
  localEngines,
  inferenceToken,
}: ServerDeps): Promise<RunningServer> {
  await migrate(db);
  const store = storePorts(db);
  const table = new RoutingTable();
  await table.loadFrom(store);
  const board = new LoadBoard();
  const storeName = await storeId(db);
  const serverTaskQueue = taskQueues.server(storeName, serverId);
  const workflowTaskQueue = taskQueues.workflows(storeName);
  // The queue a killed previous run of this server reported its demands from, when its name was
  // another (before queues were named by the store): they are withdrawn with this queue's.
  const previousQueue = (await findServer(db, serverId))?.taskQueue;
  const self = { id: serverId, taskQueue: serverTaskQueue };
  const { address, namespace } = settings.temporal;
  if (address === undefined) throw new Error('server.temporal.address is not set');
  const client = new Client({ connection: await Connection.connect({ address }), namespace });
  // Whose each host's scheduler is: a host another installation on this namespace schedules is refused.
  const ownership = new SchedulerOwnership({
    client,
    ownTaskQueue: workflowTaskQueue,
    temporal: { address, namespace },
    logger,
  });

  // Each host's own queue settings: the waiting limits are the tightest of them, the window its own.
  const hostQueues = new Map<string, QueueSettings>();
  // Where each host's ingress takes the requests for its engines, and the secret it takes them with.
  const hostIngress = new Map<string, { url: string; headers: Record<string, string> }>();
  const ingressOf = (url: string, secret: string) => ({ url, headers: { [INGRESS_SECRET_HEADER]: secret } });
  // Hosts an operator drained: nothing is placed on them any more.
  const drainingHosts = new Set<string>();
  /** A host as the store records it (registered with this server's previous run, or with another server). */
  const knowHost = (host: Host, secret: string | undefined) => {
    hostQueues.set(host.id, (host.settings.queue as QueueSettings | undefined) ?? HOST_QUEUE_DEFAULTS);
    if (typeof host.settings.ingress_url === 'string' && secret !== undefined)
      hostIngress.set(host.id, ingressOf(host.settings.ingress_url, secret));
    if (host.draining) drainingHosts.add(host.id);
  };
  const secrets = await ingressSecrets(db);
  for (const host of await listHosts(db)) knowHost(host, secrets.get(host.id));
  // Hosts that report, and whose agent is not stopping.
  const liveness = new HostLiveness({
    downAfterMs: settings.hosts.down_after,
    onDown: (hostId) => enginesGoneOn(hostId),
    persistSeen: (hostId, at) => markHostSeen(db, hostId, at),
    storedSeen: async (hostId) => (await findHost(db, hostId))?.lastSeenAt,
    logger,
  });
  // A host served is one that reports, whose agent is not stopping and whose scheduler is this
  // installation's: only they are routed and placed on, and set the waiting limits.
  const serves = (hostId: string) => liveness.serves(hostId) && !ownership.refusal(hostId);
  const placeable = () => [...hostQueues.keys()].filter((h) => !drainingHosts.has(h) && serves(h));
  // Where each deployment's waiting requests were sent: its next demands go there too, and it counts
  // in those hosts' load until it holds memory there.
  const sentTo = new Map<string, string[]>();
  /**
   * The hosts of the deployment's instances, one per instance it may have (gateway/placement.ts): where
   * they are held, then where its requests were sent, then by the rule; the store is read only when
   * more than one host could take the next. None when no host may run it.
   */
  async function placement(deployment: RoutedDeployment): Promise<string[]> {
    const hosts = placeable();
    const wanted = instanceCount(deployment.spec);
    const placed = heldOn(deployment, hosts).slice(0, wanted);
    for (const sent of sentTo.get(deployment.id) ?? [])
      if (placed.length < wanted && hosts.includes(sent) && !placed.includes(sent)) placed.push(sent);
    while (placed.length < wanted) {
      const allowed = hosts.filter((h) => mayRunOn(deployment, h) && !placed.includes(h));
      const next = allowed.length <= 1 ? allowed[0] : await placeByLoad(store, deployment, allowed, sentTo);
      if (next === undefined) break;
      placed.push(next);
    }
    return placed;
  }
  // Demands are placed one at a time: each is counted where it went before the next is weighed.
  let demandsPlaced: Promise<unknown> = Promise.resolve();
  function placeDemand(deployment: RoutedDeployment, demand: Demand): Promise<string[]> {
    const placed = demandsPlaced.then(async () => {
      const hostIds = await placement(deployment);
      if (hostIds.length > 0 && demand.waiting > 0) sentTo.set(deployment.id, hostIds);
      else sentTo.delete(deployment.id);
      return hostIds;
    });
    demandsPlaced = placed.catch(() => undefined);
    return placed;
  }
  /**
   * A host other than `refusedOn` that can serve the deployment by evicting (gateway/placement.ts), for the
   * requests `refusedOn` refused for capacity; none for a model held on as many hosts as it may have
   * instances (it wakes where it is).
   */
  async function servableElsewhere(deployment: RoutedDeployment, refusedOn: string): Promise<string | undefined> {
    const hosts = placeable();
    const held = heldOn(deployment, hosts);
    if (held.length >= instanceCount(deployment.spec)) return undefined;
    const others = hosts.filter((h) => h !== refusedOn && !held.includes(h) && mayRunOn(deployment, h));
    return others.length === 0 ? undefined : placeByLoad(store, deployment, others, sentTo, true);
  }
  const schedulerRef = (hostId: string): SchedulerRef => ({
    hostId,
    serverTaskQueue: workflowTaskQueue,
    settings: schedulerSettings(settings, hostQueues.get(hostId) ?? HOST_QUEUE_DEFAULTS),
  });

  // The scheduler run each host's demands last reached. A new run after a terminate knows nothing
  // of the old one's demands: every waiting one is reported again (after a continue-as-new, which
  // carries them, that changes nothing).
  const schedulerRuns = new Map<string, string>();
  const deliverDemand = latestInOrder(
    async (demand) => {
      const deployment = table.get(demand.deploymentId);
      const hostIds = deployment ? await placeDemand(deployment, demand) : [];
      if (!deployment || hostIds.length === 0) {
        // Only a host another installation schedules may run it: no worker here would ever take its
        // requests, so they are answered now, not at their deadline.
        const refused = deployment && ownership.refusalFor(deployment);
        if (refused) {
          const failed = queue.failWaiters(demand.deploymentId, refused);
          if (failed > 0) logger.warn({ deploymentId: demand.deploymentId, failed }, refused.message);
          return;
        }
        logger.warn(
          { deploymentId: demand.deploymentId },
          'no registered host may run this deployment; its requests wait',
        );
        return;
      }
      // Each instance's host hears it: every one that does not serve yet wakes or starts.
      const indexes = instanceIndexes(deployment, hostIds);
      await Promise.all(
        hostIds.map(async (hostId) => {
          // A host found to be another installation's is refused: the demand is placed again without it.
          if (await ownership.foreign(hostId)) return deliverDemand(demand);
          const runId = await reportDemand(client, schedulerRef(hostId), {
            ...demand,
            serverTaskQueue,
            instanceIndex: indexes.get(hostId),
          });
          const before = schedulerRuns.get(hostId);
          schedulerRuns.set(hostId, runId);
          // A new run is looked at once: it may have been started by the other installation.
          if (await ownership.foreign(hostId, { runId })) return deliverDemand(demand);
          if (before !== undefined && before !== runId) redeliverDemands();
        }),
      );
    },
    (e, demand) => logger.error({ err: e, ...demand }, 'demand not delivered'),
  );
  // Until the schedulers have forgotten the previous run's demands (below), this run's wait here: sent
  // before, they would be forgotten with them.
  let demandsOpen = false;
  const queue = new RequestQueue({
    // Only the hosts that serve set them: one that stopped or went down no longer does, until it registers again.
    limits: () =>
      tightestOfHosts(
        [...hostQueues].filter(([hostId]) => serves(hostId)).map(([, q]) => q),
        HOST_QUEUE_DEFAULTS,
      ),
    onDemand: (demand) => demandsOpen && deliverDemand(demand),
    // A request goes to the least loaded serving instance, the engine's own fresh figures counted.
    engineLoad: (deploymentId, instanceIndex) => board.freshEngine(deploymentId, instanceIndex, Date.now()),
  });
  const metrics = new ServerMetrics({ table, queue, board, db });
  const redeliverDemands = () => {
    for (const demand of queue.snapshot().demands) deliverDemand(demand);
  };

  for (const d of table.list()) for (const i of d.instances) serveRecorded(queue, { deploymentId: d.id, ...i });

  const exits = EngineExits.fromRecorded(table.list());
  const activities = createServerActivities({
    db,
    serverTaskQueue,
    queue,
    table,
    exits,
    // Requests a host cannot make room for go to another host that can serve them, else are refused.
    async sendElsewhere(hostId, deploymentId) {
      const deployment = table.get(deploymentId);
      const elsewhere = deployment && (await servableElsewhere(deployment, hostId));
      const demand = elsewhere && queue.snapshot().demands.find((d) => d.deploymentId === deploymentId);
      if (!demand) return false;
      sentTo.set(deploymentId, [...(sentTo.get(deploymentId) ?? []).filter((h) => h !== hostId), elsewhere]);
      deliverDemand(demand);
      return true;
    },
    switchEnded: (outcome, phases) => metrics.switchEnded(outcome, phases),
  });

  /**
   * An engine that is gone without being asked (it exited, or its host agent restarted): nothing is
   * routed to it, the catalogue lists it stopped, and its next request asks for a fresh start.
   */
  async function engineGone(hostId: string, instance: InstanceRef) {
    exits.record(hostId, instance);
    // At once, before the row is written (which withdraws it too).
    queue.withdraw(instance);
    await activities.saveInstance(instanceRow(hostId, instance, 'stopped', null, null));
    await ownership.ifOwn(hostId, () =>
      client.workflow.getHandle(workflowIds.hostScheduler(hostId)).signal(signals.engineExited, instance),
    );
  }

  /**
   * An instance the store lists stopped: that generation is over for good (every start takes a newer
   * one), so nothing is routed to it here either, though this server did not hear of it (its engine
   * exited, or its host was found down, as another server of the store heard it).
   */
  function learnStopped(stopped: Instance) {
    const { deploymentId, index: instanceIndex, hostId, generation } = stopped;
    exits.record(hostId, { deploymentId, instanceIndex, generation });
    learnInstance(queue, table, stopped);
  }

  /**
   * The engines the catalogue lists on the host in the states `gone` picks are gone: its agent
   * started again, stops, or stopped reporting. Requests already running there finish; new ones
   * wait for a start on a host that serves. By default the ready and parked: a switch in flight
   * settles its own instances.
   */
  async function enginesGoneOn(
    hostId: string,
    gone: (state: InstanceState) => boolean = (state) => state === 'ready' || state === 'parked',
  ) {
    for (const d of table.list()) {
      for (const i of d.instances) {
        if (i.hostId === hostId && gone(i.observedState)) {
          await engineGone(hostId, { deploymentId: d.id, instanceIndex: i.index, generation: i.generation });
        }
      }
    }
  }

  /** Saves a deployment document; a new revision's checkpoint is measured on the host it would run on. */
  async function deploy(spec: DeploymentSpec): Promise<SaveResult> {
    const saved = await saveDeployment(db, spec);
    table.putDeployment(saved.deployment);
    const { id, revision } = saved.deployment;
    const [hostId] = await placement(table.get(id)!);
    if (saved.measure && hostId)
      await startMeasurement(client, { deploymentId: id, revision, hostId, serverTaskQueue: workflowTaskQueue });
    return saved;
  }

  /**
   * Measures what waits for this host to read its checkpoint: a revision deployed while no host
   * could, or one this host failed to read before it restarted or came back from a drain.
   */
  async function measurePendingOn(hostId: string) {
    for (const d of await listDeployments(db)) {
      if (d.checkpoint === null && (await placement(table.get(d.id)!))[0] === hostId) {
        if (d.measureFailure !== null) await recordMeasureFailure(db, d.id, d.revision, null);
        await startMeasurement(client, {
          deploymentId: d.id,
          revision: d.revision,
          hostId,
          serverTaskQueue: workflowTaskQueue,
        });
      }
    }
  }

  const lifecycle: OperatorLifecycle = {
    placement,
    async command(hostId, update, ...args) {
      await ownership.refuseIfForeign(hostId);
      return sendCommand(client, schedulerRef(hostId), update, ...args);
    },
    deploy,
    async drainHost(hostId) {
      await ownership.refuseIfForeign(hostId);
      await setHostDraining(db, hostId, true);
      drainingHosts.add(hostId);
      return sendCommand(client, schedulerRef(hostId), 'drainHost');
    },
    async undrainHost(hostId) {
      await setHostDraining(db, hostId, false);
      drainingHosts.delete(hostId);
      await measurePendingOn(hostId);
    },
    switchResult: (switchId) => switchResult(client, switchId),
    hostLiveness: (host) => ({
      state: liveness.stateOf(host.id, host.draining),
      lastSeenAt: liveness.lastSeenAt(host.id, host.lastSeenAt),
    }),
  };

  const management: FastifyInstance = await buildManagementApp({
    store,
    board,
    logger,
    hostEvents: {
      async registered(hostId, body, ingressSecret) {
        // Known as the store now has it, refused or not: the store's other servers learn it there.
        hostQueues.set(hostId, (body.settings.queue as QueueSettings | undefined) ?? HOST_QUEUE_DEFAULTS);
        hostIngress.set(hostId, ingressOf(body.ingress_url, ingressSecret));
        // Refused before anything reaches a scheduler another installation runs; its agent prints the
        // line and exits, and the requests only it could serve are answered with it. A host no
        // installation schedules yet is taken now, so two that name a host alike never both accept it.
        const runId = await ensureScheduler(client, schedulerRef(hostId));
        const foreign = await ownership.foreign(hostId, { runId, fresh: true });
        if (foreign) {
          // Its agent exits: shown down once it has been silent for the bound.
          liveness.know(hostId);
          if (demandsOpen) redeliverDemands();
          throw new CapyError(apiErrors.hostOfAnotherInstallation(foreign));
        }
        liveness.registered(hostId);
        table.setHostActivation(hostId, body.settings.activation === 'explicit' ? 'explicit' : 'on_demand');
        await configureScheduler(client, schedulerRef(hostId));
        // A host agent registers when it starts, and a starting agent runs no engine: whatever the
        // catalogue lists there but stopped is gone, on its way in or out too. A switch still in
        // flight on such an instance must not start its waiters on it or record it serving
        // (`startWaiters`, `saveInstance`); its next request starts it afresh.
        await enginesGoneOn(hostId, (state) => state !== 'stopped');
        await measurePendingOn(hostId);
        // Requests that waited while no host could take them are asked for again.
        if (demandsOpen) redeliverDemands();
      },
      runsOn: (hostId, deploymentId, instanceIndex) => table.hostOf(deploymentId, instanceIndex) === hostId,
      async engineExited(hostId, exit) {
        await engineGone(hostId, {
          deploymentId: exit.deployment_id,
          instanceIndex: exit.instance_index,
          generation: exit.generation,
        });
      },
      heard: (hostId) => liveness.heard(hostId),
      async stopping(hostId) {
        liveness.markStopping(hostId);
        await enginesGoneOn(hostId);
      },
    },
    metricsToken: settings.metrics.token,
    admin: {
      adminToken,
      table,
      figures: queue,
      lifecycle,
      metrics: metrics.registry,
      webUi: { url: settings.temporal.web_ui, namespace: settings.temporal.namespace },
    },
  });

  const inference = await buildInferenceApp({
    table,
    queue,
    metrics,
    logger,
    token: inferenceToken,
    routeTo: (instance) => {
      const { deploymentId, instanceIndex } = instance;
      // Starting the waiters told the table which host the instance runs on before any request was let through.
      const hostId = table.hostOf(deploymentId, instanceIndex);
      // The host's own bound, as it last registered.
      const streamIdleMs = ((hostId && hostQueues.get(hostId)) || HOST_QUEUE_DEFAULTS).stream_idle_timeout;
      const local = localEngines?.urlOf(instance);
      if (local !== undefined) return { url: local, streamIdleMs };
      const ingress = hostId && hostIngress.get(hostId);
      if (!ingress) throw new Error(`no host is known to run instance ${deploymentId}/${instanceIndex}`);
      return {
        url: `${ingress.url}/instances/${deploymentId}/${instanceIndex}`,
        streamIdleMs,
        headers: ingress.headers,
      };
    },
  });

  /**
   * This server's heartbeat in the store's list of servers. A server found gone has the demands it
   * reported withdrawn (a killed one never withdraws them, and they would keep their models on the
   * GPUs); a host that registered with another server, a deployment saved, changed or deleted
   * through another server, and an engine gone as another server heard it, are learned here.
   */
  async function registryBeat() {
    try {
      // Taken for gone while it was only slow: its demands were withdrawn, and are reported again.
      if ((await markServerSeen(db, self)) && demandsOpen) redeliverDemands();
      for (const gone of await takeGoneServers(db)) {
        logger.warn({ serverId: gone.id }, 'a server of this store stopped reporting: its demands are withdrawn');
        await Promise.all(
          [...hostQueues.keys()].map((hostId) =>
            ownership.ifOwn(hostId, () => withdrawDemandsOf(client, hostId, gone.taskQueue)),
          ),
        );
      }
      const hosts = (await listHosts(db)).filter((h) => !hostQueues.has(h.id));
      const hostSecrets = hosts.length > 0 ? await ingressSecrets(db) : new Map<string, string>();
      for (const host of hosts) {
        knowHost(host, hostSecrets.get(host.id));
        liveness.know(host.id);
        logger.info({ hostId: host.id }, 'host registered with another server of this store');
      }
      const saved = await listDeployments(db);
      for (const d of saved) {
        const known = table.get(d.id);
        if (!known || known.revision !== d.revision || known.operatorStopped !== d.operatorStopped)
          table.putDeployment(d);
      }
      const ids = new Set(saved.map((d) => d.id));
      for (const d of table.list()) if (!ids.has(d.id)) table.removeDeployment(d.id);
      for (const instance of await listInstances(db)) if (instance.observedState === 'stopped') learnStopped(instance);
    } catch (e) {
      logger.warn({ err: e }, "the store did not take this server's heartbeat");
    }
  }

  // Both listeners bind before the worker takes any task: a second server started on the same
  // addresses (and task queue) refuses to start instead of running this one's switches.
  let managementUrl: string;
  let inferenceUrl: string;
  try {
    managementUrl = await listen(management, settings.listen.management);
    inferenceUrl = await listen(inference, settings.listen.inference);
    if (inferenceToken === undefined && !isLoopback(listenAddress(settings.listen.inference).host)) {
      logger.warn(
        { inferenceUrl },
        'the inference listener is reachable beyond this machine and asks for no token: set CAPYCTL_INFERENCE_TOKEN',
      );
    }
  } catch (e) {
    await Promise.all([management.close(), inference.close()]);
    await client.connection.close();
    throw e;
  }
  // Listed as soon as its listeners are its own: a switch that begins from now on reaches its requests.
  await markServerSeen(db, self);

  installTemporalRuntime(logger);
  const workerConnection = await NativeConnection.connect({ address });
  const workerOptions = {
    connection: workerConnection,
    namespace,
    activities,
    shutdownGraceTime: settings.switching.drain_timeout,
    // A stop always ends: a task still held at twice the drain bound is left to the next start,
    // which finishes or compensates its switch.
    shutdownForceTime: 2 * settings.switching.drain_timeout,
  };
  // The workflows, with the store's rows and this gateway's instant steps as their local
  // activities, on the queue every server of the store polls; and this gateway's steps on its own
  // queue, where a switch run by any server reaches its requests (workflows/everyGateway.ts).
  const workers = [
    await Worker.create({
      ...workerOptions,
      taskQueue: workflowTaskQueue,
      workflowBundle: await workflowBundle(),
      stickyQueueScheduleToStartTimeout: STICKY_QUEUE_TIMEOUT_MS,
    }),
    await Worker.create({ ...workerOptions, taskQueue: serverTaskQueue }),
  ];
  const running = Promise.all(workers.map((w) => w.run()));
  // A host's scheduler outlives this server's last run: it takes the settings as they are now, and
  // forgets the demands of that run's requests (they died with it, and would keep the GPU for them).
  // Then the requests this run took meanwhile report theirs. A host another installation
  // schedules is told nothing, and refused.
  await Promise.all(
    [...hostQueues.keys()].map((hostId) =>
      ownership.ifOwn(hostId, async () => {
        await configureScheduler(client, schedulerRef(hostId));
        await withdrawDemandsOf(client, hostId, serverTaskQueue);
        if (previousQueue !== undefined && previousQueue !== serverTaskQueue)
          await withdrawDemandsOf(client, hostId, previousQueue);
      }),
    ),
  );
  demandsOpen = true;
  redeliverDemands();

  liveness.watch([...hostQueues.keys()]);
  // One beat at a time: a slow store does not pile them up.
  let beating = Promise.resolve();
  const beat = setInterval(() => (beating = beating.then(registryBeat)), SERVER_BEAT_MS);

  return {
    inferenceUrl,
    managementUrl,
    serverTaskQueue,
    workflowTaskQueue,
    client,
    queue,
    table,
    board,
    schedulerRef,
    deploy,
    /**
     * Takes no more requests (new and waiting ones are answered 503 dispatch closed), lets the
     * running answers finish within the drain bound, then stops the listeners and the worker.
     */
    async stop() {
      await liveness.stop();
      queue.stopTaking();
      const drainedBy = Date.now() + settings.switching.drain_timeout;
      while (queue.runningTotal() > 0 && Date.now() < drainedBy) await sleep(STOP_POLL_MS);
      const stillRunning = queue.runningTotal();
      if (stillRunning > 0) logger.warn({ running: stillRunning }, 'answers still running at the drain bound are cut');
      await closeWithin(inference, stillRunning > 0 ? 0 : REPLIES_OUT_MS);
      await closeWithin(management, REPLIES_OUT_MS);
      clearInterval(beat);
      await beating;
      for (const w of workers) w.shutdown();
      await running.catch((e: unknown) =>
        logger.warn({ err: e }, 'the worker stopped with tasks unfinished; the next start takes them up'),
      );
      await forgetServer(db, serverId).catch((e: unknown) =>
        logger.warn({ err: e }, 'could not take this server out of the store; it is gone once unseen'),
      );
      await workerConnection.close();
      await client.connection.close();
    },
  };
}
