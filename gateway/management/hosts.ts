/**
 * Routes a host agent calls with its host token: register, report load samples (its heartbeat),
 * report an engine that exited, say that it stops.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { type ApiError, apiErrors, CapyError } from '../../domain/catalogue.js';
import {
  type EngineExitBody,
  engineExitBody,
  type RegistrationBody,
  registrationBody,
  registrationReply,
  samplesBody,
} from '../../api/hosts.js';
import type { RegistrationOutcome } from '../../api/catalogue.js';
import type { HostRegistry, Registered } from '../ports.js';
import type { LoadBoard } from '../loadBoard.js';
import { bearerToken } from '../../net/bearerToken.js';
import { POLLED_LOG_LEVEL } from '../polledLogLevel.js';

/** What the server does when a host reports; the lifecycle hooks in here. */
export interface HostEventSink {
  registered(hostId: string, body: RegistrationBody, ingressSecret: string): Promise<void>;
  engineExited(hostId: string, exit: EngineExitBody): Promise<void>;
  /**
   * Whether the catalogue places this instance on the host: a host reports only its own. Absent in
   * benches that run a host agent against the listener alone, with no catalogue of instances.
   */
  runsOn?(hostId: string, deploymentId: string, instanceIndex: number): boolean;
  /** A report arrived: the host is alive. Left out by benches that watch no heartbeat. */
  heard?(hostId: string): void;
  /** The host's agent stops: nothing new goes there, its running answers finish. */
  stopping?(hostId: string): Promise<void>;
}

const refusals: Record<Exclude<RegistrationOutcome, 'registered'>, (hostId: string) => ApiError> = {
  unknown_token: () => apiErrors.unauthorized('host token'),
  token_bound_to_another_host: apiErrors.tokenBoundToAnotherHost,
  host_bound_to_another_token: apiErrors.hostBoundToAnotherToken,
};

const hostParams = z.strictObject({ hostId: z.string().min(1) });

/** An instance as a host's report names it. */
type InstanceRef = { deployment_id: string; instance_index: number };

export interface HostRouteDeps {
  hosts: HostRegistry;
  board: LoadBoard;
  events: HostEventSink;
  metricsToken?: string;
}

export function hostRoutes(deps: HostRouteDeps) {
  // Read from the store on every report, not remembered: a revoked token stops working at once.
  async function requireHost(request: FastifyRequest<{ Params: { hostId: string } }>) {
    const token = bearerToken(request.raw);
    if (!token || (await deps.hosts.hostOfToken(token)) !== request.params.hostId)
      throw new CapyError(apiErrors.unauthorized('host token'));
  }
  /**
   * A host reports only the instances the catalogue places on it: a report naming another's (or
   * none's) is refused whole, 403, for a load sample as for an engine exit.
   */
  function requireOwnInstances(hostId: string, instances: ReadonlyArray<InstanceRef>) {
    const foreign = instances.find((i) => !(deps.events.runsOn?.(hostId, i.deployment_id, i.instance_index) ?? true));
    if (foreign)
      throw new CapyError(apiErrors.notHostsInstance(hostId, `${foreign.deployment_id}/${foreign.instance_index}`));
  }

  return async (app: FastifyInstance) => {
    const routes = app.withTypeProvider<ZodTypeProvider>();

    routes.post(
      '/management/v1/hosts/register',
      { schema: { body: registrationBody, response: { 200: registrationReply } } },
      async (request) => {
        const token = bearerToken(request.raw);
        const { body } = request;
        const registration = {
          id: body.host_id,
          gpus: body.gpus.map((g) => ({
            index: g.index,
            name: g.name,
            memoryBytes: g.memory_bytes,
            memoryKind: g.memory_kind,
          })),
          hostRamBytes: body.host_ram_bytes,
          settings: { ...body.settings, ingress_url: body.ingress_url },
        };
        const registered: Registered = token
          ? await deps.hosts.register(token, registration)
          : { outcome: 'unknown_token' };
        if (registered.outcome !== 'registered') {
          request.log.warn({ hostId: body.host_id, outcome: registered.outcome }, 'host registration refused');
          throw new CapyError(refusals[registered.outcome](body.host_id));
        }
        const { ingressSecret } = registered;
        await deps.events.registered(body.host_id, body, ingressSecret);
        request.log.info({ hostId: body.host_id, gpus: body.gpus.length }, 'host registered');
        return {
          host_id: body.host_id,
          ingress_secret: ingressSecret,
          ...(deps.metricsToken === undefined ? {} : { metrics_token: deps.metricsToken }),
        };
      },
    );

    routes.post(
      '/management/v1/hosts/:hostId/samples',
      { schema: { params: hostParams, body: samplesBody }, preHandler: requireHost, logLevel: POLLED_LOG_LEVEL },
      async (request, reply) => {
        const { hostId } = request.params;
        // Heard even when its report is refused: its token says it is the host, and it is alive.
        deps.events.heard?.(hostId);
        requireOwnInstances(hostId, request.body.instances);
        const sampledAtMs = Math.min(request.body.sampled_at_ms, Date.now());
        deps.board.record(
          request.body.instances.map((i) => ({
            hostId,
            deploymentId: i.deployment_id,
            instanceIndex: i.instance_index,
            generation: i.generation,
            sampledAtMs,
            ingressInFlight: i.ingress_in_flight,
            engine: i.engine,
            maxRunning: i.max_running,
          })),
        );
        return reply.code(204).send();
      },
    );

    routes.post(
      '/management/v1/hosts/:hostId/engine-exits',
      { schema: { params: hostParams, body: engineExitBody }, preHandler: requireHost },
      async (request, reply) => {
        const exit = request.body;
        const { hostId } = request.params;
        requireOwnInstances(hostId, [exit]);
        deps.board.forget(exit.deployment_id, exit.instance_index, exit.generation);
        request.log.warn({ hostId, ...exit }, 'engine exited');
        await deps.events.engineExited(hostId, exit);
        return reply.code(204).send();
      },
    );

    routes.post(
      '/management/v1/hosts/:hostId/stopping',
      { schema: { params: hostParams }, preHandler: requireHost },
      async (request, reply) => {
        request.log.info({ hostId: request.params.hostId }, 'host stopping: nothing new is routed to it');
        await deps.events.stopping?.(request.params.hostId);
        return reply.code(204).send();
      },
    );
  };
}
