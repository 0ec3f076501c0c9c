/**
 * What the load route (gateway/management/load.ts, spec "Reading load") sends: the live conditions
 * of every model.
 */
import { z } from 'zod';
import { SAMPLE_STALE_AFTER_MS } from '../domain/limits.js';
import { instanceStates, maxRunningSources } from '../domain/vocabulary.js';

// Plain objects, not strict ones: the serializer sends what the schema parsed, so a field a
// sample carries beyond the spec's is left out rather than failing the reply.
const count = z.number().int().min(0);

/** `count` is left out when it is not known: an absent figure is unknown, never zero. */
const maxRunningBody = z.object({ count: z.number().int().positive().optional(), source: maxRunningSources });

const sampleBody = z.object({
  sampled_at_ms: z.number().int(),
  age_ms: count,
  fresh: z.boolean(),
  ingress_in_flight: count,
  /** Null when the host could not read the engine's metrics. */
  engine: z.object({ running: z.number().min(0), waiting: z.number().min(0), kv_usage_ppm: count }).nullable(),
});

const instanceBody = z.object({
  index: count,
  host_id: z.string(),
  generation: count,
  observed_state: instanceStates,
  /** The GPUs of its host it holds (an instance may span several); empty when not known or stopped. */
  gpu_indexes: z.array(count),
  router_in_flight: count,
  max_running: maxRunningBody,
  /** Null when no sample is held: not loaded, dropped after 30 s, or the server just started. */
  sample: sampleBody.nullable(),
});

const deploymentBody = z.object({
  deployment_id: z.string(),
  name: z.string(),
  router: z.object({ in_flight: count, in_flight_limit: count, waiting: count, waiting_limit: count }),
  max_running: maxRunningBody,
  instances: z.array(instanceBody),
});

export const loadReply = z.object({
  observed_at_ms: z.number().int(),
  stale_after_ms: z.literal(SAMPLE_STALE_AFTER_MS),
  deployments: z.array(deploymentBody),
});
export type LoadReply = z.infer<typeof loadReply>;
