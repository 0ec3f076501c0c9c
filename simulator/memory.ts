/**
 * Where one engine's weights and KV cache are: on the GPU, copied to host RAM, or dropped. Every
 * change goes through the shared GPU ledger when there is one (CAPYCTL_SIM_GPU_DIR), so two engines
 * on one simulated device cannot both hold more than it has.
 */
import type { MemoryBoundContract } from '../engines/contracts.js';
import { gibibytes } from '../settings/units.js';
import { SimArgsError } from '../engines/simulatorArgs.js';
import { type Allocation, GpuHolding, type Room, type Sizing } from '../hostAgent/simulatedGpu.js';

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

/**
 * How the engine sizes its memory at start on a simulated GPU: its engine's bound rule at the share it
 * was given (or the engine's default share), or, for an engine with no bound, its declared KV cache.
 */
export type StartSizing = { rule: MemoryBoundContract['rule']; share: number } | { rule: 'declared' };

/** The start's outcome: the line an engine that cannot start dies with. */
export type StartOutcome = { ok: true } | { ok: false; line: string };

/** Reads the device from the environment, as a real engine reads CUDA_VISIBLE_DEVICES. */
export function gpuPlacementFromEnv(env: NodeJS.ProcessEnv): GpuPlacement | undefined {
  const dir = env.CAPYCTL_SIM_GPU_DIR;
  if (!dir) return undefined;
  // An engine uses the first visible device; tensor parallelism is not simulated.
  const first = (env.CUDA_VISIBLE_DEVICES ?? '0').split(',')[0]!.trim();
  const index = Number(first);
  if (!Number.isInteger(index) || index < 0)
    throw new SimArgsError(`CUDA_VISIBLE_DEVICES=${env.CUDA_VISIBLE_DEVICES}: expected a device index`);
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
    /** The declared KV cache; a bounded engine on a simulated GPU sizes its own at start. */
    public kvBytes: number,
    readonly placement: GpuPlacement | undefined,
    label: string,
    private readonly sizing: StartSizing = { rule: 'declared' },
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

  /**
   * The start: weights and KV cache in one allocation, as an engine sizes both before serving. A
   * bounded engine takes its share of the device by its engine's rule (engines/contracts.ts); without a
   * simulated device there is nothing to share and the declared KV cache is taken.
   */
  async load(): Promise<StartOutcome> {
    if (this.holding === undefined || this.sizing.rule === 'declared') {
      const { allocation, triedBytes } = await this.restore({ weights: true, kv: true });
      this.weightsGarbage = false;
      return allocation.ok
        ? { ok: true }
        : { ok: false, line: `torch.OutOfMemoryError: ${this.outOfMemoryMessage(triedBytes, allocation)}` };
    }
    const sized = this.sizing;
    const allocation = await this.holding.allocate((room) => this.startSize(sized, room));
    if (!allocation.ok) {
      return {
        ok: false,
        line: allocation.refusal ?? `torch.OutOfMemoryError: ${this.outOfMemoryMessage(this.weightsBytes, allocation)}`,
      };
    }
    this.kvBytes = allocation.bytes! - this.weightsBytes;
    // Read from disk: good weights, unlike a wake into dropped ones.
    this.weights = 'gpu';
    this.kvOnGpu = true;
    this.weightsGarbage = false;
    await this.holding.setHostRam(0);
    return { ok: true };
  }

  /** What the engine takes of `room` at `share`, in its own words when it cannot start (engines/contracts.ts). */
  private startSize(sized: Exclude<StartSizing, { rule: 'declared' }>, room: Room): ReturnType<Sizing> {
    const { share } = sized;
    const { capacityBytes, freeBytes } = room;
    if (sized.rule === 'share_of_total') {
      // vLLM: the share of the whole device, free at start, weights and KV cache within it.
      const take = Math.floor(share * capacityBytes);
      if (freeBytes < take) {
        return {
          refusal:
            `ValueError: Free memory on device (${gibibytes(freeBytes)}/${gibibytes(capacityBytes)} GiB) on ` +
            `startup is less than desired GPU memory ` +
            `utilization (${share}, ${gibibytes(take)} GiB). Decrease GPU memory utilization or reduce GPU memory ` +
            `used by other processes.`,
        };
      }
      if (take <= this.weightsBytes) {
        return {
          refusal:
            'ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when ' +
            'initializing the engine.',
        };
      }
      return { bytes: take };
    }
    // SGLang: weights first, then a KV pool of what is free less (1 − share) of the whole device.
    if (this.weightsBytes > freeBytes) {
      return {
        refusal:
          `torch.OutOfMemoryError: ` +
          `${this.outOfMemoryMessage(this.weightsBytes, { ok: false, capacityBytes, freeBytes })}`,
      };
    }
    const kv = Math.floor(freeBytes - this.weightsBytes - (1 - share) * capacityBytes);
    if (kv <= 0) return { refusal: 'RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.' };
    return { bytes: this.weightsBytes + kv };
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
    return (
      `CUDA out of memory. Tried to allocate ${gibibytes(triedBytes)} GiB. GPU ${this.placement?.index ?? 0} has a ` +
      `total capacity of ` +
      `${gibibytes(refusal.capacityBytes)} GiB of which ${gibibytes(refusal.freeBytes)} GiB is free.`
    );
  }
}
