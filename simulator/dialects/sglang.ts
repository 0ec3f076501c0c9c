/**
 * SGLang's own routes (engines.md): server and model info, metrics behind --enable-metrics,
 * pause/continue, memory release/resume behind --enable-memory-saver, weight reload, cache flush
 * and abort by request id.
 */
import { STATUS_CODES } from 'node:http';
import { engineContracts } from '../../engines/contracts.js';
import { atLeast } from '../../engines/engineVersions.js';
import type { SimConfig } from '../../engines/simulatorArgs.js';
import type { Dialect } from '../dialect.js';
import type { SimEngine } from '../engine.js';
import { type Handler, type Router, sendEmpty, sendJson, sendText } from '../http.js';
import type { MemoryParts } from '../memory.js';
import { sendGauges } from '../metrics.js';

const contract = engineContracts.sglang;
const routes = contract.routes;

function errorBody(status: number, message: string): unknown {
  return contract.errorBody(status, STATUS_CODES[status] ?? 'Internal Server Error', message);
}

/** `{"tags":[…]}` of weights, kv_cache and cuda_graph; none means all. CUDA graphs hold no simulated memory. */
function memoryParts(body: unknown): MemoryParts {
  const tags = (body as { tags?: unknown } | undefined)?.tags;
  if (!Array.isArray(tags)) return { weights: true, kv: true };
  return { weights: tags.includes('weights'), kv: tags.includes('kv_cache') };
}

/** `PauseGenerationReqInput` gained `mode` after 0.5.5 (`abort`, its default; `retract`; `in_place`). */
const PAUSE_MODE_SINCE = '0.5.6';
const pauseModes = ['abort', 'retract', 'in_place'];

/**
 * `get_internal_state` reports the requests its scheduler runs at once, after sizing its pools, as
 * `effective_max_running_requests_per_dp` from 0.5.18 (CONTRACTS.md, Versions); older ones do not.
 */
const EFFECTIVE_MAX_RUNNING_SINCE = '0.5.18';

/** The KV cache's size in tokens, as the simulated engine reports it. */
const maxTotalNumTokensOf = (config: SimConfig) => config.maxRunning * 64;

/** Server and model info, each also at its older path. */
function addInfoRoutes(router: Router, engine: SimEngine): void {
  const { config } = engine;
  const maxTotalNumTokens = maxTotalNumTokensOf(config);

  /** Its server args: `max_running_requests` is the command-line value, null when absent. */
  const serverArgs = {
    model_path: config.model,
    tokenizer_path: config.model,
    served_model_name: config.servedModelName,
    host: config.host,
    port: config.port,
    max_running_requests: config.maxRunningFlag ?? null,
    enable_memory_saver: config.enableMemorySaver,
    enable_weights_cpu_backup: config.enableWeightsCpuBackup,
    enable_metrics: config.enableMetrics,
    speculative_algorithm: config.speculativeAlgorithm ?? null,
  };

  /** Its one scheduler's own figure, the one its slots enforce, where its version reports it. */
  const effective = atLeast(config.version, EFFECTIVE_MAX_RUNNING_SINCE)
    ? { effective_max_running_requests_per_dp: config.maxRunning }
    : {};

  /**
   * `get_server_info` (http_server.py): the server args, the first scheduler's ready message, each
   * scheduler's internal state (its server args again, its throughput and memory, and from 0.5.18 the
   * requests it runs at once) and the version. Before 0.5.18 that figure is only in its start-up log line.
   */
  function serverInfo(): unknown {
    return {
      ...serverArgs,
      status: 'ready',
      max_total_num_tokens: maxTotalNumTokens,
      max_req_input_len: config.maxModelLen - 1,
      internal_states: [
        {
          ...serverArgs,
          last_gen_throughput: 0,
          memory_usage: {
            weight: config.weightsBytes / 2 ** 30,
            kvcache: config.kvBytes / 2 ** 30,
            token_capacity: maxTotalNumTokens,
          },
          ...effective,
        },
      ],
      version: config.version,
    };
  }

  function modelInfo(): unknown {
    return {
      model_path: config.model,
      tokenizer_path: config.model,
      is_generation: true,
      preferred_sampling_params: null,
      weight_version: 'default',
    };
  }

  for (const path of [routes.serverInfo.path, '/server_info'])
    router.on('GET', path, ({ res }) => sendJson(res, 200, serverInfo()));
  for (const path of [routes.modelInfo.path, '/model_info'])
    router.on('GET', path, ({ res }) => sendJson(res, 200, modelInfo()));
}

/** The scheduler's gauges, behind --enable-metrics. */
function addMetricsRoute(router: Router, engine: SimEngine): void {
  const { config } = engine;
  if (!config.enableMetrics) return;
  router.on(routes.metrics.method, routes.metrics.path, ({ res }) =>
    sendGauges(
      res,
      [
        { name: 'sglang:num_running_reqs', help: 'The number of running requests.', value: engine.slots.running },
        {
          name: 'sglang:num_queue_reqs',
          help: 'The number of requests in the waiting queue.',
          value: engine.slots.waiting,
        },
        { name: 'sglang:token_usage', help: 'The token usage.', value: engine.kvUsage },
      ],
      { model_name: config.servedModelName },
    ),
  );
}

