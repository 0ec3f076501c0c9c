/**
 * SGLang's server. Parking pauses generation and releases GPU memory by tag (`--enable-memory-saver`);
 * released weights go to host RAM only when it was launched with `--enable-weights-cpu-backup`, so
 * its tier is fixed at launch. The requests are engines/contracts.ts's.
 */
import { z } from 'zod';
import { engineContracts } from '../../engines/contracts.js';
import { type EngineAdapter, EngineError } from '../../engines/engine.js';
import { answers200, fetchJson, fetchJsonIfServed, post } from './http.js';
import { buildLaunchPlan } from '../../engines/launchPlan.js';
import { sampleMetrics } from './metrics.js';
import { askProbe } from './probe.js';
import { parallelLayout } from '../../engines/parallelism.js';
import { expectedMaxRunning, reportedMaxRunning } from '../../engines/rules.js';
import { parkByContract, wakeByContract } from './steps.js';
import { adapterFacts } from '../../engines/traits.js';

const contract = engineContracts.sglang;

const loadMetrics = {
  running: 'sglang:num_running_reqs',
  waiting: 'sglang:num_queue_reqs',
  kvUsage: ['sglang:token_usage'],
};

/**
 * Of `/get_server_info` (server args, scheduler info, internal states), the version and, where the
 * version reports it, the requests each DP rank's scheduler runs at once: `internal_states[i]` is
 * scheduler i's `get_internal_state` (CONTRACTS.md).
 */
const serverInfo = z.object({
  internal_states: z
    .array(z.object({ effective_max_running_requests_per_dp: z.number().int().positive().nullish() }))
    .nullish(),
  version: z.string().nullish(),
});

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

  // The scheduler's own figure where its version reports it, times the DP ranks sharing the batch; an
  // older version (or an engine that does not answer yet) has not said.
  async maxRunning(endpoint, ctx, options) {
    const expected = expectedMaxRunning(ctx);
    if (endpoint === null) return expected;
    try {
      const info = await fetchJson(endpoint, contract.routes.serverInfo.path, serverInfo, options);
      const perRank = info.internal_states?.[0]?.effective_max_running_requests_per_dp ?? undefined;
      const ranks = parallelLayout('sglang', [...(ctx.command ?? []), ...ctx.spec.extra_args]).batchRanks;
      return reportedMaxRunning(expected, perRank === undefined ? undefined : perRank * ranks);
    } catch (e) {
      if (e instanceof EngineError && e.kind !== 'timeout') return expected;
      throw e;
    }
  },

  // A version probe only refines the capability rules: an engine without the route has not said.
  async version(endpoint, options) {
    return (await fetchJsonIfServed(endpoint, contract.routes.serverInfo.path, serverInfo, options))?.version ?? null;
  },

  async abort(endpoint, requestId, options = {}) {
    await post(endpoint, contract.routes.abort.path, { json: { rid: requestId, abort_all: false }, ...options });
  },

  probe: (endpoint, probe, options) => askProbe(endpoint, probe, contract.determinism, options),
};
