/**
 * A server and two host agents, each its own process, with one simulated 8 GiB card each: a 5 GiB
 * model fills a host. Where the server places models (every host is used before anything is
 * switched out, and no host where models kept loaded hold the memory), what a deploy refuses on the
 * hosts a deployment may run on (the second card has unified memory), and a drain that moves a model
 * to the other host (it serves from there, and keeps doing so after an undrain and a server restart).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { cannotParkReasons, hostBackedRefusals } from '../activities/engines/rules.js';
import { apiErrors } from '../domain/catalogue.js';
import { gpuUsage } from '../simulator/gpuLedger.js';
import { Cluster, type ClusterHost } from './support/cluster.js';
import { simDeployment } from './support/lifecycle.js';
import { until } from './support/until.js';

/** What one simulator model of `simDeployment` holds on its GPU: 4 GiB of weights and 1 GiB of KV cache. */
const MODEL_BYTES = 5 * 2 ** 30;

/** What the host's simulated card holds now, as `nvidia-smi` would say. */
const gpuUsed = async (host: ClusterHost) => (await gpuUsage(join(host.dataDir, 'sim-gpus'), 0)).usedBytes;

/** The deployment's state and the hosts it is on, as `status deployment --json` shows them. */
async function whereIs(cluster: Cluster, name: string): Promise<{ state: string; hosts: string[] }> {
  const { state, hosts } = await cluster.status(name);
  return { state, hosts };
}

