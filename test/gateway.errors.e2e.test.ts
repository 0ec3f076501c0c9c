/**
 * The spec's "Errors while waiting" and "No waiting", as a client sees them over real sockets: the
 * real server, a host agent running simulator engines, and the real workflows on Temporal. The
 * short bounds come from the host and server documents. The simulated card holds one model at a
 * time, so every request for another model is a switch.
 */
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { type ApiError, apiErrors } from '../domain/catalogue.js';
import type { Deployment } from '../store/deployments.js';
import { simDeployment } from './support/lifecycle.js';
import { ADMIN_TOKEN, type OpenStream, type Reply, type ServerBench, startServerBench } from './support/serverBench.js';
import { until } from './support/until.js';

const RUNNING_PER_MODEL = 32;
const REQUEST_DEADLINE_MS = 5_000;
const DRAIN_TIMEOUT_MS = 1_000;

/** Every 429 carries Retry-After: 1; every error is `{code, message, retryable: true}` here. */
function expectRefusal(reply: Reply, status: 429 | 503, code: string, message: string) {
  expect({ status: reply.status, body: reply.body }).toEqual({ status, body: { code, message, retryable: true } });
  if (status === 429) expect(reply.headers['retry-after']).toBe('1');
}

/** The capacity refusal `start --evict` gives, as a request gets it: 409, not retryable, no Retry-After. */
function expectCapacityRefusal(reply: Reply, error: ApiError) {
  expect({ status: reply.status, body: reply.body }).toEqual({
    status: 409,
    body: { code: 'insufficient_capacity', message: error.message, retryable: false },
  });
  expect(reply.headers['retry-after']).toBeUndefined();
}

const timed = async <T>(f: () => Promise<T>) => {
  const startedAt = Date.now();
  const value = await f();
  return { value, ms: Date.now() - startedAt };
};

/** `count` streams of `d` running at once, each past its first output; `max_tokens` keeps them running. */
async function streams(bench: ServerBench, d: Deployment, count: number, maxTokens: number): Promise<OpenStream[]> {
  const open = await Promise.all(Array.from({ length: count }, () => bench.stream(d, { max_tokens: maxTokens })));
  expect(open.map((s) => s.status)).toEqual(Array(count).fill(200));
  return open;
}

/**
 * Hangs up `open` and waits for them to leave the gateway's count and `d`'s engine: the next test's
 * switch finds nothing to drain.
 */
async function hangUp(bench: ServerBench, d: Deployment, open: readonly OpenStream[]) {
  for (const s of open) s.end();
  await until('the hung-up requests to leave', async () =>
    (await bench.load(`?deployment=${d.id}`)).deployments[0]!.router.in_flight === 0 &&
    (await bench.engine(d)).running === 0
      ? true
      : undefined,
  );
}

