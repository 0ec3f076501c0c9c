/**
 * SGLang's server. Parking pauses generation and releases GPU memory by tag (`--enable-memory-saver`);
 * released weights go to host RAM only when it was launched with `--enable-weights-cpu-backup`, so
 * its tier is fixed at launch. The requests are engines/contracts.ts's.
 */
import { z } from 'zod';
import { engineContracts } from '../../engines/contracts.js';
import type { EngineAdapter } from '../../engines/engine.js';
import { answers200, fetchJsonIfServed, post } from './http.js';
import { buildLaunchPlan } from '../../engines/launchPlan.js';
import { sampleMetrics } from './metrics.js';
import { askProbe } from './probe.js';
import { expectedMaxRunning } from '../../engines/rules.js';
import { parkByContract, wakeByContract } from './steps.js';
import { adapterFacts } from '../../engines/traits.js';

const contract = engineContracts.sglang;

const loadMetrics = {
  running: 'sglang:num_running_reqs',
  waiting: 'sglang:num_queue_reqs',
  kvUsage: ['sglang:token_usage'],
};

/** Of `/get_server_info` (server args, scheduler info, internal states), only the version is read. */
const serverInfo = z.object({ version: z.string().nullish() });

export const sglang: EngineAdapter = {
  ...adapterFacts('sglang'),

  launch: (ctx) => buildLaunchPlan(ctx),

  // 503 while starting; 200 once a one-token generation succeeds.
  isReady: (endpoint, options) => answers200(endpoint, '/health', options),

  park: (endpoint, tier, sends, options = {}) =>
    parkByContract('sglang', endpoint, tier, sends, () => sglang.version(endpoint, options), options),
  wake: (endpoint, tier, sends, options = {}) => wakeByContract('sglang', endpoint, tier, sends, options),

  // null without `--enable-metrics` (the route answers 404).
  sampleLoad: (endpoint, options) => sampleMetrics(endpoint, loadMetrics, options),

  // `/get_server_info` gives the command-line value, in its server args and again in each scheduler's
  // internal state; the figure a scheduler chose is only in its start-up log line (CONTRACTS.md).
  maxRunning: async (_endpoint, ctx) => expectedMaxRunning(ctx),

  // A version probe only refines the capability rules: an engine without the route has not said.
  async version(endpoint, options) {
    return (await fetchJsonIfServed(endpoint, contract.routes.serverInfo.path, serverInfo, options))?.version ?? null;
  },

  async abort(endpoint, requestId, options = {}) {
    await post(endpoint, contract.routes.abort.path, { json: { rid: requestId, abort_all: false }, ...options });
  },

  probe: (endpoint, probe, options) => askProbe(endpoint, probe, contract.determinism, options),
};