/** `capyctl <args>`, which must succeed. */
async function ok(cluster: Cluster, args: string[]): Promise<string> {
  const r = await cluster.capyctl(args);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout;
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
      ['name: gpt\nengine: vllm\nmodel: openai/gpt-oss-20b\nresidency: deep\n', apiErrors.capabilityMissingDeepPark('gpt', cannotParkReasons.gptOss)],
      ['name: tf\nengine: tensorfold\nmodel: sim/tf\nresidency: deep\n', apiErrors.capabilityMissingDeepPark('tf', cannotParkReasons.engine('tensorfold'))],
      ['name: eagle\nengine: sglang\nmodel: sim/eagle\nresidency: host_backed\nextra_args: ["--speculative-algorithm", "EAGLE"]\n', apiErrors.invalidRequest(hostBackedRefusals.keepsWeights('eagle'))],
    ] as const;
    const deploy = (text: string) => cluster.api('POST', '/management/v1/deployments', parseYaml(text));
    const [cli, ...api] = await Promise.all([cluster.capyctl(['deploy', 'model', '--file', file]), ...refusals.map(([text]) => deploy(text))]);
    const unifiedRefusal = apiErrors.invalidRequest(hostBackedRefusals.unifiedMemoryOn('hb', unified.hostId));
    expect(cli).toEqual({ code: 1, stdout: '', stderr: `capyctl: ${unifiedRefusal.code}: ${unifiedRefusal.message}\n` });
    expect(api.map((r) => [r.status, r.body])).toEqual(refusals.map(([, e]) => [e.status, { code: e.code, message: e.message, retryable: e.retryable }]));

    const pinned = await deploy(simDeployment('hb', 'vllm', [], `residency: host_backed\nhosts: [${discrete.hostId}]\n`));
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
    for (const host of cluster.hosts) expect(await gpuUsed(host)).toBe(MODEL_BYTES);
    // And the operator's list says the same.
    const list = await ok(cluster, ['list', 'deployments']);
    expect(list).toMatch(new RegExp(`^m1 +ready +1/1 +1 +${m1.hosts[0]}$`, 'm'));
    expect(list).toMatch(new RegExp(`^m2 +ready +1/1 +1 +${m2.hosts[0]}$`, 'm'));
  }, 120_000);

  it('start without --evict goes to the host where the model fits, at once', async () => {
    await ok(cluster, ['stop', 'deployment', 'm1']);
    await ok(cluster, ['stop', 'deployment', 'm2']);
    expect((await cluster.chat('m3')).status).toBe(200);
    const m3 = await whereIs(cluster, 'm3');

    const began = Date.now();
    const out = await ok(cluster, ['start', 'deployment', 'm1', '--wait']);
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
    const onHost = (host: ClusterHost, name: string, more = '', args: string[] = []) => simDeployment(name, 'vllm', args, `hosts: [${host.hostId}]\n${more}`);
    const [explicit, slow] = ['lifecycle: { activation: explicit }', ['--sim-load-ms', '3000']];
    await Promise.all([cluster.deploy(onHost(host1, 'pin', '', slow)), cluster.deploy(simDeployment('m4')), cluster.deploy(simDeployment('m5'))]);
    // pin starts on host-1 for 3 s; m4's request goes there (the hosts are alike, host-1 has the lower
    // ID) and waits behind the start, while pin is deployed again as explicit.
    expect(await ok(cluster, ['start', 'deployment', 'pin', '--evict'])).toMatch(/^pin: starting/);
    const m4 = Promise.race([cluster.chat('m4'), sleep(60_000).then(() => ({ status: 'no answer within 60 s', body: undefined }))]);
    const m4Id = (await cluster.status('m4')).deployment_id;
    await until('the request for m4 to wait', async () => {
      const load = await cluster.api('GET', `/management/v1/metrics/load?deployment=${m4Id}`);
      return load.body.deployments?.[0]?.router.waiting === 1 ? true : undefined;
    });
    // Deployed again as `capyctl deploy` does: the new revision holds at once, its measurement runs behind.
    expect((await cluster.api('POST', '/management/v1/deployments', parseYaml(onHost(host1, 'pin', explicit, slow)))).status).toBe(200);
    // Still on its way up (parking host-1's model first, or starting): explicit before it is ready.
    expect((await cluster.status('pin')).state).not.toBe('ready');
    const served = await m4;
    expect(served.status, JSON.stringify(served.body)).toBe(200);
    expect(await whereIs(cluster, 'm4')).toEqual({ state: 'ready', hosts: [host2.hostId] });
    expect(await whereIs(cluster, 'pin')).toEqual({ state: 'ready', hosts: [host1.hostId] });

    // Explicit models on both hosts: no host can serve m5, and its request is refused at once.
    await cluster.deploy(onHost(host2, 'pin2', explicit));
    await ok(cluster, ['start', 'deployment', 'pin2', '--evict', '--wait']);
    const sentAt = Date.now();
    const refused = await cluster.chat('m5');
    const m5Id = (await cluster.status('m5')).deployment_id;
    expect({ status: refused.status, body: refused.body }).toEqual({
      status: 409,
      body: { code: 'insufficient_capacity', message: apiErrors.insufficientCapacity(m5Id, [{ name: 'pin', keptBy: 'explicit' }]).message, retryable: false },
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
    await ok(cluster, ['drain', 'host', host1.hostId]);
    expect(await whereIs(cluster, 'd1')).toEqual({ state: 'stopped', hosts: [] });

    const reply = await cluster.chat('d1');
    expect(reply.status, JSON.stringify(reply.body)).toBe(200);
    expect(await whereIs(cluster, 'd1')).toEqual({ state: 'ready', hosts: [host2.hostId] });
    expect((await cluster.chat('d1')).status).toBe(200);
    expect(await gpuUsed(host1)).toBe(0);
    expect(await gpuUsed(host2)).toBe(MODEL_BYTES);
  }, 120_000);

  it('stays on the other host after the undrain', async () => {
    await ok(cluster, ['undrain', 'host', host1.hostId]);
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
    expect(await gpuUsed(host2)).toBe(MODEL_BYTES);
  }, 120_000);
});

/** What a user reads of the deployment's router in `GET /management/v1/metrics/load`. */
async function routerOf(cluster: Cluster, deploymentId: string): Promise<{ in_flight: number; waiting: number; waiting_limit: number }> {
  const load = await cluster.api('GET', `/management/v1/metrics/load?deployment=${deploymentId}`);
  expect(load.status).toBe(200);
  return load.body.deployments[0].router;
}

/** A chat completion and how long it took to be answered. */
async function timedChat(cluster: Cluster, model: string): Promise<{ status: number; body: unknown; retryAfter: unknown; ms: number }> {
  const sentAt = Date.now();
  const reply = await cluster.chat(model);
  return { status: reply.status, body: reply.body, retryAfter: reply.headers['retry-after'], ms: Date.now() - sentAt };
}

/** The error body a client reads for a catalogue error. */
const bodyOf = (e: { code: string; message: string; retryable: boolean }) => ({ code: e.code, message: e.message, retryable: e.retryable });

