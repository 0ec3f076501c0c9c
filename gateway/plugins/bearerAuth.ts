/**
 * A scope that takes `Authorization: Bearer <token>` with one token: the operator's side of the
 * management listener (the admin token), and the inference listener when it has a token of its own.
 * Registered inside the scope it guards: on the management listener the host agent's routes check
 * their host token themselves, and an unknown route still answers not_found.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { type ApiError, CapyError } from '../../domain/catalogue.js';
import { secretMatcher } from '../../net/secretMatcher.js';
import { bearerToken } from './bearerToken.js';

export const bearerAuth = fp<{ token: string; refusal: ApiError }>(async (app: FastifyInstance, { token, refusal }) => {
  const isToken = secretMatcher(token);
  app.addHook('onRequest', async (request) => {
    if (!isToken(bearerToken(request))) throw new CapyError(refusal);
  });
});
