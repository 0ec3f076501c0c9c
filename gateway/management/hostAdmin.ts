/**
 * The operator's host routes (`capyctl list hosts`, `drain host`, `undrain host`, `create
 * host-token`, `revoke host-token`), behind the admin token; the routes a host agent calls with its own token are in
 * `hosts.ts`.
 */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { apiErrors, CapyError } from '../../domain/catalogue.js';
import type { CatalogueReads, HostRegistry } from '../ports.js';
import { heldPerGpu } from '../gpuHoldings.js';
import type { OperatorLifecycle } from './operatorLifecycle.js';
import type { RoutingTable } from '../routingTable.js';
import { renderReceipt } from './deployments.js';
import { drainReply, hostBody, hostTokenReply, revokeTokenReply, undrainReply } from '../../api/hostAdmin.js';
import { POLLED_LOG_LEVEL } from '../polledLogLevel.js';

const hostParams = z.strictObject({ hostId: z.string().min(1) });

export function hostAdminRoutes(deps: {
  hosts: HostRegistry;
  catalogue: CatalogueReads;
  table: RoutingTable;
  lifecycle: OperatorLifecycle;
}) {
  return async (app: FastifyInstance) => {
    const routes = app.withTypeProvider<ZodTypeProvider>();

    routes.get(
      '/management/v1/hosts',
      { logLevel: POLLED_LOG_LEVEL, schema: { response: { 200: z.object({ hosts: z.array(hostBody) }) } } },
      async () => {
        const [hosts, instances] = await Promise.all([deps.hosts.hosts(), deps.catalogue.instances()]);
        return {
          hosts: hosts.map((h) => {
            const { state, lastSeenAt } = deps.lifecycle.hostLiveness(h);
            const used = heldPerGpu(
              h.gpus.map((g) => g.index),
              instances.filter((i) => i.hostId === h.id),
            );
            return {
              host_id: h.id,
              gpus: h.gpus.map((g, i) => ({
                index: g.index,
                name: g.name,
                memory_bytes: g.memoryBytes,
                memory_kind: g.memoryKind,
                used_bytes: used[i]!,
              })),
              host_ram_bytes: h.hostRamBytes,
              draining: h.draining,
              state,
              last_seen_at: lastSeenAt.toISOString(),
            };
          }),
        };
      },
    );

    routes.post(
      '/management/v1/hosts/:hostId/drain',
      { schema: { params: hostParams, response: { 200: drainReply } } },
      async (request) => {
        const { hostId } = request.params;
        if (!(await deps.hosts.host(hostId))) throw new CapyError(apiErrors.notFound('host', hostId));
        const receipts = await deps.lifecycle.drainHost(hostId);
        request.log.info({ hostId, released: receipts.length }, 'host drained');
        const nameOf = (id: string) => deps.table.get(id)?.name ?? id;
        return {
          host_id: hostId,
          draining: true as const,
          released: receipts.map((r) => renderReceipt(r, nameOf(r.deploymentId), deps.table)),
        };
      },
    );

    routes.post(
      '/management/v1/hosts/:hostId/undrain',
      { schema: { params: hostParams, response: { 200: undrainReply } } },
      async (request) => {
        const { hostId } = request.params;
        if (!(await deps.hosts.host(hostId))) throw new CapyError(apiErrors.notFound('host', hostId));
        await deps.lifecycle.undrainHost(hostId);
        request.log.info({ hostId }, 'host drain ended');
        return { host_id: hostId, draining: false as const };
      },
    );

    // The operator's act of re-binding a host ID: its token stops working, and a new one may register it.
    routes.delete(
      '/management/v1/hosts/:hostId/token',
      { schema: { params: hostParams, response: { 200: revokeTokenReply } } },
      async (request) => {
        const { hostId } = request.params;
        if (!(await deps.hosts.host(hostId))) throw new CapyError(apiErrors.notFound('host', hostId));
        const revoked = await deps.hosts.revokeToken(hostId);
        request.log.warn({ hostId, revoked }, 'host token revoked');
        return { host_id: hostId, revoked };
      },
    );

    // Shown once: only its hash is stored.
    routes.post(
      '/management/v1/host-tokens',
      { schema: { response: { 201: hostTokenReply } } },
      async (request, reply) => {
        const token = await deps.hosts.issueToken();
        request.log.info('host token issued');
        return reply.code(201).send({ token });
      },
    );
  };
}
