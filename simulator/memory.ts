/**
 * Where one engine's weights and KV cache are: on the GPU, copied to host RAM, or dropped. Every
 * change goes through the shared GPU ledger when there is one (CAPYCTL_SIM_GPU_DIR), so two engines
 * on one simulated device cannot both hold more than it has.
 */
import { SimArgsError } from './args.js';
import { type Allocation, GpuHolding } from './gpuLedger.js';

export type WeightsPlace = 'gpu' | 'host' | 'dropped';

/** What a park or wake touches. */
export interface MemoryParts {
  weights: boolean;
  kv: boolean;
}

export interface GpuPlacement {
  dir: string;
  index: number;
}

/** Reads the device from the environment, as a real engine reads CUDA_VISIBLE_DEVICES. */
export function gpuPlacementFromEnv(env: NodeJS.ProcessEnv): GpuPlacement | undefined {
  const dir = env.CAPYCTL_SIM_GPU_DIR;
  if (!dir) return undefined;
  // An engine uses the first visible device; tensor parallelism is not simulated.
  const first = (env.CUDA_VISIBLE_DEVICES ?? '0').split(',')[0]!.trim();
  const index = Number(first);
  if (!Number.isInteger(index) || index < 0) throw new SimArgsError(`CUDA_VISIBLE_DEVICES=${env.CUDA_VISIBLE_DEVICES}: expected a device index`);
  return { dir, index };
}

export class EngineMemory {
  weights: WeightsPlace = 'dropped';
  kvOnGpu = false;
  /**
   * The weights are on the GPU but were dropped before and not reloaded since: the engine computes
   * with whatever the freshly allocated memory holds (vLLM level 2 without reload_weights, SGLang
   * without a CPU backup).
   */
  weightsGarbage = false;
  private readonly holding: GpuHolding | undefined;

  constructor(
    readonly weightsBytes: number,
    readonly kvBytes: number,
    readonly placement: GpuPlacement | undefined,
    label: string,
  ) {
    this.holding = placement && new GpuHolding(placement.dir, placement.index, label);
  }

  get gpuBytes(): number {
    return (this.weights === 'gpu' ? this.weightsBytes : 0) + (this.kvOnGpu ? this.kvBytes : 0);
  }

  get hostRamBytes(): number {
    return this.weights === 'host' ? this.weightsBytes : 0;
  }

  get resident(): boolean {
    return this.weights === 'gpu' && this.kvOnGpu;
  }

  /** The start: weights and KV cache in one allocation, as an engine sizes both before serving. */
  async load(): Promise<{ allocation: Allocation; triedBytes: number }> {
    const result = await this.restore({ weights: true, kv: true });
    // Read from disk: good weights, unlike a wake into dropped ones.
    this.weightsGarbage = false;
    return result;
  }

  /**
   * Frees the GPU memory of `parts`. The weights keep a copy in host RAM when asked, unless they are
   * garbage: a copy of garbage is no better than dropping them.
   */
  async release(parts: MemoryParts, keepHostCopy: boolean): Promise<void> {
    let freed = 0;
    if (parts.weights && this.weights === 'gpu') {
      this.weights = keepHostCopy && !this.weightsGarbage ? 'host' : 'dropped';
      this.weightsGarbage = false;
      freed += this.weightsBytes;
    }
    if (parts.kv && this.kvOnGpu) {
      this.kvOnGpu = false;
      freed += this.kvBytes;
    }
    await this.holding?.release(freed);
    await this.holding?.setHostRam(this.hostRamBytes);
  }

  /**
   * Takes the GPU memory of `parts` back in one allocation, so a wake either fits whole or changes
   * nothing. Weights come back intact from a host copy and as garbage when they were dropped.
   */
  async restore(parts: MemoryParts): Promise<{ allocation: Allocation; triedBytes: number }> {
    const weights = parts.weights && this.weights !== 'gpu';
    const kv = parts.kv && !this.kvOnGpu;
    const triedBytes = (weights ? this.weightsBytes : 0) + (kv ? this.kvBytes : 0);
    const allocation = triedBytes === 0 ? ({ ok: true } as const) : await this.allocate(triedBytes);
    if (allocation.ok) {
      if (weights) {
        this.weightsGarbage = this.weights === 'dropped';
        this.weights = 'gpu';
      }
      if (kv) this.kvOnGpu = true;
      await this.holding?.setHostRam(this.hostRamBytes);
    }
    return { allocation, triedBytes };
  }

  /** On a clean exit: gives everything back at once. */
  dropSync(): void {
    this.holding?.dropSync();
  }

  private allocate(bytes: number): Promise<Allocation> {
    return this.holding ? this.holding.allocate(bytes) : Promise.resolve({ ok: true });
  }

  /** PyTorch's wording, so logs and error bodies read like the real thing. */
  outOfMemoryMessage(triedBytes: number, refusal: Extract<Allocation, { ok: false }>): string {
    const gib = (n: number) => `${(n / 2 ** 30).toFixed(2)} GiB`;
    return (
      `CUDA out of memory. Tried to allocate ${gib(triedBytes)}. GPU ${this.placement?.index ?? 0} has a total capacity of ` +
      `${gib(refusal.capacityBytes)} of which ${gib(refusal.freeBytes)} is free.`
    );
  }
}
