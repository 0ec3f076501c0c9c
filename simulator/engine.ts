/**
 * One simulated engine: its lifecycle state, memory, batch, the requests in it, the faults asked
 * for and the misuse seen. The dialects translate their routes into these operations; the timings
 * come from the --sim-*-ms flags.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { ParkTier } from '../domain/vocabulary.js';
import type { SimConfig } from '../engines/simulatorArgs.js';
import { engineContracts } from '../engines/contracts.js';
import {
  EngineMemory,
  type GpuPlacement,
  type MemoryParts,
  noCudaGpusLine,
  type StartOutcome,
  type ModelMemory,
  type StartSizing,
} from './memory.js';
import { Slots } from './slots.js';

export type EngineState = 'loading' | 'ready' | 'parking' | 'parked' | 'waking' | 'reloading';

export interface Faults {
  /** Answers differ after the next wake. */
  wrong_answer_after_wake: boolean;
  /** Reloading weights answers 500. */
  reload_fails: boolean;
  /** A wake never answers, and the engine never wakes. */
  wake_hangs: boolean;
  /** New requests never finish: a stream stops after its role chunk, a plain request never answers. */
  requests_never_finish: boolean;
  /** A new stream goes silent after its first token, as an engine stuck mid-answer; it stays running. */
  streams_go_silent: boolean;
  /** Paths the engine answers 404, as a build without those routes (an older or newer version). */
  missing_routes: string[];
  /** It samples even at temperature 0, as some simulators and samplers do (answers repeat only when pinned). */
  ignores_temperature: boolean;
}

/** Why a request stopped early: its client hung up, or the engine was told to abort it. */
export type AbortCause = 'client' | 'engine';

export interface InFlightRequest {
  /** SGLang's request id, from the body's `rid`. */
  readonly rid: string | undefined;
  abort(cause: AbortCause): void;
}

export type WakeOutcome = { ok: true } | { ok: false; message: string };

/** The body of `GET /sim/state`. */
export interface SimState {
  dialect: string;
  model: string;
  served_model_name: string;
  state: EngineState;
  /** vLLM's sleep level while asleep. */
  parked_level: 1 | 2 | null;
  parked_tier: ParkTier | null;
  paused: boolean;
  /** The devices its ranks hold memory on, one each; none without a simulated GPU. */
  gpu_indexes: number[];
  gpu_bytes: number;
  host_ram_bytes: number;
  running: number;
  waiting: number;
  max_running: number;
  violations: string[];
  draft_lost: boolean;
  /** Times it came back to ready from a park (SGLang's two resumes of one wake count once). */
  wakes: number;
  /** Wake requests received, those that found nothing to take back included: a host that asks twice shows here. */
  wake_requests: number;
  faults: Faults;
}

/** The dialect's bound rule at the share its command line gave, or at the engine's own default share. */
function startSizing(config: SimConfig): StartSizing {
  const bound = engineContracts[config.dialect].memoryBound;
  return bound === null ? { rule: 'declared' } : { rule: bound.rule, share: config.memoryShare ?? bound.defaultShare };
}

/** What each rank keeps asleep, and the sequence its engine checks its KV cache against when the model's figures are declared. */
function modelMemory(config: SimConfig): ModelMemory {
  const contract = engineContracts[config.dialect].contextLength;
  return {
    residueBytes: config.residueBytes,
    ...(config.kvBytesPerToken !== undefined && contract !== null
      ? { kvCheck: { bytesPerToken: config.kvBytesPerToken, maxModelLen: config.maxModelLen, contract } }
      : {}),
  };
}

export class SimEngine {
  state: EngineState = 'loading';
  readonly memory: EngineMemory;
  readonly slots: Slots;
  readonly violations: string[] = [];
  readonly faults: Faults = {
    wrong_answer_after_wake: false,
    reload_fails: false,
    wake_hangs: false,
    requests_never_finish: false,
    streams_go_silent: false,
    missing_routes: [],
    ignores_temperature: false,
  };
  readonly inFlight = new Set<InFlightRequest>();
  parkedLevel: 1 | 2 | null = null;
  parkedTier: ParkTier | null = null;
  /** SGLang: speculative decoding's draft model was wiped by a weights release; nothing restores it. */
  draftLost = false;
  /** SGLang: the cache was filled by garbage weights; answers stay garbage until /flush_cache. */
  cacheStale = false;
  /** SGLang's pause_generation. */
  paused = false;
  private wakes = 0;
  private wakeRequests = 0;
  /** Changes the answers; empty while the weights are the ones loaded at start. */
  answerSalt = '';
  private control: Promise<unknown> = Promise.resolve();

  constructor(
    readonly config: SimConfig,
    placement: GpuPlacement | undefined,
  ) {
    this.memory = new EngineMemory(
      config.weightsBytes,
      config.kvBytes,
      config.layout,
      placement,
      `${config.dialect} ${config.model}`,
      startSizing(config),
      modelMemory(config),
    );
    this.slots = new Slots(config.maxRunning);
  }

  /** Answers are garbage (no error, just "!!!!") while weights or cache hold what a wake left there. */
  get answersGarbage(): boolean {
    return this.memory.weightsGarbage || this.cacheStale;
  }

  /** KV-cache use moves with load: the running share of the batch, nothing while the cache is freed. */
  get kvUsage(): number {
    return this.memory.kvOnGpu ? Math.min(1, this.slots.running / this.slots.limit) : 0;
  }

