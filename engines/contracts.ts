/**
 * What capyctl relies on in each engine's command line and HTTP server, read from the engines' own
 * sources (CONTRACTS.md beside this file cites them). The adapters send exactly these requests and
 * the simulator's dialects serve exactly these routes, both from this one table;
 * test/engines.contracts.test.ts holds each to it.
 */
import type { EngineName, ParkTier } from '../domain/vocabulary.js';
import { gibibytes } from '../settings/units.js';

export type Method = 'GET' | 'POST';

export interface RouteContract {
  method: Method;
  path: string;
  /** Registered only in dev mode (vLLM: `VLLM_SERVER_DEV_MODE=1`); without it the route answers 404. */
  devMode?: boolean;
  /** Registered only with this launch flag (the simulator's reading; real vLLM registers and then fails). */
  flag?: string;
  /**
   * It only refines a park or wake (a cache reset): an engine without it (404) is skipped with a
   * warning. A route not marked optional that answers 404 is a refusal naming the route and version.
   */
  optional?: boolean;
  /** A POST-only route: `GET` on it answers 405 when the engine has it and 404 when not, doing nothing. */
  probedByGet?: boolean;
  /** What the engine answers when it succeeds: the status, and the JSON body or `''` for none. */
  answer: { status: number; json?: unknown; text?: string };
}

/** What a step's answer means beyond success. */
export type StepRole =
  /** `{"is_sleeping": true}` is expected: `/sleep` has answered 200 without sleeping (vLLM #15483). */
  | 'expect_asleep'
  /** `{"is_sleeping": false}` is expected. */
  | 'expect_awake'
  /** A weight reload: an error answer (or `success: false`) is `reload_failed`. */
  | 'reload'
  /** Reads `model_path`, the checkpoint the engine loaded, for a later step's body. */
  | 'read_model_path';

/**
 * What capyctl sends that differs between versions of one engine (the `versions` table): each field
 * absent where the version reads no such parameter.
 */
export interface VersionRequests {
  /**
   * vLLM's `/sleep?mode=`, read from 0.17.0 on (default `abort`, which aborts what is in flight):
   * `wait` lets a request that slipped past the drain finish before the sleep.
   */
  sleepMode?: 'wait';
  /**
   * SGLang's `/pause_generation` `mode`, read after 0.5.5 (default `abort`): `abort` pinned, what the
   * bodiless pause of 0.5.4 did; `retract` and `in_place` leave requests whose cache the release drops.
   */
  pauseMode?: 'abort';
}

/** A range of an engine's releases capyctl knows, `from` included and `below` not, and what it sends them. */
export interface SupportedVersions {
  from: string;
  below: string;
  sends: VersionRequests;
}

/** Facts a step's query and body are built from. */
export interface StepFacts {
  modelPath: string;
  /** What this version of the engine is sent. */
  sends: VersionRequests;
}

export interface Step {
  route: RouteContract;
  /** The query string, without `?`, or a function of what is known. */
  query?: string | ((facts: StepFacts) => string);
  /** The JSON body, or a function of what earlier steps read. */
  json?: unknown | ((facts: StepFacts) => unknown);
  role?: StepRole;
}

/** How an engine is bounded in GPU memory, and what it takes when it is not. */
export interface MemoryBoundContract {
  /** The launch option capyctl passes. */
  option: string;
  /**
   * `share_of_total`: the engine takes `value × total` and refuses to start unless that much is free
   * (vLLM). `static_share_of_total`: the engine fills the GPU up to `value × total`, counting what
   * other processes hold, and takes the rest after its weights as KV cache (SGLang).
   */
  rule: 'share_of_total' | 'static_share_of_total';
  /** The engine's own default share of the GPU when no option is given. */
  defaultShare: number;
  /** What the engine says on stderr when the bound leaves no room, as its own sources word it. */
  noRoomLine: string;
}

/**
 * One option whose value multiplies the GPUs an instance runs on (parallelism.ts): the engine starts
 * one rank per GPU, on the first of the devices CUDA_VISIBLE_DEVICES lists.
 */
export interface ParallelismFactor {
  /** Every spelling the engine's parser takes, its own name first. */
  options: readonly string[];
  /**
   * What its ranks share: `model`, each holding a part of the weights (tensor and pipeline
   * parallelism); `requests`, each group of ranks holding the whole model and serving its own
   * requests (data parallelism), so the weights are held once per group.
   */
  splits: 'model' | 'requests';
  /** Flags that make it multiply nothing: SGLang's data-parallel attention runs inside the tensor-parallel ranks. */
  notWith?: readonly string[];
}

