/**
 * `GET /metrics` on the management listener: the server's registry in Prometheus's text format,
 * to the admin token or the metrics token (`metrics.token` in the server document), a scraper's one
 * static credential, which reads nothing else.
 */
import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { apiErrors } from '../../domain/catalogue.js';
import { bearerAuth } from './bearerAuth.js';
import { POLLED_LOG_LEVEL } from '../polledLogLevel.js';

interface MetricsRouteDeps {
  registry: Registry;
  adminToken: string;
  metricsToken?: string;
}

export function metricsRoute({ registry, adminToken, metricsToken }: MetricsRouteDeps) {
  return async (app: FastifyInstance) => {
    const tokens = metricsToken === undefined ? [adminToken] : [adminToken, metricsToken];
    await app.register(bearerAuth, {
      tokens,
      refusal: apiErrors.unauthorized(metricsToken === undefined ? 'admin token' : 'admin token or metrics token'),
    });
    // Scraped every few seconds: only a failed scrape is worth a log line.
    app.get('/metrics', { logLevel: POLLED_LOG_LEVEL }, async (_request, reply) =>
      reply.type(registry.contentType).send(await registry.metrics()),
    );
  };
}
