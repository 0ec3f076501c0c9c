/**
 * The operator's deployment routes (`capyctl deploy`, `start`, `stop`, `park`, `preinitialize`,
 * `delete`, `list deployments`, `status deployment`). A command goes to the scheduler of the host the
 * deployment runs on, and answers with its receipt, which names the switch that carried it out. Two
 * plugins, each with its schemas: the deployments and each one (`catalogueRoutes`), and a deployment's
 * commands (`commandRoutes`).
 */
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { documentRefusal, hostsRefusal, instanceCount } from '../../engines/rules.js';
import { gpusPerInstance } from '../../engines/parallelism.js';
import { apiErrors, CapyError } from '../../domain/catalogue.js';
import { checkpointOf, measurementState, unmeasuredRefusal } from '../../domain/measurement.js';
import { crashLooping } from '../../domain/problems.js';
import { deploymentDocument } from '../../settings/deploymentDocument.js';
import { fitsNoGpu, instanceIndexes, liveInstances, mayRunOn, tooFewGpus } from '../placement.js';
import type { Deployment, Host } from '../../api/catalogue.js';
import type { Catalogue, HostReads } from '../ports.js';
import {
  type DeploymentBody,
  deploymentBody,
  deployReply,
  type ReceiptBody,
  receiptBody,
} from '../../api/deployments.js';
import type { CommandReceipt } from '../../api/lifecycle.js';
import type { CommandArgs } from '../lifecycleClient.js';
import type { OperatorLifecycle } from './operatorLifecycle.js';
import { deploymentState, type RoutedDeployment, type RoutedInstance, type RoutingTable } from '../routingTable.js';
import { POLLED_LOG_LEVEL } from '../polledLogLevel.js';

const refParams = z.strictObject({ ref: z.string().min(1) });

/**
 * A command's receipt as the API sends it, each deployment with its name. `name` is the command's
 * deployment's, which a deleted one no longer has in the table.
 */
export function renderReceipt(r: CommandReceipt, name: string, table: RoutingTable): ReceiptBody {
  const nameOf = (id: string) => table.get(id)?.name ?? id;
  return {
    deployment_id: r.deploymentId,
    name,
    ...(r.switchId ? { switch_id: r.switchId } : {}),
    victims: r.victims.map((v) => ({
      deployment_id: v.deploymentId,
      name: nameOf(v.deploymentId),
      instance_index: v.instanceIndex,
      released: v.released,
      gpu_indexes: v.gpuIndexes,
    })),
    state: r.state,
  };
}

/**
 * One receipt for a command that each instance's host carried out: the first switch begun (the one
 * `--wait` follows) and its state, with every host's victims.
 */
function mergedReceipt(receipts: readonly CommandReceipt[]): CommandReceipt {
  const followed = receipts.find((r) => r.switchId !== undefined) ?? receipts[0]!;
  return { ...followed, victims: receipts.flatMap((r) => r.victims) };
}

export interface DeploymentRouteDeps {
  catalogue: Catalogue;
  hosts: HostReads;
  table: RoutingTable;
  lifecycle: OperatorLifecycle;
}

/** What a measured revision reserves, as the API says it; nothing while it is not measured. */
function memoryOf(d: Deployment): Pick<DeploymentBody, 'memory'> {
  const c = checkpointOf(d);
  if (c === null) return {};
  return {
    memory: {
      weight_bytes: c.weightBytes,
      kv_bytes: c.kvBytes,
      parked_residue_bytes: c.residueBytes,
      max_model_len: c.maxModelLen,
      max_model_len_from: c.maxModelLenFrom,
    },
  };
}

/**
 * What a parked instance's engine is counted as keeping: what its host measured after the park, else
 * the checkpoint's residue; nothing for an instance that is not parked.
 */
function parkedResidueOf(
  i: RoutedInstance,
  d: Deployment,
): Pick<DeploymentBody['instances'][number], 'parked_residue_bytes' | 'parked_residue_from'> {
  if (i.observedState !== 'parked') return {};
  if (i.residueBytes !== null) return { parked_residue_bytes: i.residueBytes, parked_residue_from: 'measured' };
  const c = checkpointOf(d);
  return c === null ? {} : { parked_residue_bytes: c.residueBytes, parked_residue_from: 'reserved' };
}

/** Why no GPU it may run on could hold it, when none could: waiting for memory cannot help. */
function fitsNowhere(d: Deployment, hostList: readonly Host[] | undefined): { fits_nowhere?: string } {
  const refusal = hostList ? fitsNoGpu(d, hostList) : undefined;
  return refusal ? { fits_nowhere: refusal.message } : {};
}

