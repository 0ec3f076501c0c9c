/**
 * SGLang's server. Parking pauses generation and releases GPU memory by tag (`--enable-memory-saver`);
 * released weights go to host RAM only when it was launched with `--enable-weights-cpu-backup`, so
 * its tier is fixed at launch.
 */
import { z } from 'zod';
import type { ParkTier } from '../../domain/vocabulary.js';
import { type CallOptions, type EngineAdapter, type EngineEndpoint, EngineError } from './engine.js';
import { answers200, fetchJson, post, reloading } from './http.js';
import { buildLaunchPlan } from './launchPlan.js';
import { sampleMetrics } from './metrics.js';
import { askProbe } from './probe.js';
import { expectedMaxRunning, reportedMaxRunning } from './rules.js';
import { adapterFacts } from './traits.js';

const loadMetrics = { running: 'sglang:num_running_reqs', waiting: 'sglang:num_queue_reqs', kvUsage: ['sglang:token_usage'] };

/** What each tier gives back; `kv_only` keeps the weights (and the speculative draft model with them). */
const releasedTags: Record<ParkTier, string[]> = {
  host_ram: ['weights', 'kv_cache', 'cuda_graph'],
  deep: ['weights', 'kv_cache', 'cuda_graph'],
  kv_only: ['kv_cache'],
};

/**
 * `max_running_requests` at the top is the command-line value; the one each scheduler settled on
 * (after sizing its memory pools) is in `internal_states`.
 */
const serverInfo = z.object({
  max_running_requests: z.number().int().positive().nullish(),
  internal_states: z.array(z.object({ max_running_requests: z.number().int().positive().nullish() })).nullish(),
  version: z.string().nullish(),
});

const modelInfo = z.object({ model_path: z.string() });
const weightsUpdate = z.object({ success: z.boolean(), message: z.string().nullish() });

/**
 * Without a CPU backup the resumed weights are garbage until reloaded from disk (#6367). The
 * checkpoint path is the engine's own, in case the served name differs from it.
 */
async function reloadFromDisk(endpoint: EngineEndpoint, options: CallOptions): Promise<void> {
  const { model_path } = await fetchJson(endpoint, '/get_model_info', modelInfo, options);
  const call = { method: 'POST', json: { model_path }, ...options } as const;
  const outcome = await reloading(endpoint, () => fetchJson(endpoint, '/update_weights_from_disk', weightsUpdate, call));
  // A failed load usually answers 400, but a 200 with success false says the same.
  if (!outcome.success) {
    throw new EngineError('reload_failed', `SGLang at ${endpoint.baseUrl} did not reload ${model_path}: ${outcome.message ?? ''}`);
  }
}

export const sglang: EngineAdapter = {
  ...adapterFacts('sglang'),

  launch(ctx) {
    // Metrics are off by default, and without them the host has no load to report.
    const options = ['--enable-metrics'];
    if (ctx.parkTier !== null) options.push('--enable-memory-saver');
    if (ctx.parkTier === 'host_ram') options.push('--enable-weights-cpu-backup');
    return buildLaunchPlan(ctx, { model: ['--model-path', ctx.spec.model], options });
  },

  // 503 while starting; 200 once a one-token generation succeeds.
  isReady: (endpoint, options) => answers200(endpoint, '/health', options),

  async park(endpoint, tier, options = {}) {
    // Memory is released only while idle: pausing holds back anything that slipped past the drain.
    await post(endpoint, '/pause_generation', { json: {}, ...options });
    await post(endpoint, '/release_memory_occupation', { json: { tags: releasedTags[tier] }, ...options });
  },

  async wake(endpoint, tier, options = {}) {
    await post(endpoint, '/resume_memory_occupation', { json: { tags: releasedTags[tier] }, ...options });
    if (tier === 'deep') await reloadFromDisk(endpoint, options);
    // The radix cache must not point at KV memory that was given back.
    await post(endpoint, '/flush_cache', options);
    await post(endpoint, '/continue_generation', { json: {}, ...options });
  },

  // null without `--enable-metrics` (the route answers 404).
  sampleLoad: (endpoint, options) => sampleMetrics(endpoint, loadMetrics, options),

  async maxRunning(endpoint, ctx, options) {
    const expected = expectedMaxRunning(ctx);
    if (endpoint === null) return expected;
    try {
      const info = await fetchJson(endpoint, '/get_server_info', serverInfo, options);
      const reported = info.internal_states?.[0]?.max_running_requests ?? info.max_running_requests ?? undefined;
      return reportedMaxRunning(expected, reported);
    } catch (e) {
      // An engine that does not answer (yet) has not said.
      if (e instanceof EngineError && e.kind !== 'timeout') return expected;
      throw e;
    }
  },

  async version(endpoint, options) {
    return (await fetchJson(endpoint, '/get_server_info', serverInfo, options)).version ?? null;
  },

  async abort(endpoint, requestId, options = {}) {
    await post(endpoint, '/abort_request', { json: { rid: requestId, abort_all: false }, ...options });
  },

  probe: (endpoint, probe, options) => askProbe(endpoint, probe, options),
};
