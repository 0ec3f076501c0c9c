/**
 * The switches a host scheduler has running now, with what each holds until it ends: the GPUs of its
 * target and victims, their deployments, and the host RAM its victims' parked copies take. Pure.
 * Wakes on other GPUs may run beside them (demands.ts); nothing else touches what they hold.
 */
import type { SwitchTarget, SwitchVictim } from '../../api/lifecycle.js';

interface Running {
  switchId: string;
  gpuIndexes: ReadonlySet<number>;
  deploymentIds: ReadonlySet<string>;
  hostRamBytes: number;
}

export class RunningSwitches {
  private readonly running: Running[] = [];

  /** `hostRamBytes`: what its victims' copies take in host RAM, which the ledger counts only once it ends. */
  add(switchId: string, target: SwitchTarget | null, victims: readonly SwitchVictim[], hostRamBytes: number): void {
    const parts = [...(target ? [{ gpuIndexes: target.gpuIndexes, instance: target.instance }] : []), ...victims];
    this.running.push({
      switchId,
      gpuIndexes: new Set(parts.flatMap((p) => p.gpuIndexes ?? [])),
      deploymentIds: new Set(parts.map((p) => p.instance.deploymentId)),
      hostRamBytes,
    });
  }

  remove(switchId: string): void {
    const at = this.running.findIndex((r) => r.switchId === switchId);
    if (at >= 0) this.running.splice(at, 1);
  }

  get size(): number {
    return this.running.length;
  }

  /** The switch the ledger query names: the oldest running, or null. */
  first(): string | null {
    return this.running[0]?.switchId ?? null;
  }

  /** True when a running switch holds any of `gpuIndexes`. */
  holdsAny(gpuIndexes: readonly number[]): boolean {
    return this.running.some((r) => gpuIndexes.some((g) => r.gpuIndexes.has(g)));
  }

  involves(deploymentId: string): boolean {
    return this.running.some((r) => r.deploymentIds.has(deploymentId));
  }

  /** Host RAM the running switches' parked copies take beyond what the ledger counts yet. */
  hostRamBytes(): number {
    return this.running.reduce((sum, r) => sum + r.hostRamBytes, 0);
  }
}
