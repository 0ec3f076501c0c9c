/**
 * Where one engine's weights and KV cache are: on the GPU, copied to host RAM, or dropped. The engine
 * runs one rank per device, on the first of the visible devices its layout needs (engines/contracts.ts,
 * `parallelism`); each rank holds its part of the weights and its own KV cache. Every change goes
 * through the shared GPU ledger when there is one (CAPYCTL_SIM_GPU_DIR), so two engines on one
 * simulated device cannot both hold more than it has.
 */
import type { ContextLengthContract, MemoryBoundContract, ParallelLayout } from '../engines/contracts.js';
import { kvBytesFor, longestSequenceIn } from '../engines/kvCache.js';
import { gibibytes } from '../settings/units.js';
import { SimArgsError } from '../engines/simulatorArgs.js';
import { type Allocation, GpuHolding, type NoRoom, type Room, type Sizing } from '../hostAgent/simulatedGpu.js';

export type WeightsPlace = 'gpu' | 'host' | 'dropped';

/** What a park or wake touches. */
export interface MemoryParts {
  weights: boolean;
  kv: boolean;
}

export interface GpuPlacement {
  dir: string;
  /** The visible devices, in CUDA_VISIBLE_DEVICES's order. */
  indexes: number[];
}

/**
 * How the engine sizes its memory at start on a simulated GPU: its engine's bound rule at the share it
 * was given (or the engine's default share), or, for an engine with no bound, its declared KV cache.
 */
export type StartSizing = { rule: MemoryBoundContract['rule']; share: number } | { rule: 'declared' };

/**
 * What the model brings beyond its weights and KV cache: what each rank keeps while asleep, and, when
 * the model's KV figures are declared, the sequence length its engine checks its KV cache against.
 */
export interface ModelMemory {
  residueBytes: number;
  kvCheck?: { bytesPerToken: number; maxModelLen: number; contract: ContextLengthContract };
}

/** The start's outcome: the line an engine that cannot start dies with. */
export type StartOutcome = { ok: true } | { ok: false; line: string };

/** A restore's outcome: whether it took anything, or PyTorch's out-of-memory message. */
export type RestoreOutcome = { ok: true; took: boolean } | { ok: false; message: string };

/** What PyTorch says when the process sees no device at all. */
export const noCudaGpusLine = 'RuntimeError: No CUDA GPUs are available';

/** Reads the devices from the environment, as a real engine reads CUDA_VISIBLE_DEVICES. */
export function gpuPlacementFromEnv(env: NodeJS.ProcessEnv): GpuPlacement | undefined {
  const dir = env.CAPYCTL_SIM_GPU_DIR;
  if (!dir) return undefined;
  const visible = env.CUDA_VISIBLE_DEVICES ?? '0';
  // Set but empty, it hides every device.
  const indexes = visible.trim() === '' ? [] : visible.split(',').map((word) => Number(word.trim()));
  if (indexes.some((index) => !Number.isInteger(index) || index < 0) || new Set(indexes).size !== indexes.length)
    throw new SimArgsError(`CUDA_VISIBLE_DEVICES=${visible}: expected distinct device indexes`);
  return { dir, indexes };
}

