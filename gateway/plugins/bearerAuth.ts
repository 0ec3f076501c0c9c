/**
 * A scope that takes `Authorization: Bearer <token>` with one of its tokens: the operator's side of the
 * management listener (the admin token), its metrics (the admin or the metrics token), and the
 * inference listener when it has a token of its own.
 * Registered inside the scope it guards: on the management listener the host agent's routes check
 * their host token themselves, and an unknown route still answers not_found.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { type ApiError, CapyError } from '../../domain/catalogue.js';
import { secretMatcher } from '../../net/secretMatcher.js';
import { bearerToken } from '../../net/bearerToken.js';

export const bearerAuth = fp<{ tokens: readonly string[]; refusal: ApiError }>(
  async (app: FastifyInstance, { tokens, refusal }) => {
    const matchers = tokens.map(secretMatcher);
    app.addHook('onRequest', async (request) => {
      const sent = bearerToken(request.raw);
      if (!matchers.some((isToken) => isToken(sent))) throw new CapyError(refusal);
    });
  },
);
