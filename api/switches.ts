/**
 * What the switch routes (gateway/management/switches.ts) send: how one switch stands, and the
 * latest switches as listed. The CLI and the status page read the same shapes.
 */
import { z } from 'zod';
import { errorCodes } from '../domain/catalogue.js';
import { instanceStates, parkTiers, switchOutcomes, switchPhases } from '../domain/vocabulary.js';
import { receiptBody } from './deployments.js';

export const switchBody = z.object({
  switch_id: z.string(),
  /** `running` until it ends. */
  outcome: switchOutcomes,
  /** Once it ended: the model it woke or started, and where it stands; absent for a release only. */
  target: z.object({ deployment_id: z.string(), name: z.string(), state: instanceStates }).optional(),
  /** Once it ended: what it released, each with its receipt line. */
  victims: receiptBody.shape.victims,
  /** Once it ended without bringing its target up: the error the target's waiters got. */
  error: z.object({ code: errorCodes, message: z.string(), retryable: z.boolean() }).optional(),
});
export type SwitchBody = z.infer<typeof switchBody>;

export const listedSwitchBody = z.object({
  switch_id: z.string(),
  host_id: z.string(),
  /** What it woke or started; null for a release only. */
  target: z.object({ deployment_id: z.string(), name: z.string() }).nullable(),
  victims: receiptBody.shape.victims,
  outcome: switchOutcomes,
  /** One line: "wake chat-b, park chat-a on gpu-box". */
  summary: z.string(),
  /** Its steps in order, once it ended (empty while it runs); `park_tier` for a park, a wake or its check. */
  phases: z.array(z.object({ phase: switchPhases, park_tier: parkTiers.nullable(), ms: z.number().int().min(0) })),
  started_at: z.iso.datetime(),
  finished_at: z.iso.datetime().nullable(),
  /** Its workflow in the Temporal Web UI (`temporal.web_ui` in the server document). */
  web_ui_url: z.url().optional(),
});
export type ListedSwitchBody = z.infer<typeof listedSwitchBody>;

export const switchListReply = z.object({ switches: z.array(listedSwitchBody) });
export type SwitchListReply = z.infer<typeof switchListReply>;
