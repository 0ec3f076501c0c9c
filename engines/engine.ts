/**
 * One interface for every engine. An adapter knows its engine's launch arguments and HTTP routes;
 * the host agent owns the processes (start, supervise, stop) and calls the adapter for the rest.
 */
import type { DeploymentSpec } from '../settings/deploymentDocument.js';
import type { EngineName, MaxRunningSource, ParkTier } from '../domain/vocabulary.js';
import type { VersionRequests } from './contracts.js';
import type { LaunchMemory } from './memoryBound.js';

/** How the host should start the engine process. */
export interface LaunchPlan {
  /** The executable and its arguments: the host's configured command, then the adapter's. */
  argv: string[];
  env: Record<string, string>;
}

export interface LaunchContext {
  spec: DeploymentSpec;
  /** The command the host document configures for this engine, e.g. `["vllm", "serve"]`. */
  command: readonly string[];
  /** Where the engine listens (always 127.0.0.1: the host's ingress forwards to it). */
  port: number;
  /** The GPUs it runs on (`CUDA_VISIBLE_DEVICES`). */
  gpuIndexes: number[];
  /** The tier it will park at, or null when it will never park (it stops instead). */
  parkTier: ParkTier | null;
  /** The GPU's size and what the ledger counts on it, for the engine's memory bound. */
  memory: LaunchMemory;
}

/** A running engine process, as the adapter reaches it. */
export interface EngineEndpoint {
  /** `http://127.0.0.1:<port>` */
  baseUrl: string;
  /** The model name the engine serves (what `/v1/models` lists). */
  model: string;
}

/** The engine's own load figures; null in a sample when it has no metrics to read. */
export interface EngineLoad {
  running: number;
  waiting: number;
  kv_usage_ppm: number;
}

export interface MaxRunning {
  /** Absent when not known. */
  count?: number;
  source: MaxRunningSource;
}

/** What decides how many requests an engine runs at once before the engine itself says. */
export interface MaxRunningContext {
  spec: DeploymentSpec;
  /**
   * The host's command for the engine (an option there fixes the figure: `host_fixed`). Absent where
   * the host is not known yet (the server before a placement): the figure is then `on_host`.
   */
  command?: readonly string[];
}

/** What the wake check asks: a fixed greedy prompt, or a decision model's fixed decision. */
export type Probe =
  { kind: 'prompt'; prompt: string; maxTokens: number } | { kind: 'decision'; prompt: string; options: string[] };

/** The answer compared after a wake. */
export type ProbeAnswer =
  { kind: 'prompt'; text: string } | { kind: 'decision'; option: string; probabilities: Record<string, number> };

/**
 * A failure the lifecycle maps to a spec code. `reload_failed` → wake_reload_failed;
 * `not_ready` / `timeout` → wake_uncertain when it happens during a wake; `out_of_memory` when the
 * GPU cannot hold what was asked (a 5xx whose body says out of memory); `refused` when the engine
 * answered another error or an answer that does not parse; `unreachable` when nothing answered
 * (connection refused or reset). `timeout` is the caller's signal aborting the call.
 * `version_unsupported`: the engine started reports a version capyctl does not know (engineVersions.ts).
 */
export class EngineError extends Error {
  constructor(
    readonly kind:
      'out_of_memory' | 'reload_failed' | 'not_ready' | 'timeout' | 'refused' | 'unreachable' | 'version_unsupported',
    message: string,
  ) {
    super(message);
    this.name = 'EngineError';
  }
}

/** Calls with a deadline; adapters pass it to every HTTP call so a hung engine cannot hang a step. */
export interface CallOptions {
  signal?: AbortSignal;
  /** Told what a step skipped (an optional route the engine does not have). */
  warn?: (message: string) => void;
}

export interface EngineAdapter {
  readonly name: EngineName;
  /** False for engines that cannot park (TensorFold): they stop instead. Same as `parkTiers.length > 0`. */
  readonly canPark: boolean;
  /** The tiers it can park at (`rules.ts` picks one per deployment and host). */
  readonly parkTiers: readonly ParkTier[];
  /**
   * CapyCTL's default of requests run at once, passed when nothing else sets it (32 vLLM, 8 TensorFold);
   * undefined when the engine chooses (SGLang).
   */
  readonly defaultMaxRunning: number | undefined;

  launch(ctx: LaunchContext): LaunchPlan;
  /**
   * Resolves once the engine answers its readiness route (200 on `GET /health`); the caller retries with
   * a deadline.
   */
  isReady(endpoint: EngineEndpoint, options?: CallOptions): Promise<boolean>;
  /**
   * Gives back GPU memory at `tier`, one of `parkTiers` and, for SGLang, the tier it was launched for
   * (`rules.parkPlan` says which), with the requests its version takes (`sends`, from the start's
   * version check). The caller has drained it first: no request is running. An engine launched with
   * `parkTier: null` refuses.
   */
  park(endpoint: EngineEndpoint, tier: ParkTier, sends: VersionRequests, options?: CallOptions): Promise<void>;
  /** Takes GPU memory back after a park at `tier`, reloading weights where that tier dropped them. */
  wake(endpoint: EngineEndpoint, tier: ParkTier, sends: VersionRequests, options?: CallOptions): Promise<void>;
  /**
   * The engine's running, waiting and KV use; null when it exposes no metrics (no `/metrics` route, or a
   * series missing). Throws `unreachable` / `timeout` when the engine does not answer at all.
   */
  sampleLoad(endpoint: EngineEndpoint, options?: CallOptions): Promise<EngineLoad | null>;
  /**
   * How many requests it runs at once, and where that figure comes from. With `endpoint` null (not
   * started, or not ready) it is what CapyCTL passes or expects; SGLang from 0.5.18 reports the
   * figure its schedulers chose (`engine`, or `state_cache` below what it was passed) once it runs; an
   * engine that does not answer, or an older one, has not said.
   */
  maxRunning(endpoint: EngineEndpoint | null, ctx: MaxRunningContext, options?: CallOptions): Promise<MaxRunning>;
  /**
   * The engine's version as it reports it, null when it has no version route. The start checks it
   * (engineVersions.ts) and some capability rules depend on it.
   */
  version(endpoint: EngineEndpoint, options?: CallOptions): Promise<string | null>;
  /**
   * Stops the engine's work on one request. SGLang aborts by `rid`, so `requestId` is the `rid` the
   * ingress put in the request's body; vLLM and TensorFold abort when the request's connection closes
   * and do nothing here.
   */
  abort(endpoint: EngineEndpoint, requestId: string, options?: CallOptions): Promise<void>;
  /** Asks the wake check's question. */
  probe(endpoint: EngineEndpoint, probe: Probe, options?: CallOptions): Promise<ProbeAnswer>;
}
