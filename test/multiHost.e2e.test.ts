/**
 * A server and two host agents, each its own process, with one simulated 8 GiB card each: a 5 GiB
 * model fills a host. Where the server places models (every host is used before anything is
 * switched out, and no host where models kept loaded hold the memory), what a deploy refuses on the
 * hosts a deployment may run on (the second card has unified memory), and a drain that moves a model
 * to the other host (it serves from there, and keeps doing so after an undrain and a server restart);
 * and requests that wait for a slot of a model ready on one host, served there with no switch on the
 * other; a model of two instances, one on each host, its requests spread between them by load and
 * served by one while the other parks. Hosts that leave and join: multiHost.leaveAndJoin.e2e.test.ts.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { cannotParkReasons, hostBackedRefusals } from '../engines/rules.js';
import { apiErrors } from '../domain/catalogue.js';
import { Cluster, type ClusterHost, gpuUsed } from './support/cluster.js';
import { SIM_MODEL_BYTES, simDeployment } from './support/lifecycle.js';
import { until } from './support/until.js';

/** The deployment's state and the hosts it is on, as `status deployment --json` shows them. */
async function whereIs(cluster: Cluster, name: string): Promise<{ state: string; hosts: string[] }> {
  const { state, hosts } = await cluster.status(name);
  return { state, hosts };
}

