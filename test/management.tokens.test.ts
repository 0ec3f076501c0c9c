/**
 * Every route of the management listener, read from its route tree, against every credential that
 * is not its own: the operator's routes take only the admin token, a host's routes only that host's
 * token. Host tokens are kept as hashes only.
 */
import { createHash } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { apiErrors } from '../domain/catalogue.js';
import { issueHostToken, registerHost } from '../store/hosts.js';
import { migrate } from '../store/migrate.js';
import { buildAdminApp } from './support/adminApp.js';
import { type FreshDatabase, freshDatabase } from './support/postgres.js';
import { type RouteRef, routesOf } from './support/routes.js';

const ADMIN_TOKEN = 'capy_admin_sweep';
const HOST_ROUTES = new Set([
  '/management/v1/hosts/register',
  '/management/v1/hosts/:hostId/samples',
  '/management/v1/hosts/:hostId/engine-exits',
  '/management/v1/hosts/:hostId/stopping',
]);
/** The status page: a login form and its script, no data; what it shows it reads with the admin token. */
const PUBLIC_ROUTES = new Set(['/']);
const gpus = [{ index: 0, name: 'sim-0', memoryBytes: 2 ** 33, memoryKind: 'discrete' as const }];

describe('the management listener’s credentials', () => {
  let fresh: FreshDatabase;
  let app: FastifyInstance;
  let routes: RouteRef[];
  const tokens: Record<'a' | 'b', string> = { a: '', b: '' };

  beforeAll(async () => {
    fresh = await freshDatabase(inject('postgresAdminUrl'));
    await migrate(fresh.db);
    for (const host of ['a', 'b'] as const) {
      tokens[host] = await issueHostToken(fresh.db);
      await registerHost(fresh.db, tokens[host], { id: `host-${host}`, gpus, hostRamBytes: 2 ** 36, settings: {} });
    }
    app = await buildAdminApp(fresh.db, { adminToken: ADMIN_TOKEN, hosts: ['host-a'] });
    await app.ready();
    routes = routesOf(app);
  });
  afterAll(async () => {
    await app?.close();
    await fresh?.drop();
  });

  const send = (route: RouteRef, authorization?: string) =>
    app.inject({
      method: route.method as 'GET',
      url: route.url.replace(':hostId', 'host-a').replace(':ref', 'chat-a'),
      headers: authorization === undefined ? {} : { authorization },
      ...(route.method === 'POST' ? { payload: {} } : {}),
    });

  it('reads every route from the listener itself', () => {
    expect(routes.length).toBeGreaterThanOrEqual(15);
    expect(routes).toContainEqual({ method: 'DELETE', url: '/management/v1/hosts/:hostId/token' });
    expect(routes.filter((r) => HOST_ROUTES.has(r.url))).toHaveLength(HOST_ROUTES.size);
  });

  it('serves the status page to anyone, and nothing else without a token', async () => {
    expect(routes.filter((r) => PUBLIC_ROUTES.has(r.url)).map((r) => r.method)).toContain('GET');
    const page = await send({ method: 'GET', url: '/' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
  });

  it('refuses every operator route a missing token, a wrong one, a host token and another scheme (401)', async () => {
    const refused = apiErrors.unauthorized('admin token');
    const credentials = [
      undefined,
      'Bearer capy_admin_wrong',
      `Bearer ${tokens.a}`,
      `Basic ${ADMIN_TOKEN}`,
      ADMIN_TOKEN,
      `Bearer ${ADMIN_TOKEN} extra`,
    ];
    for (const route of routes.filter((r) => !HOST_ROUTES.has(r.url) && !PUBLIC_ROUTES.has(r.url))) {
      for (const credential of credentials) {
        const reply = await send(route, credential);
        expect({ route, credential, status: reply.statusCode, body: reply.json() }).toEqual({
          route,
          credential,
          status: 401,
          body: { code: 'unauthorized', message: refused.message, retryable: false },
        });
      }
    }
  });

  it('refuses a host’s routes the admin token, a wrong token, no token and another host’s token (401)', async () => {
    const credentials = [undefined, `Bearer ${ADMIN_TOKEN}`, 'Bearer capy_host_wrong', `Bearer ${tokens.b}`];
    for (const route of routes.filter((r) => HOST_ROUTES.has(r.url))) {
      for (const credential of credentials) {
        // A registration body that is valid but for its token: the refusal is the token's.
        const payload = route.url.endsWith('/register')
          ? { host_id: 'host-a', gpus: [], host_ram_bytes: 2 ** 36, settings: {}, ingress_url: 'http://127.0.0.1:1' }
          : route.url.endsWith('/samples')
            ? { sampled_at_ms: Date.now(), instances: [] }
            : route.url.endsWith('/engine-exits')
              ? { deployment_id: 'x', instance_index: 0, generation: 1, exit_code: 1, signal: null }
              : undefined;
        const reply = await app.inject({
          method: 'POST',
          url: route.url.replace(':hostId', 'host-a'),
          headers: credential === undefined ? {} : { authorization: credential },
          ...(payload === undefined ? {} : { payload }),
        });
        expect({ route: route.url, credential, status: reply.statusCode, code: reply.json().code }).toEqual({
          route: route.url,
          credential,
          status: 401,
          code: 'unauthorized',
        });
      }
    }
  });

  it('keeps only the hash of a host token', async () => {
    const rows = await fresh.db.query('SELECT * FROM host_tokens');
    expect(rows).toHaveLength(2);
    const stored = JSON.stringify(rows);
    for (const token of Object.values(tokens)) {
      expect(stored).not.toContain(token);
      expect(stored).toContain(createHash('sha256').update(token).digest('hex'));
    }
  });
});