/** How an instance's command line lays it out on GPUs (parallelism.ts reads it). */
export interface ParallelLayout {
  /** The GPUs it runs on, one rank each: every factor multiplied. */
  ranks: number;
  /** The parts its weights are cut into, each on its own rank: the factors that split the model (vLLM's world size). */
  modelShards: number;
  /** The schedulers its batch is split between (parallelism.ts `parallelLayout`); 1 for most layouts. */
  batchRanks: number;
}

export interface ParallelismContract {
  factors: readonly ParallelismFactor[];
  /** What the engine says on stderr when CUDA_VISIBLE_DEVICES lists fewer devices than its ranks, in its sources' words. */
  tooFewDevicesLine: (layout: ParallelLayout, visibleDevices: number) => string;
}

/**
 * How an engine is told the longest sequence it serves, and how it checks its KV cache against it
 * (engines/kvCache.ts computes both; CONTRACTS.md, "Memory an engine really needs", cites them).
 */
export interface ContextLengthContract {
  /** The launch option capyctl passes. */
  option: string;
  /**
   * `refuses_at_start`: the engine exits when its KV cache cannot hold one sequence of that length
   * (vLLM's `check_enough_kv_cache_memory`). `clamps`: it serves, capping a request at the tokens its
   * KV pool holds (SGLang's `max_req_len`).
   */
  rule: 'refuses_at_start' | 'clamps';
  /** What a `refuses_at_start` engine says on stderr when its KV cache cannot hold one sequence, in its sources' words. */
  kvTooSmallLine?: (f: KvShortfall) => string;
}

/** The figures of a KV cache too small for one sequence, as the engine reports them. */
export interface KvShortfall {
  maxModelLen: number;
  neededBytes: number;
  availableBytes: number;
  /** The longest sequence it holds; 0 when not one page. */
  estimatedMaxLen: number;
}

export interface EngineContract<Route extends string = string> {
  /** How messages name the engine. */
  label: string;
  /** The version these facts were first read for; the simulator reports it unless told another. */
  version: string;
  /** The releases capyctl knows, oldest first, and what it sends each (engines/engineVersions.ts reads it). */
  versions: readonly SupportedVersions[];
  /** How the engine reports its version, said when it does not. */
  versionRoute: string;
  /**
   * Options that make the engine park on its own when idle, behind the scheduler's back: refused in a
   * deployment's extra_args and in the host's command.
   */
  selfParkOptions: readonly string[];
  /** How the model is named on the command line. */
  modelArgs: (model: string) => string[];
  /** Options that enable parking, per tier; env needed for the park routes to exist. */
  parkFlags: (tier: ParkTier) => string[];
  parkEnv: Record<string, string>;
  /** Why the park routes may be missing, said when one is. */
  missingRouteHint?: string;
  /** Options always passed. */
  alwaysFlags: string[];
  maxRunning: { option: string; engineDefault: number | 'computed' };
  memoryBound: MemoryBoundContract | null;
  /** The longest sequence it serves; null for an engine capyctl does not size a KV cache for. */
  contextLength: ContextLengthContract | null;
  /** How an instance runs on several GPUs; null for an engine that runs on one. */
  parallelism: ParallelismContract | null;
  routes: Record<Route, RouteContract>;
  /** The requests of a park and a wake at each tier the engine parks at, in order. */
  park: Partial<Record<ParkTier, Step[]>>;
  wake: Partial<Record<ParkTier, Step[]>>;
  /** Sent with the wake check: every knob the engine has that makes its answer repeatable. */
  determinism: Record<string, number>;
  /** The engine's error JSON. */
  errorBody: (status: number, type: string, message: string) => unknown;
}

const empty = { status: 200, text: '' } as const;

// ─── vLLM 0.10.1 ────────────────────────────────────────────────────────────────────────────────

