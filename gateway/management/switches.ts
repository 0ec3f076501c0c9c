/**
 * `GET /management/v1/switches/<switch_id>`: how a switch stands. A start answers as its switch
 * begins, naming it; `capyctl start deployment --wait` follows the switch here until it ends.
 */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { apiErrors, CapyError, errorCodes } from '../../domain/catalogue.js';
import { instanceStates, switchOutcomes } from '../../domain/vocabulary.js';
import type { OperatorLifecycle } from '../lifecycleClient.js';
import type { RoutingTable } from '../routingTable.js';
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

const switchParams = z.strictObject({ switchId: z.uuid() });

export function switchRoutes(deps: { table: RoutingTable; lifecycle: OperatorLifecycle }) {
  const nameOf = (id: string) => deps.table.get(id)?.name ?? id;
  return async (app: FastifyInstance) => {
    const routes = app.withTypeProvider<ZodTypeProvider>();
    routes.get('/management/v1/switches/:switchId', { schema: { params: switchParams, response: { 200: switchBody } } }, async (request): Promise<SwitchBody> => {
      const { switchId } = request.params;
      const result = await deps.lifecycle.switchResult(switchId);
      if (result === undefined) throw new CapyError(apiErrors.notFound('switch', switchId));
      if (result === null) return { switch_id: switchId, outcome: 'running', victims: [] };
      const { target, error } = result;
      return {
        switch_id: switchId,
        outcome: result.outcome,
        ...(target ? { target: { deployment_id: target.instance.deploymentId, name: nameOf(target.instance.deploymentId), state: target.state } } : {}),
        victims: result.victims.map((v) => ({ deployment_id: v.deploymentId, name: nameOf(v.deploymentId), instance_index: v.instanceIndex, released: v.released })),
        ...(error ? { error: { code: error.code, message: error.message, retryable: error.retryable } } : {}),
      };
    });
  };
}