describe('placement over two empty hosts', () => {
  let cluster: Cluster;

  beforeAll(async () => {
    cluster = await Cluster.start({ hosts: [{ gpuMemory: '8GiB' }, { gpuMemory: '8GiB', memoryKind: 'unified' }] });
    await Promise.all(['m1', 'm2', 'm3'].map((name) => cluster.deploy(simDeployment(name))));
  }, 240_000);

  it('a deploy refuses a residency that a host it may run on, or its engine, cannot give; named onto discrete cards only, it is taken', async () => {
    const [discrete, unified] = cluster.hosts as [ClusterHost, ClusterHost];
    const file = join(cluster.dir, 'hb.yaml');
    writeFileSync(file, simDeployment('hb', 'vllm', [], 'residency: host_backed\n'));
    const refusals = [
      [
        'name: gpt\nengine: vllm\nmodel: openai/gpt-oss-20b\nresidency: deep\n',
        apiErrors.capabilityMissingDeepPark('gpt', cannotParkReasons.gptOss),
      ],
      [
        'name: tf\nengine: tensorfold\nmodel: sim/tf\nresidency: deep\n',
        apiErrors.capabilityMissingDeepPark('tf', cannotParkReasons.engine('tensorfold')),
      ],
      [
        'name: eagle\nengine: sglang\nmodel: sim/eagle\nresidency: host_backed\nextra_args: ["--speculative-algorithm", "EAGLE"]\n',
        apiErrors.invalidRequest(hostBackedRefusals.keepsWeights('eagle')),
      ],
    ] as const;
    const deploy = (text: string) => cluster.api('POST', '/management/v1/deployments', parseYaml(text));
    const [cli, ...api] = await Promise.all([
      cluster.capyctl(['deploy', 'model', '--file', file]),
      ...refusals.map(([text]) => deploy(text)),
    ]);
    const unifiedRefusal = apiErrors.invalidRequest(hostBackedRefusals.unifiedMemoryOn('hb', unified.hostId));
    expect(cli).toEqual({
      code: 1,
      stdout: '',
      stderr: `capyctl: ${unifiedRefusal.code}: ${unifiedRefusal.message}\n`,
    });
    expect(api.map((r) => [r.status, r.body])).toEqual(
      refusals.map(([, e]) => [e.status, { code: e.code, message: e.message, retryable: e.retryable }]),
    );

    const pinned = await deploy(
      simDeployment('hb', 'vllm', [], `residency: host_backed\nhosts: [${discrete.hostId}]\n`),
    );
    expect(pinned.status).toBe(201);
  }, 60_000);
  afterAll(async () => {
    await cluster?.close();
  });

  it('requests for two models start one on each host: both answer, and both stay ready at once', async () => {
    const replies = await Promise.all([cluster.chat('m1'), cluster.chat('m2')]);
    expect(replies.map((r) => r.status)).toEqual([200, 200]);

    const [m1, m2] = [await whereIs(cluster, 'm1'), await whereIs(cluster, 'm2')];
    expect(m1.state).toBe('ready');
    expect(m2.state).toBe('ready');
    expect(m1.hosts).toHaveLength(1);
    expect(m2.hosts).toHaveLength(1);
    expect(new Set([...m1.hosts, ...m2.hosts]).size).toBe(2);
    // No switch: each card holds its own model.
    for (const host of cluster.hosts) expect(await gpuUsed(host)).toBe(SIM_MODEL_BYTES);
    // And the operator's list says the same.
    const list = await cluster.capyctlOk(['list', 'deployments']);
    expect(list).toMatch(new RegExp(`^m1 +ready +1/1 +1 +${m1.hosts[0]}$`, 'm'));
    expect(list).toMatch(new RegExp(`^m2 +ready +1/1 +1 +${m2.hosts[0]}$`, 'm'));
  }, 120_000);

  it('start without --evict goes to the host where the model fits, at once', async () => {
    await cluster.capyctlOk(['stop', 'deployment', 'm1']);
    await cluster.capyctlOk(['stop', 'deployment', 'm2']);
    expect((await cluster.chat('m3')).status).toBe(200);
    const m3 = await whereIs(cluster, 'm3');

    const began = Date.now();
    const out = await cluster.capyctlOk(['start', 'deployment', 'm1', '--wait']);
    // A start is seconds on the simulator; before, it waited for memory on m3's host, with the other empty, until m3 left.
    expect(Date.now() - began).toBeLessThan(90_000);
    expect(out).toContain('m1: ready');
    expect(out).not.toContain('victim');

    const m1 = await whereIs(cluster, 'm1');
    expect(m1.state).toBe('ready');
    expect(m1.hosts).toHaveLength(1);
    expect(m1.hosts).not.toEqual(m3.hosts);
    expect((await whereIs(cluster, 'm3')).state).toBe('ready');
    expect((await cluster.chat('m3')).status).toBe(200);
    expect((await cluster.chat('m1')).status).toBe(200);
  }, 180_000);

  it('requests whose memory an explicit model holds on one host go to the other; refused for capacity only when no host can serve them', async () => {
    const [host1, host2] = cluster.hosts as [ClusterHost, ClusterHost];
    const onHost = (host: ClusterHost, name: string, more = '', args: string[] = []) =>
      simDeployment(name, 'vllm', args, `hosts: [${host.hostId}]\n${more}`);
    const [explicit, slow] = ['lifecycle: { activation: explicit }', ['--sim-load-ms', '3000']];
    await Promise.all([
      cluster.deploy(onHost(host1, 'pin', '', slow)),
      cluster.deploy(simDeployment('m4')),
      cluster.deploy(simDeployment('m5')),
    ]);
    // pin starts on host-1 for 3 s; m4's request goes there (the hosts are alike, host-1 has the lower
    // ID) and waits behind the start, while pin is deployed again as explicit.
    expect(await cluster.capyctlOk(['start', 'deployment', 'pin', '--evict'])).toMatch(/^pin: starting/);
    const m4 = Promise.race([
      cluster.chat('m4'),
      sleep(60_000).then(() => ({ status: 'no answer within 60 s', body: undefined })),
    ]);
    const m4Id = (await cluster.status('m4')).deployment_id;
    await until('the request for m4 to wait', async () => {
      const load = await cluster.api('GET', `/management/v1/metrics/load?deployment=${m4Id}`);
      return load.body.deployments?.[0]?.router.waiting === 1 ? true : undefined;
    });
    // Deployed again as `capyctl deploy` does: the new revision holds at once, its measurement runs behind.
    expect(
      (await cluster.api('POST', '/management/v1/deployments', parseYaml(onHost(host1, 'pin', explicit, slow)))).status,
    ).toBe(200);
    // Still on its way up (parking host-1's model first, or starting): explicit before it is ready.
    expect((await cluster.status('pin')).state).not.toBe('ready');
    const served = await m4;
    expect(served.status, JSON.stringify(served.body)).toBe(200);
    expect(await whereIs(cluster, 'm4')).toEqual({ state: 'ready', hosts: [host2.hostId] });
    expect(await whereIs(cluster, 'pin')).toEqual({ state: 'ready', hosts: [host1.hostId] });

    // Explicit models on both hosts: no host can serve m5, and its request is refused at once.
    await cluster.deploy(onHost(host2, 'pin2', explicit));
    await cluster.capyctlOk(['start', 'deployment', 'pin2', '--evict', '--wait']);
    const sentAt = Date.now();
    const refused = await cluster.chat('m5');
    const m5Id = (await cluster.status('m5')).deployment_id;
    expect({ status: refused.status, body: refused.body }).toEqual({
      status: 409,
      body: {
        code: 'insufficient_capacity',
        message: apiErrors.insufficientCapacity(m5Id, [{ name: 'pin', keptBy: 'explicit' }]).message,
        retryable: false,
      },
    });
    expect(Date.now() - sentAt).toBeLessThan(10_000);
  }, 180_000);
});

