import type { FastifyRequest } from 'fastify';
import { apiErrors, CapyError } from '../../domain/catalogue.js';

/**
 * The token of `Authorization: Bearer <token>`, or undefined when the header is absent or another
 * scheme. Two Authorization headers are refused: Node keeps only the first, and a proxy in front may
 * have read the other.
 */
export function bearerToken(request: FastifyRequest): string | undefined {
  const { rawHeaders } = request.raw;
  let sent = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]!.toLowerCase() === 'authorization') sent++;
  if (sent > 1) throw new CapyError(apiErrors.repeatedHeader('Authorization'));
  return /^Bearer (\S+)$/.exec(request.headers.authorization ?? '')?.[1];
}
