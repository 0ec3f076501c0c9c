/**
 * Switching as clients see it over real sockets, with the real server, a host agent running
 * simulator engines and the real workflows: the spec's "Example: two apps, one GPU" (the admission
 * window shortened to 1 s in the host document, its structure kept), the hang-ups and stream bounds
 * that end an answer, and the load endpoint field by field. The card holds one model at a time.
 */
import { once } from 'node:events';
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Deployment } from '../store/deployments.js';
import type { CommandReceipt } from '../api/lifecycle.js';
import { simDeployment } from './support/lifecycle.js';
import { type Reply, type ServerBench, startServerBench } from './support/serverBench.js';
import { until } from './support/until.js';

const WINDOW_MS = 1_000;
const CLIENT_READ_IDLE_MS = 10_000;

describe('switching, end to end', () => {
  let bench: ServerBench;
  let a: Deployment;
  let b: Deployment;

  beforeAll(async () => {
    bench = await startServerBench({
      // A drain bound past the 10 s read-idle cut, so that cut is what ends the drain.
      serverYaml: 'switching: { drain_timeout: 20s, start_timeout: 60s }',
      hostYaml: `resource_policy: { queue: { admission_window: ${WINDOW_MS}ms } }`,
    });
    // chat-a streams slowly (20 tokens/s) and takes 1.5 s to park, so "it has begun parking" lasts a while.
    a = await bench.deploy(
      'chat-a',
      simDeployment('chat-a', 'vllm', ['--sim-park-ms', '1500', '--sim-tokens-per-s', '20']),
    );
    b = await bench.deploy('chat-b');
  });
  afterAll(async () => {
    await bench?.close();
  });

  /** Set-up, not a check: the model serves (any switch still finishing first). */
  const loaded = (d: Deployment) =>
    until(`${d.name} to serve`, async () => ((await bench.chat(d)).status === 200 ? true : undefined), 30_000);
  const closedBody = (d: Deployment) => ({
    code: 'unavailable',
    message: `dispatch to deployment ${d.id} is closed; retry shortly`,
    retryable: true,
  });

  it('two apps, one GPU: the window, the 503s of the drain, one switch for every waiting request, and the switch back', async () => {
    await loaded(a);
    // App 1 is streaming a long answer from chat-a: 60 tokens at 20 per second, 3 s.
    const long = await bench.stream(a, { max_tokens: 60 });
    const longDone = long.rest().then((text) => ({ text, atMs: Date.now() }));

    // 0 s: App 2 sends three requests for chat-b; they wait and one switch begins.
    const t0 = Date.now();
    const app2 = [
      bench.chat(b, { max_tokens: 20 }),
      bench.chat(b, { max_tokens: 20 }),
      bench.chat(b, { max_tokens: 20 }),
    ];

    // App 1 keeps sending short requests: served during the window, 503 once chat-a drains.
    const app1: { sentAtMs: number; reply: Reply }[] = [];
    for (;;) {
      const sentAtMs = Date.now();
      const reply = await bench.chat(a);
      app1.push({ sentAtMs, reply });
      if (reply.status !== 200) break;
    }
    const firstClosed = app1.at(-1)!;
    expect(firstClosed.reply.body).toEqual(closedBody(a));
    expect(app1.length).toBeGreaterThan(1);
    // The window counts from the switch's start, a moment after the requests arrived.
    expect(firstClosed.sentAtMs - t0).toBeGreaterThanOrEqual(WINDOW_MS - 250);
    expect(firstClosed.sentAtMs - t0).toBeLessThan(WINDOW_MS + 2_000);

    // More requests for chat-b arrive during the drain: they join the same switch.
    app2.push(bench.chat(b, { max_tokens: 20 }));

    // App 1's requests are answered 503 until chat-a begins parking; then one waits.
    let waiting: Promise<Reply> | undefined;
    let waitingSentAtMs = 0;
    while (!waiting) {
      waitingSentAtMs = Date.now();
      const next = bench.chat(a);
      const quick = await Promise.race([next, sleep(300).then(() => undefined)]);
      if (quick === undefined) waiting = next;
      else {
        expect(quick.body).toEqual(closedBody(a));
        await sleep(50);
      }
    }

    // The drain waited for App 1's long answer, which ended whole.
    const { text, atMs: drainedAtMs } = await longDone;
    expect(text).toMatch(/"finish_reason":"length"[\s\S]*data: \[DONE\]\n\n$/);
    expect(waitingSentAtMs).toBeGreaterThanOrEqual(drainedAtMs - 100);

    // chat-b ready: App 2's four requests run together (20 tokens at 50/s is 400 ms each; one by
    // one they would end 400 ms apart).
    const served = await Promise.all(app2);
    expect(served.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    const ends = served.map((r) => r.endAtMs);
    expect(Math.min(...ends)).toBeGreaterThan(drainedAtMs);
    expect(Math.max(...ends) - Math.min(...ends)).toBeLessThan(300);

    // Next: App 1's waiting request began the switch back, under the same rules.
    const back = await waiting;
    expect(back.status).toBe(200);
    expect(back.endAtMs).toBeGreaterThan(Math.max(...ends));
    expect(bench.stateOf(a)).toBe('ready');
    expect(bench.stateOf(b)).toBe('parked');
  });

  it('a client that hangs up while it waits gives up its own place only; the switch goes on', async () => {
    const slow = await bench.deploy('chat-slow', simDeployment('chat-slow', 'vllm', ['--sim-load-ms', '1500']));
    const client = new AbortController();
    const leaving = bench.chat(slow, {}, client.signal).catch((e: Error) => e);
    const staying = bench.chat(slow);
    const waitingFor = async (n: number) =>
      (await bench.load(`?deployment=${slow.id}`)).deployments[0]!.router.waiting === n ? true : undefined;
    await until('two requests to wait', () => waitingFor(2));
    client.abort();
    expect(await leaving).toBeInstanceOf(Error);
    await until('one request to wait', () => waitingFor(1));
    expect((await staying).status).toBe(200);
    expect(bench.server.table.get(slow.id)?.instances).toMatchObject([{ generation: 1, observedState: 'ready' }]);
  });

  it('reports the load field by field while chat-a streams and a request waits for chat-b', async () => {
    await loaded(a);
    const stream = await bench.stream(a, { max_tokens: 400 });
    const now = Date.now();
    const waiter = bench.chat(b);
    const shown = await until('a sample of chat-a running one request, and one waiting for chat-b', async () => {
      const load = await bench.load();
      const [da, db] = [a, b].map((d) => load.deployments.find((x) => x.deployment_id === d.id));
      const sample = da?.instances[0]?.sample;
      // A sample taken since the stream opened: one before may still count the set-up's request.
      return sample && sample.sampled_at_ms > now && sample.engine?.running === 1 && db?.router.waiting === 1
        ? { load, da, db }
        : undefined;
    });
    expect(shown.load.stale_after_ms).toBe(3000);
    expect(Math.abs(shown.load.observed_at_ms - now)).toBeLessThan(20_000);
    expect(shown.da).toEqual({
      deployment_id: a.id,
      name: 'chat-a',
      router: { in_flight: 1, in_flight_limit: 32, waiting: 0, waiting_limit: 64 },
      // vLLM does not say its own figure: CapyCTL's default for it.
      max_running: { count: 32, source: 'default' },
      instances: [
        {
          index: 0,
          host_id: bench.hostId,
          generation: 1,
          observed_state: 'ready',
          gpu_indexes: [0],
          router_in_flight: 1,
          max_running: { count: 32, source: 'default' },
          sample: {
            sampled_at_ms: expect.any(Number),
            age_ms: expect.any(Number),
            fresh: true,
            ingress_in_flight: 1,
            engine: { running: 1, waiting: 0, kv_usage_ppm: Math.round(1e6 / 32) },
          },
        },
      ],
    });
    const sample = shown.da!.instances[0]!.sample!;
    expect(sample.age_ms).toBeLessThan(3000);
    expect(Math.abs(shown.load.observed_at_ms - sample.age_ms - sample.sampled_at_ms)).toBeLessThanOrEqual(1);
    // chat-b is parked: no sample, so the figure is the host's to size (its command is not known here), and one request waits for it.
    expect(shown.db).toEqual({
      deployment_id: b.id,
      name: 'chat-b',
      router: { in_flight: 0, in_flight_limit: 32, waiting: 1, waiting_limit: 64 },
      max_running: { source: 'on_host' },
      instances: [
        {
          index: 0,
          host_id: bench.hostId,
          generation: 1,
          observed_state: 'parked',
          // Parked, it holds no GPU memory, but wakes on the GPU it was launched on.
          gpu_indexes: [0],
          router_in_flight: 0,
          max_running: { source: 'on_host' },
          sample: null,
        },
      ],
    });
    stream.end();
    expect((await waiter).status).toBe(200);
  });

  it('a client that hangs up mid-stream: the engine stops its work, then the victim parks and the switch goes on', async () => {
    await loaded(a);
    const stream = await bench.stream(a, { max_tokens: 400 });
    const waiter = bench.chat(b);
    // Past the window: chat-a drains, and would for 20 s.
    await sleep(WINDOW_MS + 1_000);
    expect((await bench.engine(a)).running).toBe(1);
    const hungUpAtMs = Date.now();
    stream.end();
    const reply = await waiter;
    expect(reply.status).toBe(200);
    // Well before the 20 s the answer would have run: the hang-up ended the drain.
    expect(reply.endAtMs - hungUpAtMs).toBeLessThan(10_000);
    // It had output, so it parked (not stopped), and never with a request in flight.
    expect(bench.stateOf(a)).toBe('parked');
    expect(await bench.engine(a)).toMatchObject({ state: 'parked', running: 0, waiting: 0, violations: [] });
  });

  /** A non-streamed answer from chat-a that its client hangs up on once chat-a drains for chat-b; chat-b's reply. */
  async function hangUpOnWholeAnswer(): Promise<Reply> {
    const client = new AbortController();
    const whole = bench.chat(a, { max_tokens: 400 }, client.signal).catch((e: Error) => e);
    await until('chat-a to run it', async () => ((await bench.engine(a)).running === 1 ? true : undefined));
    const waiter = bench.chat(b);
    await until('chat-a to close its dispatch after the window', () =>
      bench.server.queue.dispatchOf(a.id) === 'closed' ? true : undefined,
    );
    client.abort();
    expect(await whole).toBeInstanceOf(Error);
    return waiter;
  }

  it('a client that hangs up mid non-streamed answer: the engine stops its work, then the victim parks', async () => {
    await loaded(a);
    expect((await hangUpOnWholeAnswer()).status).toBe(200);
    // Its engine had produced output, so it parked (not stopped), and never with a request in flight.
    expect(bench.stateOf(a)).toBe('parked');
    expect(await bench.engine(a)).toMatchObject({ state: 'parked', running: 0, waiting: 0, violations: [] });
  });

  it('a client that hangs up on a non-streamed answer before any output: the victim is stopped, not parked', async () => {
    await loaded(a);
    const generation = bench.server.table.get(a.id)!.instances[0]!.generation;
    // The engine takes the request and never produces a token of it.
    await bench.fault(a, { requests_never_finish: true });
    expect((await hangUpOnWholeAnswer()).status).toBe(200);
    // The engine may not have started it, so its count proves nothing: the stop settles it.
    expect(bench.stateOf(a)).toBe('stopped');
    expect((await bench.chat(a)).status).toBe(200);
    expect(bench.server.table.get(a.id)!.instances[0]).toMatchObject({
      generation: generation + 1,
      observedState: 'ready',
    });
  });

  it(
    `a client that reads nothing for ${CLIENT_READ_IDLE_MS / 1000} s has its stream ended; then the victim parks`,
    { timeout: 60_000 },
    async () => {
      const fast = await bench.deploy(
        'chat-fast',
        simDeployment('chat-fast', 'vllm', ['--sim-tokens-per-s', '100000']),
      );
      await loaded(fast);
      // About 1.5 KiB a token with 20 alternatives each: far more than the sockets between hold.
      const body = JSON.stringify({
        model: fast.name,
        messages: [{ role: 'user', content: 'hello' }],
        max_tokens: 30_000,
        logprobs: true,
        top_logprobs: 20,
        stream: true,
      });
      const url = new URL(bench.server.inferenceUrl);
      const socket = connect(Number(url.port), url.hostname);
      try {
        socket.write(
          `POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
        );
        await once(socket, 'data');
        socket.pause();
        const pausedAtMs = Date.now();
        const reply = await bench.chat(b);
        expect(reply.status).toBe(200);
        expect(reply.endAtMs - pausedAtMs).toBeGreaterThanOrEqual(CLIENT_READ_IDLE_MS);
        expect(reply.endAtMs - pausedAtMs).toBeLessThan(CLIENT_READ_IDLE_MS + 8_000);
        expect(await bench.engine(fast)).toMatchObject({ state: 'parked', running: 0, violations: [] });
      } finally {
        socket.destroy();
      }
    },
  );

  it('a single piece of an answer larger than 64 KiB ends it, streamed or not; the engine runs nothing after', async () => {
    // A decision model lists every option with its log-probability in its one token's piece.
    const options = Array.from({ length: 2_000 }, (_, i) => `option-number-${i}`).join(',');
    const decide = await bench.deploy('chat-decide', simDeployment('chat-decide', 'vllm', ['--sim-decision', options]));
    await loaded(decide);
    // The engine is asked for a stream of a whole answer too, and its one piece is too large.
    expect(await bench.chat(decide, { logprobs: true, top_logprobs: 1 }).catch((e: Error) => e)).toBeInstanceOf(Error);
    await until(
      'the engine to run nothing',
      async () => ((await bench.engine(decide)).running === 0 ? true : undefined),
      3_000,
    );
    const stream = await bench
      .stream(decide, { logprobs: true, top_logprobs: 1 })
      .then((s) => s.rest())
      .catch((e: Error) => e);
    expect(stream).toBeInstanceOf(Error);
    await until(
      'the engine to run nothing',
      async () => ((await bench.engine(decide)).running === 0 ? true : undefined),
      3_000,
    );
  });
});

describe('where a released model parks: one decision for an operator park, a switch and an idle timer', () => {
  let bench: ServerBench;
  let ja: Deployment;
  let ib: Deployment;
  let jb: Deployment;

  beforeAll(async () => {
    // An 8 GiB card and 7 GiB of host RAM: ja's 5 GiB copy in host RAM leaves no room for ib's 3 GiB.
    bench = await startServerBench({ gpuMemory: '8GiB', hostRam: '7GiB' });
    const sglang = (name: string, weights: string) =>
      bench.deploy(name, simDeployment(name, 'sglang', ['--sim-weights', weights, '--sim-kv', '512MiB']));
    [ja, ib, jb] = [await sglang('ja', '5GiB'), await sglang('ib', '3GiB'), await sglang('jb', '5GiB')];
  });
  afterAll(async () => {
    await bench?.close();
  });

  const start = async (d: Deployment) => {
    const receipt = (await bench.command('start', d.id)) as CommandReceipt;
    await until(`${d.name} to be ready`, () => (bench.stateOf(d) === 'ready' ? true : undefined), 30_000);
    return receipt;
  };
  /** `start ja`, then `start ib --evict`: ja parks in host RAM, and ib is ready. */
  async function position() {
    for (const d of [ja, ib, jb]) await bench.command('stop', d.id);
    await start(ja);
    expect((await start(ib)).victims).toEqual([
      { deploymentId: ja.id, instanceIndex: 0, gpuIndexes: [0], released: 'releasing: parking (host RAM)' },
    ]);
  }
  /** ib parks deep: it is listed parked, its engine is up and holds no copy in host RAM. */
  async function parksDeep() {
    const state = await until(
      'ib to be released',
      () => (['parked', 'stopped'].includes(bench.stateOf(ib)!) ? bench.stateOf(ib) : undefined),
      30_000,
    );
    expect(state).toBe('parked');
    expect(await bench.engine(ib)).toMatchObject({ state: 'parked', host_ram_bytes: 0 });
  }

  it('park deployment: its copy does not fit in host RAM, so it parks deep', async () => {
    await position();
    expect(await bench.command('park', ib.id)).toMatchObject({ deploymentId: ib.id, state: 'parking' });
    await parksDeep();
  });

  it('a switch: start jb --evict parks it deep', async () => {
    await position();
    expect((await start(jb)).victims).toEqual([
      { deploymentId: ib.id, instanceIndex: 0, gpuIndexes: [0], released: 'releasing: parking (deep)' },
    ]);
    await parksDeep();
  });

  it('the ready idle timer parks it deep', async () => {
    await position();
    await bench.restartServer(
      'switching: { drain_timeout: 5s, start_timeout: 60s }\nlifecycle_defaults: { ready_idle_timeout: 1s }',
    );
    await parksDeep();
  });
});
