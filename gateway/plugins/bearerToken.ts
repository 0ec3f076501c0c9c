import type { FastifyRequest } from 'fastify';

/** The token of `Authorization: Bearer <token>`, or undefined when the header is absent or another scheme. */
export const bearerToken = (request: FastifyRequest): string | undefined =>
  /^Bearer (\S+)$/.exec(request.headers.authorization ?? '')?.[1];
