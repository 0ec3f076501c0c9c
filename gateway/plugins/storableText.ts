/**
 * Text the management API takes is text the store can keep. A path parameter with a control
 * character (a NUL, a newline…) is refused 400 naming it, before any route reads it: no ID or name
 * holds one, and the store cannot even look a NUL up. A NUL anywhere in a JSON body is refused the
 * same way: Postgres keeps none in text or jsonb; so is a lone UTF-16 surrogate (`"\ud800"`), which
 * JSON can spell but jsonb refuses and UTF-8 cannot hold. One hook for every route, so a route added
 * later is covered too.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { apiErrors, CapyError } from '../../domain/catalogue.js';

const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;
/** With the `u` flag a well-formed pair reads as one astral code point, so only a lone half matches. */
const LONE_SURROGATE = /\p{Cs}/u;

/** Why Postgres could not keep `text`, if it could not. */
function unstorable(text: string): 'nul' | 'loneSurrogate' | undefined {
  if (text.includes('\u0000')) return 'nul';
  return LONE_SURROGATE.test(text) ? 'loneSurrogate' : undefined;
}

/**
 * The first string or key in `value` that Postgres could not keep, with its path (`body.a.0.b`).
 * Iterative: a body may nest deep.
 */
function unstorableAt(value: unknown, path: string): { where: string; why: 'nul' | 'loneSurrogate' } | undefined {
  const pending: Array<[unknown, string]> = [[value, path]];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [item, where] = next;
    const why = typeof item === 'string' ? unstorable(item) : undefined;
    if (why !== undefined) return { where, why };
    if (typeof item !== 'object' || item === null) continue;
    for (const [key, inner] of Object.entries(item)) {
      const keyWhy = unstorable(key);
      if (keyWhy !== undefined) return { where, why: keyWhy };
      pending.push([inner, `${where}.${key}`]);
    }
  }
  return undefined;
}

export const storableTextPlugin = fp(async (app: FastifyInstance) => {
  app.addHook('preValidation', async (request) => {
    for (const [name, value] of Object.entries((request.params ?? {}) as Record<string, unknown>)) {
      if (typeof value === 'string' && CONTROL_CHARACTER.test(value))
        throw new CapyError(apiErrors.controlCharacter(`params.${name}`));
    }
    const found = unstorableAt(request.body, 'body');
    if (found !== undefined)
      throw new CapyError(
        found.why === 'nul' ? apiErrors.nulInBody(found.where) : apiErrors.loneSurrogateInBody(found.where),
      );
  });
});
