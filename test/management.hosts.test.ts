import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { LoadBoard } from '../gateway/loadBoard.js';
import { buildManagementApp } from '../gateway/managementApp.js';
import { storePorts } from '../server/storePorts.js';
import { ingressSecrets, issueHostToken } from '../store/hosts.js';
import { migrate } from '../store/migrate.js';
import { type FreshDatabase, freshDatabase } from './support/postgres.js';

const registration = (hostId: string) => ({
  host_id: hostId,
  gpus: [{ index: 0, name: 'sim-0', memory_bytes: 2 ** 34, memory_kind: 'discrete' }],
  host_ram_bytes: 2 ** 36,
  settings: { activation: 'on_demand' },
  ingress_url: 'http://127.0.0.1:7080',
});

describe('the host routes of the management listener', () => {
  let fresh: FreshDatabase;
  let app: FastifyInstance;
  let token: string;
  const board = new LoadBoard();

  beforeAll(async () => {
    fresh = await freshDatabase(inject('postgresAdminUrl'));
    await migrate(fresh.db);
    token = await issueHostToken(fresh.db);
    app = await buildManagementApp({
      store: storePorts(fresh.db),
      board,
      hostEvents: { registered: async () => {}, engineExited: async () => {} },
      logger: pino({ level: 'silent' }),
    });
  });
  afterAll(async () => {
    await app.close();
    await fresh.drop();
  });

  it('refuses registration without a token the server issued, with the catalogue body', async () => {
    for (const authorization of [undefined, 'Bearer capy_host_unknown', token]) {
      const reply = await app.inject({
        method: 'POST',
        url: '/management/v1/hosts/register',
        headers: authorization ? { authorization } : {},
        payload: registration('gpu-box'),
      });
      expect(reply.statusCode).toBe(401);
      expect(reply.json()).toEqual({
        code: 'unauthorized',
        message: 'a valid host token is required: send Authorization: Bearer <host token>',
        retryable: false,
      });
    }
  });

  it('names the field and the reason of a malformed registration', async () => {
    const reply = await app.inject({
      method: 'POST',
      url: '/management/v1/hosts/register',
      headers: { authorization: `Bearer ${token}` },
      payload: { ...registration('gpu-box'), host_ram_bytes: -1, extra: true },
    });
    expect(reply.statusCode).toBe(400);
    const body = reply.json();
    expect(body.code).toBe('invalid_request');
    expect(body.retryable).toBe(false);
    expect(body.message).toContain('body.host_ram_bytes');
    expect(body.message).toContain('extra');
  });

  it('registers, then takes samples only from that host', async () => {
    const headers = { authorization: `Bearer ${token}` };
    const registered = await app.inject({
      method: 'POST',
      url: '/management/v1/hosts/register',
      headers,
      payload: registration('gpu-box'),
    });
    expect(registered.statusCode).toBe(200);
    expect(registered.json()).toEqual({ host_id: 'gpu-box', ingress_secret: expect.any(String) });

    const sample = {
      sampled_at_ms: Date.now(),
      instances: [
        {
          deployment_id: 'D',
          instance_index: 0,
          generation: 7,
          ingress_in_flight: 3,
          engine: { running: 3, waiting: 0, kv_usage_ppm: 121_000 },
          max_running: { count: 8, source: 'engine' },
        },
      ],
    };
    const other = await app.inject({
      method: 'POST',
      url: '/management/v1/hosts/other-box/samples',
      headers,
      payload: sample,
    });
    expect(other.statusCode).toBe(401);
    const ok = await app.inject({
      method: 'POST',
      url: '/management/v1/hosts/gpu-box/samples',
      headers,
      payload: sample,
    });
    expect(ok.statusCode).toBe(204);
    expect(board.read('D', 0, Date.now())).toMatchObject({
      hostId: 'gpu-box',
      generation: 7,
      ingressInFlight: 3,
      engine: { running: 3, waiting: 0, kv_usage_ppm: 121_000 },
      maxRunning: { count: 8, source: 'engine' },
      fresh: true,
    });
  });

  it('gives a new ingress secret at each registration, and keeps the latest for a restarted server', async () => {
    const headers = { authorization: `Bearer ${token}` };
    const register = async () =>
      (
        await app.inject({
          method: 'POST',
          url: '/management/v1/hosts/register',
          headers,
          payload: registration('gpu-box'),
        })
      ).json().ingress_secret;
    const first = await register();
    const second = await register();
    // 32 random bytes, base64url.
    expect(second).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(second).not.toBe(first);
    expect((await ingressSecrets(fresh.db)).get('gpu-box')).toBe(second);
  });

  it('answers an unknown route with a not_found body', async () => {
    const reply = await app.inject({ method: 'GET', url: '/management/v1/nothing' });
    expect(reply.statusCode).toBe(404);
    expect(reply.json()).toEqual({
      code: 'not_found',
      message: 'route GET /management/v1/nothing not found',
      retryable: false,
    });
  });
});

describe('the load board', () => {
  it('marks a sample stale after 3 s and drops it after 30 s', () => {
    const board = new LoadBoard();
    const at = 1_000_000;
    board.record([
      {
        hostId: 'h',
        deploymentId: 'D',
        instanceIndex: 0,
        generation: 1,
        sampledAtMs: at,
        ingressInFlight: 0,
        engine: null,
        maxRunning: { source: 'on_host' },
      },
    ]);
    expect(board.read('D', 0, at + 2_999)).toMatchObject({ ageMs: 2_999, fresh: true, engine: null });
    expect(board.read('D', 0, at + 3_000)).toMatchObject({ ageMs: 3_000, fresh: false });
    expect(board.read('D', 0, at + 30_000)).toMatchObject({ fresh: false });
    expect(board.read('D', 0, at + 30_001)).toBeNull();
  });

  it('keeps the newest sample when reports arrive out of order', () => {
    const board = new LoadBoard();
    const s = {
      hostId: 'h',
      deploymentId: 'D',
      instanceIndex: 0,
      generation: 2,
      ingressInFlight: 0,
      engine: null,
      maxRunning: { source: 'default' as const },
    };
    board.record([{ ...s, sampledAtMs: 2_000 }]);
    board.record([{ ...s, sampledAtMs: 1_000 }]);
    board.record([{ ...s, generation: 1, sampledAtMs: 3_000 }]);
    expect(board.read('D', 0, 2_500)).toMatchObject({ sampledAtMs: 2_000, generation: 2 });
  });

  it('ignores a late sample of an instance that exited, but takes its next start', () => {
    const board = new LoadBoard();
    const s = {
      hostId: 'h',
      deploymentId: 'D',
      instanceIndex: 0,
      ingressInFlight: 0,
      engine: null,
      maxRunning: { source: 'default' as const },
    };
    board.record([{ ...s, generation: 3, sampledAtMs: 1_000 }]);
    board.forget('D', 0, 3);
    board.record([{ ...s, generation: 3, sampledAtMs: 1_500 }]);
    expect(board.read('D', 0, 2_000)).toBeNull();
    board.record([{ ...s, generation: 4, sampledAtMs: 1_800 }]);
    expect(board.read('D', 0, 2_000)).toMatchObject({ generation: 4 });
  });
});
