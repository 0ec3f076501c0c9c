/**
 * Deploys, and the checkpoint measurements they wait for: a revision's checkpoint is measured on
 * the host it would run on, when a host may run it; one deployed while none could, or that a host
 * failed to read, is measured when such a host registers or comes back from a drain.
 */
import type { Client } from '@temporalio/client';
import type { SaveResult } from '../api/catalogue.js';
import { startMeasurement } from '../gateway/lifecycleClient.js';
import type { RoutedDeployment, RoutingTable } from '../gateway/routingTable.js';
import type { DeploymentSpec } from '../settings/deploymentDocument.js';
import type { ServerCatalogue } from './storePorts.js';

export interface DeploysDeps {
  catalogue: Pick<ServerCatalogue, 'save' | 'deployments' | 'clearMeasureFailure'>;
  table: RoutingTable;
  /** The hosts of a deployment's instances (server/demandDelivery.ts): the first measures it. */
  placement: (deployment: RoutedDeployment) => Promise<string[]>;
  client: Client;
  /** The queue the lifecycle's workflows run on. */
  workflowTaskQueue: string;
}

export class Deploys {
  constructor(private readonly deps: DeploysDeps) {}

  /** Saves a deployment document; a new revision's checkpoint is measured on the host it would run on. */
  async deploy(spec: DeploymentSpec): Promise<SaveResult> {
    const { catalogue, table, placement, client, workflowTaskQueue } = this.deps;
    const saved = await catalogue.save(spec);
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
  async measurePendingOn(hostId: string): Promise<void> {
    const { catalogue, table, placement, client, workflowTaskQueue } = this.deps;
    for (const d of await catalogue.deployments()) {
      if (d.checkpoint === null && (await placement(table.get(d.id)!))[0] === hostId) {
        if (d.measureFailure !== null) await catalogue.clearMeasureFailure(d.id, d.revision);
        await startMeasurement(client, {
          deploymentId: d.id,
          revision: d.revision,
          hostId,
          serverTaskQueue: workflowTaskQueue,
        });
      }
    }
  }
}
