/**
 * Which hosts' schedulers hear of a deployment's waiting requests and take the operator's commands
 * for it (the README's placement rule), one host per instance it may have (`instances`), each chosen as:
 *
 * 1. a host that holds an instance of it (starting, ready, parked …): a parked model wakes where it is;
 * 2. else, among the hosts it may run on (its `hosts`, registered, not down, not draining), one
 *    where it fits in free GPU memory without evicting anything: as many of its GPUs as an instance
 *    runs on (`gpusPerInstance`) each have its share free (`perGpuBytes`);
 * 3. then one where it can be served by evicting: models kept loaded (explicit activation, warm)
 *    leave it that room on as many GPUs;
 * 4. then the least loaded: the most free GPU memory, then the fewest models holding GPU memory,
 *    then the lower host ID.
 *
 * The load is the store's mirror of the hosts' ledgers: what each instance holds on which GPUs
 * (gpuHoldings.ts), written as each step of a switch begins (a starting model counts before its
 * engine is up). The server adds the models whose requests it has sent to a host and that hold
 * nothing yet; their next demands go to the same host.
 */
import type { Deployment, Host, HostGpu } from '../api/catalogue.js';
import { type ApiError, apiErrors } from '../domain/catalogue.js';
import { gpusPerInstance, perGpuBytes } from '../engines/parallelism.js';
import type { RoutedDeployment } from './routingTable.js';
import { checkpointOf } from '../domain/measurement.js';
import type { StoreReads } from './ports.js';
import { gpuNeed } from '../workflows/ledger.js';
import { type HeldRow, heldPerGpu } from './gpuHoldings.js';

type Placed = Pick<RoutedDeployment, 'id' | 'spec' | 'instances'>;

/** What one GPU holds, as placement weighs it. */
export interface GpuLoad {
  memoryBytes: number;
  /** What instances hold on it, or are being started or woken with. */
  heldBytes: number;
  /** What models kept loaded (explicit activation, `lifecycle.warm`) hold on it: nothing evicts them. */
  keptBytes: number;
}

/** What one host's GPUs hold, as placement weighs it. */
export interface HostLoad {
  hostId: string;
  gpus: readonly GpuLoad[];
  /** GPU memory its instances hold, or are being started or woken with, each counted once. */
  heldBytes: number;
  /** Models holding GPU memory there. */
  models: number;
}

/** A model sent to a host that holds nothing there yet: what it will need, on how many GPUs. */
export interface Reserved {
  bytes: number;
  gpus: number;
}

/**
 * One host's load: its rows that hold GPU memory (each with whether its model is kept loaded), and the
 * models sent there that hold nothing yet, each counted on the GPUs with the most room, as many as it
 * runs on (its host's scheduler picks which).
 */
export function hostLoad(
  hostId: string,
  gpus: readonly Pick<HostGpu, 'index' | 'memoryBytes'>[],
  held: readonly (HeldRow & { kept: boolean })[],
  reserved: readonly Reserved[],
): HostLoad {
  const indexes = gpus.map((g) => g.index);
  const heldOn = heldPerGpu(indexes, held);
  const keptOn = heldPerGpu(
    indexes,
    held.filter((h) => h.kept),
  );
  const loads = gpus.map((g, i) => ({ memoryBytes: g.memoryBytes, heldBytes: heldOn[i]!, keptBytes: keptOn[i]! }));
  const room = (g: GpuLoad) => g.memoryBytes - g.heldBytes;
  for (const r of reserved)
    for (const g of [...loads].sort((a, b) => room(b) - room(a)).slice(0, r.gpus))
      g.heldBytes += perGpuBytes(r.bytes, r.gpus);
  return {
    hostId,
    gpus: loads,
    heldBytes: [...held.map((h) => h.gpuBytes), ...reserved.map((r) => r.bytes)].reduce((sum, b) => sum + b, 0),
    models: held.length + reserved.length,
  };
}

export const mayRunOn = (deployment: Pick<Placed, 'spec'>, hostId: string): boolean =>
  deployment.spec.hosts === undefined || deployment.spec.hosts.includes(hostId);

/**
 * The refusal of a deployment that no host it may run on could hold, even empty: one needing more
 * GPUs than any of the registered hosts it may run on has (down or drained ones count: they may come
 * back), or one whose measured checkpoint needs more on each of its GPUs than any such host has on as
 * many of its GPUs. Undefined when one could, while it is not measured (for the memory), and while no
 * such host is registered.
 */