describe('waiting requests for a model ready on one host', () => {
  let cluster: Cluster;
  let host1: ClusterHost;
  let host2: ClusterHost;

  beforeAll(async () => {
    cluster = await Cluster.start({ hosts: [{ gpuMemory: '8GiB' }, { gpuMemory: '8GiB' }] });
    [host1, host2] = cluster.hosts as [ClusterHost, ClusterHost];
    // 20 tokens at 10 a second: each answer runs 2 s, so 40 at once keep 8 waiting for one of the 32 slots.
    await Promise.all([cluster.deploy(simDeployment('busy', 'vllm', ['--sim-tokens-per-s', '10'])), cluster.deploy(simDeployment('other'))]);
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
      const router = await routerOf(cluster, busyBefore.deployment_id);
      return router.waiting > 0 ? router : undefined;
    });
    expect(waiting.in_flight).toBe(32);
    expect((await replies).map((r) => r.status)).toEqual(Array(40).fill(200));

    // Where they were: busy's one instance on host-1, other untouched on host-2, each card holding its own model.
    expect((await cluster.status('busy')).instances).toEqual(busyBefore.instances);
    expect((await cluster.status('other')).instances).toEqual(otherBefore.instances);
    expect(await gpuUsed(host1)).toBe(MODEL_BYTES);
    expect(await gpuUsed(host2)).toBe(MODEL_BYTES);
  }, 120_000);
});

describe('the queue limits are the tightest of the hosts that serve', () => {
  let cluster: Cluster;
  let roomy: ClusterHost;
  let tight: ClusterHost;
  const ids: Record<string, string> = {};
  /** One waiting request per model and a 2 s request deadline, against the defaults' 64 and 600 s. */
  const TIGHT = { gpuMemory: '8GiB', yaml: 'resource_policy: { queue: { max_pending_per_deployment: 1, request_deadline: 2s, admission_window: 1s } }' };
  /** Each model takes 6 s to start: a request for it waits past the tight deadline. */
  const SLOW_START = ['--sim-load-ms', '6000'];

  beforeAll(async () => {
    cluster = await Cluster.start({ hosts: [{ gpuMemory: '24GiB' }], serverYaml: 'hosts: { down_after: 3s }' });
    roomy = cluster.hosts[0]!;
    // All on the roomy host, which sets the defaults: only the limits of the other change.
    for (const name of ['s1', 's2', 's3']) {
      ids[name] = (await cluster.deploy(simDeployment(name, 'vllm', SLOW_START, `hosts: [${roomy.hostId}]\n`))).deployment_id;
    }
  }, 240_000);
  afterAll(async () => {
    await cluster?.close();
  });

  it('a host that joins with tighter limits makes them the server’s: a second waiting request is refused, the first is refused at the 2 s deadline', async () => {
    expect((await routerOf(cluster, ids.s1!)).waiting_limit).toBe(64);
    tight = await cluster.addHost(TIGHT);
    expect((await routerOf(cluster, ids.s1!)).waiting_limit).toBe(1);

    const replies = (await Promise.all([timedChat(cluster, 's1'), timedChat(cluster, 's1')])).sort((a, b) => a.status - b.status);
    expect(replies.map(({ status, body, retryAfter }) => ({ status, body, retryAfter }))).toEqual([
      { status: 429, body: bodyOf(apiErrors.waitingLimit(ids.s1!)), retryAfter: '1' },
      { status: 503, body: bodyOf(apiErrors.queueDeadline(ids.s1!)), retryAfter: undefined },
    ]);
    // The deadline, not the start: that takes 6 s.
    expect(replies[1]!.ms).toBeGreaterThanOrEqual(2_000);
    expect(replies[1]!.ms).toBeLessThan(5_000);
  }, 60_000);

  it('a host that stops no longer sets them: two requests wait past its deadline and are served', async () => {
    expect(await tight.process.stop()).toBe(0);
    expect((await routerOf(cluster, ids.s2!)).waiting_limit).toBe(64);
    const replies = await Promise.all([timedChat(cluster, 's2'), timedChat(cluster, 's2')]);
    expect(replies.map((r) => r.status)).toEqual([200, 200]);
    for (const r of replies) expect(r.ms).toBeGreaterThan(2_000);
  }, 60_000);

  it('registered again it sets them again; killed, it stops setting them once it is found down', async () => {
    await cluster.restartHost(tight);
    expect((await routerOf(cluster, ids.s3!)).waiting_limit).toBe(1);

    tight.process.child.kill('SIGKILL');
    // The 3 s bound and the server's check once a second, on a loaded machine.
    await until('the killed host to stop setting the limit', async () => ((await routerOf(cluster, ids.s3!)).waiting_limit === 64 ? true : undefined), 20_000);
    expect(await ok(cluster, ['list', 'hosts'])).toMatch(new RegExp(`^${tight.hostId} .* down `, 'm'));
    const replies = await Promise.all([timedChat(cluster, 's3'), timedChat(cluster, 's3')]);
    expect(replies.map((r) => r.status)).toEqual([200, 200]);
    for (const r of replies) expect(r.ms).toBeGreaterThan(2_000);
  }, 90_000);
});

