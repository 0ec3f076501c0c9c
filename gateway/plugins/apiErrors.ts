/**
 * Every error a listener sends is a catalogue entry rendered the one way: `{code, message,
 * retryable}` with `Retry-After` on 429s. Validation failures name the field and the reason.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { type ApiError, apiErrors, CapyError, renderApiError } from '../../domain/catalogue.js';

/** The error each reply was answered with: what the metrics count a request refused before its route by. */
const answeredErrors = new WeakMap<FastifyReply, ApiError>();

export function replyWith(reply: FastifyReply, error: ApiError) {
  answeredErrors.set(reply, error);
  const rendered = renderApiError(error);
  return reply.code(rendered.status).headers(rendered.headers).send(rendered.body);
}

/** The catalogue's error `replyWith` answered the reply with; undefined when it answered none. */
export const errorAnsweredBy = (reply: FastifyReply): ApiError | undefined => answeredErrors.get(reply);

function toApiError(error: FastifyError, request: FastifyRequest): ApiError {
  if (error instanceof CapyError) return error.apiError;
  if (hasZodFastifySchemaValidationErrors(error)) {
    const where = error.validationContext ?? 'request';
    const problems = error.validation.map((v) => {
      const path = v.instancePath.replace(/^\//, '').replaceAll('/', '.');
      return `${where}${path ? `.${path}` : ''}: ${v.message}`;
    });
    return apiErrors.invalidRequest(problems.join('; '));
  }
  // Fastify's message does not say the limit; the route's options do.
  if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return apiErrors.payloadTooLarge(request.routeOptions.bodyLimit);
  if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500)
    return apiErrors.invalidRequest(error.message);
  throw error;
}

/** The longest name or ID a path takes: names are at most 63 characters, IDs 26. */
export const MAX_PARAM_LENGTH = 100;

/**
 * The errors Fastify's router answers before any hook runs (a path parameter too long, a path that
 * does not decode), as catalogue entries too: pass as the `frameworkErrors` option.
 */
export function frameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  return replyWith(
    reply,
    error.code === 'FST_ERR_MAX_PARAM_LENGTH'
      ? apiErrors.paramTooLong(MAX_PARAM_LENGTH)
      : apiErrors.badUrl(request.url),
  );
}

export const apiErrorsPlugin = fp(async (app: FastifyInstance) => {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    let apiError: ApiError;
    try {
      apiError = toApiError(error, request);
    } catch {
      request.log.error({ err: error }, 'unhandled error');
      apiError = apiErrors.internal();
    }
    return replyWith(reply, apiError);
  });
  app.setNotFoundHandler((request, reply) =>
    replyWith(reply, apiErrors.notFound('route', `${request.method} ${request.url}`)),
  );
});
