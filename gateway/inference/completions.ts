/**
 * `POST /v1/chat/completions` and `POST /v1/completions`, streamed or not: routed by the `model`
 * field only, admitted by the request queue, then relayed to the ticket's instance.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Dispatcher } from 'undici';
import { z } from 'zod';
import { apiErrors, CapyError } from '../../domain/catalogue.js';
import { forwardableHeaders } from '../../net/forwarding.js';
import { INGRESS_PATHS, INGRESS_SECRET_HEADER } from '../../domain/hostIngress.js';
import type { InstanceRef } from '../../api/lifecycle.js';
import { errorAnsweredBy, replyWith } from '../plugins/apiErrors.js';
import { rawBodyOf } from '../plugins/jsonBody.js';
import { type RequestMetrics, UNROUTED } from '../requestMetrics.js';
import type { Admission, Arrival, RequestQueue } from '../requestQueue.js';
import type { RoutedDeployment, RoutingTable } from '../routingTable.js';
import { relay } from './relay.js';

const SECOND = 1_000;

// Only what routing needs; every other field goes to the engine as the client wrote it.
const completionBody = z.looseObject({ model: z.string().min(1) });

export interface CompletionDeps {
  table: RoutingTable;
  queue: RequestQueue;
  metrics: RequestMetrics;
  routeTo: (instance: InstanceRef) => EngineRoute;
  dispatcher: Dispatcher;
}

/** How a request reaches an instance's engine. */
export interface EngineRoute {
  /** The engine's base URL (standalone) or the host ingress's route to it (server). */
  url: string;
  /** The longest silence in a reply after its first output: its host's stream_idle_timeout, in ms. */
  streamIdleMs: number;
  /** Headers the way in asks for besides the client's: the host ingress's secret. */
  headers?: Record<string, string>;
}

/**
 * Why a request must not start or wake the deployment (the queue's `startBlockedBy`). An explicit
 * model that is starting or waking on a command is not blocked: its requests wait for it.
 */
function whatBlocksStart(d: RoutedDeployment): Arrival['startBlockedBy'] {
  if (d.operatorStopped) return 'operator_stopped';
  const commanded = d.instances.some((i) => i.observedState === 'starting' || i.observedState === 'waking');
  return d.activation === 'explicit' && !commanded ? 'explicit' : undefined;
}

/** Aborts when the client hangs up: its connection closes before the reply was all written. */
function hangUpOf(reply: FastifyReply): AbortSignal {
  const client = new AbortController();
  const res = reply.raw;
  res.once('close', () => {
    if (!res.writableFinished) client.abort();
  });
  return client.signal;
}

/**
 * A whole answer the gateway assembles from a stream: every answer not asked as a stream, unless the
 * client gave stream options, which the engine refuses without a stream (its error is the answer).
 */
function asksWholeAnswer(body: Record<string, unknown>): boolean {
  return body.stream !== true && body.stream_options === undefined;
}

/**
 * The body the engine gets: the client's bytes unless something is added. A whole answer is asked
 * for as a stream with its usage; SGLang aborts a request by its `rid`, so naming it after the
 * request lets an abort find it.
 */
function engineBody(
  body: Record<string, unknown>,
  raw: Buffer,
  add: { assemble: boolean; rid: string | undefined },
): Buffer {
  if (!add.assemble && add.rid === undefined) return raw;
  const streamed = add.assemble ? { stream: true, stream_options: { include_usage: true } } : {};
  const named = add.rid === undefined ? {} : { rid: add.rid };
  return Buffer.from(JSON.stringify({ ...body, ...streamed, ...named }));
}

export function completionRoutes(deps: CompletionDeps) {
  return async (app: FastifyInstance) => {
    const route = app.withTypeProvider<ZodTypeProvider>();
    const { metrics } = deps;
    // A request the route routed is counted by it, with how its exchange ended; one refused before
    // (no token, a body too large or malformed, an unknown model) once answered, by its error.
    const routed = new WeakSet<FastifyRequest>();
    app.addHook('onResponse', async (request, reply) => {
      if (!routed.has(request)) metrics.answered(UNROUTED, reply.statusCode, errorAnsweredBy(reply)?.code ?? 'none');
    });
    // The routes a host's ingress forwards are these.
    for (const path of INGRESS_PATHS) {
      route.post(path, { schema: { body: completionBody } }, async (request, reply) => {
        const deployment = deps.table.byModel(request.body.model);
        if (!deployment) throw new CapyError(apiErrors.notFound('model', request.body.model));
        routed.add(request);
        const raw = rawBodyOf(request);
        const hangUp = hangUpOf(reply);
        const arrivedMs = performance.now();
        let admission: Admission;
        try {
          admission = await deps.queue.admit({
            deploymentId: deployment.id,
            bodyBytes: raw.length,
            signal: hangUp,
            startBlockedBy: whatBlocksStart(deployment),
          });
        } catch {
          // The client hung up while it waited: it gave up its place, and nobody is left to answer.
          reply.hijack();
          reply.raw.destroy();
          metrics.answered(deployment.name, 0, 'cut');
          return;
        }
        if (admission.kind === 'refused') {
          metrics.answered(deployment.name, admission.error.status, admission.error.code);
          return replyWith(reply, admission.error);
        }
        metrics.waited(deployment.name, (performance.now() - arrivedMs) / SECOND);
        const assemble = asksWholeAnswer(request.body);
        const body = engineBody(request.body, raw, {
          assemble,
          rid: deployment.spec.engine === 'sglang' ? request.id : undefined,
        });
        let engine: EngineRoute;
        try {
          engine = deps.routeTo(admission.ticket.instance);
        } catch (e) {
          // Answered 500 by the error handler; the slot it was given is free again.
          admission.ticket.finish({ cut: false });
          metrics.answered(deployment.name, apiErrors.internal().status, apiErrors.internal().code);
          throw e;
        }
        reply.hijack();
        const end = await relay({
          ticket: admission.ticket,
          url: `${engine.url}${request.url}`,
          // The client's credentials are for this listener, not the engine (nor the ingress: a client
          // cannot send its secret); the length is the body's own; and the answer must come
          // uncompressed for its events to be read as they pass.
          headers: {
            ...forwardableHeaders(request.headers, [
              'authorization',
              'content-length',
              'accept-encoding',
              INGRESS_SECRET_HEADER,
            ]),
            ...engine.headers,
          },
          body,
          assemble,
          res: reply.raw,
          hangUp,
          dispatcher: deps.dispatcher,
          streamIdleMs: engine.streamIdleMs,
          log: request.log,
        });
        // Observed once the exchange ended, off the stream's path: its first output's time came with it.
        if (end.outputAtMs !== undefined) metrics.firstOutput(deployment.name, (end.outputAtMs - arrivedMs) / SECOND);
        metrics.answered(deployment.name, reply.raw.headersSent ? reply.raw.statusCode : 0, end.how);
      });
    }
  };
}
