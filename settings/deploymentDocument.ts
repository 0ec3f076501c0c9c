/** A deployment document (`capyctl deploy model --file my-model.yaml`). */
import { z } from 'zod';
import { activations, engineNames, residencies } from '../domain/vocabulary.js';
import { count, label } from './fields.js';

export const deploymentDocument = z.strictObject({
  name: label,
  engine: engineNames,
  model: z.string().min(1, 'is required: the checkpoint to serve'),
  /** Where it parks; left out, the rules for its engine and hardware choose. */
  residency: residencies.optional(),
  max_concurrent_requests: count(1, 65_536).optional(),
  extra_args: z.array(z.string()).default([]),
  lifecycle: z
    .strictObject({
      activation: activations.default('on_demand'),
      warm: z.boolean().default(false),
    })
    .prefault({}),
  /** The hosts it may run on; left out, any host. */
  hosts: z.array(label).min(1).optional(),
});
export type DeploymentSpec = z.output<typeof deploymentDocument>;
