/**
 * Two servers (issue 16, "Two servers"): two `capyctl start server` processes on one Temporal and
 * one store, behind one address that this test balances by hand, and one host agent whose card
 * holds one model at a time. A request waits in the memory of the server it came to; the switch,
 * whichever server asked for it and whichever runs it, releases the waiters of both. A server
 * killed outright loses only its own clients' requests: the other's are answered, and the demands
 * the killed one can no longer withdraw stop holding the card. An engine exit the host reports to
 * one server reaches the other through the store.
 */
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Balancer, startBalancer } from './support/balancer.js';
import { type ApiReply, chatAt, Cluster, CLUSTER_ADMIN_TOKEN, type ClusterServer } from './support/cluster.js';
import { gpuUsage } from '../hostAgent/simulatedGpu.js';
import { simDeployment } from './support/lifecycle.js';
import { until, within } from './support/until.js';

/** A start and a wake are slow enough for a request to the other server, and a kill, to land while they run. */
const LOAD_MS = '2500';
const WAKE_MS = '3000';

describe('two servers on one Temporal and one store', () => {
  let cluster: Cluster;
  let second: ClusterServer;
  let balancer: Balancer;
  const viaFirst = (model: string) => chatAt(cluster.inferenceUrl, model);
  const viaSecond = (model: string) => chatAt(second.inferenceUrl, model);

  beforeAll(async () => {
    cluster = await Cluster.start();
    second = await cluster.startAnotherServer('second');
    // The agent reaches the servers through one address: it registers with the first, and reports
    // to the second once the first is gone. One 8 GiB card: each model holds 5 GiB, never both.
    balancer = await startBalancer([cluster.managementUrl, second.managementUrl]);
    await cluster.addHost({ gpuMemory: '8GiB', serverUrl: balancer.url });
    await second.process.awaitOutput(
      'the second server to learn the host',
      /"msg":"(host registered with another server of this store)"/,
    );
    await cluster.deploy(simDeployment('left', 'vllm', ['--sim-load-ms', LOAD_MS, '--sim-wake-ms', WAKE_MS]));
    await cluster.deploy(simDeployment('right', 'vllm', ['--sim-load-ms', LOAD_MS]));
    // Deployed through the first server: the second learns them from the store.
    await until('the second server to route both models', async () => {
      const listed = (await (await request(`${second.inferenceUrl}/v1/models`)).body.json()) as {
        data: Array<{ id: string }>;
      };
      return ['left', 'right'].every((m) => listed.data.some((d) => d.id === m)) ? true : undefined;
    });
  }, 120_000);

  afterAll(async () => {
    await cluster?.close();
    await balancer?.close();
  });

  /** The switches that brought `name` up, as the management API lists them (newest first). */
  const switchesTo = async (name: string) =>
    (
      (await cluster.api('GET', '/management/v1/switches?limit=100')).body.switches as Array<{
        target: { name: string } | null;
        outcome: string;
        victims: unknown[];
      }>
    ).filter((s) => s.target?.name === name);
  /** Waits for a switch that brings `name` up to be running. */
  const switchRunning = (name: string) =>
    until(
      `a switch to ${name} to run`,
      async () => ((await switchesTo(name)).some((s) => s.outcome === 'running') ? true : undefined),
      30_000,
    );

  const servedBy = (reply: ApiReply | string, model: string) => {
    if (typeof reply === 'string') throw new Error(`${model}: ${reply}`);
    expect(reply.status).toBe(200);
    expect(reply.body.model).toBe(model);
    expect(reply.body.choices[0].message.content).toMatch(/\S/);
  };

  it("releases a request waiting on the second server with the switch the first one's request began, and the other way round", async () => {
    // Nothing is loaded: the first server's request starts left; the second's comes while it loads.
    const first = viaFirst('left');
    await switchRunning('left');
    const waiting = viaSecond('left');
    // Each within 30 s: a waiter nobody releases would wait out its 600 s deadline.
    const [a, b] = await Promise.all([within(30_000, first), within(30_000, waiting)]);
    servedBy(a, 'left');
    servedBy(b, 'left');
    // One switch served both: the second server's waiter was released by the first one's switch.
    expect(await switchesTo('left')).toHaveLength(1);

    const fromSecond = viaSecond('right');
    await switchRunning('right');
    const fromFirst = viaFirst('right');
    const [c, d] = await Promise.all([within(30_000, fromSecond), within(30_000, fromFirst)]);
    servedBy(c, 'right');
    servedBy(d, 'right');
    // Its last receipt is written once the release has reached both servers, after its waiters ran.
    const toRight = await until('the switch to right to end', async () => {
      const listed = await switchesTo('right');
      return listed.every((x) => x.outcome !== 'running') ? listed : undefined;
    });
    expect(toRight).toHaveLength(1);
    expect(toRight[0]).toMatchObject({
      outcome: 'released',
      victims: [{ released: expect.stringMatching(/^released: parked/) }],
    });
  }, 90_000);

  it('an engine exit the host reports to the first server reaches the second: its next request starts the model afresh', async () => {
    const statusOn = async (server: string) =>
      (
        await request(`${server}/management/v1/deployments/right`, {
          headers: { authorization: `Bearer ${CLUSTER_ADMIN_TOKEN}` },
        })
      ).body.json() as Promise<{ state: string; instances: Array<{ generation: number; state: string }> }>;
    const before = await statusOn(second.managementUrl);
    expect(before.state).toBe('ready');
    // right's engine dies on the host: its agent, which reports to the first server, tells only that one.
    const [host] = cluster.hosts;
    const { owners } = await gpuUsage(join(host!.dataDir, 'sim-gpus'), 0);
    const loaded = owners.filter((o) => o.gpuBytes > 0);
    expect(loaded).toHaveLength(1);
    process.kill(loaded[0]!.pid, 'SIGKILL');
    await until('the second server to list right stopped', async () =>
      (await statusOn(second.managementUrl)).state === 'stopped' ? true : undefined,
    );
    servedBy(await within(30_000, viaSecond('right')), 'right');
    expect((await statusOn(second.managementUrl)).instances).toEqual([
      expect.objectContaining({ generation: before.instances[0]!.generation + 1, state: 'ready' }),
    ]);
  }, 60_000);

  it("answers the surviving server's waiters when the other is killed (SIGKILL) mid-switch; the killed one's clients lose their connection", async () => {
    // right is loaded; both servers' requests for left wait for the switch that wakes it.
    const lost = viaFirst('left').then(
      (reply) => `answered ${reply.status}`,
      (e: Error) => `lost: ${e.message}`,
    );
    await switchRunning('left');
    const kept = viaSecond('left');
    await cluster.server.stop('SIGKILL');

    // Its connection went with the process: the first server's client is not the second's to answer.
    expect(await lost).toMatch(/^lost: (other side closed|.*ECONNRESET|.*socket)/i);
    servedBy(await within(30_000, kept), 'left');

    // The killed server's demand for left, which it can no longer withdraw, does not keep left on
    // the card: once the second server finds it gone, right is served in place of left.
    // (Without that, it would wait out its 600 s deadline.)
    servedBy(await within(30_000, viaSecond('right')), 'right');
    servedBy(await within(30_000, viaSecond('left')), 'left');
  }, 120_000);
});