describe('errors while waiting', () => {
  let bench: ServerBench;
  let a: Deployment;
  let b: Deployment;

  beforeAll(async () => {
    bench = await startServerBench({
      serverYaml: `switching: { drain_timeout: ${DRAIN_TIMEOUT_MS}ms, start_timeout: 60s }`,
      hostYaml: `resource_policy: { queue: { admission_window: 100ms, request_deadline: ${REQUEST_DEADLINE_MS}ms, max_pending_per_deployment: 2, max_pending_total: 3, max_buffered_bytes_total: 4KiB } }`,
    });
    a = await bench.deploy('chat-a');
    b = await bench.deploy('chat-b');
  });
  afterAll(async () => {
    await bench?.close();
  });

  /**
   * A test's own set-up, whatever the ones before it left: `d` ready by the operator's start (after
   * any switch still running; it parks what holds the GPU) and nothing waiting for any model.
   */
  async function readyAlone(d: Deployment) {
    await bench.command('start', d.id);
    await until(`${d.name} to be ready`, () => (bench.stateOf(d) === 'ready' ? true : undefined), 30_000);
    await until('no request to wait', async () =>
      (await bench.load()).deployments.every((l) => l.router.waiting === 0) ? true : undefined,
    );
  }

  it('503 queue deadline: a model that does not become servable within the request deadline', async () => {
    const slow = await bench.deploy('slow-start', simDeployment('slow-start', 'vllm', ['--sim-load-ms', '7000']));
    const { value: reply, ms } = await timed(() => bench.chat(slow));
    expectRefusal(
      reply,
      503,
      'unavailable',
      `deployment ${slow.id} did not become servable within the queue deadline; retry shortly`,
    );
    expect(ms).toBeGreaterThanOrEqual(REQUEST_DEADLINE_MS);
    expect(ms).toBeLessThan(REQUEST_DEADLINE_MS + 1_500);
    // The start goes on: the retry the message asks for is served.
    await until('the slow model to be ready', () => (bench.stateOf(slow) === 'ready' ? true : undefined));
    expect((await bench.chat(slow)).status).toBe(200);
  });

  it('429 at the waiting limit per model, at the buffered-bytes bound and at the waiting limit in total', async () => {
    // Its start takes 7 s, past the 5 s request deadline: the two requests that fill its place wait
    // through every refusal below, however slow the machine, and then get the deadline's answer.
    const queued = await bench.deploy('queued', simDeployment('queued', 'vllm', ['--sim-load-ms', '7000']));
    const first = [timed(() => bench.chat(queued)), timed(() => bench.chat(queued))];
    await until('two requests to wait', async () =>
      (await bench.load(`?deployment=${queued.id}`)).deployments[0]!.router.waiting === 2 ? true : undefined,
    );

    expectRefusal(
      await bench.chat(queued),
      429,
      'queue_full',
      `too many requests are waiting for deployment ${queued.id}`,
    );
    // 4 KiB in total: a waiting body of 5 KiB would pass it.
    expectRefusal(
      await bench.chat(b, { user: 'x'.repeat(5 * 1024) }),
      429,
      'queue_full',
      'waiting requests exceed the buffered-bytes bound',
    );

    // A third request waits (3 in total); the fourth passes the total, though chat-b has one waiting only.
    const client = new AbortController();
    const third = bench.chat(b, {}, client.signal).catch((e: Error) => e);
    await until('a third request to wait', async () =>
      (await bench.load(`?deployment=${b.id}`)).deployments[0]!.router.waiting === 1 ? true : undefined,
    );
    expectRefusal(await bench.chat(b), 429, 'queue_full', `too many requests are waiting for deployment ${b.id}`);
    client.abort();
    expect(await third).toMatchObject({ name: 'AbortError' });
    await until('the hung-up request to leave', async () =>
      (await bench.load(`?deployment=${b.id}`)).deployments[0]!.router.waiting === 0 ? true : undefined,
    );

    // The two that waited each get one answer: the queue deadline's, once.
    for (const { value: reply, ms } of await Promise.all(first)) {
      expectRefusal(
        reply,
        503,
        'unavailable',
        `deployment ${queued.id} did not become servable within the queue deadline; retry shortly`,
      );
      expect(ms).toBeGreaterThanOrEqual(REQUEST_DEADLINE_MS);
      expect(ms).toBeLessThan(REQUEST_DEADLINE_MS + 1_500);
    }
  });

  it('503 dispatch closed while the loaded model drains, then 503 drain timeout: the victim serves again', async () => {
    await readyAlone(a);
    // 500 tokens at the simulator's 50 per second: 10 s, well past the window and the 1 s drain bound.
    const [long] = await streams(bench, a, 1, 500);
    const switchAt = Date.now();
    const waiter = bench.chat(b);
    await until('chat-a to close its dispatch', () =>
      bench.server.queue.dispatchOf(a.id) === 'closed' ? true : undefined,
    );
    expectRefusal(await bench.chat(a), 503, 'unavailable', `dispatch to deployment ${a.id} is closed; retry shortly`);

    const failed = await waiter;
    expectRefusal(
      failed,
      503,
      'unavailable',
      `switch to ${b.id} failed: drain timeout after ${DRAIN_TIMEOUT_MS} ms with 1 request(s) still charged; the victims serve again; retry shortly`,
    );
    // The demand's way to the scheduler and the window come on top of the drain bound; the answer
    // it did not wait for runs 10 s.
    expect(failed.endAtMs - switchAt).toBeGreaterThanOrEqual(DRAIN_TIMEOUT_MS);
    expect(failed.endAtMs - switchAt).toBeLessThan(DRAIN_TIMEOUT_MS + 6_000);
    // The victim serves again, and its long answer was never cut.
    expect((await bench.chat(a)).status).toBe(200);
    expect(await long!.rest()).toMatch(/"finish_reason":"length"[\s\S]*data: \[DONE\]\n\n$/);
    expect(bench.stateOf(a)).toBe('ready');
    expect(bench.stateOf(b)).not.toBe('ready');
  });

  it('429 when 32 requests kept running for the whole request deadline', async () => {
    await readyAlone(a);
    // 350 tokens at 50 per second: 7 s each, past the 5 s deadline.
    const running = await streams(bench, a, RUNNING_PER_MODEL, 350);
    const { value: reply, ms } = await timed(() => bench.chat(a));
    expectRefusal(reply, 429, 'queue_full', `deployment ${a.id} stayed at its in-flight bound for the queue deadline`);
    expect(ms).toBeGreaterThanOrEqual(REQUEST_DEADLINE_MS);
    expect(ms).toBeLessThan(REQUEST_DEADLINE_MS + 1_500);
    await hangUp(bench, a, running);
  });

  it('409 deployment_inactive for an explicit model that is not running, with nothing queued or started', async () => {
    const x = await bench.deploy('chat-x', simDeployment('chat-x', 'vllm', [], 'lifecycle:\n  activation: explicit\n'));
    const reply = await bench.chat(x);
    expect({ status: reply.status, body: reply.body }).toEqual({
      status: 409,
      body: {
        code: 'deployment_inactive',
        message: `deployment ${x.id} is not running and its activation is explicit (lifecycle.activation: explicit); inference does not start or wake it; start it with \`capyctl start deployment ${x.id}\``,
        retryable: false,
      },
    });
    const [shown] = (await bench.load(`?deployment=${x.id}`)).deployments;
    expect(shown).toMatchObject({ router: { in_flight: 0, waiting: 0 }, instances: [] });
  });

  it('409 insufficient_capacity at once, naming the holder, for a model whose memory an explicit model holds', async () => {
    const x = await bench.deploy(
      'chat-pinned',
      simDeployment('chat-pinned', 'vllm', [], 'lifecycle:\n  activation: explicit\n'),
    );
    await bench.command('start', x.id);
    await until('chat-pinned to be ready', () => (bench.stateOf(x) === 'ready' ? true : undefined), 30_000);
    const { value: reply, ms } = await timed(() => bench.chat(b));
    expectCapacityRefusal(reply, apiErrors.insufficientCapacity(b.id, [{ name: 'chat-pinned', keptBy: 'explicit' }]));
    expect(ms).toBeLessThan(REQUEST_DEADLINE_MS / 2);
    await bench.command('stop', x.id);
  });

  it('409 insufficient_capacity, saying warm, for a request already waiting when the model holding its memory became warm', async () => {
    await until(
      'the GPU to be free',
      () => (bench.stateOf(a) !== 'ready' && bench.stateOf(b) !== 'ready' ? true : undefined),
      30_000,
    );
    // chat-w starts for 2.5 s; the request for chat-b waits behind its start, and chat-w is made warm meanwhile.
    // The operator starts it: a request would have only the 5 s deadline for the start, on a busy machine too.
    const args = ['--sim-load-ms', '2500'];
    const w = await bench.deploy('chat-w', simDeployment('chat-w', 'vllm', args));
    await bench.command('start', w.id);
    await until('chat-w to start', () => (bench.stateOf(w) === 'starting' ? true : undefined));
    const waiter = timed(() => bench.chat(b));
    await until('the request for chat-b to wait', async () =>
      (await bench.load(`?deployment=${b.id}`)).deployments[0]!.router.waiting === 1 ? true : undefined,
    );
    // Deployed again as `capyctl deploy` does: the new revision holds at once, its measurement runs behind.
    const warm = parseYaml(simDeployment('chat-w', 'vllm', args, 'lifecycle:\n  warm: true\n'));
    const redeployed = await request(`${bench.server.managementUrl}/management/v1/deployments`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(warm),
    });
    expect(redeployed.statusCode).toBe(200);
    await redeployed.body.dump();
    expect(bench.stateOf(w)).toBe('starting');
    const { value: reply, ms } = await waiter;
    expectCapacityRefusal(reply, apiErrors.insufficientCapacity(b.id, [{ name: 'chat-w', keptBy: 'warm' }]));
    expect(ms).toBeLessThan(REQUEST_DEADLINE_MS);
  });
});