const vllmRoutes = {
  health: { method: 'GET', path: '/health', answer: empty },
  version: { method: 'GET', path: '/version', optional: true, answer: { status: 200, json: { version: '0.10.1' } } },
  metrics: {
    method: 'GET',
    path: '/metrics',
    answer: { status: 200, text: 'vllm:num_requests_running{engine="0",model_name="M"} 0.0\n' },
  },
  sleep: {
    method: 'POST',
    path: '/sleep',
    devMode: true,
    flag: '--enable-sleep-mode',
    probedByGet: true,
    answer: empty,
  },
  wakeUp: {
    method: 'POST',
    path: '/wake_up',
    devMode: true,
    flag: '--enable-sleep-mode',
    probedByGet: true,
    answer: empty,
  },
  isSleeping: {
    method: 'GET',
    path: '/is_sleeping',
    devMode: true,
    flag: '--enable-sleep-mode',
    answer: { status: 200, json: { is_sleeping: true } },
  },
  collectiveRpc: {
    method: 'POST',
    path: '/collective_rpc',
    devMode: true,
    probedByGet: true,
    answer: { status: 200, json: { results: [null] } },
  },
  resetPrefixCache: { method: 'POST', path: '/reset_prefix_cache', devMode: true, optional: true, answer: empty },
} as const satisfies Record<string, RouteContract>;

const reloadWeights = { method: 'reload_weights', args: [], kwargs: {}, timeout: null };

/** `level=N`, and the in-flight mode for versions that read one. */
const sleepQuery =
  (level: 1 | 2) =>
  ({ sends }: StepFacts): string =>
    `level=${level}${sends.sleepMode ? `&mode=${sends.sleepMode}` : ''}`;

const vllm: EngineContract<keyof typeof vllmRoutes> = {
  label: 'vLLM',
  version: '0.10.1',
  versions: [
    // 0.10.0 and older answer errors in another JSON shape; /sleep reads `level` only.
    { from: '0.10.1', below: '0.17.0', sends: {} },
    // vllm-project/vllm#34528: sleep pauses the scheduler first and takes its pause mode.
    { from: '0.17.0', below: '0.32.0', sends: { sleepMode: 'wait' } },
  ],
  versionRoute: 'GET /version',
  // vllm-project/vllm#47703 (vllm/entrypoints/serve/idle_sleep): sleeps after this many idle seconds.
  selfParkOptions: ['--sleep-idle-ttl'],
  modelArgs: (model) => [model],
  parkFlags: () => ['--enable-sleep-mode'],
  parkEnv: { VLLM_SERVER_DEV_MODE: '1' },
  missingRouteHint: 'its sleep routes exist only when it runs with --enable-sleep-mode and VLLM_SERVER_DEV_MODE=1',
  alwaysFlags: [],
  maxRunning: { option: '--max-num-seqs', engineDefault: 256 },
  parallelism: {
    factors: [
      { options: ['--tensor-parallel-size', '-tp'], splits: 'model' },
      { options: ['--pipeline-parallel-size', '-pp'], splits: 'model' },
      // One server's data-parallel engine cores, each on the next tp × pp devices.
      { options: ['--data-parallel-size', '-dp'], splits: 'requests' },
    ],
    // The world size (tp × pp) is checked first; then a data-parallel core past the last device fails.
    tooFewDevicesLine: ({ modelShards }, visible) =>
      modelShards > visible
        ? `ValueError: World size (${modelShards}) is larger than the number of available GPUs (${visible}) in this ` +
          `node. If this is intentional and you are using:\n- ray, set '--distributed-executor-backend ray'.\n` +
          `- multiprocessing, set '--nnodes' appropriately.`
        : `AssertionError: DP adjusted local rank ${visible} is out of bounds. `,
  },
  memoryBound: {
    option: '--gpu-memory-utilization',
    rule: 'share_of_total',
    defaultShare: 0.9,
    noRoomLine: 'ValueError: Free memory on device on startup is less than desired GPU memory utilization',
  },
  contextLength: {
    option: '--max-model-len',
    rule: 'refuses_at_start',
    // vllm/v1/core/kv_cache_utils.py, `_check_enough_kv_cache_memory` ("models's" is its own spelling).
    kvTooSmallLine: (f) =>
      `ValueError: To serve at least one request with the models's max seq len (${f.maxModelLen}), ` +
      `(${gibibytes(f.neededBytes)} GiB KV cache is needed, which is larger than the available KV cache memory ` +
      `(${gibibytes(f.availableBytes)} GiB). ` +
      (f.estimatedMaxLen > 0
        ? `Based on the available memory, the estimated maximum model length is ${f.estimatedMaxLen}. `
        : '') +
      'Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.',
  },
  routes: vllmRoutes,
  park: {
    host_ram: [
      { route: vllmRoutes.sleep, query: sleepQuery(1) },
      { route: vllmRoutes.isSleeping, role: 'expect_asleep' },
    ],
    deep: [
      { route: vllmRoutes.sleep, query: sleepQuery(2) },
      { route: vllmRoutes.isSleeping, role: 'expect_asleep' },
    ],
  },
  wake: {
    // The prefix cache still points at KV blocks the sleep dropped: stale entries answer wrongly (#16234, #17103).
    host_ram: [
      { route: vllmRoutes.wakeUp },
      { route: vllmRoutes.resetPrefixCache },
      { route: vllmRoutes.isSleeping, role: 'expect_awake' },
    ],
    // Weights first so the reload has its memory before the KV cache takes the rest; without the
    // reload a level-2 wake answers garbage with no error (#29341).
    deep: [
      { route: vllmRoutes.wakeUp, query: 'tags=weights' },
      { route: vllmRoutes.collectiveRpc, json: reloadWeights, role: 'reload' },
      { route: vllmRoutes.wakeUp, query: 'tags=kv_cache' },
      { route: vllmRoutes.resetPrefixCache },
      { route: vllmRoutes.isSleeping, role: 'expect_awake' },
    ],
  },
  determinism: { temperature: 0, seed: 0, top_k: 1 },
  // ≥ 0.10.1 wraps the error in `error`.
  errorBody: (status, type, message) => ({ error: { message, type, param: null, code: status } }),
};

