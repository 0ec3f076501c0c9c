/**
 * TensorFold's OpenAI-compatible server. It cannot park: a model that would park stops instead. Its
 * stream sends the assistant-role opening chunk before it reads the prompt, so that chunk is no sign
 * of progress (the gateway's concern; nothing to do here).
 */
import { engineContracts } from '../../engines/contracts.js';
import type { EngineAdapter } from '../../engines/engine.js';
import { EngineError } from '../../engines/engine.js';
import { answers200, versionRoute } from './http.js';
import { buildLaunchPlan } from '../../engines/launchPlan.js';
import { sampleMetrics } from './metrics.js';
import { askProbe } from './probe.js';
import { expectedMaxRunning } from '../../engines/rules.js';
import { adapterFacts } from '../../engines/traits.js';

const loadMetrics = {
  running: 'tensorfold:requests_running',
  waiting: 'tensorfold:requests_waiting',
  kvUsage: ['tensorfold:kv_cache_usage_ratio'],
};

const cannotPark = async (): Promise<never> => {
  throw new EngineError('refused', 'TensorFold cannot park; it stops instead');
};

export const tensorfold: EngineAdapter = {
  ...adapterFacts('tensorfold'),

  launch: (ctx) => buildLaunchPlan(ctx),
  isReady: (endpoint, options) => answers200(endpoint, '/health', options),
  park: cannotPark,
  wake: cannotPark,
  sampleLoad: (endpoint, options) => sampleMetrics(endpoint, loadMetrics, options),
  // TensorFold does not report its bound: the figure is what CapyCTL passed.
  maxRunning: async (_endpoint, ctx) => expectedMaxRunning(ctx),
  version: (endpoint, options) => versionRoute(endpoint, options),
  // Like vLLM, it stops a request's work when its HTTP connection closes.
  abort: async () => {},
  probe: (endpoint, probe, options) => askProbe(endpoint, probe, engineContracts.tensorfold.determinism, options),
};
