/**
 * Which hosts' schedulers hear of a deployment's waiting requests and take the operator's commands
 * for it (the README's placement rule), one host per instance it may have (`instances`), each chosen as:
 *
 * 1. a host that holds an instance of it (starting, ready, parked …): a parked model wakes where it is;
 * 2. else, among the hosts it may run on (its `hosts`, registered, not down, not draining), one
 *    where it fits in free GPU memory without evicting anything;
 * 3. then one where it can be served by evicting: models kept loaded (explicit activation, warm)
 *    leave it room on a GPU;
 * 4. then the least loaded: the most free GPU memory, then the fewest models holding GPU memory,
 *    then the lower host ID.
 *
 * "Fits" and "room" are per GPU: a model on N GPUs (its engine's parallelism options) needs N GPUs
 * of one host each with its even share free; a host with fewer GPUs never runs it.
 *
 * The load is the store's mirror of the hosts' ledgers: what each instance holds, on which GPUs,
 * written as each step of a switch begins (a starting model counts before its engine is up). The
 * server adds the models whose requests it has sent to a host and that hold nothing yet, each on
 * the GPUs with the most free; their next demands go to the same host.
 */
import type { Deployment, Host } from '../api/catalogue.js';
import { type ApiError, apiErrors } from '../domain/catalogue.js';
import type { RoutedDeployment } from './routingTable.js';
import { checkpointOf } from '../domain/measurement.js';
import type { StoreReads } from './ports.js';
import { gpuNeed } from '../workflows/ledger.js';
import { gpusPerInstance, perGpuBytes } from '../engines/parallelism.js';

type Placed = Pick<RoutedDeployment, 'id' | 'spec' | 'instances'>;

/** What one host's GPUs hold, as placement weighs it: each list by GPU, in the host's order. */
export interface HostLoad {
  hostId: string;
  /** Each GPU's memory. */
  gpuMemoryBytes: readonly number[];
  /** GPU memory its instances hold on each GPU, or are being started or woken with. */
  heldBytes: readonly number[];
  /** Models holding GPU memory there. */
  models: number;
  /** GPU memory held on each GPU by models kept loaded (explicit activation, `lifecycle.warm`): nothing evicts them. */
  keptBytes: readonly number[];
}

/** One instance's GPU memory, as the store says it: its share on each of its GPUs (all of the host's when not known). */
export function addHolding(load: { held: number[] }, gpuIndexes: readonly number[], gpuBytes: number): void {
  const on = gpuIndexes.length > 0 ? gpuIndexes : load.held.map((_, g) => g);
  const each = gpuIndexes.length > 0 ? perGpuBytes(gpuBytes, gpuIndexes.length) : gpuBytes;
  for (const g of on) if (g < load.held.length) load.held[g]! += each;
}

export const mayRunOn = (deployment: Pick<Placed, 'spec'>, hostId: string): boolean =>
  deployment.spec.hosts === undefined || deployment.spec.hosts.includes(hostId);

/**
 * The refusal of a deployment that runs on more GPUs than any registered host it may run on has;
 * undefined when one has enough, and while no such host is registered. Down or drained hosts count:
 * they may come back.
 */
export function fitsNoHost(
  deployment: Pick<Deployment, 'spec'>,
  hosts: readonly Pick<Host, 'id' | 'gpus'>[],
): ApiError | undefined {
  const gpus = gpusPerInstance(deployment.spec);
  let largest: { hostId: string; gpus: number } | undefined;
  for (const host of hosts.filter((h) => mayRunOn(deployment, h.id)))
    if (!largest || host.gpus.length > largest.gpus) largest = { hostId: host.id, gpus: host.gpus.length };
  return largest && gpus > largest.gpus
    ? apiErrors.moreGpusThanAnyHost(deployment.spec.name, gpus, largest)
    : undefined;
}

/**
 * The refusal of a deployment that fits no host it may run on: more GPUs than any has
 * (`fitsNoHost`), or a measured checkpoint whose share on each of its GPUs needs more than the
 * largest GPU of those hosts; undefined when one fits it, while it is not measured, and while no such
 * host is registered.
 */
export function fitsNoGpu(
  deployment: Pick<Deployment, 'id' | 'spec' | 'checkpoint'>,
  hosts: readonly Pick<Host, 'id' | 'gpus'>[],
): ApiError | undefined {
  const tooFew = fitsNoHost(deployment, hosts);
  const checkpoint = checkpointOf(deployment);
  if (tooFew || !checkpoint) return tooFew;
  const gpus = gpusPerInstance(deployment.spec);
  let largest: { hostId: string; memoryBytes: number } | undefined;
  for (const host of hosts.filter((h) => mayRunOn(deployment, h.id) && h.gpus.length >= gpus))
    for (const gpu of host.gpus)
      if (!largest || gpu.memoryBytes > largest.memoryBytes)
        largest = { hostId: host.id, memoryBytes: gpu.memoryBytes };
  const need = perGpuBytes(gpuNeed(checkpoint), gpus);
  return largest && need > largest.memoryBytes ? apiErrors.fitsNoGpu(deployment.id, need, gpus, largest) : undefined;
}

/** The deployment's instances that hold a host: every one but those stopped. */
export const liveInstances = <I extends Placed['instances'][number]>(deployment: { instances: readonly I[] }): I[] =>
  deployment.instances.filter((i) => i.observedState !== 'stopped');

/** The hosts among `hosts` that hold an instance of the deployment, which stays there; by instance index. */
export function heldOn(deployment: Placed, hosts: readonly string[]): string[] {
  return liveInstances(deployment)
    .filter((i) => hosts.includes(i.hostId))
    .map((i) => i.hostId);
}

