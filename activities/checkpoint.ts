/**
 * Measuring a checkpoint: how many bytes of weights it brings to a GPU, read from the files on the
 * host (a local folder, or the Hugging Face cache), or declared to the engine simulator.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { DeploymentSpec } from '../settings/deploymentDocument.js';
import { gibibytes } from '../settings/units.js';
import { dialectNames, parseSimArgs } from '../engines/simulatorArgs.js';
import { engineContracts } from '../engines/contracts.js';
import { engineTraits } from '../engines/traits.js';
import { gpusPerInstance, perGpuBytes } from '../engines/parallelism.js';
import { setShare } from '../engines/memoryBound.js';
import { type ModelKv, modelKvOfConfig } from '../engines/kvCache.js';
import { type SequencePlan, planSequence } from '../engines/sequencePlan.js';

/** What the host reads of a checkpoint before the ledger's reservation is decided. */
export interface MeasuredFiles {
  weightBytes: number;
  /** The KV budget declared (the simulator) or the default share of the weights. */
  kvBytes: number;
  source: 'simulator' | 'files';
  /** The model's KV figures, when known: its config.json, or the simulator's model description. */
  modelKv?: ModelKv;
  /** What the engine keeps on each GPU while parked, when the engine itself says (the simulator's `--sim-residue`). */
  residuePerGpu?: number;
}

/** What the ledger reserves for a deployment, and what its engine is launched with. */
export interface Checkpoint extends SequencePlan {
  weightBytes: number;
  /** The GPU memory the engine takes beyond the weights and its residue (its KV cache budget). */
  kvBytes: number;
  /**
   * What the engine keeps on its GPUs while parked, all of them together: its CUDA context, graphs
   * and what else sleep does not free; part of what it holds running too. 0 for one that cannot park.
   */
  residueBytes: number;
  source: 'simulator' | 'files';
}

const WEIGHT_FILE = /\.(safetensors|bin|pt|gguf)$/;

/**
 * A real checkpoint declares no KV cache: the ledger reserves a quarter of its weights for one (a
 * 16 GB model gets 4 GB, tens of thousands of tokens for a mid-size model), unless the deployment
 * bounds its engine itself.
 */
const KV_SHARE_OF_WEIGHTS = 0.25;

function sizeOfWeights(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) total += sizeOfWeights(path);
    else if (WEIGHT_FILE.test(entry.name)) total += statSync(path).size; // follows the HF cache's symlinks
  }
  return total;
}

/** The folder a model's weights are in: the path itself, or its newest snapshot in the HF cache. */
function checkpointFolder(model: string): string | undefined {
  if (existsSync(model) && statSync(model).isDirectory()) return model;
  const hub = join(process.env.HF_HOME ?? join(homedir(), '.cache', 'huggingface'), 'hub');
  const snapshots = join(hub, `models--${model.replaceAll('/', '--')}`, 'snapshots');
  if (!existsSync(snapshots)) return undefined;
  const newest = readdirSync(snapshots)
    .map((name) => ({ name, mtime: statSync(join(snapshots, name)).mtimeMs }))
    .sort((a, b) => b.mtime - a.mtime)[0];
  return newest && join(snapshots, newest.name);
}

/**
 * `args`: everything the engine is launched with (the host's command and the deployment's extra
 * arguments). An engine simulator's checkpoint is what its flags declare, read by the simulator's
 * own parser; a real one is measured on disk. Throws when it is on neither.
 */
export function measureCheckpoint(model: string, args: readonly string[]): MeasuredFiles {
  const sim = args.findIndex((a, i) => a === 'sim' && (dialectNames as readonly string[]).includes(args[i + 1] ?? ''));
  if (sim >= 0) {
    const config = parseSimArgs([...args.slice(sim + 1), '--model', model]);
    return {
      weightBytes: config.weightsBytes,
      kvBytes: config.kvBytes,
      source: 'simulator',
      ...(config.residueReported ? { residuePerGpu: config.residueBytes } : {}),
      ...(config.kvBytesPerToken !== undefined
        ? { modelKv: { bytesPerToken: config.kvBytesPerToken, maxModelLen: config.modelMaxLen } }
        : {}),
    };
  }
  const folder = checkpointFolder(model);
  if (!folder)
    throw new Error(`checkpoint ${model} is not on this host: neither a folder nor in the Hugging Face cache`);
  const weightBytes = sizeOfWeights(folder);
  if (weightBytes === 0) throw new Error(`checkpoint ${model} has no weight files in ${folder}`);
  const modelKv = modelKvOf(folder);
  return {
    weightBytes,
    kvBytes: Math.floor(weightBytes * KV_SHARE_OF_WEIGHTS),
    source: 'files',
    ...(modelKv ? { modelKv } : {}),
  };
}

