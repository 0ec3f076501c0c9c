/**
 * vLLM's OpenAI-compatible server. Parking is its sleep mode: level 1 copies the weights to host
 * RAM, level 2 drops them; both give back the KV cache.
 */
import { z } from 'zod';
import type { ParkTier } from '../../domain/vocabulary.js';
import { type CallOptions, type EngineAdapter, type EngineEndpoint, EngineError } from './engine.js';
import { answers200, fetchJson, post, reloading, versionRoute } from './http.js';
import { buildLaunchPlan } from './launchPlan.js';
import { sampleMetrics } from './metrics.js';
import { askProbe } from './probe.js';
import { expectedMaxRunning } from './rules.js';
import { adapterFacts } from './traits.js';

/** `vllm:gpu_cache_usage_perc` is the name up to 0.9.1 and gone in 0.12. */
const loadMetrics = {
  running: 'vllm:num_requests_running',
  waiting: 'vllm:num_requests_waiting',
  kvUsage: ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'],
};

const sleepLevels: Partial<Record<ParkTier, 1 | 2>> = { host_ram: 1, deep: 2 };

function sleepLevel(tier: ParkTier): 1 | 2 {
  const level = sleepLevels[tier];
  if (level === undefined) throw new EngineError('refused', `vLLM cannot park at tier ${tier}`);
  return level;
}

const sleepState = z.object({ is_sleeping: z.boolean() });

/** `/sleep` has answered 200 without sleeping (a crashed engine, issue #15483), so each change is checked. */
async function expectSleeping(endpoint: EngineEndpoint, asleep: boolean, options: CallOptions): Promise<void> {
  const { is_sleeping } = await fetchJson(endpoint, '/is_sleeping', sleepState, options);
  if (is_sleeping === asleep) return;
  throw asleep
    ? new EngineError('refused', `vLLM at ${endpoint.baseUrl} answered the sleep but is not sleeping`)
    : new EngineError('not_ready', `vLLM at ${endpoint.baseUrl} answered the wake but is still sleeping`);
}

/** Level 2 dropped the weights; without this reload a wake answers garbage with no error (#29341). */
async function reloadWeights(endpoint: EngineEndpoint, options: CallOptions): Promise<void> {
  const json = { method: 'reload_weights', args: [], kwargs: {}, timeout: null };
  await reloading(endpoint, () => post(endpoint, '/collective_rpc', { json, ...options }));
}

export const vllm: EngineAdapter = {
  ...adapterFacts('vllm'),

  launch(ctx) {
    // The sleep routes exist only with both; they cost nothing when the model never sleeps.
    const parks = ctx.parkTier !== null;
    return buildLaunchPlan(ctx, {
      model: [ctx.spec.model],
      options: parks ? ['--enable-sleep-mode'] : [],
      env: parks ? { VLLM_SERVER_DEV_MODE: '1' } : {},
    });
  },

  // Connections are refused until the engine is built, then /health answers 200 (asleep too).
  isReady: (endpoint, options) => answers200(endpoint, '/health', options),

  async park(endpoint, tier, options = {}) {
    await post(endpoint, `/sleep?level=${sleepLevel(tier)}`, options);
    await expectSleeping(endpoint, true, options);
  },

  async wake(endpoint, tier, options = {}) {
    if (sleepLevel(tier) === 1) {
      await post(endpoint, '/wake_up', options);
    } else {
      // Weights first, so the reload has its memory before the KV cache takes the rest.
      await post(endpoint, '/wake_up?tags=weights', options);
      await reloadWeights(endpoint, options);
      await post(endpoint, '/wake_up?tags=kv_cache', options);
    }
    // The prefix cache still points at KV blocks the sleep dropped: stale entries answer wrongly
    // (#16234, #17103), after either level.
    await post(endpoint, '/reset_prefix_cache', options);
    await expectSleeping(endpoint, false, options);
  },

  sampleLoad: (endpoint, options) => sampleMetrics(endpoint, loadMetrics, options),

  // vLLM does not report how many sequences it runs at once: the figure is what CapyCTL passed.
  maxRunning: async (_endpoint, ctx) => expectedMaxRunning(ctx),

  version: (endpoint, options) => versionRoute(endpoint, options),

  // vLLM aborts a request when its HTTP connection closes: the ingress closing it is the abort.
  abort: async () => {},

  probe: (endpoint, probe, options) => askProbe(endpoint, probe, options),
};
