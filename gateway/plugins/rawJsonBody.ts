/**
 * JSON bodies read as bytes and parsed, the bytes kept: the inference listener forwards a request's
 * body as the client wrote it, and a malformed one is answered 400 naming the problem.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { apiErrors, CapyError } from '../../domain/catalogue.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The body's bytes as they arrived (rawJsonBody); null for a request that had none. */
    rawBody: Buffer | null;
  }
}

/** The body's bytes as they arrived; empty for a request that had none. */
export const rawBodyOf = (request: FastifyRequest): Buffer => request.rawBody ?? Buffer.alloc(0);

export const rawJsonBody = fp(async (app: FastifyInstance) => {
  // A request's own field, declared up front so every request has the same shape.
  app.decorateRequest('rawBody', null);
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body: Buffer, done) => {
    request.rawBody = body;
    try {
      done(null, JSON.parse(body.toString('utf8')));
    } catch (e) {
      done(new CapyError(apiErrors.invalidRequest(`the body is not valid JSON: ${(e as Error).message}`)), undefined);
    }
  });
});
