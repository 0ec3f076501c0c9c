/**
 * The operator's side of the management listener takes `Authorization: Bearer <admin token>`.
 * Registered inside the scope that holds the operator's routes, so it guards exactly those: the host
 * agent's routes check their host token themselves, and an unknown route still answers not_found.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { apiErrors, CapyError } from '../../domain/catalogue.js';
import { secretMatcher } from '../../net/secretMatcher.js';
import { bearerToken } from './bearerToken.js';

export const adminAuth = fp<{ adminToken: string }>(async (app: FastifyInstance, { adminToken }) => {
  const isAdminToken = secretMatcher(adminToken);
  app.addHook('onRequest', async (request) => {
    if (!isAdminToken(bearerToken(request))) throw new CapyError(apiErrors.unauthorized('admin token'));
  });
});