/** Pause and continue, abort by request id, and the cache flush: what acts on the running requests and the cache. */
function addGenerationRoutes(router: Router, engine: SimEngine): void {
  const readsMode = atLeast(engine.config.version, PAUSE_MODE_SINCE);
  const flushCache: Handler = ({ res }) => {
    const busy = engine.slots.running + engine.slots.waiting > 0;
    if (!busy) engine.cacheStale = false;
    sendText(
      res,
      busy ? 400 : 200,
      'Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, ' +
        'the operation will not be performed.)\n',
    );
  };

  router.on(routes.pause.method, routes.pause.path, ({ res, body }) => {
    // Older versions take no body and abort; newer ones read `mode`, `abort` by default.
    const mode = readsMode ? ((body as { mode?: unknown } | undefined)?.mode ?? 'abort') : 'abort';
    if (typeof mode !== 'string' || !pauseModes.includes(mode))
      return sendJson(
        res,
        400,
        // As `__post_init__` words it, with Python's reprs.
        errorBody(
          400,
          `Invalid mode: '${String(mode)}'. Expected one of [${pauseModes.map((m) => `'${m}'`).join(', ')}].`,
        ),
      );
    engine.paused = true;
    engine.slots.setGate(false);
    // An abort cuts what is in flight: an answer cut off, which capyctl must never cause. Retract and
    // in-place keep the requests, held until /continue_generation.
    const aborted = mode === 'abort' ? engine.abortRequests() : 0;
    if (aborted > 0) engine.violation(`pause_generation aborted ${aborted} request(s)`);
    sendJson(res, 200, { message: 'Generation paused successfully.', status: 'ok' });
  });
  router.on(routes.continue.method, routes.continue.path, ({ res }) => {
    engine.paused = false;
    engine.slots.setGate(true);
    sendJson(res, 200, { message: 'Generation continued successfully.', status: 'ok' });
  });
  router.on(routes.abort.method, routes.abort.path, ({ res, body }) => {
    const { rid, abort_all: all } = (body ?? {}) as { rid?: unknown; abort_all?: unknown };
    if (all === true) engine.abortRequests();
    else if (typeof rid === 'string' && rid !== '') engine.abortRequests(rid);
    sendEmpty(res, 200);
  });
  router.on(routes.flushCache.method, routes.flushCache.path, flushCache).on('GET', routes.flushCache.path, flushCache);
}

/** Memory release and resume behind --enable-memory-saver, and the weight reload. */
function addMemoryRoutes(router: Router, engine: SimEngine): void {
  const { config } = engine;
  router.on(routes.release.method, routes.release.path, async ({ res, body }) => {
    const parts = memoryParts(body);
    // Without the memory saver SGLang answers the same and frees nothing.
    if (config.enableMemorySaver) {
      // Speculative decoding's draft lives with the weights: releasing them wipes it for good.
      if (parts.weights && config.speculativeAlgorithm && engine.memory.weights === 'gpu') engine.draftLost = true;
      await engine.park({
        parts,
        keepHostCopy: config.enableWeightsCpuBackup,
        tier: parts.weights ? (config.enableWeightsCpuBackup ? 'host_ram' : 'deep') : 'kv_only',
        what: 'release_memory_occupation',
      });
    }
    sendJson(res, 200, null);
  });
  router.on(routes.resume.method, routes.resume.path, async ({ res, body }) => {
    if (config.enableMemorySaver) {
      const outcome = await engine.wake(memoryParts(body));
      if (!outcome.ok) return sendJson(res, 500, errorBody(500, outcome.message));
      // Whatever the cache computes from garbage weights stays wrong until it is flushed (#6367).
      if (engine.memory.weightsGarbage) engine.cacheStale = true;
    }
    sendJson(res, 200, null);
  });
  router.on(routes.updateWeightsFromDisk.method, routes.updateWeightsFromDisk.path, async ({ res, body }) => {
    const modelPath = (body as { model_path?: unknown } | undefined)?.model_path;
    if (typeof modelPath !== 'string') return sendJson(res, 400, errorBody(400, '`model_path` is required'));
    const outcome = await engine.reload();
    if (!outcome.ok) return sendJson(res, 500, { success: false, message: outcome.message, num_paused_requests: 0 });
    sendJson(res, 200, { success: true, message: 'Succeeded to update model weights.', num_paused_requests: 0 });
  });
}

export function sglangDialect(engine: SimEngine): Dialect {
  const { config } = engine;
  const maxTotalNumTokens = maxTotalNumTokensOf(config);

  return {
    ownedBy: 'sglang',
    listensWhileLoading: true,
    roleChunkOnArrival: false,
    readyLines: [
      // The effective figure, which /get_server_info's top level does not give.
      `max_total_num_tokens=${maxTotalNumTokens}, max_running_requests=${config.maxRunning}, ` +
        `context_len=${config.maxModelLen}`,
      'The server is fired up and ready to roll!',
    ],
    errorBody,
    addRoutes(router) {
      addInfoRoutes(router, engine);
      addMetricsRoute(router, engine);
      addGenerationRoutes(router, engine);
      addMemoryRoutes(router, engine);
    },
  };
}
