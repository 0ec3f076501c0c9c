/**
 * Where the request queue's demands go: each deployment's waiting requests are placed on the hosts
 * of its instances (gateway/placement.ts) and reported to those hosts' schedulers, which wake or
 * start what does not serve yet. Opened once the schedulers have forgotten the previous run's
 * demands (`open`): sent before, this run's would be forgotten with them.
 */
import type { Client } from '@temporalio/client';
import type { Logger } from 'pino';
import type { Demand } from '../api/lifecycle.js';
import { instanceCount } from '../engines/rules.js';
import { latestInOrder } from '../gateway/demandReports.js';
import { configureScheduler, reportDemand, type SchedulerRef, withdrawDemandsOf } from '../gateway/lifecycleClient.js';
import { fitsNoGpu, heldOn, instanceIndexes, mayRunOn, placeByLoad } from '../gateway/placement.js';
import type { StoreReads } from '../gateway/ports.js';
import type { RequestQueue } from '../gateway/requestQueue.js';
import type { RoutedDeployment, RoutingTable } from '../gateway/routingTable.js';
import type { SchedulerOwnership } from '../gateway/schedulerOwnership.js';
import type { HostDirectory } from './hostDirectory.js';

export interface DemandDeliveryDeps {
  store: StoreReads;
  table: RoutingTable;
  queue: RequestQueue;
  directory: Pick<HostDirectory, 'ids' | 'placeable'>;
  ownership: SchedulerOwnership;
  client: Client;
  schedulerRef: (hostId: string) => SchedulerRef;
  /** This server's own queue: the demands it reports are its requests'. */
  serverTaskQueue: string;
  logger: Logger;
}

export class DemandDelivery {
  /**
   * Where each deployment's waiting requests were sent: its next demands go there too, and it counts
   * in those hosts' load until it holds memory there.
   */
  private readonly sentTo = new Map<string, string[]>();
  /** Demands are placed one at a time: each is counted where it went before the next is weighed. */
  private demandsPlaced: Promise<unknown> = Promise.resolve();
  /**
   * The scheduler run each host's demands last reached. A new run after a terminate knows nothing
   * of the old one's demands: every waiting one is reported again (after a continue-as-new, which
   * carries them, that changes nothing).
   */
  private readonly schedulerRuns = new Map<string, string>();
  private opened = false;
  private readonly deliver: (demand: Demand) => void;

  constructor(private readonly deps: DemandDeliveryDeps) {
    this.deliver = latestInOrder(
      (demand) => this.deliverNow(demand),
      (e, demand) => deps.logger.error({ err: e, ...demand }, 'demand not delivered'),
    );
  }

  /**
   * A host's scheduler outlives this server's last run: it takes the settings as they are now, and
   * forgets the demands of that run's requests (they died with it, and would keep the GPU for them).
   * Then the requests this run took meanwhile report theirs. A host another installation
   * schedules is told nothing, and refused. `previousQueue`: the queue a killed previous run of this
   * server reported its demands from, when its name was another (before queues were named by the
   * store): they are withdrawn with this queue's.
   */
  async open(previousQueue: string | undefined): Promise<void> {
    const { ownership, client, schedulerRef, serverTaskQueue } = this.deps;
    await Promise.all(
      this.deps.directory.ids().map((hostId) =>
        ownership.ifOwn(hostId, async () => {
          await configureScheduler(client, schedulerRef(hostId));
          await withdrawDemandsOf(client, hostId, serverTaskQueue);
          if (previousQueue !== undefined && previousQueue !== serverTaskQueue)
            await withdrawDemandsOf(client, hostId, previousQueue);
        }),
      ),
    );
    this.opened = true;
    this.redeliver();
  }

  /** The queue's demand: delivered once open. */
  demanded(demand: Demand): void {
    if (this.opened) this.deliver(demand);
  }

  /**
   * A checkpoint was measured: the requests that waited for it are weighed again, and refused if no
   * GPU could hold it.
   */
  measured(deploymentId: string): void {
    const demand = this.deps.queue.snapshot().demands.find((d) => d.deploymentId === deploymentId);
    if (this.opened && demand) this.deliver(demand);
  }

  /** Every waiting demand is reported again, once open: requests that waited while no host could take them. */
  reportAgain(): void {
    if (this.opened) this.redeliver();
  }

