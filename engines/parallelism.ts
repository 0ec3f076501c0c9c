/**
 * How many GPUs of one host an instance of a deployment runs on: what its engine arguments say, the
 * way users write them (`--tensor-parallel-size 4`, `-tp 4`), read with the engine's own spellings
 * (contracts.ts, `parallelism`). Every place that counts GPUs for an instance reads it here: the
 * placement, the host's ledger, the launch and the simulator.
 */
import type { EngineName } from '../domain/vocabulary.js';
import type { DeploymentSpec } from '../settings/deploymentDocument.js';
import { engineContracts, type ParallelLayout } from './contracts.js';
import { findCount, findOption } from './launchOptions.js';

/**
 * The layout an engine's arguments give an instance; one rank, one shard and one batch rank when they
 * name no parallelism. A factor that splits requests but, beside its `notWith` flag, runs on the GPUs
 * the model is already split over takes no ranks of its own and splits the batch instead: SGLang's
 * `--dp-size` with `--enable-dp-attention` starts one scheduler per DP rank, each running
 * `--max-running-requests` ÷ dp (`resolve_max_num_reqs`, mem_cache/kv_cache_configurator.py).
 */
export function parallelLayout(engine: EngineName, args: readonly string[]): ParallelLayout {
  const factors = engineContracts[engine].parallelism?.factors ?? [];
  return factors.reduce(
    (layout, factor) => {
      const off = factor.notWith?.some((flag) => findOption(args, flag) !== undefined) ?? false;
      const count = findCount(args, factor.options) ?? 1;
      const size = off ? 1 : count;
      return {
        ranks: layout.ranks * size,
        modelShards: factor.splits === 'model' ? layout.modelShards * size : layout.modelShards,
        batchRanks: off && factor.splits === 'requests' ? layout.batchRanks * count : layout.batchRanks,
      };
    },
    { ranks: 1, modelShards: 1, batchRanks: 1 },
  );
}

/** The GPUs one instance takes: the product of the engine's parallelism options, 1 when none is given. */
export function gpusPerInstance(spec: Pick<DeploymentSpec, 'engine' | 'extra_args'>): number {
  return parallelLayout(spec.engine, spec.extra_args).ranks;
}

/** What an instance on `gpus` GPUs holds on each: its bytes split evenly, rounded up so the parts never hold less than the whole. */
export const perGpuBytes = (totalBytes: number, gpus: number): number => Math.ceil(totalBytes / gpus);
