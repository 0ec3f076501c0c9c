/**
 * What happens every 2 s (`SERVER_BEAT_MS`): this server's heartbeat in the store's list of servers,
 * and what it learns there. A server found gone has the demands it reported withdrawn (a killed one
 * never withdraws them, and they would keep their models on the GPUs); a host that registered with
 * another server, a deployment saved, changed or deleted through another server, and an engine gone
 * as another server heard it, are learned here.
 *
 * The server is listed as soon as its listeners are its own (`enlist`): a switch that begins from
 * then on reaches its requests. It leaves the list once its workers stopped (`leave`).
 */
import type { Logger } from 'pino';
import type { Instance } from '../api/catalogue.js';
import type { CatalogueReads } from '../gateway/ports.js';
import type { RoutingTable } from '../gateway/routingTable.js';
import { SERVER_BEAT_MS, type ServerRow } from '../store/servers.js';
import type { HostDirectory } from './hostDirectory.js';
import type { ServerHosts, ServerList } from './storePorts.js';

export interface RegistryBeatDeps {
  /** This server as the store lists it: its ID and its own task queue. */
  self: ServerRow;
  store: {
    servers: ServerList;
    hosts: Pick<ServerHosts, 'hosts' | 'ingressSecrets'>;
    catalogue: Pick<CatalogueReads, 'deployments' | 'instances'>;
  };
  directory: Pick<HostDirectory, 'ids' | 'has' | 'know' | 'liveness'>;
  table: Pick<RoutingTable, 'get' | 'list' | 'putDeployment' | 'removeDeployment'>;
  /** Withdraws from the host's scheduler the demands reported from `taskQueue`, unless another installation schedules it. */
  withdrawDemands: (hostId: string, taskQueue: string) => Promise<void>;
  /** An instance the store lists stopped (server/engineLoss.ts). */
  learnStopped: (instance: Instance) => void;
  /** Every waiting demand is reported again, once delivery is open. */
  reportAgain: () => void;
  logger: Logger;
}

export class RegistryBeat {
  private timer: NodeJS.Timeout | undefined;
  private beating: Promise<void> = Promise.resolve();

  constructor(private readonly deps: RegistryBeatDeps) {}

  async enlist(): Promise<void> {
    await this.deps.store.servers.markSeen(this.deps.self);
  }

  start(): void {
    // One beat at a time: a slow store does not pile them up.
    this.timer = setInterval(() => (this.beating = this.beating.then(() => this.beat())), SERVER_BEAT_MS);
  }

  /** One beat; a store that fails it is logged, and the next beat tries again. */
  async beat(): Promise<void> {
    try {
      // Taken for gone while it was only slow: its demands were withdrawn, and are reported again.
      if (await this.deps.store.servers.markSeen(this.deps.self)) this.deps.reportAgain();
      await this.withdrawGoneServers();
      await this.learnHosts();
      await this.learnDeployments();
      for (const instance of await this.deps.store.catalogue.instances())
        if (instance.observedState === 'stopped') this.deps.learnStopped(instance);
    } catch (e) {
      this.deps.logger.warn({ err: e }, "the store did not take this server's heartbeat");
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.beating;
  }

  async leave(): Promise<void> {
    await this.deps.store.servers
      .forget(this.deps.self.id)
      .catch((e: unknown) =>
        this.deps.logger.warn({ err: e }, 'could not take this server out of the store; it is gone once unseen'),
      );
  }

  private async withdrawGoneServers(): Promise<void> {
    const { store, directory, withdrawDemands, logger } = this.deps;
    for (const gone of await store.servers.takeGone()) {
      logger.warn({ serverId: gone.id }, 'a server of this store stopped reporting: its demands are withdrawn');
      await Promise.all(directory.ids().map((hostId) => withdrawDemands(hostId, gone.taskQueue)));
    }
  }

  /** Hosts that registered with another server of the store: their silence counts from now. */
  private async learnHosts(): Promise<void> {
    const { store, directory, logger } = this.deps;
    const hosts = (await store.hosts.hosts()).filter((h) => !directory.has(h.id));
    const secrets = hosts.length > 0 ? await store.hosts.ingressSecrets() : new Map<string, string>();
    for (const host of hosts) {
      directory.know(host, secrets.get(host.id));
      directory.liveness.know(host.id);
      logger.info({ hostId: host.id }, 'host registered with another server of this store');
    }
  }

  /** Deployments saved, changed, stopped or deleted through another server. */
  private async learnDeployments(): Promise<void> {
    const { store, table } = this.deps;
    const saved = await store.catalogue.deployments();
    for (const d of saved) {
      const known = table.get(d.id);
      if (!known || known.revision !== d.revision || known.operatorStopped !== d.operatorStopped)
        table.putDeployment(d);
    }
    const ids = new Set(saved.map((d) => d.id));
    for (const d of table.list()) if (!ids.has(d.id)) table.removeDeployment(d.id);
  }
}