/** PyTorch's wording, so logs and error bodies read like the real thing. */
export function outOfMemoryMessage({ index, triedBytes, capacityBytes, freeBytes }: NoRoom): string {
  return (
    `CUDA out of memory. Tried to allocate ${gibibytes(triedBytes)} GiB. GPU ${index} has a total capacity of ` +
    `${gibibytes(capacityBytes)} GiB of which ${gibibytes(freeBytes)} GiB is free.`
  );
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
  /** What each rank holds of the weights: its part of them. */
  private readonly rankWeights: number;
  /** Each rank's KV cache: the declared one split across the ranks, until a bounded start sizes its own. */
  private rankKv: number[];
  /** What each rank keeps on its device from its start to its exit, asleep or not. */
  private readonly rankResidue: number;
  private residueHeld = false;
  private readonly holding: GpuHolding | undefined;

  constructor(
    weightsBytes: number,
    /** The declared KV cache; a bounded engine on a simulated GPU sizes its own at start. */
    kvBytes: number,
    readonly layout: ParallelLayout,
    /** The visible devices; the ranks run on the first `layout.ranks` of them. */
    readonly placement: GpuPlacement | undefined,
    label: string,
    private readonly sizing: StartSizing = { rule: 'declared' },
    private readonly model: ModelMemory = { residueBytes: 0 },
  ) {
    this.rankWeights = Math.ceil(weightsBytes / layout.modelShards);
    this.rankResidue = model.residueBytes;
    this.rankKv = Array.from({ length: layout.ranks }, () => Math.ceil(kvBytes / layout.ranks));
    this.holding = placement && new GpuHolding(placement.dir, placement.indexes.slice(0, layout.ranks), label);
  }

  /** The devices the ranks hold memory on; none without a simulated GPU. */
  get gpuIndexes(): readonly number[] {
    return this.holding?.indexes ?? [];
  }

  /** Every rank's GPU memory, added up. */
  get gpuBytes(): number {
    return (
      this.onGpu(this.partsHeld).reduce((sum, bytes) => sum + bytes, 0) +
      this.residueByRank().reduce((a, b) => a + b, 0)
    );
  }

  get hostRamBytes(): number {
    return this.weights === 'host' ? this.rankWeights * this.layout.ranks : 0;
  }

  get resident(): boolean {
    return this.weights === 'gpu' && this.kvOnGpu;
  }

  /**
   * The start: weights and KV cache in one allocation on every rank's device, as an engine sizes both
   * before serving. A bounded engine takes its share of each device by its engine's rule
   * (engines/contracts.ts); without a simulated device there is nothing to share and the declared KV
   * cache is taken.
   */
  async load(): Promise<StartOutcome> {
    if (this.holding === undefined || this.sizing.rule === 'declared') {
      const restored = await this.restore({ weights: true, kv: true }, true);
      this.weightsGarbage = false;
      return restored.ok ? { ok: true } : { ok: false, line: `torch.OutOfMemoryError: ${restored.message}` };
    }
    const sized = this.sizing;
    const allocation = await this.holding.allocate((rooms) => this.startSize(sized, rooms));
    if (!allocation.ok) {
      return {
        ok: false,
        line:
          'refusal' in allocation
            ? allocation.refusal
            : `torch.OutOfMemoryError: ${outOfMemoryMessage(allocation.noRoom)}`,
      };
    }
    this.rankKv = allocation.bytes.map((bytes) => bytes - this.rankWeights - this.rankResidue);
    this.residueHeld = true;
    // Read from disk: good weights, unlike a wake into dropped ones.
    this.weights = 'gpu';
    this.kvOnGpu = true;
    this.weightsGarbage = false;
    await this.holding.setHostRam(this.rankKv.map(() => 0));
    return { ok: true };
  }

  /**
   * What each rank takes of its device at `share`, in the engine's own words when it cannot start
   * (engines/contracts.ts): the share applies to each device, as the real engines apply it per GPU.
   */
  private startSize(sized: Exclude<StartSizing, { rule: 'declared' }>, rooms: readonly Room[]): ReturnType<Sizing> {
    const { share } = sized;
    if (sized.rule === 'share_of_total') {
      // vLLM: each worker takes the share of its whole device, free at start, weights and KV cache within it.
      const takes = rooms.map((room) => Math.floor(share * room.capacityBytes));
      const short = rooms.findIndex((room, i) => room.freeBytes < takes[i]!);
      if (short >= 0) {
        const { freeBytes, capacityBytes } = rooms[short]!;
        return {
          refusal:
            `ValueError: Free memory on device (${gibibytes(freeBytes)}/${gibibytes(capacityBytes)} GiB) on ` +
            `startup is less than desired GPU memory ` +
            `utilization (${share}, ${gibibytes(takes[short]!)} GiB). Decrease GPU memory utilization or reduce GPU memory ` +
            `used by other processes.`,
        };
      }
      const kv = Math.min(...takes.map((take) => take - this.rankWeights - this.rankResidue));
      if (kv <= 0) {
        return {
          refusal:
            'ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when ' +
            'initializing the engine.',
        };
      }
      const tooSmall = this.kvTooSmall(kv);
      return tooSmall === undefined ? { bytes: takes } : { refusal: tooSmall };
    }
    // SGLang: weights first on every rank, then one KV pool size for all of them, from the least free
    // of their devices (its free-memory reading is reduced to the minimum across the ranks).
    const loaded = this.rankWeights + this.rankResidue;
    const short = rooms.find((room) => loaded > room.freeBytes);
    if (short) return { refusal: `torch.OutOfMemoryError: ${outOfMemoryMessage({ ...short, triedBytes: loaded })}` };
    const kv = Math.min(...rooms.map((room) => Math.floor(room.freeBytes - loaded - (1 - share) * room.capacityBytes)));
    if (kv <= 0) return { refusal: 'RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.' };
    return { bytes: rooms.map(() => loaded + kv) };
  }

  /**
   * The engine's own refusal when a rank's KV cache of `kvBytes` cannot hold one sequence of the
   * length it serves (vLLM's check; SGLang clamps instead). Each rank holds its share of every token.
   */
  private kvTooSmall(kvBytes: number): string | undefined {
    const check = this.model.kvCheck;
    if (check?.contract.kvTooSmallLine === undefined) return undefined;
    const perRank = Math.ceil(check.bytesPerToken / this.layout.modelShards);
    const neededBytes = kvBytesFor(perRank, check.maxModelLen);
    if (neededBytes <= kvBytes) return undefined;
    const estimatedMaxLen = Math.min(check.maxModelLen, longestSequenceIn(perRank, kvBytes));
    return check.contract.kvTooSmallLine({
      maxModelLen: check.maxModelLen,
      neededBytes,
      availableBytes: kvBytes,
      estimatedMaxLen,
    });
  }

  /**
   * Frees the GPU memory of `parts` on every rank. The weights keep a copy in host RAM when asked,
   * unless they are garbage: a copy of garbage is no better than dropping them.
   */
  async release(parts: MemoryParts, keepHostCopy: boolean): Promise<void> {
    const freeing = { weights: parts.weights && this.weights === 'gpu', kv: parts.kv && this.kvOnGpu };
    const freed = this.onGpu(freeing);
    if (freeing.weights) {
      this.weights = keepHostCopy && !this.weightsGarbage ? 'host' : 'dropped';
      this.weightsGarbage = false;
    }
    if (freeing.kv) this.kvOnGpu = false;
    await this.holding?.release(freed);
    await this.holding?.setHostRam(this.hostRamByRank());
  }

  /**
   * Takes the GPU memory of `parts` back on every rank in one allocation, so a wake either fits whole
   * or changes nothing. Weights come back intact from a host copy and as garbage when they were dropped.
   */
  async restore(parts: MemoryParts, starting = false): Promise<RestoreOutcome> {
    const taking = { weights: parts.weights && this.weights !== 'gpu', kv: parts.kv && !this.kvOnGpu };
    if (!taking.weights && !taking.kv) return { ok: true, took: false };
    // The start takes the residue too (its CUDA context first of all); a wake finds it still held.
    const want = this.onGpu(taking).map((bytes) => bytes + (starting ? this.rankResidue : 0));
    const allocation: Allocation = this.holding ? await this.holding.allocate(want) : { ok: true, bytes: want };
    if (!allocation.ok)
      return {
        ok: false,
        message: 'noRoom' in allocation ? outOfMemoryMessage(allocation.noRoom) : allocation.refusal,
      };
    if (taking.weights) {
      this.weightsGarbage = this.weights === 'dropped';
      this.weights = 'gpu';
    }
    if (taking.kv) this.kvOnGpu = true;
    if (starting) this.residueHeld = true;
    await this.holding?.setHostRam(this.hostRamByRank());
    return { ok: true, took: true };
  }

  /** On a clean exit: gives everything back at once. */
  dropSync(): void {
    this.holding?.dropSync();
  }

  /** What is on the GPU now. */
  private get partsHeld(): MemoryParts {
    return { weights: this.weights === 'gpu', kv: this.kvOnGpu };
  }

  /** What `parts` weigh on each rank's device. */
  private onGpu(parts: MemoryParts): number[] {
    return this.rankKv.map((kv) => (parts.weights ? this.rankWeights : 0) + (parts.kv ? kv : 0));
  }

  private residueByRank(): number[] {
    return this.rankKv.map(() => (this.residueHeld ? this.rankResidue : 0));
  }

  private hostRamByRank(): number[] {
    return this.rankKv.map(() => (this.weights === 'host' ? this.rankWeights : 0));
  }
}
