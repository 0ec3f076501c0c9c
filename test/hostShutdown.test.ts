/**
 * A host agent that stops, or dies, as an operator sees it from outside: a server and two host
 * agents, each its own process. A SIGTERM lets the answers running on the host finish; a host that
 * stops reporting is shown down and its models start elsewhere instead of failing with 502.
 */
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster, type ClusterHost } from './support/cluster.js';
import { simDeployment } from './support/lifecycle.js';

const STREAM_TOKENS = 60;
/** 60 tokens at 20 a second: a stream lasts about 3 s, within the hosts' 5 s shutdown grace. */
const MODEL = simDeployment('steady', 'vllm', ['--sim-tokens-per-s', '20']);

interface StreamResult {
  tokens: number;
  done: boolean;
  finishReason: string | null;
}

/** A streamed chat completion; `started` resolves at its first token. */
function stream(cluster: Cluster, model: string): { started: Promise<void>; result: Promise<StreamResult> } {
  let markStarted!: () => void;
  const started = new Promise<void>((resolve) => (markStarted = resolve));
  const result = (async () => {
    const reply = await request(`${cluster.inferenceUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model,
        messages: [{ role: 'user', content: 'tell me a story' }],
        max_tokens: STREAM_TOKENS,
        stream: true,
      }),
    });
    expect(reply.statusCode).toBe(200);
    const seen: StreamResult = { tokens: 0, done: false, finishReason: null };
    let text = '';
    for await (const piece of reply.body) {
      text += piece;
      const lines = text.split('\n');
      text = lines.pop()!;
      for (const line of lines) {
        if (!line.startsWith('data: ')) continue;
        if (line === 'data: [DONE]') {
          seen.done = true;
          continue;
        }
        const choice = JSON.parse(line.slice('data: '.length)).choices?.[0];
        if (choice?.delta?.content) {
          seen.tokens++;
          markStarted();
        }
        if (choice?.finish_reason) seen.finishReason = choice.finish_reason;
      }
    }
    return seen;
  })();
  result.catch(() => markStarted());
  return { started, result };
}

const hostsNow = async (cluster: Cluster) =>
  (await cluster.api('GET', '/management/v1/hosts')).body.hosts as Array<{
    host_id: string;
    state: string;
    last_seen_at: string;
  }>;
/** The host as `GET /management/v1/hosts` shows it once it is in `state`, or as it is after `ms`. */
async function stateWithin(cluster: Cluster, hostId: string, state: string, ms: number) {
  const by = Date.now() + ms;
  for (;;) {
    const host = (await hostsNow(cluster)).find((h) => h.host_id === hostId)!;
    if (host.state === state || Date.now() > by) return host;
    await new Promise((r) => setTimeout(r, 100));
  }
}
const hostOf = async (cluster: Cluster, name: string): Promise<string | undefined> =>
  (await cluster.status(name)).hosts[0];

describe('a host agent that stops or dies', () => {
  let cluster: Cluster;
  let hostA: ClusterHost;
  let hostB: ClusterHost;
  const byId = (id: string | undefined) => [hostA, hostB].find((h) => h.hostId === id)!;

  beforeAll(async () => {
    cluster = await Cluster.start({ hosts: [{}, {}], serverYaml: 'hosts: { down_after: 3s }' });
    [hostA, hostB] = cluster.hosts as [ClusterHost, ClusterHost];
    await cluster.deploy(MODEL);
  }, 120_000);
  afterAll(() => cluster?.close(), 60_000);

  it('SIGTERM lets every running stream finish, routes new requests elsewhere, and exits 0 within its grace', async () => {
    expect((await cluster.chat('steady')).status).toBe(200);
    const serving = byId(await hostOf(cluster, 'steady'));
    const other = serving === hostA ? hostB : hostA;

    const streams = Array.from({ length: 4 }, () => stream(cluster, 'steady'));
    await Promise.all(streams.map((s) => s.started));
    const signalledAt = Date.now();
    serving.process.child.kill('SIGTERM');

    for (const s of streams)
      expect(await s.result).toEqual({ tokens: STREAM_TOKENS, done: true, finishReason: 'length' });
    // The host said it stops: a new request is answered by a start on the other host.
    expect((await cluster.chat('steady')).status).toBe(200);
    expect(await hostOf(cluster, 'steady')).toBe(other.hostId);

    expect(await serving.process.exited).toBe(0);
    // Its 5 s grace, the engines' stop and the process's own exit, on a loaded machine.
    expect(Date.now() - signalledAt).toBeLessThan(30_000);
    expect(serving.process.output()).not.toContain('answers still running at the shutdown grace are cut');
    // Stopped, it no longer reports: shown down.
    expect(await stateWithin(cluster, serving.hostId, 'down', 20_000)).toMatchObject({ state: 'down' });
  }, 120_000);

  it('a host that stops reporting is shown down within the bound, and its model starts elsewhere instead of a 502', async () => {
    // Both hosts run; the model is on one of them.
    for (const h of [hostA, hostB]) if (!h.process.running) await cluster.restartHost(h);
    expect((await cluster.chat('steady')).status).toBe(200);
    const serving = byId(await hostOf(cluster, 'steady'));
    const other = serving === hostA ? hostB : hostA;

    serving.process.child.kill('SIGKILL');
    const killedAt = Date.now();
    // The 3 s bound, and the server's check once a second, on a loaded machine.
    const down = await stateWithin(cluster, serving.hostId, 'down', 20_000);

    // The request waits for a start on the host that runs, and is answered.
    expect((await cluster.chat('steady')).status).toBe(200);
    expect(await hostOf(cluster, 'steady')).toBe(other.hostId);

    // Its last report is from before the kill and stays so; the host that runs reports on.
    expect(down.state).toBe('down');
    expect(Date.parse(down.last_seen_at)).toBeGreaterThan(killedAt - 10_000);
    expect(Date.parse(down.last_seen_at)).toBeLessThanOrEqual(killedAt + 1_000);
    const running = (await hostsNow(cluster)).find((h) => h.host_id === other.hostId)!;
    await new Promise((r) => setTimeout(r, 2_000));
    const later = await hostsNow(cluster);
    expect(later.find((h) => h.host_id === serving.hostId)).toMatchObject({
      state: 'down',
      last_seen_at: down.last_seen_at,
    });
    const runningLater = later.find((h) => h.host_id === other.hostId)!;
    expect(runningLater.state).toBe('ready');
    expect(Date.parse(runningLater.last_seen_at)).toBeGreaterThan(Date.parse(running.last_seen_at));

    const listed = await cluster.capyctl(['list', 'hosts']);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(new RegExp(`${serving.hostId}\\s.*\\sdown\\s`));
  }, 120_000);
});
