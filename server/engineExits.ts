/**
 * The newest generation of each deployment's engine that is over, per host: one that exited unasked
 * while this server ran, or one the store lists stopped when it started. A switch still finishing
 * must not start its waiters on that engine nor record it as serving again. The store's rows are
 * the durable record (an exit is written `stopped` before the scheduler hears of it), so a restart
 * rebuilds this from them instead of forgetting every exit.
 */
import type { RoutedDeployment } from '../gateway/routingTable.js';
import type { InstanceRef } from '../api/lifecycle.js';

export class EngineExits {
  private readonly newest = new Map<string, number>();

  /**
   * From the rows as the server starts. A stopped row's generation is over for good, whether it
   * exited or was stopped: every start takes a newer generation than any it had.
   */
  static fromRecorded(deployments: ReadonlyArray<Pick<RoutedDeployment, 'id' | 'instances'>>): EngineExits {
    const exits = new EngineExits();
    for (const d of deployments) {
      for (const i of d.instances) {
        if (i.observedState === 'stopped')
          exits.record(i.hostId, { deploymentId: d.id, instanceIndex: i.index, generation: i.generation });
      }
    }
    return exits;
  }

  record(hostId: string, instance: InstanceRef): void {
    const key = `${hostId}/${instance.deploymentId}`;
    this.newest.set(key, Math.max(instance.generation, this.newest.get(key) ?? 0));
  }

  isGone(hostId: string, deploymentId: string, generation: number): boolean {
    return (this.newest.get(`${hostId}/${deploymentId}`) ?? 0) >= generation;
  }
}
