/**
 * What the deployment routes (gateway/management/deployments.ts) send: a deployment as listed, a
 * command's receipt, a deploy's reply. The CLI reads the same shapes.
 */
import { z } from 'zod';
import { measurementStates } from '../domain/measurement.js';
import { problemBody } from '../domain/problems.js';
import { activations, instanceStates, maxModelLenSources, parkTiers, residueSources } from '../domain/vocabulary.js';
import type { DeploymentSpec } from '../settings/deploymentDocument.js';

export const deploymentBody = z.object({
  deployment_id: z.string(),
  name: z.string(),
  revision: z.number().int(),
  /** The state of its instance; `stopped` before its first start. */
  state: instanceStates,
  ready_instances: z.number().int(),
  /** One instance per deployment in this release. */
  desired_instances: z.number().int(),
  /** The hosts that hold an instance of it (ready, parked, or on the way). */
  hosts: z.array(z.string()),
  activation: activations,
  operator_stopped: z.boolean(),
  /** The current revision's checkpoint: a start is refused until it is measured. */
  checkpoint: measurementStates,
  /** Why its measurement failed: the host could not read the checkpoint. Only when `failed`. */
  checkpoint_failure: z.string().optional(),
  /**
   * What the ledger reserves for an instance, once measured: its weights, KV budget and the residue
   * its engine keeps parked (bytes, all its GPUs together), and the longest sequence its engine is
   * launched for (null: the engine chooses) with where that figure comes from.
   */
  memory: z
    .object({
      weight_bytes: z.number().int(),
      kv_bytes: z.number().int(),
      parked_residue_bytes: z.number().int(),
      max_model_len: z.number().int().nullable(),
      max_model_len_from: maxModelLenSources,
    })
    .optional(),
  /**
   * Why its latest start failed (an engine that exited: how, and its last lines of stderr). Only until a
   * start succeeds.
   */
  start_failure: z.string().optional(),
  /** Its last problem: an engine that exited unasked, or a start, park or wake that failed; absent when none. */
  last_problem: problemBody.optional(),
  /** How many times its engine ended unasked (exited, or its start failed). */
  restarts: z.number().int(),
  /**
   * It keeps ending unasked (`CRASH_LOOP` in domain/problems.ts) and is not ready: shown beside its
   * state, which stays the spec's.
   */
  crash_loop: z.boolean(),
  /** Why no GPU it may run on could ever hold it (its need, the largest GPU): its requests cannot be served. */
  fits_nowhere: z.string().optional(),
  instances: z.array(
    z.object({
      index: z.number().int(),
      host_id: z.string(),
      generation: z.number().int(),
      state: instanceStates,
      /** Where a parked (or parking) instance's weights are: in host RAM, deep (dropped), or kept on the GPU. */
      park_tier: parkTiers.optional(),
      /**
       * Parked: what its engine still holds on its GPUs (bytes, all together), as the ledger counts it,
       * and where that figure comes from: measured by its host after the park, or the checkpoint's.
       */
      parked_residue_bytes: z.number().int().optional(),
      parked_residue_from: residueSources.optional(),
    }),
  ),
  /**
   * The document as it was read (its output): the document's schema cannot write it back, since its
   * fields with units and ranges are one-way transforms (`max_concurrent_requests: 8` answered 500).
   */
  spec: z.custom<DeploymentSpec>(),
});
export type DeploymentBody = z.infer<typeof deploymentBody>;

export const receiptBody = z.object({
  deployment_id: z.string(),
  name: z.string(),
  /** The switch that carried the command out: workflow `switch/<switch_id>` in the Temporal Web UI. */
  switch_id: z.string().optional(),
  victims: z.array(
    z.object({
      deployment_id: z.string(),
      name: z.string(),
      instance_index: z.number().int(),
      released: z.string(),
      /** Every GPU it gave back (an instance may span several). */
      gpu_indexes: z.array(z.number().int()),
    }),
  ),
  state: instanceStates,
});
export type ReceiptBody = z.infer<typeof receiptBody>;

export const deployReply = z.object({
  outcome: z.enum(['created', 'revised', 'unchanged']),
  deployment: deploymentBody,
});
export type DeployReply = z.infer<typeof deployReply>;