describe('a drain that moves a model to the other host', () => {
  let cluster: Cluster;
  let host1: ClusterHost;
  let host2: ClusterHost;

  beforeAll(async () => {
    cluster = await Cluster.start({ hosts: [{ gpuMemory: '8GiB' }] });
    host1 = cluster.hosts[0]!;
    await cluster.deploy(simDeployment('d1'));
    // d1 on host-1, then its engine goes with its agent's restart and comes back: generation 2.
    expect((await cluster.chat('d1')).status).toBe(200);
    await cluster.restartHost(host1);
    expect((await cluster.chat('d1')).status).toBe(200);
    const { instances } = await cluster.status('d1');
    expect(instances).toEqual([{ index: 0, host_id: host1.hostId, generation: 2, state: 'ready' }]);
    host2 = await cluster.addHost({ gpuMemory: '8GiB' });
  }, 240_000);
  afterAll(async () => {
    await cluster?.close();
  });

  it('serves from the other host after the drain, and the catalogue says so', async () => {
    await cluster.capyctlOk(['drain', 'host', host1.hostId]);
    expect(await whereIs(cluster, 'd1')).toEqual({ state: 'stopped', hosts: [] });

    const reply = await cluster.chat('d1');
    expect(reply.status, JSON.stringify(reply.body)).toBe(200);
    expect(await whereIs(cluster, 'd1')).toEqual({ state: 'ready', hosts: [host2.hostId] });
    expect((await cluster.chat('d1')).status).toBe(200);
    expect(await gpuUsed(host1)).toBe(0);
    expect(await gpuUsed(host2)).toBe(SIM_MODEL_BYTES);
  }, 120_000);

  it('stays on the other host after the undrain', async () => {
    await cluster.capyctlOk(['undrain', 'host', host1.hostId]);
    expect((await cluster.chat('d1')).status).toBe(200);
    expect(await whereIs(cluster, 'd1')).toEqual({ state: 'ready', hosts: [host2.hostId] });
    expect(await gpuUsed(host1)).toBe(0);
  }, 60_000);

  it('a restarted server serves it where it is, without starting a second engine', async () => {
    await cluster.server.stop();
    await cluster.startServer();
    expect(await whereIs(cluster, 'd1')).toEqual({ state: 'ready', hosts: [host2.hostId] });
    const reply = await cluster.chat('d1');
    expect(reply.status, JSON.stringify(reply.body)).toBe(200);
    expect(await whereIs(cluster, 'd1')).toEqual({ state: 'ready', hosts: [host2.hostId] });
    expect(await gpuUsed(host1)).toBe(0);
    expect(await gpuUsed(host2)).toBe(SIM_MODEL_BYTES);
  }, 120_000);
});

