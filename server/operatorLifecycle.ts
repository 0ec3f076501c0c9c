/**
 * What the operator's routes ask of the lifecycle (gateway/management/operatorLifecycle.ts), over
 * Temporal: commands to the hosts' schedulers, a host's drain, a switch's result, how a host stands.
 */
import type { Client } from '@temporalio/client';
import { type SchedulerRef, sendCommand, switchResult } from '../gateway/lifecycleClient.js';
import type { OperatorLifecycle } from '../gateway/management/operatorLifecycle.js';
import type { SchedulerOwnership } from '../gateway/schedulerOwnership.js';
import type { DemandDelivery } from './demandDelivery.js';
import type { Deploys } from './deploys.js';
import type { HostDirectory } from './hostDirectory.js';
import type { ServerHosts } from './storePorts.js';

export interface OperatorLifecycleDeps {
  hosts: Pick<ServerHosts, 'setDraining'>;
  directory: HostDirectory;
  ownership: SchedulerOwnership;
  client: Client;
  schedulerRef: (hostId: string) => SchedulerRef;
  delivery: Pick<DemandDelivery, 'placement'>;
  deploys: Deploys;
}

export function operatorLifecycle(deps: OperatorLifecycleDeps): OperatorLifecycle {
  const { hosts, directory, ownership, client, schedulerRef, deploys } = deps;
  return {
    placement: (deployment) => deps.delivery.placement(deployment),
    async command(hostId, update, ...args) {
      await ownership.refuseIfForeign(hostId);
      return sendCommand(client, schedulerRef(hostId), update, ...args);
    },
    deploy: (spec) => deploys.deploy(spec),
    async drainHost(hostId) {
      await ownership.refuseIfForeign(hostId);
      await hosts.setDraining(hostId, true);
      directory.setDraining(hostId, true);
      return sendCommand(client, schedulerRef(hostId), 'drainHost');
    },
    async undrainHost(hostId) {
      await hosts.setDraining(hostId, false);
      directory.setDraining(hostId, false);
      await deploys.measurePendingOn(hostId);
    },
    switchResult: (switchId) => switchResult(client, switchId),
    hostLiveness: (host) => ({
      state: directory.liveness.stateOf(host.id, host.draining),
      lastSeenAt: directory.liveness.lastSeenAt(host.id, host.lastSeenAt),
    }),
  };
}