/** What the routes share: a deployment as the API renders it, found by its ref, and the hosts that decide for it. */
function deploymentViews(deps: DeploymentRouteDeps) {
  const { catalogue, table, lifecycle } = deps;

  /**
   * The catalogue's row with the instances as the routing table holds them: the table learns a
   * target is ready before its waiters are answered, so a list after an answer shows it ready.
   */
  function render(d: Deployment, hostList?: readonly Host[]): DeploymentBody {
    const instances = table.get(d.id)?.instances ?? [];
    const state = deploymentState(instances);
    return {
      deployment_id: d.id,
      name: d.name,
      revision: d.revision,
      state,
      ready_instances: instances.filter((i) => i.observedState === 'ready').length,
      desired_instances: instanceCount(d.spec),
      hosts: [...new Set(liveInstances({ instances }).map((i) => i.hostId))],
      activation: table.get(d.id)?.activation ?? d.spec.lifecycle.activation,
      operator_stopped: d.operatorStopped,
      checkpoint: measurementState(d),
      ...(d.measureFailure !== null ? { checkpoint_failure: d.measureFailure } : {}),
      ...memoryOf(d),
      ...(d.startFailure !== null ? { start_failure: d.startFailure } : {}),
      ...(d.lastProblem !== null ? { last_problem: d.lastProblem } : {}),
      restarts: d.restarts,
      crash_loop: crashLooping(d.recentEndings, state, Date.now()),
      ...fitsNowhere(d, hostList),
      instances: instances.map((i) => ({
        index: i.index,
        host_id: i.hostId,
        generation: i.generation,
        state: i.observedState,
        ...(i.parkTier !== null ? { park_tier: i.parkTier } : {}),
        ...parkedResidueOf(i, d),
      })),
      spec: d.spec,
    };
  }

  async function find(ref: string): Promise<Deployment> {
    const d = await catalogue.deployment(ref);
    if (!d) throw new CapyError(apiErrors.notFound('deployment', ref));
    return d;
  }

  /** The deployment as the routing table holds it, with no instance before it has one. */
  const routedOf = (d: Deployment): RoutedDeployment =>
    table.get(d.id) ?? { ...d, activation: d.spec.lifecycle.activation, instances: [] };

  /**
   * The hosts whose schedulers decide for the deployment's instances: where they are held, else where
   * the placement rule puts them. A command that takes instances away (`holdingToo`) also reaches a
   * host holding one beyond its `instances` (a revision that asked for fewer).
   */
  async function hostsOf(routed: RoutedDeployment, holdingToo = false): Promise<string[]> {
    const placed = await lifecycle.placement(routed);
    const holding = holdingToo ? liveInstances(routed).map((i) => i.hostId) : [];
    return [...new Set([...placed, ...holding])];
  }

  return { render, find, routedOf, hostsOf };
}

type DeploymentViews = ReturnType<typeof deploymentViews>;

/** The deployments and each one: deploy, list, status, delete. */
function catalogueRoutes(deps: DeploymentRouteDeps, views: DeploymentViews) {
  const { catalogue, hosts, table, lifecycle } = deps;
  const { render, find, routedOf, hostsOf } = views;

  return async (app: FastifyInstance) => {
    const routes = app.withTypeProvider<ZodTypeProvider>();

    routes.post(
      '/management/v1/deployments',
      { schema: { body: deploymentDocument, response: { 200: deployReply, 201: deployReply } } },
      async (request, reply) => {
        // Refused where the operator can act, not at its first park.
        const spec = request.body;
        const mayRun = (await hosts.hosts()).filter((h) => mayRunOn({ spec }, h.id));
        const refusal =
          documentRefusal(spec)?.error ??
          hostsRefusal(spec, mayRun) ??
          tooFewGpus(spec.name, gpusPerInstance(spec), mayRun);
        if (refusal) throw new CapyError(refusal);
        // A new revision is measured where it may run; with no host yet, the host's registration starts it.
        const { deployment, outcome } = await lifecycle.deploy(request.body);
        request.log.info({ deploymentId: deployment.id, revision: deployment.revision, outcome }, 'deployment saved');
        return reply.code(outcome === 'created' ? 201 : 200).send({ outcome, deployment: render(deployment) });
      },
    );

    routes.get(
      '/management/v1/deployments',
      {
        logLevel: POLLED_LOG_LEVEL,
        schema: { response: { 200: z.object({ deployments: z.array(deploymentBody) }) } },
      },
      async () => {
        const hostList = await hosts.hosts();
        return { deployments: (await catalogue.deployments()).map((d) => render(d, hostList)) };
      },
    );

    routes.get(
      '/management/v1/deployments/:ref',
      { schema: { params: refParams, response: { 200: deploymentBody } } },
      async (request) => {
        return render(await find(request.params.ref), await hosts.hosts());
      },
    );

    routes.delete(
      '/management/v1/deployments/:ref',
      { schema: { params: refParams, response: { 200: receiptBody } } },
      async (request) => {
        const d = await find(request.params.ref);
        const [hostId, ...others] = await hostsOf(routedOf(d), true);
        if (hostId) {
          // The other instances stop first: the delete on the first host removes the catalogue's rows.
          await Promise.all(others.map((other) => lifecycle.command(other, 'stop', { deploymentId: d.id })));
          return renderReceipt(await lifecycle.command(hostId, 'delete', { deploymentId: d.id }), d.name, table);
        }
        // No host may run it, so none holds it: there is nothing to stop, only the catalogue entry.
        await catalogue.deleteDeployment(d.id);
        table.removeDeployment(d.id);
        return { deployment_id: d.id, name: d.name, victims: [], state: 'stopped' as const };
      },
    );
  };
}

