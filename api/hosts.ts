/**
 * What a host agent and the server's host routes (gateway/management/hosts.ts) say to each other:
 * the registration and its reply, the load samples, an engine's exit.
 */
import { z } from 'zod';
import { maxRunningSources, memoryKinds } from '../domain/vocabulary.js';

export const registrationBody = z.strictObject({
  host_id: z.string().min(1),
  gpus: z.array(
    z.strictObject({
      index: z.number().int().min(0),
      name: z.string(),
      memory_bytes: z.number().int().positive(),
      memory_kind: memoryKinds,
    }),
  ),
  host_ram_bytes: z.number().int().positive(),
  /** The host's settings the server applies: queue limits (tightest of hosts) and activation. */
  settings: z.record(z.string(), z.unknown()),
  /** Where the server reaches the host's ingress. */
  ingress_url: z.url(),
});
export type RegistrationBody = z.infer<typeof registrationBody>;

export const registrationReply = z.strictObject({
  host_id: z.string(),
  /** What the server sends with every request to the host's ingress; a new one at each registration. */
  ingress_secret: z.string().min(1),
  /** The server's metrics token, which the host's ingress takes for `GET /metrics` too; absent when none is set. */
  metrics_token: z.string().min(1).optional(),
});

export const samplesBody = z.strictObject({
  sampled_at_ms: z.number().int().positive(),
  instances: z.array(
    z.strictObject({
      deployment_id: z.string().min(1),
      instance_index: z.number().int().min(0),
      generation: z.number().int().min(0),
      ingress_in_flight: z.number().int().min(0),
      engine: z
        .strictObject({
          running: z.number().min(0),
          waiting: z.number().min(0),
          kv_usage_ppm: z.number().int().min(0).max(1_000_000),
        })
        .nullable(),
      max_running: z.strictObject({ count: z.number().int().positive().optional(), source: maxRunningSources }),
    }),
  ),
});
export type SamplesBody = z.infer<typeof samplesBody>;

export const engineExitBody = z.strictObject({
  deployment_id: z.string().min(1),
  instance_index: z.number().int().min(0),
  generation: z.number().int().min(0),
  exit_code: z.number().int().nullable(),
  signal: z.string().nullable(),
  /** Its last lines of stderr (domain/problems.ts); absent from an agent of an older release. */
  stderr: z.array(z.string()).optional(),
});
export type EngineExitBody = z.infer<typeof engineExitBody>;