// ─── SGLang 0.5.4 ───────────────────────────────────────────────────────────────────────────────

const idle = { status: 200, json: { message: 'ok', status: 'ok' } } as const;
const nothing = { status: 200, json: null } as const;

const sglangRoutes = {
  health: { method: 'GET', path: '/health', answer: empty },
  serverInfo: {
    method: 'GET',
    path: '/get_server_info',
    optional: true,
    answer: { status: 200, json: { version: '0.5.4', max_running_requests: null } },
  },
  modelInfo: {
    method: 'GET',
    path: '/get_model_info',
    answer: { status: 200, json: { model_path: 'Qwen/Qwen3-4B', is_generation: true } },
  },
  metrics: {
    method: 'GET',
    path: '/metrics',
    flag: '--enable-metrics',
    answer: { status: 200, text: 'sglang:num_running_reqs{model_name="M"} 0.0\n' },
  },
  pause: { method: 'POST', path: '/pause_generation', answer: idle },
  continue: { method: 'POST', path: '/continue_generation', answer: idle },
  release: { method: 'POST', path: '/release_memory_occupation', answer: nothing },
  resume: { method: 'POST', path: '/resume_memory_occupation', answer: nothing },
  updateWeightsFromDisk: {
    method: 'POST',
    path: '/update_weights_from_disk',
    answer: {
      status: 200,
      json: { success: true, message: 'Succeeded to update model weights.', num_paused_requests: 0 },
    },
  },
  flushCache: { method: 'POST', path: '/flush_cache', answer: { status: 200, text: 'Cache flushed.\n' } },
  abort: { method: 'POST', path: '/abort_request', answer: empty },
} as const satisfies Record<string, RouteContract>;

/** What each tier gives back; `kv_only` keeps the weights (and the speculative draft model with them). */
export const sglangReleasedTags: Record<ParkTier, string[]> = {
  host_ram: ['weights', 'kv_cache', 'cuda_graph'],
  deep: ['weights', 'kv_cache', 'cuda_graph'],
  kv_only: ['kv_cache'],
};

const sglangPark = (tier: ParkTier): Step[] => [
  // Memory is released only while idle: pausing holds back anything that slipped past the drain.
  { route: sglangRoutes.pause, json: ({ sends }: StepFacts) => (sends.pauseMode ? { mode: sends.pauseMode } : {}) },
  { route: sglangRoutes.release, json: { tags: sglangReleasedTags[tier] } },
];

/** Without a CPU backup the resumed weights are garbage until reloaded from disk (#6367). */
const sglangWake = (tier: ParkTier): Step[] => [
  { route: sglangRoutes.resume, json: { tags: sglangReleasedTags[tier] } },
  ...(tier === 'deep'
    ? [
        { route: sglangRoutes.modelInfo, role: 'read_model_path' as const },
        {
          route: sglangRoutes.updateWeightsFromDisk,
          json: (facts: StepFacts) => ({ model_path: facts.modelPath }),
          role: 'reload' as const,
        },
      ]
    : []),
  // The radix cache must not point at KV memory that was given back.
  { route: sglangRoutes.flushCache },
  { route: sglangRoutes.continue, json: {} },
];

