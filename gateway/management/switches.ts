/**
 * `GET /management/v1/switches/<switch_id>`: how a switch stands. A start answers as its switch
 * begins, naming it; `capyctl start deployment --wait` follows the switch here until it ends.
 * `GET /management/v1/switches?limit=20`: the latest switches from their receipts, newest first, each
 * with its phases and its link in the Temporal Web UI, as the status page lists them.
 */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { apiErrors, CapyError } from '../../domain/catalogue.js';
import type { SwitchReceipt } from '../../api/catalogue.js';
import type { SwitchReceipts } from '../ports.js';
import { workflowIds } from '../../workflows/definitions.js';
import type { OperatorLifecycle } from './operatorLifecycle.js';
import type { RoutingTable } from '../routingTable.js';
import {
  type ListedSwitchBody,
  type SwitchBody,
  switchBody,
  type SwitchListReply,
  switchListReply,
} from '../../api/switches.js';
import { POLLED_LOG_LEVEL } from '../polledLogLevel.js';

const switchParams = z.strictObject({ switchId: z.uuid() });

/** The most a list shows; the status page asks for 20. */
const MAX_LISTED_SWITCHES = 100;

const switchListQuery = z.object({ limit: z.coerce.number().int().min(1).max(MAX_LISTED_SWITCHES).default(20) });

/** Where the Temporal Web UI is, and the namespace the switches run in. */
export interface TemporalWebUi {
  url: string;
  namespace: string;
}

/**
 * The switch's own workflow in the Web UI. Its ID is enough: the UI opens the latest run of
 * `/namespaces/<ns>/workflows/<workflow ID>` (temporalio/ui `src/routes/(app)/namespaces/[namespace]/
 * workflows/[workflow]/+page.ts`, UI 2.42.1 in the Temporal CLI here), the ID's slash encoded as its own
 * links encode it (`encodeURIForSvelte`).
 */
export function switchWebUiUrl(ui: TemporalWebUi, switchId: string): string {
  const namespace = encodeURIComponent(ui.namespace);
  const workflowId = encodeURIComponent(workflowIds.switch(switchId));
  return `${ui.url.replace(/\/+$/, '')}/namespaces/${namespace}/workflows/${workflowId}`;
}

export interface SwitchRouteDeps {
  switchReceipts: SwitchReceipts;
  table: RoutingTable;
  lifecycle: OperatorLifecycle;
  /** Left out by test benches without a Temporal Web UI: the listed switches then carry no link. */
  webUi?: TemporalWebUi;
}

export function switchRoutes(deps: SwitchRouteDeps) {
  const nameOf = (id: string) => deps.table.get(id)?.name ?? id;
  const renderListed = (r: SwitchReceipt): ListedSwitchBody => ({
    switch_id: r.switchId,
    host_id: r.hostId,
    target:
      r.targetDeploymentId === null
        ? null
        : { deployment_id: r.targetDeploymentId, name: nameOf(r.targetDeploymentId) },
    victims: r.victims.map((v) => ({
      deployment_id: v.deploymentId,
      name: nameOf(v.deploymentId),
      instance_index: v.instanceIndex,
      released: v.released,
      gpu_indexes: v.gpuIndexes ?? [],
    })),
    outcome: r.outcome,
    summary: r.summary,
    phases: r.phases.map((p) => ({ phase: p.phase, park_tier: p.tier, ms: p.ms })),
    started_at: r.startedAt.toISOString(),
    finished_at: r.finishedAt?.toISOString() ?? null,
    ...(deps.webUi ? { web_ui_url: switchWebUiUrl(deps.webUi, r.switchId) } : {}),
  });
  return async (app: FastifyInstance) => {
    const routes = app.withTypeProvider<ZodTypeProvider>();
    routes.get(
      '/management/v1/switches',
      { logLevel: POLLED_LOG_LEVEL, schema: { querystring: switchListQuery, response: { 200: switchListReply } } },
      async (request): Promise<SwitchListReply> => ({
        switches: (await deps.switchReceipts.latest(request.query.limit)).map(renderListed),
      }),
    );
    routes.get(
      '/management/v1/switches/:switchId',
      { schema: { params: switchParams, response: { 200: switchBody } } },
      async (request): Promise<SwitchBody> => {
        const { switchId } = request.params;
        const result = await deps.lifecycle.switchResult(switchId);
        if (result === undefined) throw new CapyError(apiErrors.notFound('switch', switchId));
        if (result === null) return { switch_id: switchId, outcome: 'running', victims: [] };
        const { target, error } = result;
        return {
          switch_id: switchId,
          outcome: result.outcome,
          ...(target
            ? {
                target: {
                  deployment_id: target.instance.deploymentId,
                  name: nameOf(target.instance.deploymentId),
                  state: target.state,
                },
              }
            : {}),
          victims: result.victims.map((v) => ({
            deployment_id: v.deploymentId,
            name: nameOf(v.deploymentId),
            instance_index: v.instanceIndex,
            released: v.released,
            gpu_indexes: v.gpuIndexes,
          })),
          ...(error ? { error: { code: error.code, message: error.message, retryable: error.retryable } } : {}),
        };
      },
    );
  };
}
