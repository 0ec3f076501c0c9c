/** A deployment document (`capyctl deploy model --file my-model.yaml`). */
import { z } from 'zod';
import { activations, engineNames, residencies } from '../domain/vocabulary.js';
import { count, distinctList, label } from './fields.js';

export const deploymentDocument = z.strictObject({
  name: label,
  engine: engineNames,
  model: z.string().min(1, 'is required: the checkpoint to serve'),
  /** Where it parks; left out, the rules for its engine and hardware choose. */
  residency: residencies.optional(),
  max_concurrent_requests: count(1, 65_536).optional(),
  /**
   * The longest sequence (prompt and answer, in tokens) its engine serves: its KV budget is sized
   * to hold one. Left out, the model's own maximum when the budget holds it, else what it holds.
   */
  max_model_len: count(16, 16_777_216).optional(),
  extra_args: z.array(z.string()).default([]),
  lifecycle: z
    .strictObject({
      activation: activations.default('on_demand'),
      warm: z.boolean().default(false),
    })
    .prefault({}),
  /**
   * A decision model answers a fixed decision with one option and a probability per option; the
   * wake check compares those instead of a fixed prompt's text.
   */
  decision: z
    .strictObject({
      prompt: z.string().min(1),
      options: distinctList(z.string().min(1)).min(2),
    })
    .optional(),
  /**
   * How many instances of it may run at once, each on its own host (`instanceCount`): requests go to
   * the least loaded one that serves. Left out, one (and left out of the stored spec, so documents
   * saved before it existed compare equal).
   */
  instances: count(1, 16).optional(),
  /** The hosts it may run on; left out, any host. */
  hosts: distinctList(label).min(1).optional(),
});
export type DeploymentSpec = z.output<typeof deploymentDocument>;
