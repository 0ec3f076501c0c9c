/**
 * The GPU memory bound an engine is launched with (contracts.ts, "GPU memory bounds" in
 * CONTRACTS.md): the ledger's reservation for the model, in the engine's own option, so the engine
 * takes what the ledger counted and not its default share of the GPU.
 */
import type { DeploymentSpec } from '../settings/deploymentDocument.js';
import { engineContracts } from './contracts.js';
import { findOption } from './launchOptions.js';

/** The GPU a launch is placed on, as the ledger counts it. */
export interface LaunchMemory {
  /** The GPU's size. */
  gpuBytes: number;
  /** What the ledger reserved for this model: its measured weights and KV budget. */
  reservedBytes: number;
  /** What the ledger counts on that GPU for the other models as this one starts. */
  othersBytes: number;
  /**
   * The longest sequence its KV budget was sized for (sequencePlan.ts), passed in the engine's
   * context-length option; null or absent (a launch planned before lengths were): the engine chooses.
   */
  maxModelLen?: number | null;
}

/**
 * The ratio at full precision: an engine multiplies it by the GPU's size and gets the reserved bytes
 * back to the byte (the float is within 2⁻⁵³ of the ratio, far below a byte), so bounds that each fit
 * never add up to more than the GPU.
 */
const shareOf = (bytes: number, gpuBytes: number): string => String(Math.min(1, bytes / gpuBytes));

/**
 * `[option, share]` for the launch; none for an engine without a bound, or when the deployment's
 * extra_args or the host's command sets the option already (the ledger then counts that figure).
 * vLLM takes its share of the whole GPU; SGLang fills the GPU up to its share, counting the others.
 */
export function memoryBoundArgs(spec: DeploymentSpec, command: readonly string[], memory: LaunchMemory): string[] {
  const bound = engineContracts[spec.engine].memoryBound;
  if (bound === null || setShare(spec, command) !== undefined) return [];
  const filled =
    bound.rule === 'static_share_of_total' ? memory.othersBytes + memory.reservedBytes : memory.reservedBytes;
  return [bound.option, shareOf(filled, memory.gpuBytes)];
}

/**
 * The share the engine is told already, when it is: by the deployment's extra_args, which come
 * after the host's command on the engine's line and so win, else by the host's command. The launch
 * then adds no bound, and the ledger counts this figure.
 */
export function setShare(
  spec: DeploymentSpec,
  command: readonly string[],
): { share: number; setBy: 'its extra_args set' | "the host's command sets" } | undefined {
  const bound = engineContracts[spec.engine].memoryBound;
  if (bound === null) return undefined;
  const declared = findOption(spec.extra_args, bound.option);
  if (declared !== undefined) return { share: Number(declared), setBy: 'its extra_args set' };
  const hosts = findOption(command, bound.option);
  return hosts === undefined ? undefined : { share: Number(hosts), setBy: "the host's command sets" };
}
