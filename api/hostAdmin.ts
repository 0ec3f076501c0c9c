/**
 * What the operator's host routes (gateway/management/hostAdmin.ts) send: a host as listed, a
 * drain's and an undrain's reply, a host token made or revoked. The CLI reads the same shapes.
 */
import { z } from 'zod';
import { hostStates, memoryKinds } from '../domain/vocabulary.js';
import { receiptBody } from './deployments.js';

export const hostBody = z.object({
  host_id: z.string(),
  gpus: z.array(
    z.object({
      index: z.number().int(),
      name: z.string(),
      memory_bytes: z.number(),
      memory_kind: memoryKinds,
      /**
       * GPU memory its instances hold on it, each an even share on every GPU it spans; one whose GPUs are
       * not known (a row from before they were recorded) counts on each (gateway/gpuHoldings.ts).
       */
      used_bytes: z.number(),
    }),
  ),
  /** Null when the host did not say. */
  host_ram_bytes: z.number().nullable(),
  draining: z.boolean(),
  /** `down` once it stopped reporting; see `hostStates`. */
  state: hostStates,
  last_seen_at: z.string(),
});
export type HostBody = z.infer<typeof hostBody>;

export const drainReply = z.object({ host_id: z.string(), draining: z.literal(true), released: z.array(receiptBody) });
export type DrainReply = z.infer<typeof drainReply>;

export const undrainReply = z.object({ host_id: z.string(), draining: z.literal(false) });
export type UndrainReply = z.infer<typeof undrainReply>;

export const hostTokenReply = z.object({ token: z.string() });

export const revokeTokenReply = z.object({ host_id: z.string(), revoked: z.number().int() });
export type RevokeTokenReply = z.infer<typeof revokeTokenReply>;
