/**
 * Text the management API takes is text the store can keep. A path parameter with a control
 * character (a NUL, a newline…) is refused 400 naming it, before any route reads it: no ID or name
 * holds one, and the store cannot even look a NUL up. A NUL anywhere in a JSON body is refused the
 * same way: Postgres keeps none in text or jsonb. One hook for every route, so a route added later
 * is covered too.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { apiErrors, CapyError } from '../../domain/catalogue.js';

const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;

/** The path (`body.a.0.b`) of a string or key in `value` that holds a NUL. Iterative: a body may nest deep. */
function nulAt(value: unknown, path: string): string | undefined {
  const pending: Array<[unknown, string]> = [[value, path]];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [item, where] = next;
    if (typeof item === 'string' && item.includes('\u0000')) return where;
    if (typeof item !== 'object' || item === null) continue;
    for (const [key, inner] of Object.entries(item)) {
      if (key.includes('\u0000')) return where;
      pending.push([inner, `${where}.${key}`]);
    }
  }
  return undefined;
}

export const storableTextPlugin = fp(async (app: FastifyInstance) => {
  app.addHook('preValidation', async (request) => {
    for (const [name, value] of Object.entries((request.params ?? {}) as Record<string, unknown>)) {
      if (typeof value === 'string' && CONTROL_CHARACTER.test(value)) throw new CapyError(apiErrors.controlCharacter(`params.${name}`));
    }
    const nul = nulAt(request.body, 'body');
    if (nul !== undefined) throw new CapyError(apiErrors.nulInBody(nul));
  });
});