describe('waiting requests for a model ready on one host', () => {
  let cluster: Cluster;
  let host1: ClusterHost;
  let host2: ClusterHost;

  beforeAll(async () => {
    cluster = await Cluster.start({ hosts: [{ gpuMemory: '8GiB' }, { gpuMemory: '8GiB' }] });
    [host1, host2] = cluster.hosts as [ClusterHost, ClusterHost];
    // 20 tokens at 10 a second: each answer runs 2 s, so 40 at once keep 8 waiting for one of the 32 slots.
    await Promise.all([
      cluster.deploy(simDeployment('busy', 'vllm', ['--sim-tokens-per-s', '10'])),
      cluster.deploy(simDeployment('other')),
    ]);
    expect((await cluster.chat('busy')).status).toBe(200);
    expect((await cluster.chat('other')).status).toBe(200);
  }, 240_000);
  afterAll(async () => {
    await cluster?.close();
  });

  it('are served where it is ready, with no switch on the other host', async () => {
    const [busyBefore, otherBefore] = [await cluster.status('busy'), await cluster.status('other')];
    expect(busyBefore.instances).toEqual([{ index: 0, host_id: host1.hostId, generation: 1, state: 'ready' }]);
    expect(otherBefore.instances).toEqual([{ index: 0, host_id: host2.hostId, generation: 1, state: 'ready' }]);

    const replies = Promise.all(Array.from({ length: 40 }, () => cluster.chat('busy', 20)));
    const waiting = await until('requests for busy to wait for a slot', async () => {
      const load = await cluster.api('GET', `/management/v1/metrics/load?deployment=${busyBefore.deployment_id}`);
      const router = load.body.deployments?.[0]?.router;
      return router?.waiting > 0 ? router : undefined;
    });
    expect(waiting.in_flight).toBe(32);
    expect((await replies).map((r) => r.status)).toEqual(Array(40).fill(200));

    // Where they were: busy's one instance on host-1, other untouched on host-2, each card holding its own model.
    expect((await cluster.status('busy')).instances).toEqual(busyBefore.instances);
    expect((await cluster.status('other')).instances).toEqual(otherBefore.instances);
    expect(await gpuUsed(host1)).toBe(SIM_MODEL_BYTES);
    expect(await gpuUsed(host2)).toBe(SIM_MODEL_BYTES);
  }, 120_000);

  it('a model of two instances starts one on each host, and its requests go to the less loaded one', async () => {
    await cluster.deploy(simDeployment('pair', 'vllm', ['--sim-tokens-per-s', '10'], 'instances: 2\n'));
    await cluster.capyctlOk(['start', 'deployment', 'pair', '--evict', '--wait']);
    const pair = await until('both instances of pair to be ready', async () => {
      const status = await cluster.status('pair');
      return status.ready_instances === 2 ? status : undefined;
    });
    expect([...pair.hosts].sort()).toEqual([host1.hostId, host2.hostId].sort());
    expect(await cluster.capyctlOk(['list', 'deployments'])).toMatch(
      new RegExp(`^pair +ready +2/2 +1 +${pair.hosts.join(',')}$`, 'm'),
    );

    // Sixteen answers of 2 s at once: eight on each instance.
    const replies = Promise.all(Array.from({ length: 16 }, () => cluster.chat('pair', 20)));
    const spread = await until('16 requests to run on pair', async () => {
      const load = await cluster.api('GET', `/management/v1/metrics/load?deployment=${pair.deployment_id}`);
      const figures = load.body.deployments?.[0];
      return figures?.router.in_flight === 16 ? figures.instances.map((i: any) => i.router_in_flight) : undefined;
    });
    expect(spread).toEqual([8, 8]);
    expect((await replies).map((r) => r.status)).toEqual(Array(16).fill(200));
  }, 120_000);

  it('while one instance parks for another model, the other serves its requests: no window, no 503', async () => {
    const pairBefore = await cluster.status('pair');
    // busy is parked on host-1, where an instance of pair holds the card: its request parks that one.
    expect((await cluster.status('busy')).instances).toEqual([
      {
        index: 0,
        host_id: host1.hostId,
        generation: 1,
        state: 'parked',
        park_tier: 'host_ram',
        parked_residue_bytes: 0,
        parked_residue_from: 'measured',
      },
    ]);
    const busy = cluster.chat('busy');
    const forPair: Array<Promise<{ status: number }>> = [];
    let answered = false;
    void busy.finally(() => (answered = true));
    while (!answered) {
      forPair.push(cluster.chat('pair'));
      await sleep(100);
    }
    expect((await busy).status).toBe(200);
    expect((await Promise.all(forPair)).map((r) => r.status)).toEqual(Array(forPair.length).fill(200));
    // Its host's admission window is 2 s, and pair took requests there until the switch closed it; a
    // victim ready elsewhere has none.
    const { switches } = (await cluster.api('GET', '/management/v1/switches')).body;
    const parkedPair = switches.find((s: any) => s.target?.name === 'busy');
    expect(parkedPair).toMatchObject({ host_id: host1.hostId, summary: expect.stringMatching(/park pair/) });
    const windowMs = parkedPair.phases.find((p: any) => p.phase === 'window')?.ms ?? 0;
    expect(windowMs).toBeLessThan(500);

    const onHost1 = pairBefore.instances.find((i: any) => i.host_id === host1.hostId);
    const onHost2 = pairBefore.instances.find((i: any) => i.host_id === host2.hostId);
    expect((await cluster.status('pair')).instances).toEqual(
      [
        {
          ...onHost1,
          state: 'parked',
          park_tier: 'host_ram',
          parked_residue_bytes: 0,
          parked_residue_from: 'measured',
        },
        { ...onHost2, state: 'ready' },
      ].sort((a, b) => a.index - b.index),
    );
  }, 120_000);
});