describe('no waiting: max_pending_per_deployment 0', () => {
  let bench: ServerBench;
  let a: Deployment;
  let b: Deployment;

  beforeAll(async () => {
    bench = await startServerBench({
      hostYaml: 'resource_policy: { queue: { admission_window: 100ms, max_pending_per_deployment: 0 } }',
    });
    a = await bench.deploy('chat-a');
    b = await bench.deploy('chat-b');
  });
  afterAll(async () => {
    await bench?.close();
  });

  it('429 at once for a model that is not loaded; its start was asked for, so a retry after the hint is served', async () => {
    const { value: reply, ms } = await timed(() => bench.chat(a));
    expectRefusal(
      reply,
      429,
      'queue_full',
      `deployment ${a.id} is not servable now and lets no request wait; retry shortly`,
    );
    expect(ms).toBeLessThan(500);
    await until('chat-a to start', () => (bench.stateOf(a) === 'ready' ? true : undefined), 30_000);
    expect((await bench.chat(a)).status).toBe(200);
  });

  it('429 at once for a parked model, and the retry finds it woken', async () => {
    await until('chat-b to be served', async () => ((await bench.chat(b)).status === 200 ? true : undefined));
    expect(bench.stateOf(a)).toBe('parked');
    const { value: reply, ms } = await timed(() => bench.chat(a));
    expectRefusal(
      reply,
      429,
      'queue_full',
      `deployment ${a.id} is not servable now and lets no request wait; retry shortly`,
    );
    expect(ms).toBeLessThan(500);
    await until('chat-a to wake', () => (bench.stateOf(a) === 'ready' ? true : undefined), 30_000);
    expect((await bench.chat(a)).status).toBe(200);
  });

  it('429 at once beyond the 32 running requests', async () => {
    const running = await streams(bench, a, RUNNING_PER_MODEL, 250);
    const { value: reply, ms } = await timed(() => bench.chat(a));
    expectRefusal(
      reply,
      429,
      'queue_full',
      `deployment ${a.id} is at its in-flight bound and lets no request wait; retry shortly`,
    );
    expect(ms).toBeLessThan(500);
    await hangUp(bench, a, running);
  });

  it('409 deployment_stopped for a model an operator stopped, with nothing queued or started', async () => {
    await bench.command('stop', a.id);
    expect(bench.stateOf(a)).toBe('stopped');
    const reply = await bench.chat(a);
    expect({ status: reply.status, body: reply.body }).toEqual({
      status: 409,
      body: {
        code: 'deployment_stopped',
        message: `deployment ${a.id} was stopped by an operator; inference does not start it; start it with \`capyctl start deployment ${a.id}\``,
        retryable: false,
      },
    });
    await new Promise((r) => setTimeout(r, 500));
    expect(bench.stateOf(a)).toBe('stopped');
    expect((await bench.load(`?deployment=${a.id}`)).deployments[0]!.router).toMatchObject({
      in_flight: 0,
      waiting: 0,
    });
  });
});
