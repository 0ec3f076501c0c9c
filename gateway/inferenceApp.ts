/**
 * The inference listener: OpenAI-compatible routes, every request routed by its `model` field to a
 * deployment, admitted by the request queue and relayed to an instance's engine.
 */
import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyBaseLogger, LogController } from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { Agent } from 'undici';
import { apiErrors } from '../domain/catalogue.js';
import type { InstanceRef } from '../api/lifecycle.js';
import { completionRoutes, type EngineRoute } from './inference/completions.js';
import { modelRoutes } from './inference/models.js';
import { apiErrorsPlugin, frameworkErrors, MAX_PARAM_LENGTH } from './plugins/apiErrors.js';
import { bearerAuth } from './plugins/bearerAuth.js';
import { jsonBody } from './plugins/jsonBody.js';
import type { RequestMetrics } from './requestMetrics.js';
import type { RequestQueue } from './requestQueue.js';
import type { RoutingTable } from './routingTable.js';

/**
 * Long prompts and images sent inline fit well under this; the waiting bodies' own bound
 * (max_buffered_bytes_total, 64 MiB by default) still applies on top of it.
 */
export const INFERENCE_BODY_LIMIT_BYTES = 16 * 1024 * 1024;

const UNOBSERVED: RequestMetrics = { answered() {}, waited() {}, firstOutput() {} };

/** The log levels that show every request. */
const VERBOSE_LEVELS: ReadonlySet<string> = new Set(['debug', 'trace']);

export interface InferenceDeps {
  table: RoutingTable;
  queue: RequestQueue;
  /** How a request reaches an instance's engine, looked up once per request. */
  routeTo: (instance: InstanceRef) => EngineRoute;
  logger: FastifyBaseLogger;
  bodyLimitBytes?: number;
  /** What each request tells the server's metrics; left out by benches of the listener alone. */
  metrics?: RequestMetrics;
  /** When set, every request sends `Authorization: Bearer <token>` (for a listener beyond loopback). */
  token?: string;
}

export async function buildInferenceApp(deps: InferenceDeps) {
  const app = Fastify({
    loggerInstance: deps.logger,
    bodyLimit: deps.bodyLimitBytes ?? INFERENCE_BODY_LIMIT_BYTES,
    // Unique beyond this process: SGLang's abort names a request by it.
    genReqId: () => randomUUID(),
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    frameworkErrors,
    // Fastify's two lines a request (incoming, completed) cost two synchronous log writes on the
    // answer's path; they show only at debug. apiErrorsPlugin logs errors regardless.
    logController: new LogController({ disableRequestLogging: !VERBOSE_LEVELS.has(deps.logger.level) }),
  });
  // One keep-alive pool to every engine; answers stream for minutes, so no body timeout applies.
  const dispatcher = new Agent({ keepAliveTimeout: 30_000, connections: 256, bodyTimeout: 0, headersTimeout: 0 });
  app.addHook('onClose', () => dispatcher.close());
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  await app.register(apiErrorsPlugin);
  if (deps.token !== undefined)
    await app.register(bearerAuth, { tokens: [deps.token], refusal: apiErrors.unauthorized('inference token') });
  await app.register(jsonBody);
  await app.register(
    completionRoutes({
      table: deps.table,
      queue: deps.queue,
      metrics: deps.metrics ?? UNOBSERVED,
      routeTo: deps.routeTo,
      dispatcher,
    }),
  );
  await app.register(modelRoutes({ table: deps.table }));
  return app;
}
