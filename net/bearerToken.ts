import type { IncomingMessage } from 'node:http';
import { apiErrors, CapyError } from '../domain/catalogue.js';

/**
 * The token of `Authorization: Bearer <token>`, or undefined when the header is absent or another
 * scheme. Two Authorization headers are refused: Node keeps only the first, and a proxy in front may
 * have read the other. The gateway's routes and a host's ingress read it alike.
 */
export function bearerToken(message: IncomingMessage): string | undefined {
  const { rawHeaders } = message;
  let sent = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]!.toLowerCase() === 'authorization') sent++;
  if (sent > 1) throw new CapyError(apiErrors.repeatedHeader('Authorization'));
  return /^Bearer (\S+)$/.exec(message.headers.authorization ?? '')?.[1];
}
