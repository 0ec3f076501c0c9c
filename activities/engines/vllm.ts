/**
 * vLLM's OpenAI-compatible server. Parking is its sleep mode: level 1 copies the weights to host
 * RAM, level 2 drops them; both give back the KV cache. The requests are engines/contracts.ts's.
 */
import { engineContracts } from '../../engines/contracts.js';
import type { EngineAdapter } from '../../engines/engine.js';
import { answers200, versionRoute } from './http.js';
import { buildLaunchPlan } from '../../engines/launchPlan.js';
import { sampleMetrics } from './metrics.js';
import { askProbe } from './probe.js';
import { expectedMaxRunning } from '../../engines/rules.js';
import { parkByContract, wakeByContract } from './steps.js';
import { adapterFacts } from '../../engines/traits.js';

/** `vllm:gpu_cache_usage_perc` is the name up to 0.9.1 and gone in 0.12. */
const loadMetrics = {
  running: 'vllm:num_requests_running',
  waiting: 'vllm:num_requests_waiting',
  kvUsage: ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'],
};

export const vllm: EngineAdapter = {
  ...adapterFacts('vllm'),

  // The sleep routes exist only with both the flag and dev mode; they cost nothing when the model never sleeps.
  launch: (ctx) => buildLaunchPlan(ctx),

  // Connections are refused until the engine is built, then /health answers 200 (asleep too).
  isReady: (endpoint, options) => answers200(endpoint, '/health', options),

  park: (endpoint, tier, sends, options = {}) =>
    parkByContract('vllm', endpoint, tier, sends, () => vllm.version(endpoint, options), options),
  wake: (endpoint, tier, sends, options = {}) => wakeByContract('vllm', endpoint, tier, sends, options),

  sampleLoad: (endpoint, options) => sampleMetrics(endpoint, loadMetrics, options),

  // vLLM does not report how many sequences it runs at once: the figure is what CapyCTL passed.
  maxRunning: async (_endpoint, ctx) => expectedMaxRunning(ctx),

  version: (endpoint, options) => versionRoute(endpoint, options),

  // vLLM aborts a request when its HTTP connection closes: the ingress closing it is the abort.
  abort: async () => {},

  probe: (endpoint, probe, options) => askProbe(endpoint, probe, engineContracts.vllm.determinism, options),
};
