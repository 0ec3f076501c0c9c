/**
 * The operator's side of the management listener takes `Authorization: Bearer <admin token>`.
 * Registered inside the scope that holds the operator's routes, so it guards exactly those: the host
 * agent's routes check their host token themselves, and an unknown route still answers not_found.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { apiErrors, CapyError } from '../../domain/catalogue.js';
import { bearerToken } from './bearerToken.js';

// Both sides are hashed first so the comparison takes the same time whatever the length or
// content of the token sent: `timingSafeEqual` needs equal lengths, and a length check would leak.
const digest = (token: string) => createHash('sha256').update(token).digest();

export const adminAuth = fp<{ adminToken: string }>(async (app: FastifyInstance, { adminToken }) => {
  const expected = digest(adminToken);
  app.addHook('onRequest', async (request) => {
    const sent = bearerToken(request);
    if (sent === undefined || !timingSafeEqual(digest(sent), expected)) throw new CapyError(apiErrors.unauthorized('admin token'));
  });
});
