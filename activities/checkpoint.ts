/**
 * Measuring a checkpoint: how many bytes of weights it brings to a GPU, read from the files on the
 * host (a local folder, or the Hugging Face cache), or declared to the engine simulator.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { DeploymentSpec } from '../settings/deploymentDocument.js';
import { gibibytes } from '../settings/units.js';
import { dialectNames, parseSimArgs } from '../engines/simulatorArgs.js';
import { engineContracts } from '../engines/contracts.js';
import { setShare } from '../engines/memoryBound.js';

export interface Checkpoint {
  weightBytes: number;
  /** The GPU memory the engine takes beyond the weights (its KV cache budget). */
  kvBytes: number;
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
export function measureCheckpoint(model: string, args: readonly string[]): Checkpoint {
  const sim = args.findIndex((a, i) => a === 'sim' && (dialectNames as readonly string[]).includes(args[i + 1] ?? ''));
  if (sim >= 0) {
    const config = parseSimArgs([...args.slice(sim + 1), '--model', model]);
    return { weightBytes: config.weightsBytes, kvBytes: config.kvBytes, source: 'simulator' };
  }
  const folder = checkpointFolder(model);
  if (!folder)
    throw new Error(`checkpoint ${model} is not on this host: neither a folder nor in the Hugging Face cache`);
  const weightBytes = sizeOfWeights(folder);
  if (weightBytes === 0) throw new Error(`checkpoint ${model} has no weight files in ${folder}`);
  return { weightBytes, kvBytes: Math.floor(weightBytes * KV_SHARE_OF_WEIGHTS), source: 'files' };
}

/**
 * What the ledger reserves for a deployment: its measured checkpoint, whose KV budget is what the
 * engine's memory bound leaves after the weights when its extra_args or the host's command set one
 * (counted on the host's largest GPU, the most the figure can take). A figure that leaves nothing
 * for the KV cache cannot start anywhere and is refused.
 */
export function reservedCheckpoint(
  spec: DeploymentSpec,
  command: readonly string[],
  largestGpuBytes: number,
): Checkpoint {
  const measured = measureCheckpoint(spec.model, [...command, ...spec.extra_args]);
  const set = setShare(spec, command);
  if (set === undefined) return measured;
  const { share, setBy } = set;
  const option = engineContracts[spec.engine].memoryBound!.option;
  const taken = Math.floor(share * largestGpuBytes);
  if (!(share > 0 && share <= 1) || taken <= measured.weightBytes) {
    throw new Error(
      `${setBy} ${option} ${share}, which gives the engine ${gibibytes(Math.max(0, taken))} GiB ` +
        `of this host's largest GPU (${gibibytes(largestGpuBytes)} GiB): ` +
        `no room for a KV cache beside its ${gibibytes(measured.weightBytes)} GiB of weights`,
    );
  }
  return { ...measured, kvBytes: taken - measured.weightBytes };
}