const startBody = z.strictObject({ evict: z.boolean().default(false) }).prefault({});
const commands = ['stop', 'park', 'preinitialize'] as const;

/** A deployment's commands, carried out by the hosts of its instances: start, stop, park, preinitialize. */
function commandRoutes(deps: DeploymentRouteDeps, views: DeploymentViews) {
  const { hosts, table, lifecycle } = deps;
  const { find, routedOf, hostsOf } = views;

  /** A model no GPU it may run on could hold is refused before a scheduler is asked: evicting cannot help, nor waiting. */
  async function refuseIfFitsNoGpu(d: Deployment, log: FastifyBaseLogger): Promise<void> {
    const refusal = fitsNoGpu(d, await hosts.hosts());
    if (!refusal) return;
    log.warn({ deploymentId: d.id }, refusal.message);
    throw new CapyError(refusal);
  }

  /**
   * Runs the command on the host of each of the deployment's instances, at once: answered when one of
   * them carried it out, refused with the first refusal when none did.
   */
  async function onEveryInstance<K extends 'start' | 'stop' | 'park' | 'preinitialize'>(
    d: Deployment,
    command: K,
    args: CommandArgs<K>[0],
  ): Promise<ReceiptBody> {
    const routed = routedOf(d);
    const hostIds = await hostsOf(routed, command !== 'start');
    if (hostIds.length === 0) throw new CapyError(apiErrors.noHost(d.name));
    // A start names the instance each host starts; the other commands act on the one a host holds.
    const indexes = command === 'start' ? instanceIndexes(routed, hostIds) : undefined;
    const argsOn = (hostId: string) => (indexes ? { ...args, instanceIndex: indexes.get(hostId) } : args);
    const outcomes = await Promise.allSettled(
      hostIds.map((hostId) => lifecycle.command(hostId, command, ...([argsOn(hostId)] as CommandArgs<K>))),
    );
    const receipts = outcomes.flatMap((o) => (o.status === 'fulfilled' ? [o.value as CommandReceipt] : []));
    if (receipts.length === 0) throw (outcomes[0] as PromiseRejectedResult).reason;
    return renderReceipt(mergedReceipt(receipts), d.name, table);
  }

  return async (app: FastifyInstance) => {
    const routes = app.withTypeProvider<ZodTypeProvider>();

    routes.post(
      '/management/v1/deployments/:ref/start',
      { schema: { params: refParams, body: startBody, response: { 200: receiptBody } } },
      async (request) => {
        const d = await find(request.params.ref);
        // Refused here too, so a checkpoint that waits for a host to measure it is not mistaken for a missing host.
        const unmeasured = unmeasuredRefusal(d.name, d);
        if (unmeasured) throw new CapyError(unmeasured);
        await refuseIfFitsNoGpu(d, request.log);
        return onEveryInstance(d, 'start', { deploymentId: d.id, evict: request.body.evict });
      },
    );

    for (const command of commands) {
      routes.post(
        `/management/v1/deployments/:ref/${command}`,
        { schema: { params: refParams, response: { 200: receiptBody } } },
        async (request) => {
          const d = await find(request.params.ref);
          if (command === 'preinitialize') await refuseIfFitsNoGpu(d, request.log);
          return onEveryInstance(d, command, { deploymentId: d.id });
        },
      );
    }
  };
}

/** Both groups, sharing one reading of the deployments. */
export function deploymentRoutes(deps: DeploymentRouteDeps) {
  const views = deploymentViews(deps);
  return async (app: FastifyInstance) => {
    await app.register(catalogueRoutes(deps, views));
    await app.register(commandRoutes(deps, views));
  };
}