/** The KV figures of the model's config.json, when it has one that names them all. */
function modelKvOf(folder: string): ModelKv | undefined {
  const path = join(folder, 'config.json');
  if (!existsSync(path)) return undefined;
  try {
    return modelKvOfConfig(JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>);
  } catch {
    return undefined; // not JSON: the engine will say so itself; capyctl passes no length
  }
}

/**
 * What the ledger reserves for a deployment: its measured weights; the residue its engine keeps
 * parked on each GPU (the engine's own figure, else the host's `parked_residue` for it); a KV budget,
 * which is what the engine's memory bound leaves when its extra_args or the host's command set one
 * (counted on the host's largest GPU, the most the figure can take); and the longest sequence that
 * budget holds (sequencePlan.ts). A figure that leaves nothing for the KV cache cannot start
 * anywhere and is refused.
 */
export function reservedCheckpoint(
  spec: DeploymentSpec,
  command: readonly string[],
  largestGpuBytes: number,
  parkedResiduePerGpu = 0,
): Checkpoint {
  const measured = measureCheckpoint(spec.model, [...command, ...spec.extra_args]);
  const ranks = gpusPerInstance(spec);
  const parks = engineTraits[spec.engine].parkTiers.length > 0;
  const residueBytes = parks ? (measured.residuePerGpu ?? parkedResiduePerGpu) * ranks : 0;
  const set = setShare(spec, command);
  let kvBytes = measured.kvBytes;
  if (set !== undefined) {
    const { share, setBy } = set;
    const option = engineContracts[spec.engine].memoryBound!.option;
    const taken = Math.floor(share * largestGpuBytes);
    if (!(share > 0 && share <= 1) || taken <= measured.weightBytes + residueBytes) {
      throw new Error(
        `${setBy} ${option} ${share}, which gives the engine ${gibibytes(Math.max(0, taken))} GiB ` +
          `of this host's largest GPU (${gibibytes(largestGpuBytes)} GiB): ` +
          `no room for a KV cache beside its ${gibibytes(measured.weightBytes)} GiB of weights` +
          (residueBytes > 0 ? ` and ${gibibytes(residueBytes)} GiB of residue` : ''),
      );
    }
    kvBytes = taken - measured.weightBytes - residueBytes;
  }
  const sequence = planSequence({ spec, command, modelKv: measured.modelKv, kvBytes, fixedKv: set !== undefined });
  const reserved = { weightBytes: measured.weightBytes, residueBytes, kvBytes: sequence.kvBytes };
  refuseIfDeclaredLengthFitsNoGpu(spec, sequence, reserved, ranks, largestGpuBytes);
  return {
    ...reserved,
    maxModelLen: sequence.maxModelLen,
    maxModelLenFrom: sequence.maxModelLenFrom,
    source: measured.source,
  };
}

/** A declared length whose KV cache, beside the weights and residue, is more than this host's GPUs hold: refused at once. */
function refuseIfDeclaredLengthFitsNoGpu(
  spec: DeploymentSpec,
  sequence: SequencePlan,
  reserved: { weightBytes: number; residueBytes: number; kvBytes: number },
  ranks: number,
  largestGpuBytes: number,
): void {
  if (sequence.maxModelLenFrom !== 'declared' || largestGpuBytes === 0) return;
  const perGpu = perGpuBytes(reserved.weightBytes + reserved.residueBytes + reserved.kvBytes, ranks);
  if (perGpu <= largestGpuBytes) return;
  throw new Error(
    `max_model_len ${sequence.maxModelLen} needs ${gibibytes(reserved.kvBytes)} GiB of KV cache; with ` +
      `${gibibytes(reserved.weightBytes)} GiB of weights and ${gibibytes(reserved.residueBytes)} GiB of residue that is ` +
      `${gibibytes(perGpu)} GiB ${ranks === 1 ? 'on its GPU' : `on each of its ${ranks} GPUs`}, more than this host's largest ` +
      `GPU (${gibibytes(largestGpuBytes)} GiB)`,
  );
}
