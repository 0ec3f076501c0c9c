/**
 * Every error a listener sends is a catalogue entry rendered the one way: `{code, message,
 * retryable}` with `Retry-After` on 429s. Validation failures name the field and the reason.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { type ApiError, apiErrors, CapyError, renderApiError } from '../../domain/catalogue.js';

export function replyWith(reply: FastifyReply, error: ApiError) {
  const rendered = renderApiError(error);
  return reply.code(rendered.status).headers(rendered.headers).send(rendered.body);
}

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
  if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) return apiErrors.invalidRequest(error.message);
  throw error;
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
  app.setNotFoundHandler((request, reply) => replyWith(reply, apiErrors.notFound('route', `${request.method} ${request.url}`)));
});