const sglang: EngineContract<keyof typeof sglangRoutes> = {
  label: 'SGLang',
  version: '0.5.4',
  versions: [
    { from: '0.5.4', below: '0.5.6', sends: {} },
    // PauseGenerationReqInput gained `mode` after 0.5.5.
    { from: '0.5.6', below: '0.5.18', sends: { pauseMode: 'abort' } },
    // Sent the same; from here each scheduler's internal state reports the requests it runs at once
    // (`effective_max_running_requests_per_dp`), which the adapter reads instead of `engine_default`.
    { from: '0.5.18', below: '0.6.0', sends: { pauseMode: 'abort' } },
  ],
  versionRoute: 'GET /get_server_info',
  // Its --sleep-on-idle only lets the scheduler's loop wait on its sockets; it frees no GPU memory.
  selfParkOptions: [],
  modelArgs: (model) => ['--model-path', model],
  parkFlags: (tier) => ['--enable-memory-saver', ...(tier === 'host_ram' ? ['--enable-weights-cpu-backup'] : [])],
  parkEnv: {},
  missingRouteHint: 'its memory routes need --enable-memory-saver',
  // Metrics are off by default, and without them the host has no load to report.
  alwaysFlags: ['--enable-metrics'],
  maxRunning: { option: '--max-running-requests', engineDefault: 'computed' },
  parallelism: {
    factors: [
      // `--tp` and `--dp` are argparse abbreviations, unambiguous in SGLang's parser; `--pp` is not.
      { options: ['--tp-size', '--tensor-parallel-size', '--tp'], splits: 'model' },
      { options: ['--pp-size', '--pipeline-parallel-size'], splits: 'model' },
      {
        options: ['--dp-size', '--data-parallel-size', '--dp'],
        splits: 'requests',
        notWith: ['--enable-dp-attention'],
      },
    ],
    // A scheduler sets its device, and PyTorch refuses an ordinal past the visible ones.
    tooFewDevicesLine: () =>
      'torch.AcceleratorError: CUDA error: invalid device ordinal\nGPU device may be out of range, do you have enough GPUs?',
  },
  memoryBound: {
    option: '--mem-fraction-static',
    rule: 'static_share_of_total',
    // The fallback of its GPU-size heuristic; large cards get a little more.
    defaultShare: 0.88,
    noRoomLine: 'RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.',
  },
  contextLength: { option: '--context-length', rule: 'clamps' },
  routes: sglangRoutes,
  park: { host_ram: sglangPark('host_ram'), deep: sglangPark('deep'), kv_only: sglangPark('kv_only') },
  wake: { host_ram: sglangWake('host_ram'), deep: sglangWake('deep'), kv_only: sglangWake('kv_only') },
  determinism: { temperature: 0, seed: 0, top_k: 1 },
  errorBody: (status, type, message) => ({ object: 'error', message, type, param: null, code: status }),
};

// ─── TensorFold ─────────────────────────────────────────────────────────────────────────────────

const tensorfold: EngineContract<'health' | 'version'> = {
  label: 'TensorFold',
  version: '1.0.0',
  versions: [{ from: '1.0.0', below: '2.0.0', sends: {} }],
  versionRoute: 'GET /version',
  selfParkOptions: [],
  modelArgs: (model) => ['--model', model],
  parkFlags: () => [],
  parkEnv: {},
  alwaysFlags: [],
  maxRunning: { option: '--max-running', engineDefault: 8 },
  parallelism: null,
  memoryBound: null,
  contextLength: null,
  routes: {
    health: { method: 'GET', path: '/health', answer: empty },
    version: { method: 'GET', path: '/version', optional: true, answer: { status: 200, json: { version: '1.0.0' } } },
  },
  park: {},
  wake: {},
  determinism: { temperature: 0 },
  errorBody: (status, type, message) => ({ error: { message, type, param: null, code: status } }),
};

export const engineContracts = { vllm, sglang, tensorfold } as const satisfies Record<EngineName, EngineContract>;

/** Every route a park and wake at `tier` needs that can be asked whether it exists. */
export function routesTierNeeds(engine: EngineName, tier: ParkTier): RouteContract[] {
  const c = engineContracts[engine];
  const steps = [...(c.park[tier] ?? []), ...(c.wake[tier] ?? [])];
  return [...new Set(steps.map((s) => s.route))].filter((r) => !r.optional);
}