  /**
   * The hosts of the deployment's instances, one per instance it may have (gateway/placement.ts): where
   * they are held, then where its requests were sent, then by the rule; the store is read only when
   * more than one host could take the next. None when no host may run it.
   */
  async placement(deployment: RoutedDeployment): Promise<string[]> {
    const hosts = this.deps.directory.placeable();
    const wanted = instanceCount(deployment.spec);
    const placed = heldOn(deployment, hosts).slice(0, wanted);
    for (const sent of this.sentTo.get(deployment.id) ?? [])
      if (placed.length < wanted && hosts.includes(sent) && !placed.includes(sent)) placed.push(sent);
    while (placed.length < wanted) {
      const allowed = hosts.filter((h) => mayRunOn(deployment, h) && !placed.includes(h));
      const next =
        allowed.length <= 1 ? allowed[0] : await placeByLoad(this.deps.store, deployment, allowed, this.sentTo);
      if (next === undefined) break;
      placed.push(next);
    }
    return placed;
  }

  /** Requests a host cannot make room for go to another host that can serve them; false when none can. */
  async sendElsewhere(hostId: string, deploymentId: string): Promise<boolean> {
    const { table, queue } = this.deps;
    const deployment = table.get(deploymentId);
    const elsewhere = deployment && (await this.servableElsewhere(deployment, hostId));
    const demand = elsewhere && queue.snapshot().demands.find((d) => d.deploymentId === deploymentId);
    if (!demand) return false;
    this.sentTo.set(deploymentId, [...(this.sentTo.get(deploymentId) ?? []).filter((h) => h !== hostId), elsewhere]);
    this.deliver(demand);
    return true;
  }

  private redeliver(): void {
    for (const demand of this.deps.queue.snapshot().demands) this.deliver(demand);
  }

  private placeDemand(deployment: RoutedDeployment, demand: Demand): Promise<string[]> {
    const placed = this.demandsPlaced.then(async () => {
      const hostIds = await this.placement(deployment);
      if (hostIds.length > 0 && demand.waiting > 0) this.sentTo.set(deployment.id, hostIds);
      else this.sentTo.delete(deployment.id);
      return hostIds;
    });
    this.demandsPlaced = placed.catch(() => undefined);
    return placed;
  }

  /**
   * A host other than `refusedOn` that can serve the deployment by evicting (gateway/placement.ts), for the
   * requests `refusedOn` refused for capacity; none for a model held on as many hosts as it may have
   * instances (it wakes where it is).
   */
  private async servableElsewhere(deployment: RoutedDeployment, refusedOn: string): Promise<string | undefined> {
    const hosts = this.deps.directory.placeable();
    const held = heldOn(deployment, hosts);
    if (held.length >= instanceCount(deployment.spec)) return undefined;
    const others = hosts.filter((h) => h !== refusedOn && !held.includes(h) && mayRunOn(deployment, h));
    return others.length === 0 ? undefined : placeByLoad(this.deps.store, deployment, others, this.sentTo, true);
  }

  /**
   * Answers the waiting requests of a model no GPU it may run on could hold, even empty: no host's
   * scheduler could make room, so none is asked and they do not wait out their deadline. True when so.
   */
  private async refusedForSize(deploymentId: string): Promise<boolean> {
    const { store, queue, logger } = this.deps;
    const [deployment, hosts] = await Promise.all([store.catalogue.deployment(deploymentId), store.hosts.hosts()]);
    const refused = deployment && fitsNoGpu(deployment, hosts);
    if (!refused) return false;
    const failed = queue.failWaiters(deploymentId, refused);
    if (failed > 0) logger.warn({ deploymentId, failed }, refused.message);
    return true;
  }

  private async deliverNow(demand: Demand): Promise<void> {
    const { table, queue, ownership, client, schedulerRef, serverTaskQueue, logger } = this.deps;
    if (demand.waiting > 0 && (await this.refusedForSize(demand.deploymentId))) return;
    const deployment = table.get(demand.deploymentId);
    const hostIds = deployment ? await this.placeDemand(deployment, demand) : [];
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
        if (await ownership.foreign(hostId)) return this.deliver(demand);
        const runId = await reportDemand(client, schedulerRef(hostId), {
          ...demand,
          serverTaskQueue,
          instanceIndex: indexes.get(hostId),
        });
        const before = this.schedulerRuns.get(hostId);
        this.schedulerRuns.set(hostId, runId);
        // A new run is looked at once: it may have been started by the other installation.
        if (await ownership.foreign(hostId, { runId })) return this.deliver(demand);
        if (before !== undefined && before !== runId) this.redeliver();
      }),
    );
  }
}
