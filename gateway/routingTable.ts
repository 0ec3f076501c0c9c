/**
 * The gateway's routing table: what it routes by (a model name to its deployment and instances) and
 * what the load endpoint reads. It is a cache of the host schedulers' ledgers, held in memory so no
 * request costs a query: rebuilt from the store when the server starts (`loadFrom`), then kept
 * current by the lifecycle's activities as transitions happen.
 */
import type { Activation, InstanceState } from '../domain/vocabulary.js';
import type { DeploymentSpec } from '../settings/deploymentDocument.js';
import type { Deployment, Instance } from '../api/catalogue.js';
import type { StoreReads } from './ports.js';

/**
 * `parkTier`: where a parked (or parking) instance's weights are, null otherwise; `gpuIndexes`: the
 * GPUs of its host it holds, empty when not known; `residueBytes`: what a parked one's host measured
 * its engine still holds, null when not measured.
 */
export type RoutedInstance = Pick<
  Instance,
  'index' | 'hostId' | 'generation' | 'observedState' | 'parkTier' | 'gpuIndexes' | 'residueBytes'
>;

/** A deployment's state for its list row and gauge: ready when an instance is, else its first instance's, or `stopped` before any. */
export function deploymentState(instances: readonly RoutedInstance[]): InstanceState {
  return instances.find((i) => i.observedState === 'ready')?.observedState ?? instances[0]?.observedState ?? 'stopped';
}

/**
 * What `setInstance` takes. Without `gpuIndexes` (a target's waiters started before its row is
 * written), the GPUs held for that start stay; without `residueBytes`, none is measured.
 */
export type InstanceUpdate = Omit<RoutedInstance, 'gpuIndexes' | 'residueBytes'> & {
  deploymentId: string;
  gpuIndexes?: number[];
  residueBytes?: number | null;
};

/** What `putDeployment` takes: a catalogue record fits as it is. */
export type DeploymentFacts = Pick<Deployment, 'id' | 'name' | 'revision' | 'spec' | 'operatorStopped'>;

export interface RoutedDeployment extends DeploymentFacts {
  /**
   * `explicit` when the deployment or any host it may run on says so (spec, "Only on your command"):
   * a deployment cannot opt out of its host's policy.
   */
  activation: Activation;
  /** By index. */
  instances: readonly RoutedInstance[];
}

interface Entry {
  facts: DeploymentFacts;
  instances: Map<number, RoutedInstance>;
  /** What `routed` made of it, until it changes: every request reads it, and it changes seldom. */
  routed?: RoutedDeployment;
}

export class RoutingTable {
  private readonly byId = new Map<string, Entry>();
  private readonly idByName = new Map<string, string>();
  /** Hosts whose own policy is `lifecycle.activation: explicit`. */
  private readonly explicitHosts = new Set<string>();

  /** Replaces what the table holds with the store's catalogue and its mirror of the ledgers. */
  async loadFrom(store: StoreReads): Promise<void> {
    const [deployments, instances, hosts] = await Promise.all([
      store.catalogue.deployments(),
      store.catalogue.instances(),
      store.hosts.hosts(),
    ]);
    this.byId.clear();
    this.idByName.clear();
    this.explicitHosts.clear();
    for (const host of hosts)
      this.setHostActivation(host.id, host.settings.activation === 'explicit' ? 'explicit' : 'on_demand');
    for (const deployment of deployments) this.putDeployment(deployment);
    for (const instance of instances) this.setInstance(instance);
  }

  /** Adds a deployment, or takes its new revision or operator stop; the instances it has stay. */
  putDeployment(facts: DeploymentFacts): void {
    const { id, name, revision, spec, operatorStopped } = facts;
    const held = this.byId.get(id);
    if (held && held.facts.name !== name) this.idByName.delete(held.facts.name);
    this.byId.set(id, {
      facts: { id, name, revision, spec, operatorStopped },
      instances: held?.instances ?? new Map(),
    });
    this.idByName.set(name, id);
  }

  removeDeployment(id: string): void {
    const held = this.byId.get(id);
    if (!held) return;
    this.byId.delete(id);
    this.idByName.delete(held.facts.name);
  }

  setOperatorStopped(id: string, operatorStopped: boolean): void {
    const held = this.byId.get(id);
    if (!held) return;
    held.facts = { ...held.facts, operatorStopped };
    held.routed = undefined;
  }

  /**
   * Records an instance's observed state. Like the store's mirror, it never goes back in time: an
   * older generation than the one held is a late retry and is ignored, as is an instance of a
   * deployment that was removed meanwhile.
   */
  setInstance(update: InstanceUpdate): void {
    const entry = this.byId.get(update.deploymentId);
    if (!entry) return;
    const held = entry.instances.get(update.index);
    if (held && held.generation > update.generation) return;
    const { index, hostId, generation, observedState, parkTier } = update;
    const sameStart = held && held.generation === generation && held.hostId === hostId;
    const gpuIndexes = update.gpuIndexes ?? (sameStart ? held.gpuIndexes : []);
    // Told again what it holds (a server's beat reads every stopped row): `routed` stays.
    const residueBytes = update.residueBytes ?? null;
    const same =
      sameStart &&
      held.observedState === observedState &&
      held.parkTier === parkTier &&
      held.gpuIndexes.join() === gpuIndexes.join() &&
      held.residueBytes === residueBytes;
    if (same) return;
    entry.instances.set(index, { index, hostId, generation, observedState, parkTier, gpuIndexes, residueBytes });
    entry.routed = undefined;
  }

  setHostActivation(hostId: string, activation: Activation): void {
    if (activation === 'explicit') this.explicitHosts.add(hostId);
    else this.explicitHosts.delete(hostId);
    // Any deployment's activation may follow from a host's.
    for (const entry of this.byId.values()) entry.routed = undefined;
  }

  /** The deployment a request for `model` goes to: models are routed by deployment name only. */
  byModel(model: string): RoutedDeployment | undefined {
    const id = this.idByName.get(model);
    return id === undefined ? undefined : this.get(id);
  }

  get(id: string): RoutedDeployment | undefined {
    const entry = this.byId.get(id);
    return entry && this.routed(entry);
  }

  /** The host an instance runs on, as the last start of its waiters or record said; undefined when none is known. */
  hostOf(deploymentId: string, index: number): string | undefined {
    return this.get(deploymentId)?.instances.find((i) => i.index === index)?.hostId;
  }

  /** Every deployment, by name. */
  list(): RoutedDeployment[] {
    return [...this.byId.values()]
      .map((e) => this.routed(e))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** The deployment as requests route to it: its facts, its activation and its instances by index. */
  private routed(entry: Entry): RoutedDeployment {
    entry.routed ??= {
      ...entry.facts,
      activation: this.activationOf(entry.facts.spec),
      instances: [...entry.instances.values()].sort((a, b) => a.index - b.index),
    };
    return entry.routed;
  }

  /** A deployment without `hosts` may run on any host, so any explicit host makes it explicit. */
  private activationOf(spec: DeploymentSpec): Activation {
    if (spec.lifecycle.activation === 'explicit') return 'explicit';
    const mayRunOn = spec.hosts ?? [...this.explicitHosts];
    return mayRunOn.some((h) => this.explicitHosts.has(h)) ? 'explicit' : 'on_demand';
  }
}
