/**
 * How many GPUs of one host an instance of a deployment runs on: what its engine arguments say, the
 * way users write them (`--tensor-parallel-size 4`), read with the engine's own spellings
 * (contracts.ts, `parallelism`). Every place that counts GPUs for an instance reads it here: the
 * placement, the host's ledger, the launch and the simulator.
 */
import type { DeploymentSpec } from '../settings/deploymentDocument.js';
import { engineContracts } from './contracts.js';
import { findCount } from './launchOptions.js';

/** The GPUs one instance takes: the product of the engine's parallelism options, 1 when none is given. */
export function gpusPerInstance(spec: Pick<DeploymentSpec, 'engine' | 'extra_args'>): number {
  return engineContracts[spec.engine].parallelism.reduce((gpus, factor) => {
    const counts = factor.options.map((option) => findCount(spec.extra_args, option));
    return gpus * (counts.find((c) => c !== undefined) ?? 1);
  }, 1);
}

/** What an instance on `gpus` GPUs holds on each: its bytes split evenly, rounded up so the parts never hold less than the whole. */
export const perGpuBytes = (totalBytes: number, gpus: number): number => Math.ceil(totalBytes / gpus);
