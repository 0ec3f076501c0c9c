/**
 * A path parameter with a control character (a NUL, a newline…) is refused 400 naming it, before
 * any route reads it: no ID or name holds one, and the store cannot even look a NUL up. One hook
 * for every route, so a route added later is covered too.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { apiErrors, CapyError } from '../../domain/catalogue.js';

const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;

export const pathParamsPlugin = fp(async (app: FastifyInstance) => {
  app.addHook('preValidation', async (request) => {
    for (const [name, value] of Object.entries((request.params ?? {}) as Record<string, unknown>)) {
      if (typeof value === 'string' && CONTROL_CHARACTER.test(value)) throw new CapyError(apiErrors.controlCharacter(`params.${name}`));
    }
  });
});
