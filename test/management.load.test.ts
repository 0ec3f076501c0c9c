import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type InstanceSample, LoadBoard } from '../gateway/loadBoard.js';
import { buildManagementApp } from '../gateway/managementApp.js';
import { storePorts } from '../server/storePorts.js';
import type { RouterFigures } from '../gateway/routerFigures.js';
import { RoutingTable } from '../gateway/routingTable.js';
import { recordingLifecycle } from './support/operatorLifecycle.js';
import { loadSettings } from '../settings/load.js';
import type { Db } from '../store/db.js';

const NOW = 1_791_460_000_000;
const ADMIN_TOKEN = 'capy_admin_test-token';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
const unauthorized = {
  code: 'unauthorized',
  message: 'a valid admin token is required: send Authorization: Bearer <admin token>',
  retryable: false,
};

// The load endpoint reads memory only: a query to the store fails the test.
const noQueries: Db = {
  query: async () => {
    throw new Error('the load endpoint queried the store');
  },
  transaction: async () => {
    throw new Error('the load endpoint queried the store');
  },
  close: async () => {},
};

const ids = {
  a: '01KCHATA00000000000000000A',
  b: '01KCHATB00000000000000000B',
  c: '01KCHATC00000000000000000C',
  d: '01KCHATD00000000000000000D',
};

/** The request queue's side, as the load endpoint reads it: chat-a forwards 3 to its instance 0. */
const figures: RouterFigures = {
  deployment: (id) =>
    id === ids.a
      ? { inFlight: 3, inFlightLimit: 32, waiting: 0, waitingLimit: 0 }
      : { inFlight: 0, inFlightLimit: 32, waiting: 2, waitingLimit: 64 },
  instanceInFlight: (id, index) => (id === ids.a && index === 0 ? 3 : 0),
};

function routingTable(): RoutingTable {
  const table = new RoutingTable();
  const deploy = (id: string, name: string, engine: string) =>
    table.putDeployment({
      id,
      name,
      revision: 1,
      spec: loadSettings('deployment', { text: `name: ${name}\nengine: ${engine}\nmodel: m\n` }),
      operatorStopped: false,
    });
  const ready = (
    deploymentId: string,
    index: number,
    hostId: string,
    generation: number,
    observedState: 'ready' | 'parked' = 'ready',
    gpuIndexes = [0],
  ) => table.setInstance({ deploymentId, index, hostId, generation, observedState, parkTier: null, gpuIndexes });
  deploy(ids.a, 'chat-a', 'vllm');
  ready(ids.a, 0, 'gpu-box', 7);
  deploy(ids.b, 'chat-b', 'sglang');
  // Its instance on gpu-box spans two GPUs.
  ready(ids.b, 0, 'gpu-box', 2, 'ready', [1, 2]);
  ready(ids.b, 1, 'gpu-two', 1);
  deploy(ids.c, 'chat-c', 'vllm');
  ready(ids.c, 0, 'gpu-box', 4);
  deploy(ids.d, 'chat-d', 'vllm');
  // Recorded before the store named an instance's GPUs: not known.
  ready(ids.d, 0, 'gpu-box', 5, 'parked', []);
  ready(ids.d, 1, 'gpu-two', 2);
  return table;
}

function loadBoard(): LoadBoard {
  const board = new LoadBoard();
  const sample = (
    deploymentId: string,
    instanceIndex: number,
    generation: number,
    ageMs: number,
    more: Partial<InstanceSample> = {},
  ): InstanceSample => ({
    hostId: 'gpu-box',
    deploymentId,
    instanceIndex,
    generation,
    sampledAtMs: NOW - ageMs,
    ingressInFlight: 0,
    engine: { running: 0, waiting: 0, kv_usage_ppm: 0 },
    maxRunning: { count: 32, source: 'default' },
    ...more,
  });
  board.record([
    sample(ids.a, 0, 7, 400, { ingressInFlight: 3, engine: { running: 3, waiting: 0, kv_usage_ppm: 121_000 } }),
    // SGLang said 8, fewer than it was asked to run (state_cache); without metrics its engine is null.
    sample(ids.b, 0, 2, 1_000, { engine: null, maxRunning: { count: 8, source: 'state_cache' } }),
    sample(ids.b, 1, 1, 900, { hostId: 'gpu-two', maxRunning: { count: 48, source: 'engine' } }),
    sample(ids.c, 0, 4, 10_000, { engine: { running: 1, waiting: 4, kv_usage_ppm: 500_000 } }),
    // Older than 30 s: dropped.
    sample(ids.d, 0, 5, 30_001),
    // Of the generation before the one that runs now.
    sample(ids.d, 1, 1, 500, { hostId: 'gpu-two' }),
  ]);
  return board;
}