export function fitsNoGpu(
  deployment: Pick<Deployment, 'id' | 'spec' | 'checkpoint'>,
  hosts: readonly Pick<Host, 'id' | 'gpus'>[],
): ApiError | undefined {
  const gpus = gpusPerInstance(deployment.spec);
  const mayRun = hosts.filter((h) => mayRunOn(deployment, h.id));
  const tooFew = tooFewGpus(deployment.id, gpus, mayRun);
  if (tooFew) return tooFew;
  const checkpoint = checkpointOf(deployment);
  if (!checkpoint) return undefined;
  // What each of `gpus` GPUs of a host offers at most: its `gpus`-th largest.
  let largest: { hostId: string; memoryBytes: number } | undefined;
  for (const host of mayRun) {
    const offers = host.gpus.map((g) => g.memoryBytes).sort((a, b) => b - a)[gpus - 1];
    if (offers !== undefined && (!largest || offers > largest.memoryBytes))
      largest = { hostId: host.id, memoryBytes: offers };
  }
  const need = perGpuBytes(gpuNeed(checkpoint), gpus);
  return largest && need > largest.memoryBytes ? apiErrors.fitsNoGpu(deployment.id, need, largest, gpus) : undefined;
}

/**
 * The refusal of a deployment (`ref`: its ID, or its name at deploy) whose instance runs on more GPUs
 * than any of `hosts`, those it may run on, has; undefined when one has enough, or none is registered.
 */
export function tooFewGpus(
  ref: string,
  gpus: number,
  hosts: readonly Pick<Host, 'id' | 'gpus'>[],
): ApiError | undefined {
  let largest: Pick<Host, 'id' | 'gpus'> | undefined;
  for (const host of hosts) if (!largest || host.gpus.length > largest.gpus.length) largest = host;
  return largest && gpus > largest.gpus.length
    ? apiErrors.needsMoreGpus(ref, gpus, { hostId: largest.id, gpus: largest.gpus.length })
    : undefined;
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
 * where evicting can make room. An instance on N GPUs needs its share free on N GPUs of one host.
 */
export function leastLoaded(
  deployment: Placed,
  needBytes: number,
  loads: readonly HostLoad[],
  servableOnly = false,
): string | undefined {
  const gpus = gpusPerInstance(deployment.spec);
  const share = perGpuBytes(needBytes, gpus);
  const roomOn = (l: HostLoad, taken: (g: GpuLoad) => number) =>
    l.gpus.filter((g) => g.memoryBytes - taken(g) >= share).length >= gpus;
  const free = (l: HostLoad) => l.gpus.reduce((sum, g) => sum + g.memoryBytes, 0) - l.heldBytes;
  const fits = (l: HostLoad) => roomOn(l, (g) => g.heldBytes);
  const servable = (l: HostLoad) => roomOn(l, (g) => g.keptBytes);
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
  const needOf = (id: string): Reserved => {
    const d = deployments.find((x) => x.id === id);
    const checkpoint = checkpointOf(d);
    return { bytes: checkpoint ? gpuNeed(checkpoint) : 0, gpus: d ? gpusPerInstance(d.spec) : 1 };
  };
  const holding = instances.filter((i) => i.gpuBytes > 0);
  // As the host's scheduler decides it: the deployment's lifecycle, or the host's own activation policy.
  const kept = (deploymentId: string, hostId: string) => {
    const lifecycle = deployments.find((d) => d.id === deploymentId)?.spec.lifecycle;
    const hostExplicit = registered.find((h) => h.id === hostId)?.settings.activation === 'explicit';
    return lifecycle?.activation === 'explicit' || lifecycle?.warm === true || hostExplicit;
  };
  const waiting = [...sent].filter(([id]) => !holding.some((i) => i.deploymentId === id));
  const loads = hosts.map((hostId) =>
    hostLoad(
      hostId,
      registered.find((h) => h.id === hostId)?.gpus ?? [],
      holding.filter((i) => i.hostId === hostId).map((i) => ({ ...i, kept: kept(i.deploymentId, hostId) })),
      waiting.filter(([, sentHosts]) => sentHosts.includes(hostId)).map(([id]) => needOf(id)),
    ),
  );
  return leastLoaded(deployment, needOf(deployment.id).bytes, loads, servableOnly);
}
