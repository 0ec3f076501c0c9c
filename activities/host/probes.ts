/**
 * What the host measures and asks without changing what its GPUs hold: the checkpoint a revision
 * brings, the wake check's question, an engine's load, and the engines alive here.
 */
import { ApplicationFailure } from '@temporalio/common';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ParkTier } from '../../domain/vocabulary.js';
import type { DeploymentSpec } from '../../settings/deploymentDocument.js';
import type { Probe, ProbeAnswer } from '../../engines/engine.js';
import { hostFailureTypes } from '../../api/hostFailures.js';
import { type Checkpoint, reservedCheckpoint } from '../checkpoint.js';
import { whileHeartbeating } from '../heartbeat.js';
import type { EngineStage, InstanceKey, SupervisedEngine } from '../supervisor.js';
import { asFailure, type HostActivityDeps, runningEngine } from './shared.js';

/** How often a park waiting for its engine to finish asks it again. */
const IDLE_POLL_MS = 50;

/** An engine alive on the host, as `listEngines` reports it. */
export interface RunningEngine {
  instance: InstanceKey;
  stage: EngineStage;
  gpuIndexes: number[];
  /** Parked: the tier it parked at; otherwise the tier it was launched to park at. */
  tier: ParkTier | null;
  /** The GPU memory the ledger reserved for it at launch on each of its GPUs: its weights and KV budget. */
  reservedBytes: number;
}

/** The wake check's question, asked of a running engine. */
export const askEngine = (engine: SupervisedEngine, probe: Probe, signal: AbortSignal): Promise<ProbeAnswer> =>
  engine.adapter.probe(engine.endpoint, probe, { signal }).catch(asFailure);

/**
 * What the engine still runs or queues (counting `inFlight`, the ingress's requests on their way),
 * polled until none or `untilMs`.
 */
export async function busyUntil(
  engine: SupervisedEngine,
  inFlight: () => number,
  untilMs: number,
  signal: AbortSignal,
): Promise<number> {
  for (;;) {
    const load = await engine.adapter.sampleLoad(engine.endpoint).catch(() => null);
    const busy = inFlight() + (load ? load.running + load.waiting : 0);
    if (busy === 0 || Date.now() + IDLE_POLL_MS > untilMs) return busy;
    await sleep(IDLE_POLL_MS, undefined, { signal });
  }
}

export function probeActivities(
  deps: Pick<HostActivityDeps, 'supervisor' | 'engineCommands' | 'largestGpuBytes' | 'parkedResidueBytes'>,
) {
  return {
    /**
     * Measures the checkpoint a revision brings: its weights' bytes on the GPU, its KV budget, the
     * residue its engine keeps parked and the longest sequence it is launched for.
     */
    async measureCheckpoint(input: { spec: DeploymentSpec }): Promise<Checkpoint> {
      const { engine } = input.spec;
      try {
        return reservedCheckpoint(
          input.spec,
          deps.engineCommands[engine],
          deps.largestGpuBytes,
          deps.parkedResidueBytes[engine],
        );
      } catch (e) {
        throw ApplicationFailure.nonRetryable((e as Error).message, hostFailureTypes.checkpointMissing);
      }
    },

    async probeEngine(input: { key: InstanceKey; probe: Probe }): Promise<ProbeAnswer> {
      const engine = runningEngine(deps.supervisor, input.key);
      return whileHeartbeating((signal) => askEngine(engine, input.probe, signal));
    },

    /**
     * The engines alive here: a scheduler that starts without a ledger learns from it what the GPUs
     * hold (engines end with their agent, so nothing else holds them).
     */
    async listEngines(): Promise<RunningEngine[]> {
      return deps.supervisor
        .list()
        .filter((e) => e.exit === undefined)
        .map((e) => ({
          instance: e.key,
          stage: e.stage,
          gpuIndexes: e.gpuIndexes,
          tier: e.stage === 'parked' ? e.parkedTier : e.parkTier,
          reservedBytes: e.memory.reservedBytes,
        }));
    },
  };
}