describe('GET /management/v1/metrics/load', () => {
  let app: FastifyInstance;

  beforeAll(async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: NOW });
    const table = routingTable();
    app = await buildManagementApp({
      store: storePorts(noQueries),
      board: loadBoard(),
      hostEvents: { registered: async () => {}, engineExited: async () => {} },
      logger: pino({ level: 'silent' }),
      admin: { adminToken: ADMIN_TOKEN, table, figures, lifecycle: recordingLifecycle(noQueries, table) },
    });
  });
  afterAll(async () => {
    await app.close();
    vi.useRealTimers();
  });

  const load = (query = '') =>
    app.inject({ method: 'GET', url: `/management/v1/metrics/load${query}`, headers: admin });

  it('refuses a request without the admin token, with the catalogue body', async () => {
    for (const authorization of [
      undefined,
      'Bearer wrong-token',
      `Bearer ${ADMIN_TOKEN}x`,
      ADMIN_TOKEN,
      `Basic ${ADMIN_TOKEN}`,
    ]) {
      const reply = await app.inject({
        method: 'GET',
        url: '/management/v1/metrics/load',
        headers: authorization ? { authorization } : {},
      });
      expect(reply.statusCode).toBe(401);
      expect(reply.json()).toStrictEqual(unauthorized);
    }
    // Only the operator's routes are behind it. A host agent's route without any token gets as far
    // as validating its body (its host token is checked after that), and an unknown route is still
    // not found.
    const hostRoute = await app.inject({
      method: 'POST',
      url: '/management/v1/hosts/gpu-box/engine-exits',
      payload: {},
    });
    expect(hostRoute.json()).toMatchObject({ code: 'invalid_request' });
    const unknown = await app.inject({ method: 'GET', url: '/management/v1/nothing' });
    expect(unknown.statusCode).toBe(404);
  });

  it('answers an ID that names no model with 404 not_found', async () => {
    const reply = await load('?deployment=01KNOSUCHMODEL000000000000');
    expect(reply.statusCode).toBe(404);
    expect(reply.json()).toStrictEqual({
      code: 'not_found',
      message: 'deployment 01KNOSUCHMODEL000000000000 not found',
      retryable: false,
    });
  });

  it('lists every model by name, observed now', async () => {
    const reply = await load();
    expect(reply.statusCode).toBe(200);
    const body = reply.json();
    expect(Object.keys(body)).toEqual(['observed_at_ms', 'stale_after_ms', 'deployments']);
    expect(body.observed_at_ms).toBe(NOW);
    expect(body.stale_after_ms).toBe(3_000);
    expect(body.deployments.map((d: { name: string }) => d.name)).toEqual(['chat-a', 'chat-b', 'chat-c', 'chat-d']);
  });

  it('reports a model with a fresh sample field for field', async () => {
    const reply = await load(`?deployment=${ids.a}`);
    expect(reply.statusCode).toBe(200);
    expect(reply.json()).toStrictEqual({
      observed_at_ms: NOW,
      stale_after_ms: 3_000,
      deployments: [
        {
          deployment_id: ids.a,
          name: 'chat-a',
          router: { in_flight: 3, in_flight_limit: 32, waiting: 0, waiting_limit: 0 },
          max_running: { count: 32, source: 'default' },
          instances: [
            {
              index: 0,
              host_id: 'gpu-box',
              generation: 7,
              observed_state: 'ready',
              gpu_indexes: [0],
              router_in_flight: 3,
              max_running: { count: 32, source: 'default' },
              sample: {
                sampled_at_ms: NOW - 400,
                age_ms: 400,
                fresh: true,
                ingress_in_flight: 3,
                engine: { running: 3, waiting: 0, kv_usage_ppm: 121_000 },
              },
            },
          ],
        },
      ],
    });
  });

  it("shows SGLang's own figure as source engine, and engine null when its metrics are off", async () => {
    const [chatB] = (await load(`?deployment=${ids.b}`)).json().deployments;
    expect(chatB).toStrictEqual({
      deployment_id: ids.b,
      name: 'chat-b',
      router: { in_flight: 0, in_flight_limit: 32, waiting: 2, waiting_limit: 64 },
      // The deployment's figure says why the engine runs fewer than asked.
      max_running: { count: 8, source: 'state_cache' },
      instances: [
        {
          index: 0,
          host_id: 'gpu-box',
          generation: 2,
          observed_state: 'ready',
          gpu_indexes: [1, 2],
          router_in_flight: 0,
          max_running: { count: 8, source: 'engine' },
          sample: { sampled_at_ms: NOW - 1_000, age_ms: 1_000, fresh: true, ingress_in_flight: 0, engine: null },
        },
        {
          index: 1,
          host_id: 'gpu-two',
          generation: 1,
          observed_state: 'ready',
          gpu_indexes: [0],
          router_in_flight: 0,
          max_running: { count: 48, source: 'engine' },
          sample: {
            sampled_at_ms: NOW - 900,
            age_ms: 900,
            fresh: true,
            ingress_in_flight: 0,
            engine: { running: 0, waiting: 0, kv_usage_ppm: 0 },
          },
        },
      ],
    });
  });

  it('keeps a stale sample, marked not fresh', async () => {
    const [chatC] = (await load(`?deployment=${ids.c}`)).json().deployments;
    expect(chatC.instances[0].sample).toStrictEqual({
      sampled_at_ms: NOW - 10_000,
      age_ms: 10_000,
      fresh: false,
      ingress_in_flight: 0,
      engine: { running: 1, waiting: 4, kv_usage_ppm: 500_000 },
    });
  });

  it('holds no sample older than 30 s or of an earlier generation, and leaves an unknown count out', async () => {
    const [chatD] = (await load(`?deployment=${ids.d}`)).json().deployments;
    expect(chatD).toStrictEqual({
      deployment_id: ids.d,
      name: 'chat-d',
      router: { in_flight: 0, in_flight_limit: 32, waiting: 2, waiting_limit: 64 },
      // No engine has said, and the server does not know the host's command.
      max_running: { source: 'on_host' },
      instances: [
        {
          index: 0,
          host_id: 'gpu-box',
          generation: 5,
          observed_state: 'parked',
          gpu_indexes: [],
          router_in_flight: 0,
          max_running: { source: 'on_host' },
          sample: null,
        },
        {
          index: 1,
          host_id: 'gpu-two',
          generation: 2,
          observed_state: 'ready',
          gpu_indexes: [0],
          router_in_flight: 0,
          max_running: { source: 'on_host' },
          sample: null,
        },
      ],
    });
  });

  it('answers over a real socket with JSON', async () => {
    const url = await app.listen({ host: '127.0.0.1', port: 0 });

    const refused = await request(`${url}/management/v1/metrics/load`);
    expect(refused.statusCode).toBe(401);
    expect(refused.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(await refused.body.json()).toStrictEqual(unauthorized);

    const reply = await request(`${url}/management/v1/metrics/load?deployment=${ids.a}`, { headers: admin });
    expect(reply.statusCode).toBe(200);
    expect(reply.headers['content-type']).toBe('application/json; charset=utf-8');
    const text = await reply.body.text();
    expect(reply.headers['content-length']).toBe(String(Buffer.byteLength(text)));
    expect(JSON.parse(text)).toMatchObject({
      observed_at_ms: NOW,
      stale_after_ms: 3_000,
      deployments: [
        {
          deployment_id: ids.a,
          name: 'chat-a',
          instances: [{ index: 0, router_in_flight: 3, sample: { age_ms: 400, fresh: true } }],
        },
      ],
    });
  });
});
