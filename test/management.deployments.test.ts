import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { apiErrors, CapyError, releasedLines } from '../domain/catalogue.js';
import { RoutingTable } from '../gateway/routingTable.js';
import type { CommandReceipt } from '../api/lifecycle.js';
import { findHost, issueHostToken, registerHost } from '../store/hosts.js';
import { deleteDeployment, recordCheckpoint } from '../store/deployments.js';
import { migrate } from '../store/migrate.js';
import { buildAdminApp } from './support/adminApp.js';
import { type RecordingLifecycle, recordingLifecycle } from './support/operatorLifecycle.js';
import { type FreshDatabase, freshDatabase } from './support/postgres.js';

const ADMIN_TOKEN = 'capy_admin_routes';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
const doc = (name: string, more: Record<string, unknown> = {}) => ({
  name,
  engine: 'vllm',
  model: 'Qwen3-4B',
  ...more,
});

describe('the operator routes for deployments and hosts', () => {
  let fresh: FreshDatabase;
  let app: FastifyInstance;
  let lifecycle: RecordingLifecycle;
  const table = new RoutingTable();

  beforeAll(async () => {
    fresh = await freshDatabase(inject('postgresAdminUrl'));
    await migrate(fresh.db);
    const token = await issueHostToken(fresh.db);
    await registerHost(fresh.db, token, {
      id: 'gpu-box',
      gpus: [{ index: 0, name: 'sim-0', memoryBytes: 2 ** 34, memoryKind: 'discrete' }],
      hostRamBytes: 2 ** 36,
      settings: {},
    });
    lifecycle = recordingLifecycle(fresh.db, table, ['gpu-box', 'gpu-two']);
    app = await buildAdminApp(fresh.db, { adminToken: ADMIN_TOKEN, table, lifecycle });
  });
  afterAll(async () => {
    await app.close();
    await fresh.drop();
  });
  beforeEach(() => {
    lifecycle.calls.length = 0;
    lifecycle.next = undefined;
  });

  const call = (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: unknown) =>
    app.inject({
      method,
      url: `/management/v1${url}`,
      headers: admin,
      ...(payload === undefined ? {} : { payload: payload as object }),
    });

  it('refuses every operator route without the admin token', async () => {
    for (const [method, url] of [
      ['GET', '/deployments'],
      ['POST', '/deployments'],
      ['POST', '/deployments/x/start'],
      ['GET', '/hosts'],
      ['POST', '/host-tokens'],
    ] as const) {
      const reply = await app.inject({ method, url: `/management/v1${url}` });
      expect(reply.statusCode).toBe(401);
      expect(reply.json()).toEqual({
        code: 'unauthorized',
        message: apiErrors.unauthorized('admin token').message,
        retryable: false,
      });
    }
  });

  it('names the field and the reason of an invalid document', async () => {
    const reply = await call('POST', '/deployments', {
      name: 'bad',
      engine: 'llama',
      model: 'x',
      lifecycle: { activation: 'sometimes' },
      colour: 'red',
    });
    expect(reply.statusCode).toBe(400);
    const body = reply.json() as { code: string; message: string };
    expect(body.code).toBe('invalid_request');
    expect(body.message).toContain('body.engine: ');
    expect(body.message).toContain('body.lifecycle.activation: ');
    expect(body.message).toMatch(/body: .*colour/);
  });

  it('refuses text Postgres cannot keep, naming where it is, and stores nothing', async () => {
    for (const [model, message] of [
      ['a\u0000b', apiErrors.nulInBody('body.model').message],
      ['\ud800', apiErrors.loneSurrogateInBody('body.model').message],
    ] as const) {
      const reply = await app.inject({
        method: 'POST',
        url: '/management/v1/deployments',
        headers: { ...admin, 'content-type': 'application/json' },
        payload: JSON.stringify(doc('unstorable', { model })),
      });
      expect(reply.statusCode).toBe(400);
      expect(reply.json()).toEqual({ code: 'invalid_request', message, retryable: false });
    }
    expect((await call('GET', '/deployments/unstorable')).statusCode).toBe(404);
    // A surrogate pair is one character, kept as sent.
    const paired = await call('POST', '/deployments', doc('emoji-model', { model: 'sim/😀' }));
    expect(paired.statusCode).toBe(201);
    expect((await call('GET', '/deployments/emoji-model')).json().spec.model).toBe('sim/😀');
    const { deployment_id: id } = paired.json().deployment;
    await deleteDeployment(fresh.db, id);
    table.removeDeployment(id);
  });

  it('deploys a document: a new deployment, the same spec unchanged, a changed one a new revision', async () => {
    const created = await call('POST', '/deployments', doc('chat-a'));
    expect(created.statusCode).toBe(201);
    expect(created.json()).toMatchObject({
      outcome: 'created',
      deployment: {
        name: 'chat-a',
        revision: 1,
        state: 'stopped',
        ready_instances: 0,
        desired_instances: 1,
        hosts: [],
        activation: 'on_demand',
        checkpoint: 'measuring',
      },
    });

    const same = await call('POST', '/deployments', doc('chat-a'));
    expect(same.statusCode).toBe(200);
    expect(same.json()).toMatchObject({ outcome: 'unchanged', deployment: { revision: 1 } });

    const revised = await call('POST', '/deployments', doc('chat-a', { lifecycle: { activation: 'explicit' } }));
    expect(revised.json()).toMatchObject({ outcome: 'revised', deployment: { revision: 2, activation: 'explicit' } });
    expect(lifecycle.calls).toEqual([
      'deploy chat-a created 1',
      'deploy chat-a unchanged 1',
      'deploy chat-a revised 2',
    ]);
  });

  it('answers, lists and shows a document with a ranged field as it was read', async () => {
    const created = await call('POST', '/deployments', doc('bounded', { max_concurrent_requests: 8 }));
    expect(created.statusCode).toBe(201);
    expect(created.json().deployment.spec).toMatchObject({ name: 'bounded', max_concurrent_requests: 8 });
    expect((await call('GET', '/deployments/bounded')).json().spec.max_concurrent_requests).toBe(8);
    const listed = await call('GET', '/deployments');
    expect(listed.statusCode).toBe(200);
    expect(listed.json().deployments.map((d: { name: string }) => d.name)).toContain('bounded');
    // Gone again, for the tests that count the deployments (the route's delete goes to a scheduler).
    const { deployment_id: id } = created.json().deployment;
    await deleteDeployment(fresh.db, id);
    table.removeDeployment(id);
  });

  it('lists deployments with their state, ready count and hosts, read by name or ID', async () => {
    const b = (await call('POST', '/deployments', doc('chat-b'))).json() as { deployment: { deployment_id: string } };
    const id = b.deployment.deployment_id;
    await recordCheckpoint(fresh.db, id, 1, { weightBytes: 4 * 2 ** 30, kvBytes: 2 ** 30 });
    table.setInstance({
      deploymentId: id,
      index: 0,
      hostId: 'gpu-box',
      generation: 1,
      observedState: 'parking',
      parkTier: null,
    });
    const list = (await call('GET', '/deployments')).json() as { deployments: Array<Record<string, unknown>> };
    expect(list.deployments.map((d) => [d.name, d.state, d.ready_instances, d.hosts, d.checkpoint])).toEqual([
      ['chat-a', 'stopped', 0, [], 'measuring'],
      ['chat-b', 'parking', 0, ['gpu-box'], 'measured'],
    ]);
    const byName = (await call('GET', '/deployments/chat-b')).json();
    const byId = (await call('GET', `/deployments/${id}`)).json();
    expect(byName).toEqual(byId);
    expect(byName).toMatchObject({
      instances: [{ index: 0, host_id: 'gpu-box', generation: 1, state: 'parking' }],
      spec: doc('chat-b'),
    });

    const missing = await call('GET', '/deployments/nope');
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toEqual({ code: 'not_found', message: 'deployment nope not found', retryable: false });
  });

  it("says a parked instance keeps what its host measured, else the checkpoint's residue, reserved at measurement", async () => {
    const d = (await call('POST', '/deployments', doc('chat-r'))).json() as { deployment: { deployment_id: string } };
    const id = d.deployment.deployment_id;
    await recordCheckpoint(fresh.db, id, 1, { weightBytes: 4 * 2 ** 30, kvBytes: 2 ** 30, residueBytes: 2 ** 31 });
    const parked = {
      deploymentId: id,
      hostId: 'gpu-box',
      generation: 1,
      observedState: 'parked',
      parkTier: 'host_ram',
    } as const;
    table.setInstance({ ...parked, index: 0 });
    table.setInstance({ ...parked, index: 1, residueBytes: 2 ** 29 });
    const body = (await call('GET', '/deployments/chat-r')).json() as { instances: Array<Record<string, unknown>> };
    expect(body.instances.map((i) => [i.index, i.parked_residue_bytes, i.parked_residue_from])).toEqual([
      [0, 2 ** 31, 'reserved'],
      [1, 2 ** 29, 'measured'],
    ]);
  });

  it('sends each command to the scheduler of the host, and answers with its receipt', async () => {
    const a = table.byModel('chat-a')!;
    const b = table.byModel('chat-b')!;
    lifecycle.next = () => ({
      deploymentId: b.id,
      switchId: 'sw-1',
      victims: [{ deploymentId: a.id, instanceIndex: 0, released: releasedLines.parkedHostRam, gpuIndexes: [0] }],
      state: 'ready',
    });
    const start = await call('POST', '/deployments/chat-b/start', { evict: true });
    expect(start.statusCode).toBe(200);
    expect(start.json()).toEqual({
      deployment_id: b.id,
      name: 'chat-b',
      switch_id: 'sw-1',
      victims: [
        {
          deployment_id: a.id,
          name: 'chat-a',
          instance_index: 0,
          released: 'released: parked (host RAM)',
          gpu_indexes: [0],
        },
      ],
      state: 'ready',
    });
    lifecycle.next = undefined;
    for (const command of ['stop', 'park', 'preinitialize'])
      expect((await call('POST', `/deployments/chat-b/${command}`)).statusCode).toBe(200);
    expect(lifecycle.calls).toEqual([
      `gpu-box start [{"deploymentId":"${b.id}","evict":true,"instanceIndex":0}]`,
      `gpu-box stop [{"deploymentId":"${b.id}"}]`,
      `gpu-box park [{"deploymentId":"${b.id}"}]`,
      `gpu-box preinitialize [{"deploymentId":"${b.id}"}]`,
    ]);
  });

  it('takes a deployment of two instances, each on its own host, and sends its commands to both', async () => {
    const beyondHosts = await call('POST', '/deployments', doc('pair', { instances: 2, hosts: ['gpu-box'] }));
    expect([beyondHosts.statusCode, beyondHosts.json()]).toEqual([
      400,
      {
        code: 'invalid_request',
        message:
          'deployment pair: instances: 2 is more than the 1 hosts it may run on (hosts); ' +
          'each instance runs on a host of its own',
        retryable: false,
      },
    ]);
    const outOfRange = await call('POST', '/deployments', doc('pair', { instances: 17 }));
    expect(outOfRange.statusCode).toBe(400);
    expect(outOfRange.json().message).toContain('body.instances: ');

    const deployed = await call('POST', '/deployments', doc('pair', { instances: 2 }));
    expect(deployed.statusCode).toBe(201);
    expect(deployed.json().deployment).toMatchObject({ ready_instances: 0, desired_instances: 2 });
    const pair = table.byModel('pair')!;
    await recordCheckpoint(fresh.db, pair.id, 1, { weightBytes: 4 * 2 ** 30, kvBytes: 2 ** 30 });
    lifecycle.calls.length = 0;
    const a = table.byModel('chat-a')!;
    // The first host's instance is ready already; the second's start parks chat-a there.
    const receipts: CommandReceipt[] = [
      { deploymentId: pair.id, victims: [], state: 'ready' },
      {
        deploymentId: pair.id,
        switchId: 'sw-2',
        victims: [{ deploymentId: a.id, instanceIndex: 0, released: releasedLines.parkedHostRam, gpuIndexes: [0] }],
        state: 'starting',
      },
    ];
    lifecycle.next = () => receipts[lifecycle.calls.length - 1]!;
    const start = await call('POST', '/deployments/pair/start', {});
    expect([start.statusCode, start.json()]).toEqual([
      200,
      {
        deployment_id: pair.id,
        name: 'pair',
        switch_id: 'sw-2',
        victims: [
          {
            deployment_id: a.id,
            name: 'chat-a',
            instance_index: 0,
            released: 'released: parked (host RAM)',
            gpu_indexes: [0],
          },
        ],
        state: 'starting',
      },
    ]);
    lifecycle.next = undefined;
    expect((await call('POST', '/deployments/pair/park')).statusCode).toBe(200);
    expect((await call('DELETE', '/deployments/pair')).statusCode).toBe(200);
    const args = JSON.stringify([{ deploymentId: pair.id }]);
    expect(lifecycle.calls).toEqual([
      // Each host starts an instance of its own.
      `gpu-box start [{"deploymentId":"${pair.id}","evict":false,"instanceIndex":0}]`,
      `gpu-two start [{"deploymentId":"${pair.id}","evict":false,"instanceIndex":1}]`,
      `gpu-box park ${args}`,
      `gpu-two park ${args}`,
      // The other instance stops before the delete removes the catalogue's rows.
      `gpu-two stop ${args}`,
      `gpu-box delete ${args}`,
    ]);
  });

  it('takes away every instance it holds, one beyond a revised count too; starts only as many as it asks for', async () => {
    expect((await call('POST', '/deployments', doc('shrunk'))).statusCode).toBe(201);
    const shrunk = table.byModel('shrunk')!;
    await recordCheckpoint(fresh.db, shrunk.id, 1, { weightBytes: 4 * 2 ** 30, kvBytes: 2 ** 30 });
    // Two instances, from a revision that asked for two.
    for (const [index, hostId] of [
      [0, 'gpu-box'],
      [1, 'gpu-two'],
    ] as const)
      table.setInstance({
        deploymentId: shrunk.id,
        index,
        hostId,
        generation: 1,
        observedState: 'ready',
        parkTier: null,
      });
    lifecycle.calls.length = 0;
    for (const command of ['start', 'stop'])
      expect((await call('POST', `/deployments/shrunk/${command}`, {})).statusCode).toBe(200);
    const args = JSON.stringify([{ deploymentId: shrunk.id }]);
    expect(lifecycle.calls).toEqual([
      `gpu-box start [{"deploymentId":"${shrunk.id}","evict":false,"instanceIndex":0}]`,
      `gpu-box stop ${args}`,
      `gpu-two stop ${args}`,
    ]);
  });

  it('answers a refusal with the catalogue error', async () => {
    const b = table.byModel('chat-b')!;
    lifecycle.next = () => {
      throw new CapyError(apiErrors.insufficientCapacity(b.id, [{ name: 'chat-x', keptBy: 'explicit' }]));
    };
    const reply = await call('POST', '/deployments/chat-b/start', {});
    expect(reply.statusCode).toBe(409);
    expect(reply.json()).toEqual({
      code: 'insufficient_capacity',
      message: `deployment ${b.id} needs memory held by chat-x, which activation: explicit keeps loaded; stop one of them first`,
      retryable: false,
    });
  });

  it('refuses to start a checkpoint still awaiting measurement, without asking a scheduler', async () => {
    const reply = await call('POST', '/deployments/chat-a/start', { evict: true });
    expect(reply.statusCode).toBe(409);
    expect(reply.json()).toEqual({
      code: 'checkpoint_unmeasured',
      message:
        'the checkpoint of deployment chat-a is still being measured; start it again once it is measured, or use --wait',
      retryable: true,
    });
    expect(lifecycle.calls).toEqual([]);
  });

  it('lists hosts, drains one and ends its drain, and issues host tokens', async () => {
    const hosts = (await call('GET', '/hosts')).json();
    expect(hosts).toMatchObject({
      hosts: [
        {
          host_id: 'gpu-box',
          gpus: [{ index: 0, memory_bytes: 2 ** 34, memory_kind: 'discrete', used_bytes: 0 }],
          host_ram_bytes: 2 ** 36,
          draining: false,
        },
      ],
    });
    const drain = await call('POST', '/hosts/gpu-box/drain');
    expect(drain.json()).toEqual({ host_id: 'gpu-box', draining: true, released: [] });
    expect(lifecycle.calls).toEqual(['gpu-box drainHost']);
    expect((await call('POST', '/hosts/nowhere/drain')).statusCode).toBe(404);
    const undrain = await call('POST', '/hosts/gpu-box/undrain');
    expect(undrain.json()).toEqual({ host_id: 'gpu-box', draining: false });
    expect(lifecycle.calls).toEqual(['gpu-box drainHost', 'gpu-box undrainHost']);
    expect((await call('POST', '/hosts/nowhere/undrain')).json()).toEqual({
      code: 'not_found',
      message: 'host nowhere not found',
      retryable: false,
    });

    const issued = await call('POST', '/host-tokens');
    expect(issued.statusCode).toBe(201);
    const { token } = issued.json() as { token: string };
    expect(token).toMatch(/^capy_host_/);
    expect(await registerHost(fresh.db, token, { id: 'gpu-two', gpus: [], hostRamBytes: null, settings: {} })).toBe(
      'registered',
    );
    expect(await findHost(fresh.db, 'gpu-two')).toBeDefined();
  });

  it('shows a switch: running, then how it ended, its target and victims by name and the error its target got', async () => {
    const a = table.byModel('chat-a')!;
    const b = table.byModel('chat-b')!;
    const [running, ended, failed] = [
      '0b6c8a3e-6f0e-4c55-9d1c-4d2f0f7f1a01',
      '0b6c8a3e-6f0e-4c55-9d1c-4d2f0f7f1a02',
      '0b6c8a3e-6f0e-4c55-9d1c-4d2f0f7f1a03',
    ];
    const instance = { deploymentId: b.id, instanceIndex: 0, generation: 1 };
    lifecycle.switches.set(running, null);
    lifecycle.switches.set(ended, {
      switchId: ended,
      outcome: 'released',
      victims: [
        {
          deploymentId: a.id,
          instanceIndex: 0,
          released: releasedLines.parkedHostRam,
          state: 'parked',
          tier: 'host_ram',
          gpuIndexes: [0],
        },
      ],
      target: { instance, state: 'ready', tier: null },
    });
    const error = apiErrors.startFailed(b.id, 'the engine exited');
    lifecycle.switches.set(failed, {
      switchId: failed,
      outcome: 'start_failed',
      victims: [],
      target: { instance, state: 'stopped', tier: null },
      error,
    });

    expect((await call('GET', `/switches/${running}`)).json()).toEqual({
      switch_id: running,
      outcome: 'running',
      victims: [],
    });
    expect((await call('GET', `/switches/${ended}`)).json()).toEqual({
      switch_id: ended,
      outcome: 'released',
      target: { deployment_id: b.id, name: 'chat-b', state: 'ready' },
      victims: [
        {
          deployment_id: a.id,
          name: 'chat-a',
          instance_index: 0,
          released: 'released: parked (host RAM)',
          gpu_indexes: [0],
        },
      ],
    });
    expect((await call('GET', `/switches/${failed}`)).json()).toEqual({
      switch_id: failed,
      outcome: 'start_failed',
      target: { deployment_id: b.id, name: 'chat-b', state: 'stopped' },
      victims: [],
      error: { code: error.code, message: error.message, retryable: true },
    });
    const missing = '0b6c8a3e-6f0e-4c55-9d1c-4d2f0f7f1a04';
    expect((await call('GET', `/switches/${missing}`)).json()).toEqual({
      code: 'not_found',
      message: `switch ${missing} not found`,
      retryable: false,
    });
    expect((await call('GET', '/switches/not-a-switch')).statusCode).toBe(400);
  });

  it('deletes a deployment through its host’s scheduler', async () => {
    const a = table.byModel('chat-a')!;
    lifecycle.next = () => ({ deploymentId: a.id, victims: [], state: 'stopped' });
    const reply = await call('DELETE', '/deployments/chat-a');
    expect(reply.json()).toEqual({ deployment_id: a.id, name: 'chat-a', victims: [], state: 'stopped' });
    expect(lifecycle.calls).toEqual([`gpu-box delete [{"deploymentId":"${a.id}"}]`]);
  });

  it('refuses a deployment needing more GPUs than any host it may run on has, at deploy and at its start', async () => {
    const wide = doc('wide', { extra_args: ['--tensor-parallel-size', '4'] });
    const refused = await call('POST', '/deployments', wide);
    expect(refused.statusCode).toBe(409);
    expect(refused.json()).toEqual({
      code: 'insufficient_capacity',
      message: 'deployment wide needs 4 GPUs; the largest host it may run on, gpu-box, has 1',
      retryable: false,
    });
    expect((await call('GET', '/deployments/wide')).statusCode).toBe(404);
    expect(lifecycle.calls).toEqual([]);

    // Deployed for a host not registered yet; once it registers with two GPUs, a start is refused too.
    const later = await call('POST', '/deployments', { ...wide, hosts: ['gpu-pair'] });
    expect(later.statusCode).toBe(201);
    const id = later.json().deployment.deployment_id as string;
    await recordCheckpoint(fresh.db, id, 1, { weightBytes: 40 * 2 ** 30, kvBytes: 0 });
    const gpu = (index: number) => ({
      index,
      name: `sim-${index}`,
      memoryBytes: 2 ** 36,
      memoryKind: 'discrete' as const,
    });
    await registerHost(fresh.db, await issueHostToken(fresh.db), {
      id: 'gpu-pair',
      gpus: [gpu(0), gpu(1)],
      hostRamBytes: null,
      settings: {},
    });
    lifecycle.calls.length = 0;
    const start = await call('POST', '/deployments/wide/start', {});
    expect(start.statusCode).toBe(409);
    expect(start.json()).toEqual({
      code: 'insufficient_capacity',
      message: `deployment ${id} needs 4 GPUs; the largest host it may run on, gpu-pair, has 2`,
      retryable: false,
    });
    expect(lifecycle.calls).toEqual([]);
    await deleteDeployment(fresh.db, id);
    table.removeDeployment(id);
  });
});
