/**
 * The newest generation of each deployment's engine that exited unasked, per host: a switch still
 * finishing must not release its waiters to that engine nor record it as serving again.
 */
import type { InstanceRef } from '../workflows/definitions.js';

export class EngineExits {
  private readonly newest = new Map<string, number>();

  record(hostId: string, instance: InstanceRef): void {
    const key = `${hostId}/${instance.deploymentId}`;
    this.newest.set(key, Math.max(instance.generation, this.newest.get(key) ?? 0));
  }

  isGone(hostId: string, deploymentId: string, generation: number): boolean {
    return (this.newest.get(`${hostId}/${deploymentId}`) ?? 0) >= generation;
  }
}
