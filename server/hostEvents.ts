/**
 * What the server does when a host agent reports (gateway/management/hosts.ts): it registers, its
 * engine exited, it was heard, it stops.
 */
import type { Client } from '@temporalio/client';
import type { EngineExitBody } from '../api/hosts.js';
import { apiErrors, CapyError } from '../domain/catalogue.js';
import { exitHow, type Problem } from '../domain/problems.js';
import { configureScheduler, ensureScheduler, type SchedulerRef } from '../gateway/lifecycleClient.js';
import type { HostEventSink } from '../gateway/management/hosts.js';
import type { RoutingTable } from '../gateway/routingTable.js';
import type { SchedulerOwnership } from '../gateway/schedulerOwnership.js';
import type { DemandDelivery } from './demandDelivery.js';
import type { Deploys } from './deploys.js';
import type { EngineLoss } from './engineLoss.js';
import type { HostDirectory } from './hostDirectory.js';
import type { ServerMetrics } from './metrics.js';

export interface HostEventDeps {
  directory: HostDirectory;
  ownership: SchedulerOwnership;
  client: Client;
  schedulerRef: (hostId: string) => SchedulerRef;
  table: RoutingTable;
  engineLoss: EngineLoss;
  deploys: Deploys;
  delivery: DemandDelivery;
  /** Writes a deployment's last problem where the operator looks (`status`, `list`, the status page). */
  recordProblem: (deploymentId: string, problem: Problem) => Promise<void>;
  metrics: Pick<ServerMetrics, 'engineExited'>;
}

/** An engine that exited unasked, as its host reported it. */
function exitProblem(hostId: string, exit: EngineExitBody): Problem {
  return {
    kind: 'engine_exited',
    at: new Date().toISOString(),
    host_id: hostId,
    instance_index: exit.instance_index,
    generation: exit.generation,
    message: `its engine exited unasked (${exitHow(exit.exit_code, exit.signal)})`,
    exit_code: exit.exit_code,
    signal: exit.signal,
    stderr: exit.stderr ?? [],
  };
}

export function hostEvents(deps: HostEventDeps): HostEventSink {
  const { directory, ownership, client, schedulerRef, table, engineLoss, deploys, delivery, recordProblem, metrics } =
    deps;
  const { liveness } = directory;
  return {
    async registered(hostId, body, ingressSecret) {
      // Known as the store now has it, refused or not: the store's other servers learn it there.
      directory.registered(hostId, body.settings.queue, body.ingress_url, ingressSecret);
      // Refused before anything reaches a scheduler another installation runs; its agent prints the
      // line and exits, and the requests only it could serve are answered with it. A host no
      // installation schedules yet is taken now, so two that name a host alike never both accept it.
      const runId = await ensureScheduler(client, schedulerRef(hostId));
      const foreign = await ownership.foreign(hostId, { runId, fresh: true });
      if (foreign) {
        // Its agent exits: shown down once it has been silent for the bound.
        liveness.know(hostId);
        delivery.reportAgain();
        throw new CapyError(apiErrors.hostOfAnotherInstallation(foreign));
      }
      liveness.registered(hostId);
      table.setHostActivation(hostId, body.settings.activation === 'explicit' ? 'explicit' : 'on_demand');
      await configureScheduler(client, schedulerRef(hostId));
      // A host agent registers when it starts, and a starting agent runs no engine: whatever the
      // catalogue lists there but stopped is gone, on its way in or out too. A switch still in
      // flight on such an instance must not start its waiters on it or record it serving
      // (`startWaiters`, `saveInstance`); its next request starts it afresh.
      await engineLoss.goneOn(hostId, (state) => state !== 'stopped');
      await deploys.measurePendingOn(hostId);
      // Requests that waited while no host could take them are asked for again.
      delivery.reportAgain();
    },
    runsOn: (hostId, deploymentId, instanceIndex) => table.hostOf(deploymentId, instanceIndex) === hostId,
    async engineExited(hostId, exit) {
      metrics.engineExited(hostId, { deploymentId: exit.deployment_id, exitCode: exit.exit_code, signal: exit.signal });
      await engineLoss.gone(hostId, {
        deploymentId: exit.deployment_id,
        instanceIndex: exit.instance_index,
        generation: exit.generation,
      });
      await recordProblem(exit.deployment_id, exitProblem(hostId, exit));
    },
    heard: (hostId) => liveness.heard(hostId),
    async stopping(hostId) {
      liveness.markStopping(hostId);
      await engineLoss.goneOn(hostId);
    },
  };
}
