/**
 * Every listener's JSON bodies, read the one way: as bytes, kept (the inference listener forwards a
 * request's body as the client wrote it), refused 400 when they nest deeper than MAX_NESTING,
 * then parsed; a malformed one is answered 400 naming the problem. The depth is refused before the
 * parse: JSON.parse takes any depth, but what walks or writes a body again recurses, and ran out of
 * stack (a 500): JSON.stringify into an engine's body, into the store, into a refusal quoting a value.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { apiErrors, CapyError } from '../../domain/catalogue.js';
import { MAX_NESTING } from '../../domain/limits.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The body's bytes as they arrived (jsonBody); null for a request that had none. */
    rawBody: Buffer | null;
  }
}

/** The body's bytes as they arrived; empty for a request that had none. */
export const rawBodyOf = (request: FastifyRequest): Buffer => request.rawBody ?? Buffer.alloc(0);

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;

/**
 * Whether the text opens more than `maxDepth` arrays and objects at once, brackets in strings not
 * counted. Valid JSON or not (the parse that follows says what else is wrong); UTF-8 never puts these
 * ASCII bytes inside a multi-byte character, so the bytes are read as they are.
 */
function nestsDeeperThan(bytes: Buffer, maxDepth: number): boolean {
  let depth = 0;
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i]!;
    if (byte === QUOTE) {
      // A string ends at the next quote not escaped (an even run of backslashes before it); long
      // strings (prompts) are most of a large body, so they are skipped by a native search.
      let end = bytes.indexOf(QUOTE, i + 1);
      while (end !== -1 && isEscaped(bytes, end)) end = bytes.indexOf(QUOTE, end + 1);
      if (end === -1) return false;
      i = end;
    } else if (byte === OPEN_BRACKET || byte === OPEN_BRACE) {
      if (++depth > maxDepth) return true;
    } else if (byte === CLOSE_BRACKET || byte === CLOSE_BRACE) {
      depth--;
    }
  }
  return false;
}

function isEscaped(bytes: Buffer, quoteAt: number): boolean {
  let backslashes = 0;
  while (bytes[quoteAt - 1 - backslashes] === BACKSLASH) backslashes++;
  return backslashes % 2 === 1;
}

export const jsonBody = fp(async (app: FastifyInstance) => {
  // A request's own field, declared up front so every request has the same shape.
  app.decorateRequest('rawBody', null);
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body: Buffer, done) => {
    request.rawBody = body;
    if (nestsDeeperThan(body, MAX_NESTING)) return done(new CapyError(apiErrors.nestedTooDeep(MAX_NESTING)));
    try {
      done(null, JSON.parse(body.toString('utf8')));
    } catch (e) {
      done(new CapyError(apiErrors.invalidJson((e as Error).message)), undefined);
    }
  });
});
