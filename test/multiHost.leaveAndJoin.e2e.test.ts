/**
 * Hosts that leave and join a server, each host agent its own process with its own simulated card:
 * the waiting limits and the request deadline that apply are the tightest of the hosts that serve
 * (they change as a host registers, stops or is found down), and a host drained, stopped or killed
 * and started again takes its models back, its memory counted once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiErrors } from '../domain/catalogue.js';
import { Cluster, type ClusterHost, gpuUsed } from './support/cluster.js';
import { SIM_MODEL_BYTES, simDeployment } from './support/lifecycle.js';
import { until } from './support/until.js';

/** What a user reads of the deployment's router in `GET /management/v1/metrics/load`. */
async function routerOf(
  cluster: Cluster,
  deploymentId: string,
): Promise<{ in_flight: number; waiting: number; waiting_limit: number }> {
  const load = await cluster.api('GET', `/management/v1/metrics/load?deployment=${deploymentId}`);
  expect(load.status).toBe(200);
  return load.body.deployments[0].router;
}

/** A chat completion and how long it took to be answered. */
async function timedChat(
  cluster: Cluster,
  model: string,
): Promise<{ status: number; body: unknown; retryAfter: unknown; ms: number }> {
  const sentAt = Date.now();
  const reply = await cluster.chat(model);
  return { status: reply.status, body: reply.body, retryAfter: reply.headers['retry-after'], ms: Date.now() - sentAt };
}

/** The error body a client reads for a catalogue error. */
const bodyOf = (e: { code: string; message: string; retryable: boolean }) => ({
  code: e.code,
  message: e.message,
  retryable: e.retryable,
});

describe('the queue limits are the tightest of the hosts that serve', () => {
  let cluster: Cluster;
  let roomy: ClusterHost;
  let tight: ClusterHost;
  const ids: Record<string, string> = {};
  /** One waiting request per model and a 2 s request deadline, against the defaults' 64 and 600 s. */
  const TIGHT = {
    gpuMemory: '8GiB',
    yaml: 'resource_policy: { queue: { max_pending_per_deployment: 1, request_deadline: 2s, admission_window: 1s } }',
  };
  /** Each model takes 6 s to start: a request for it waits past the tight deadline. */
  const SLOW_START = ['--sim-load-ms', '6000'];

  beforeAll(async () => {
    cluster = await Cluster.start({ hosts: [{ gpuMemory: '24GiB' }], serverYaml: 'hosts: { down_after: 3s }' });
    roomy = cluster.hosts[0]!;
    // All on the roomy host, which sets the defaults: only the limits of the other change.
    for (const name of ['s1', 's2', 's3']) {
      ids[name] = (
        await cluster.deploy(simDeployment(name, 'vllm', SLOW_START, `hosts: [${roomy.hostId}]\n`))
      ).deployment_id;
    }
  }, 240_000);
  afterAll(async () => {
    await cluster?.close();
  });

  it('a host that joins with tighter limits makes them the server’s: a second waiting request is refused, the first is refused at the 2 s deadline', async () => {
    expect((await routerOf(cluster, ids.s1!)).waiting_limit).toBe(64);
    tight = await cluster.addHost(TIGHT);
    expect((await routerOf(cluster, ids.s1!)).waiting_limit).toBe(1);

    const replies = (await Promise.all([timedChat(cluster, 's1'), timedChat(cluster, 's1')])).sort(
      (a, b) => a.status - b.status,
    );
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
    await until(
      'the killed host to stop setting the limit',
      async () => ((await routerOf(cluster, ids.s3!)).waiting_limit === 64 ? true : undefined),
      20_000,
    );
    expect(await cluster.capyctlOk(['list', 'hosts'])).toMatch(new RegExp(`^${tight.hostId} .* down `, 'm'));
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

  const listed = (list: string, name: string, state: string, ready: string, hosts: string) =>
    expect(list).toMatch(new RegExp(`^${name} +${state} +${ready} +1 +${hosts}$`, 'm'));

  /**
   * What a host that left shows while it is out: its models stopped, `beta` on the other host as it
   * was, and the host in `hostState`.
   */
  async function whileOut(hostState: string) {
    const list = await cluster.capyctlOk(['list', 'deployments']);
    listed(list, 'alpha', 'stopped', '0/1', '-');
    listed(list, 'gamma', 'stopped', '0/1', '-');
    listed(list, 'beta', 'ready', '1/1', small.hostId);
    expect(await cluster.capyctlOk(['list', 'hosts'])).toMatch(new RegExp(`^${big.hostId} .* ${hostState} `, 'm'));
    // Its engines went with it: a killed agent's engines are sent SIGTERM by the kernel as it dies
    // (processes/endingWithThisProcess.ts) and end on their own clock, which an agent started again
    // at once can beat.
    await until(`${big.hostId}'s engines to end`, async () => ((await gpuUsed(big)) === 0 ? true : undefined), 10_000);
    expect(await gpuUsed(big)).toBe(0);
  }

  /**
   * Back in, the host takes its two models again, side by side on its 16 GiB card: were the memory
   * of the engines it lost still counted, the second would not fit without parking the first.
   */
  async function servedAgain() {
    expect(await cluster.capyctlOk(['list', 'hosts'])).toMatch(new RegExp(`^${big.hostId} .* ready `, 'm'));
    for (const name of ['alpha', 'gamma']) {
      const reply = await cluster.chat(name);
      expect(reply.status, JSON.stringify(reply.body)).toBe(200);
    }
    const list = await cluster.capyctlOk(['list', 'deployments']);
    listed(list, 'alpha', 'ready', '1/1', big.hostId);
    listed(list, 'gamma', 'ready', '1/1', big.hostId);
    listed(list, 'beta', 'ready', '1/1', small.hostId);
    expect((await cluster.status('beta')).instances).toEqual(stayed);
    expect(await gpuUsed(big)).toBe(2 * SIM_MODEL_BYTES);
    expect(await gpuUsed(small)).toBe(SIM_MODEL_BYTES);
  }

  beforeAll(async () => {
    // The default 10 s bound to be found down: a restart at once comes well within it.
    cluster = await Cluster.start({ hosts: [{ gpuMemory: '16GiB' }, { gpuMemory: '8GiB' }] });
    [big, small] = cluster.hosts as [ClusterHost, ClusterHost];
    await Promise.all([
      cluster.deploy(simDeployment('alpha')),
      cluster.deploy(simDeployment('beta', 'vllm', [], `hosts: [${small.hostId}]\n`)),
      cluster.deploy(simDeployment('gamma')),
    ]);
    expect((await cluster.chat('beta')).status).toBe(200);
    stayed = (await cluster.status('beta')).instances;
    // Both fit only on the big host, once beta holds the small one.
    await servedAgain();
  }, 240_000);
  afterAll(async () => {
    await cluster?.close();
  });

  it('drained, then undrained', async () => {
    await cluster.capyctlOk(['drain', 'host', big.hostId]);
    await whileOut('draining');
    await cluster.capyctlOk(['undrain', 'host', big.hostId]);
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
    await until(
      `${big.hostId} to be shown down`,
      async () =>
        new RegExp(`^${big.hostId} .* down `, 'm').test(await cluster.capyctlOk(['list', 'hosts'])) ? true : undefined,
      30_000,
    );
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
