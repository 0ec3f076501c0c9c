/**
 * How many GPUs of one host an instance of a deployment runs on: what its engine arguments say, the
 * way users write them (`--tensor-parallel-size 4`), read with the engine's own spellings
 * (contracts.ts, `parallelism`). Every place that counts GPUs for an instance reads it here: the
 * placement, the host's ledger, the launch and the simulator.
 */
import type { DeploymentSpec } from '../settings/deploymentDocument.js';
import { engineContracts } from './contracts.js';
import { findCount, findOption } from './launchOptions.js';
import type { EngineName } from '../domain/vocabulary.js';

/** The GPUs one instance takes: the product of the engine's parallelism options, 1 when none is given. */
export function gpusPerInstance(spec: Pick<DeploymentSpec, 'engine' | 'extra_args'>): number {
  return parallelSizes(spec.engine, spec.extra_args).reduce((gpus, size) => gpus * size, 1);
}

/**
 * Each of the engine's parallelism factors as `args` set it, in the contract's order: 1 where none
 * is given, or where a flag makes the factor share the others' GPUs. Several spellings of one
 * option name one destination to argparse, so the last one written wins.
 */
export function parallelSizes(engine: EngineName, args: readonly string[]): number[] {
  return engineContracts[engine].parallelism.map((factor) => {
    if (factor.notWith !== undefined && findOption(args, factor.notWith) !== undefined) return 1;
    return lastCount(args, factor.options) ?? 1;
  });
}

/** The value of whichever of `spellings` comes last in `args`. */
function lastCount(args: readonly string[], spellings: readonly string[]): number | undefined {
  for (let i = args.length - 1; i >= 0; i--) {
    const option = spellings.find((s) => findOption([args[i]!], s) !== undefined);
    if (option !== undefined) return findCount(args.slice(i), option);
  }
  return undefined;
}

/** What an instance on `gpus` GPUs holds on each: its bytes split evenly, rounded up so the parts never hold less than the whole. */
export const perGpuBytes = (totalBytes: number, gpus: number): number => Math.ceil(totalBytes / gpus);
