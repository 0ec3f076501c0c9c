/**
 * The latest load sample of each instance, as its host reported it (spec, "Reading load"). Held in
 * memory only, so the load endpoint is cheap to poll: fresh under 3 s, kept 30 s, then dropped.
 */
import { SAMPLE_KEPT_MS, SAMPLE_STALE_AFTER_MS } from '../domain/limits.js';
import type { EngineLoad, MaxRunning } from '../engines/engine.js';

export interface InstanceSample {
  hostId: string;
  deploymentId: string;
  instanceIndex: number;
  generation: number;
  sampledAtMs: number;
  ingressInFlight: number;
  /** Null when the host could not read the engine's metrics. */
  engine: EngineLoad | null;
  maxRunning: MaxRunning;
}

export interface ReadSample extends InstanceSample {
  ageMs: number;
  fresh: boolean;
}

const keyOf = (deploymentId: string, instanceIndex: number) => `${deploymentId}/${instanceIndex}`;

export class LoadBoard {
  private readonly samples = new Map<string, InstanceSample>();
  /** The newest generation of each instance known to be gone; a late sample of it is ignored. */
  private readonly gone = new Map<string, number>();

  /** Keeps each sample unless one already held is newer (samples may arrive out of order). */
  record(samples: readonly InstanceSample[]): void {
    for (const s of samples) {
      const key = keyOf(s.deploymentId, s.instanceIndex);
      if (s.generation <= (this.gone.get(key) ?? -1)) continue;
      const held = this.samples.get(key);
      if (
        !held ||
        held.generation < s.generation ||
        (held.generation === s.generation && held.sampledAtMs <= s.sampledAtMs)
      ) {
        this.samples.set(key, s);
      }
    }
  }

  /** Drops an instance's sample: that generation is no longer loaded, even if a late report says so. */
  forget(deploymentId: string, instanceIndex: number, generation: number): void {
    const key = keyOf(deploymentId, instanceIndex);
    this.gone.set(key, Math.max(generation, this.gone.get(key) ?? -1));
    if ((this.samples.get(key)?.generation ?? Infinity) <= generation) this.samples.delete(key);
  }

  /** Every sample held (as `read` reads them). */
  list(nowMs: number): ReadSample[] {
    return [...this.samples.values()].flatMap((s) => this.read(s.deploymentId, s.instanceIndex, nowMs) ?? []);
  }

  /**
   * The engine's own figures from an instance's fresh sample, for the request queue's choice of
   * instance; undefined when its sample is absent, stale, or could not read the engine.
   */
  freshEngine(deploymentId: string, instanceIndex: number, nowMs: number): EngineLoad | undefined {
    const sample = this.read(deploymentId, instanceIndex, nowMs);
    return sample?.fresh ? (sample.engine ?? undefined) : undefined;
  }

  /** The sample held for an instance, or null when none is (never sampled, or dropped after 30 s). */
  read(deploymentId: string, instanceIndex: number, nowMs: number): ReadSample | null {
    const key = keyOf(deploymentId, instanceIndex);
    const s = this.samples.get(key);
    if (!s) return null;
    const ageMs = Math.max(0, nowMs - s.sampledAtMs);
    if (ageMs > SAMPLE_KEPT_MS) {
      this.samples.delete(key);
      return null;
    }
    return { ...s, ageMs, fresh: ageMs < SAMPLE_STALE_AFTER_MS };
  }
}