  violation(text: string): void {
    this.violations.push(text);
    process.stderr.write(`[sim] VIOLATION: ${text}\n`);
  }

  /** The engine aborts running and waiting requests: all of them, or the one with `rid`. Returns how many. */
  abortRequests(rid?: string): number {
    let aborted = 0;
    for (const request of [...this.inFlight]) {
      if (rid !== undefined && request.rid !== rid) continue;
      request.abort('engine');
      aborted++;
    }
    return aborted;
  }

  /**
   * The start's first step: one rank on each device its layout needs, taking its weights and KV cache,
   * or why not in the engine's words (the caller exits).
   */
  allocate(): Promise<StartOutcome> {
    const visible = this.memory.placement?.indexes.length;
    if (visible === 0) return Promise.resolve({ ok: false, line: noCudaGpusLine });
    const { parallelism } = engineContracts[this.config.dialect];
    if (visible !== undefined && parallelism && visible < this.config.layout.ranks)
      return Promise.resolve({ ok: false, line: parallelism.tooFewDevicesLine(this.config.layout, visible) });
    return this.memory.load();
  }

  /** The rest of the start: reading the weights and warming up, --sim-load-ms. */
  async finishLoading(): Promise<void> {
    await sleep(this.config.timings.loadMs);
    this.state = 'ready';
  }

  /**
   * Gives back the GPU memory of `parts`, after --sim-park-ms. Parking with requests in flight is
   * what crashed real engines, so it is recorded, though the engine answers as the real one does.
   */
  park(how: { parts: MemoryParts; keepHostCopy: boolean; tier: ParkTier; level?: 1 | 2; what: string }): Promise<void> {
    return this.exclusive(async () => {
      if (this.inFlight.size > 0) this.violation(`${how.what} with ${this.inFlight.size} request(s) in flight`);
      if (!this.holds(how.parts)) return;
      this.state = 'parking';
      await sleep(this.config.timings.parkMs);
      await this.memory.release(how.parts, how.keepHostCopy);
      this.parkedTier = how.tier;
      this.parkedLevel = how.level ?? null;
      this.settle();
    });
  }

  /**
   * Takes the memory of `parts` back, after --sim-wake-ms. No room: the engine stays as it was and
   * says so. The wake_hangs fault never answers.
   */
  wake(parts: MemoryParts): Promise<WakeOutcome> {
    this.wakeRequests++;
    return this.exclusive(async () => {
      if (this.faults.wake_hangs) {
        if (!this.memory.resident) this.state = 'waking';
        return new Promise<never>(() => {});
      }
      const before = this.state;
      const restored = await this.memory.restore(parts);
      if (!restored.ok) return restored;
      if (!restored.took) return { ok: true };
      this.state = 'waking';
      await sleep(this.config.timings.wakeMs);
      if (this.settle() === 'ready' && before !== 'ready') {
        this.wakes++;
        if (this.faults.wrong_answer_after_wake) this.answerSalt = 'woken-wrong';
      }
      return { ok: true };
    });
  }

  /** Reloads the weights from disk, after --sim-reload-ms. Fails under reload_fails, or with no weights on the GPU. */
  reload(): Promise<WakeOutcome> {
    return this.exclusive(async () => {
      if (this.faults.reload_fails) return { ok: false, message: 'simulated fault: reloading the weights failed' };
      if (this.memory.weights !== 'gpu') {
        this.violation('weights reloaded while they are not on the GPU');
        return { ok: false, message: 'the weights are not on the GPU: wake them first' };
      }
      const before = this.state;
      this.state = 'reloading';
      await sleep(this.config.timings.reloadMs);
      this.memory.weightsGarbage = false;
      this.state = before;
      return { ok: true };
    });
  }

  snapshot(): SimState {
    return {
      dialect: this.config.dialect,
      model: this.config.model,
      served_model_name: this.config.servedModelName,
      state: this.state,
      parked_level: this.parkedLevel,
      parked_tier: this.parkedTier,
      paused: this.paused,
      gpu_indexes: [...this.memory.gpuIndexes],
      gpu_bytes: this.memory.gpuBytes,
      host_ram_bytes: this.memory.hostRamBytes,
      running: this.slots.running,
      waiting: this.slots.waiting,
      max_running: this.slots.limit,
      violations: [...this.violations],
      draft_lost: this.draftLost,
      wakes: this.wakes,
      wake_requests: this.wakeRequests,
      faults: { ...this.faults, missing_routes: [...this.faults.missing_routes] },
    };
  }

  private holds(parts: MemoryParts): boolean {
    return (parts.weights && this.memory.weights === 'gpu') || (parts.kv && this.memory.kvOnGpu);
  }

  /** After a park or wake: ready only with everything back on the GPU. */
  private settle(): EngineState {
    this.state = this.memory.resident ? 'ready' : 'parked';
    if (this.state === 'ready') {
      this.parkedLevel = null;
      this.parkedTier = null;
    }
    return this.state;
  }

  /** Park, wake and reload run one at a time, as in the real engines; a hung one holds the rest. */
  private exclusive<T>(operation: () => Promise<T>): Promise<T> {
    const result = this.control.then(operation);
    this.control = result.catch(() => {});
    return result;
  }
}