/**
 * The instance each of `hostIds` runs of the deployment: a host holding one keeps its index, any
 * other takes the lowest index no host holds (nor one placed before it). The server places every
 * instance, so two hosts starting the model at once start two different instances.
 */
export function instanceIndexes(deployment: Placed, hostIds: readonly string[]): Map<string, number> {
  const live = liveInstances(deployment);
  const indexes = new Map(live.filter((i) => hostIds.includes(i.hostId)).map((i) => [i.hostId, i.index]));
  const taken = new Set(live.map((i) => i.index));
  let next = 0;
  for (const hostId of hostIds) {
    if (indexes.has(hostId)) continue;
    while (taken.has(next)) next++;
    indexes.set(hostId, next);
    taken.add(next);
  }
  return indexes;
}

/**
 * The host where `needBytes` (the whole model) fits without evicting, else where evicting can make
 * room, else the least loaded one, among those of `loads` the deployment may run on and with GPUs
 * enough for it; `servableOnly`: only a host where evicting can make room.
 */
export function leastLoaded(
  deployment: Placed,
  needBytes: number,
  loads: readonly HostLoad[],
  servableOnly = false,
): string | undefined {
  const gpus = gpusPerInstance(deployment.spec);
  const each = perGpuBytes(needBytes, gpus);
  const roomy = (l: HostLoad, taken: readonly number[]) =>
    l.gpuMemoryBytes.filter((m, g) => m - taken[g]! >= each).length >= gpus;
  const free = (l: HostLoad) => l.gpuMemoryBytes.reduce((sum, m, g) => sum + m - l.heldBytes[g]!, 0);
  const fits = (l: HostLoad) => roomy(l, l.heldBytes);
  const servable = (l: HostLoad) => roomy(l, l.keptBytes);
  const ranked = loads
    .filter((l) => mayRunOn(deployment, l.hostId) && l.gpuMemoryBytes.length >= gpus)
    .filter((l) => !servableOnly || servable(l))
    .sort(
      (a, b) =>
        Number(fits(b)) - Number(fits(a)) ||
        Number(servable(b)) - Number(servable(a)) ||
        free(b) - free(a) ||
        a.models - b.models ||
        (a.hostId < b.hostId ? -1 : 1),
    );
  return ranked[0]?.hostId;
}

/**
 * Places an instance of a deployment on one of `hosts`, from the store's mirror of the ledgers;
 * `sent` are the deployments whose requests already wait on hosts (by deployment ID), counted there.
 * `servableOnly`: see `leastLoaded`.
 */
export async function placeByLoad(
  store: StoreReads,
  deployment: Placed,
  hosts: readonly string[],
  sent: ReadonlyMap<string, readonly string[]>,
  servableOnly = false,
): Promise<string | undefined> {
  const [registered, instances, deployments] = await Promise.all([
    store.hosts.hosts(),
    store.catalogue.instances(),
    store.catalogue.deployments(),
  ]);
  const needOf = (id: string) => {
    const checkpoint = checkpointOf(deployments.find((d) => d.id === id));
    return checkpoint ? gpuNeed(checkpoint) : 0;
  };
  const holding = instances.filter((i) => i.gpuBytes > 0);
  // As the host's scheduler decides it: the deployment's lifecycle, or the host's own activation policy.
  const kept = (deploymentId: string, hostId: string) => {
    const lifecycle = deployments.find((d) => d.id === deploymentId)?.spec.lifecycle;
    const hostExplicit = registered.find((h) => h.id === hostId)?.settings.activation === 'explicit';
    return lifecycle?.activation === 'explicit' || lifecycle?.warm === true || hostExplicit;
  };
  const waiting = [...sent].filter(([id]) => !holding.some((i) => i.deploymentId === id));
  const loads = hosts.map((hostId): HostLoad => {
    const gpuMemoryBytes = registered.find((h) => h.id === hostId)?.gpus.map((g) => g.memoryBytes) ?? [];
    const held = { held: gpuMemoryBytes.map(() => 0) };
    const keptOn = { held: gpuMemoryBytes.map(() => 0) };
    const onHost = holding.filter((i) => i.hostId === hostId);
    for (const i of onHost) {
      addHolding(held, i.gpuIndexes, i.gpuBytes);
      if (kept(i.deploymentId, hostId)) addHolding(keptOn, i.gpuIndexes, i.gpuBytes);
    }
    const reserved = waiting.filter(([, sentHosts]) => sentHosts.includes(hostId)).map(([id]) => id);
    for (const id of reserved) {
      const spec = deployments.find((d) => d.id === id)?.spec;
      const gpus = spec ? gpusPerInstance(spec) : 1;
      addHolding(held, mostFree(gpuMemoryBytes, held.held, gpus), needOf(id));
    }
    return {
      hostId,
      gpuMemoryBytes,
      heldBytes: held.held,
      models: onHost.length + reserved.length,
      keptBytes: keptOn.held,
    };
  });
  return leastLoaded(deployment, needOf(deployment.id), loads, servableOnly);
}

/** The `count` GPUs with the most free memory, lower index first among equals: where a model sent to a host will likely go. */
function mostFree(gpuMemoryBytes: readonly number[], held: readonly number[], count: number): number[] {
  return gpuMemoryBytes
    .map((m, g) => ({ g, free: m - held[g]! }))
    .sort((a, b) => b.free - a.free || a.g - b.g)
    .slice(0, count)
    .map((x) => x.g);
}
