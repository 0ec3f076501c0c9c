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
 * The load is the store's mirror of the hosts' ledgers: what each instance holds, written as each
 * step of a switch begins (a starting model counts before its engine is up). The server adds the
 * models whose requests it has sent to a host and that hold nothing yet; their next demands go to
 * the same host.
 */
import type { Deployment, Host } from '../api/catalogue.js';
import { type ApiError, apiErrors } from '../domain/catalogue.js';
import type { RoutedDeployment } from './routingTable.js';
import { checkpointOf } from '../domain/measurement.js';
import type { StoreReads } from './ports.js';
import { gpuNeed } from '../workflows/ledger.js';

type Placed = Pick<RoutedDeployment, 'id' | 'spec' | 'instances'>;

/** What one host's GPUs hold, as placement weighs it. */
export interface HostLoad {
  hostId: string;
  /** Each GPU's memory. */
  gpuMemoryBytes: readonly number[];
  /** GPU memory its instances hold, or are being started or woken with. */
  heldBytes: number;
  /** Models holding GPU memory there. */
  models: number;
  /** GPU memory held by models kept loaded (explicit activation, `lifecycle.warm`): nothing evicts them. */
  keptBytes: number;
}

export const mayRunOn = (deployment: Pick<Placed, 'spec'>, hostId: string): boolean =>
  deployment.spec.hosts === undefined || deployment.spec.hosts.includes(hostId);

/**
 * The refusal of a deployment whose measured checkpoint needs more than the largest GPU of the
 * registered hosts it may run on has, even empty (down or drained ones count: they may come back);
 * undefined when one fits it, while it is not measured, and while no such host is registered.
 */
export function fitsNoGpu(
  deployment: Pick<Deployment, 'id' | 'spec' | 'checkpoint'>,
  hosts: readonly Pick<Host, 'id' | 'gpus'>[],
): ApiError | undefined {
  const checkpoint = checkpointOf(deployment);
  if (!checkpoint) return undefined;
  let largest: { hostId: string; memoryBytes: number } | undefined;
  for (const host of hosts.filter((h) => mayRunOn(deployment, h.id)))
    for (const gpu of host.gpus)
      if (!largest || gpu.memoryBytes > largest.memoryBytes)
        largest = { hostId: host.id, memoryBytes: gpu.memoryBytes };
  const need = gpuNeed(checkpoint);
  return largest && need > largest.memoryBytes ? apiErrors.fitsNoGpu(deployment.id, need, largest) : undefined;
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
 * The host where `needBytes` fits without evicting, else where evicting can make room, else the
 * least loaded one, among those of `loads` the deployment may run on; `servableOnly`: only a host
 * where evicting can make room. The store does not say which of a host's GPUs an instance holds, so
 * everything the host holds counts against each of its GPUs.
 */
export function leastLoaded(
  deployment: Placed,
  needBytes: number,
  loads: readonly HostLoad[],
  servableOnly = false,
): string | undefined {
  const free = (l: HostLoad) => l.gpuMemoryBytes.reduce((sum, m) => sum + m, 0) - l.heldBytes;
  const fits = (l: HostLoad) => l.gpuMemoryBytes.some((m) => m - l.heldBytes >= needBytes);
  const servable = (l: HostLoad) => l.gpuMemoryBytes.some((m) => m - l.keptBytes >= needBytes);
  const ranked = loads
    .filter((l) => mayRunOn(deployment, l.hostId) && (!servableOnly || servable(l)))
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
    const held = holding.filter((i) => i.hostId === hostId);
    const reserved = waiting.filter(([, sentHosts]) => sentHosts.includes(hostId)).map(([id]) => id);
    return {
      hostId,
      gpuMemoryBytes: registered.find((h) => h.id === hostId)?.gpus.map((g) => g.memoryBytes) ?? [],
      heldBytes: held.reduce((sum, i) => sum + i.gpuBytes, 0) + reserved.reduce((sum, id) => sum + needOf(id), 0),
      models: held.length + reserved.length,
      keptBytes: held.filter((i) => kept(i.deploymentId, hostId)).reduce((sum, i) => sum + i.gpuBytes, 0),
    };
  });
  return leastLoaded(deployment, needOf(deployment.id), loads, servableOnly);
}