describe('a host that leaves and comes back', () => {
  let cluster: Cluster;
  let big: ClusterHost;
  let small: ClusterHost;
  /** `small`'s model: no test moves it, so its instance stays as it was started. */
  let stayed: unknown;

  const listed = (list: string, name: string, state: string, ready: string, hosts: string) => expect(list).toMatch(new RegExp(`^${name} +${state} +${ready} +1 +${hosts}$`, 'm'));

  /**
   * What a host that left shows while it is out: its models stopped, `beta` on the other host as it
   * was, and the host in `hostState`.
   */
  async function whileOut(hostState: string) {
    const list = await ok(cluster, ['list', 'deployments']);
    listed(list, 'alpha', 'stopped', '0/1', '-');
    listed(list, 'gamma', 'stopped', '0/1', '-');
    listed(list, 'beta', 'ready', '1/1', small.hostId);
    expect(await ok(cluster, ['list', 'hosts'])).toMatch(new RegExp(`^${big.hostId} .* ${hostState} `, 'm'));
    // Its engines went with it.
    expect(await gpuUsed(big)).toBe(0);
  }

  /**
   * Back in, the host takes its two models again, side by side on its 16 GiB card: were the memory
   * of the engines it lost still counted, the second would not fit without parking the first.
   */
  async function servedAgain() {
    expect(await ok(cluster, ['list', 'hosts'])).toMatch(new RegExp(`^${big.hostId} .* ready `, 'm'));
    for (const name of ['alpha', 'gamma']) {
      const reply = await cluster.chat(name);
      expect(reply.status, JSON.stringify(reply.body)).toBe(200);
    }
    const list = await ok(cluster, ['list', 'deployments']);
    listed(list, 'alpha', 'ready', '1/1', big.hostId);
    listed(list, 'gamma', 'ready', '1/1', big.hostId);
    listed(list, 'beta', 'ready', '1/1', small.hostId);
    expect((await cluster.status('beta')).instances).toEqual(stayed);
    expect(await gpuUsed(big)).toBe(2 * MODEL_BYTES);
    expect(await gpuUsed(small)).toBe(MODEL_BYTES);
  }

  beforeAll(async () => {
    // The default 10 s bound to be found down: a restart at once comes well within it.
    cluster = await Cluster.start({ hosts: [{ gpuMemory: '16GiB' }, { gpuMemory: '8GiB' }] });
    [big, small] = cluster.hosts as [ClusterHost, ClusterHost];
    await Promise.all([cluster.deploy(simDeployment('alpha')), cluster.deploy(simDeployment('beta', 'vllm', [], `hosts: [${small.hostId}]\n`)), cluster.deploy(simDeployment('gamma'))]);
    expect((await cluster.chat('beta')).status).toBe(200);
    stayed = (await cluster.status('beta')).instances;
    // Both fit only on the big host, once beta holds the small one.
    await servedAgain();
  }, 240_000);
  afterAll(async () => {
    await cluster?.close();
  });

  it('drained, then undrained', async () => {
    await ok(cluster, ['drain', 'host', big.hostId]);
    await whileOut('draining');
    await ok(cluster, ['undrain', 'host', big.hostId]);
    await servedAgain();
  }, 120_000);

  it('stopped (SIGTERM), then started again', async () => {
    expect(await big.process.stop()).toBe(0);
    await whileOut('(stopping|down)');
    await cluster.restartHost(big);
    await servedAgain();
  }, 120_000);

  it('killed (SIGKILL), found down, then started again', async () => {
    big.process.child.kill('SIGKILL');
    // The 10 s bound and the server's check once a second, on a loaded machine.
    await until(`${big.hostId} to be shown down`, async () => (new RegExp(`^${big.hostId} .* down `, 'm').test(await ok(cluster, ['list', 'hosts'])) ? true : undefined), 30_000);
    await whileOut('down');
    await cluster.restartHost(big);
    await servedAgain();
  }, 120_000);

  it('killed (SIGKILL) and started again at once, before it is found down', async () => {
    big.process.child.kill('SIGKILL');
    await big.process.exited;
    await cluster.restartHost(big);
    await whileOut('ready');
    await servedAgain();
  }, 120_000);
});
