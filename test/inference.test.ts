/**
 * The inference listener over real sockets: the gateway on 127.0.0.1:0, a request queue whose
 * instances serve, and real simulator engine processes behind it. Where a test is about the
 * gateway's own framing (a piece too large, a client that stops reading, an engine gone silent), a
 * tiny upstream written here stands in for the engine, since no engine is asked to misbehave so.
 */
import { once } from 'node:events';
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { connect } from 'node:net';
import type { FastifyInstance } from 'fastify';
import OpenAI from 'openai';
import pino from 'pino';
import { ulid } from 'ulid';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { apiErrors } from '../domain/catalogue.js';
import { CLIENT_READ_IDLE_MS } from '../domain/limits.js';
import type { EngineName } from '../domain/vocabulary.js';
import { buildInferenceApp } from '../gateway/inferenceApp.js';
import { INGRESS_SECRET_HEADER } from '../domain/hostIngress.js';
import { type Admission, RequestQueue } from '../gateway/requestQueue.js';
import { RoutingTable } from '../gateway/routingTable.js';
import { loadSettings } from '../settings/load.js';
import type { SharedQueueLimits } from '../settings/queue.js';
import { type RunningSimulator, startSimulator, stopSimulators } from './support/simulator.js';
import { until } from './support/until.js';

const FAST = ['--sim-load-ms', '50', '--sim-tokens-per-s', '2000'];
const LIMITS: SharedQueueLimits = {
  request_deadline: 30_000,
  max_pending_per_deployment: 64,
  max_pending_total: 256,
  max_buffered_bytes_total: 64 * 2 ** 20,
};

interface ModelAt {
  engine: EngineName;
  /** Its engine's URL; null when no route to it is known (the lookup throws). */
  baseUrl: string | null;
  /** Serving (ready) unless false. */
  ready?: boolean;
  explicit?: boolean;
}

interface Bench {
  url: string;
  port: number;
  queue: RequestQueue;
  ids: Record<string, string>;
  /** How each dispatched request ended, as its ticket was told. */
  finishes: { deploymentId: string; cut: boolean }[];
  /** The deployments of the dispatched requests whose first output came, in order. */
  outputs: string[];
  close(): Promise<void>;
}

const benches: Bench[] = [];
afterEach(async () => {
  await Promise.all(benches.splice(0).map((b) => b.close()));
});
afterAll(stopSimulators);

async function gateway(
  models: Record<string, ModelAt>,
  options: {
    limits?: Partial<SharedQueueLimits>;
    streamIdleMs?: number;
    bodyLimitBytes?: number;
    routeHeaders?: Record<string, string>;
    token?: string;
  } = {},
): Promise<Bench> {
  const table = new RoutingTable();
  const ids: Record<string, string> = {};
  const baseUrls = new Map<string, string | null>();
  const queue = new RequestQueue({ limits: () => ({ ...LIMITS, ...options.limits }), onDemand: () => {} });
  const finishes: Bench['finishes'] = [];
  const outputs: string[] = [];
  // Records each ticket's end as the relay reports it.
  const admit = queue.admit.bind(queue);
  queue.admit = async (arrival): Promise<Admission> => {
    const admission = await admit(arrival);
    if (admission.kind === 'dispatch') {
      const { ticket } = admission;
      const [finish, firstOutput] = [ticket.finish.bind(ticket), ticket.firstOutput.bind(ticket)];
      ticket.firstOutput = () => {
        outputs.push(arrival.deploymentId);
        firstOutput();
      };
      ticket.finish = (how) => {
        finishes.push({ deploymentId: arrival.deploymentId, cut: how.cut });
        finish(how);
      };
    }
    return admission;
  };
  for (const [name, m] of Object.entries(models)) {
    const id = (ids[name] = ulid());
    baseUrls.set(id, m.baseUrl);
    const activation = m.explicit ? 'lifecycle:\n  activation: explicit\n' : '';
    table.putDeployment({
      id,
      name,
      revision: 1,
      spec: loadSettings('deployment', { text: `name: ${name}\nengine: ${m.engine}\nmodel: m\n${activation}` }),
      operatorStopped: false,
    });
    if (m.ready === false) continue;
    table.setInstance({
      deploymentId: id,
      index: 0,
      hostId: 'gpu-box',
      generation: 1,
      observedState: 'ready',
      parkTier: null,
    });
    queue.startWaiters({ deploymentId: id, instanceIndex: 0, generation: 1 });
  }
  const app: FastifyInstance = await buildInferenceApp({
    table,
    queue,
    routeTo: (instance) => {
      const url = baseUrls.get(instance.deploymentId);
      if (!url) throw new Error(`no route to ${instance.deploymentId}`);
      return { url, streamIdleMs: options.streamIdleMs ?? 120_000, headers: options.routeHeaders };
    },
    logger: pino({ level: 'silent' }),
    bodyLimitBytes: options.bodyLimitBytes,
    token: options.token,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const port = (app.server.address() as { port: number }).port;
  const bench: Bench = {
    url: `http://127.0.0.1:${port}`,
    port,
    queue,
    ids,
    finishes,
    outputs,
    async close() {
      for (const id of Object.values(ids)) queue.failWaiters(id, apiErrors.internal());
      await app.close();
    },
  };
  benches.push(bench);
  return bench;
}

const chat = (model: string, more: Record<string, unknown> = {}) => ({
  model,
  messages: [{ role: 'user', content: 'Tell me about capybaras.' }],
  max_tokens: 24,
  ...more,
});

function postJson(url: string, body: unknown, signal?: AbortSignal) {
  return request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal,
  });
}

/** The answer's bytes with the two values each reply draws afresh (its id and creation time) fixed. */
const sameReplyBytes = (text: string) =>
  text.replace(/"id":"(chatcmpl|cmpl)-[0-9a-f]+"/g, '"id":"ID"').replace(/"created":\d+/g, '"created":0');

async function bodyOf(url: string, body: unknown) {
  const res = await postJson(url, body);
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
}

describe('answers through the gateway', () => {
  let vllm: RunningSimulator;
  let sglang: RunningSimulator;
  let bench: Bench;
  beforeAll(async () => {
    [vllm, sglang] = await Promise.all([
      startSimulator('vllm', ['m', '--served-model-name', 'chat-a', ...FAST]),
      startSimulator('sglang', ['--model-path', 'm', '--served-model-name', 'chat-b', ...FAST]),
    ]);
  });
  const open = () =>
    gateway({
      'chat-a': { engine: 'vllm', baseUrl: vllm.baseUrl },
      'chat-b': { engine: 'sglang', baseUrl: sglang.baseUrl },
    });

  it.each([
    ['chat, whole', '/v1/chat/completions', 'chat-a', chat('chat-a')],
    [
      'chat, streamed',
      '/v1/chat/completions',
      'chat-a',
      chat('chat-a', { stream: true, stream_options: { include_usage: true } }),
    ],
    [
      'chat with logprobs, whole',
      '/v1/chat/completions',
      'chat-a',
      chat('chat-a', { logprobs: true, top_logprobs: 2 }),
    ],
    ['text, whole', '/v1/completions', 'chat-a', { model: 'chat-a', prompt: 'Capybaras are', max_tokens: 24 }],
    ['SGLang chat, whole', '/v1/chat/completions', 'chat-b', chat('chat-b')],
    [
      'text, streamed',
      '/v1/completions',
      'chat-a',
      { model: 'chat-a', prompt: 'Capybaras are', max_tokens: 24, stream: true },
    ],
    ['SGLang chat, streamed', '/v1/chat/completions', 'chat-b', chat('chat-b', { stream: true })],
  ])('%s: the bytes are the engine’s own answer', async (_, path, model, body) => {
    bench = await open();
    const engine = model === 'chat-a' ? vllm : sglang;
    const [direct, through] = await Promise.all([
      bodyOf(`${engine.baseUrl}${path}`, body),
      bodyOf(`${bench.url}${path}`, body),
    ]);
    expect(through.status).toBe(200);
    expect(through.headers['content-type']).toBe(direct.headers['content-type']);
    expect(sameReplyBytes(through.text)).toBe(sameReplyBytes(direct.text));
    expect(through.text.length).toBeGreaterThan(100);
    expect(bench.finishes).toEqual([{ deploymentId: bench.ids[model], cut: false }]);
  });

  it('lists the deployments by the names requests use', async () => {
    bench = await open();
    const res = await request(`${bench.url}/v1/models`);
    expect(res.statusCode).toBe(200);
    const body = (await res.body.json()) as {
      object: string;
      data: { id: string; object: string; owned_by: string; created: number }[];
    };
    expect(body.object).toBe('list');
    expect(body.data.map((m) => [m.id, m.object, m.owned_by])).toEqual([
      ['chat-a', 'model', 'capyctl'],
      ['chat-b', 'model', 'capyctl'],
    ]);
    expect(Math.abs(body.data[0]!.created - Date.now() / 1000)).toBeLessThan(60);
  });

  it('serves the official openai client unchanged, streamed and not', async () => {
    bench = await open();
    const client = new OpenAI({ baseURL: `${bench.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const direct = (await (await postJson(`${vllm.baseUrl}/v1/chat/completions`, chat('chat-a'))).body.json()) as {
      choices: { message: { content: string } }[];
    };
    const expected = direct.choices[0]!.message.content;
    const whole = await client.chat.completions.create({
      model: 'chat-a',
      messages: chat('chat-a').messages as OpenAI.ChatCompletionMessageParam[],
      max_tokens: 24,
    });
    expect(whole.choices[0]!.message.content).toBe(expected);
    const stream = await client.chat.completions.create({
      model: 'chat-a',
      messages: chat('chat-a').messages as OpenAI.ChatCompletionMessageParam[],
      max_tokens: 24,
      stream: true,
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toBe(expected);
    const text2 = await client.completions.create({ model: 'chat-a', prompt: 'Capybaras are', max_tokens: 8 });
    expect(text2.choices[0]!.text.length).toBeGreaterThan(0);
  });

  it('answers 500 when no route to the instance is known, and frees the slot it was given', async () => {
    bench = await gateway({ 'chat-a': { engine: 'vllm', baseUrl: null } });
    const reply = await bodyOf(`${bench.url}/v1/chat/completions`, chat('chat-a'));
    expect(reply.status).toBe(500);
    expect(JSON.parse(reply.text)).toEqual({
      code: 'internal',
      message: 'internal error; it was logged',
      retryable: true,
    });
    expect(bench.finishes).toEqual([{ deploymentId: bench.ids['chat-a'], cut: false }]);
    expect(bench.queue.instanceInFlight(bench.ids['chat-a']!, 0)).toBe(0);
  });

  it('answers an unknown model 404, malformed JSON 400 and an oversized body 413', async () => {
    bench = await gateway({ 'chat-a': { engine: 'vllm', baseUrl: vllm.baseUrl } }, { bodyLimitBytes: 1024 });
    const unknown = await bodyOf(`${bench.url}/v1/chat/completions`, chat('nope'));
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.text)).toEqual({ code: 'not_found', message: 'model nope not found', retryable: false });

    const malformed = await request(`${bench.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"model": "chat-a",',
    });
    expect(malformed.statusCode).toBe(400);
    const bad = (await malformed.body.json()) as { code: string; message: string; retryable: boolean };
    expect(bad.code).toBe('invalid_request');
    expect(bad.message).toMatch(/^the body is not valid JSON: /);

    const noModel = await bodyOf(`${bench.url}/v1/chat/completions`, { messages: [] });
    expect(noModel.status).toBe(400);
    expect(JSON.parse(noModel.text)).toMatchObject({
      code: 'invalid_request',
      message: expect.stringContaining('body.model'),
    });

    const big = await bodyOf(`${bench.url}/v1/chat/completions`, chat('chat-a', { padding: 'x'.repeat(2048) }));
    expect(big.status).toBe(413);
    expect(JSON.parse(big.text)).toEqual({
      code: 'payload_too_large',
      message: 'the request body is larger than 1024 bytes',
      retryable: false,
    });
  });
});

describe('refusals over the socket', () => {
  const nowhere = 'http://127.0.0.1:9';

  it('429 with Retry-After: 1 once the waiting limit is reached', async () => {
    const bench = await gateway(
      { 'chat-a': { engine: 'vllm', baseUrl: nowhere, ready: false } },
      { limits: { max_pending_per_deployment: 1 } },
    );
    const first = new AbortController();
    const waiting = postJson(`${bench.url}/v1/chat/completions`, chat('chat-a'), first.signal).catch(() => undefined);
    await until('the first request to wait', () =>
      bench.queue.deployment(bench.ids['chat-a']!).waiting === 1 ? true : undefined,
    );
    const res = await postJson(`${bench.url}/v1/chat/completions`, chat('chat-a'));
    expect(res.statusCode).toBe(429);
    expect(res.headers['retry-after']).toBe('1');
    expect(await res.body.json()).toEqual({
      code: 'queue_full',
      message: `too many requests are waiting for deployment ${bench.ids['chat-a']}`,
      retryable: true,
    });
    // A client that hangs up while it waits gives up its place.
    first.abort();
    await waiting;
    await until('the waiter to leave', () =>
      bench.queue.deployment(bench.ids['chat-a']!).waiting === 0 ? true : undefined,
    );
  });

  it('409 deployment_inactive for an explicit model that is not running', async () => {
    const bench = await gateway({ 'chat-x': { engine: 'vllm', baseUrl: nowhere, ready: false, explicit: true } });
    const id = bench.ids['chat-x']!;
    const res = await postJson(`${bench.url}/v1/chat/completions`, chat('chat-x'));
    expect(res.statusCode).toBe(409);
    expect(await res.body.json()).toEqual({
      code: 'deployment_inactive',
      message: `deployment ${id} is not running and its activation is explicit (lifecycle.activation: explicit); inference does not start or wake it; start it with \`capyctl start deployment ${id}\``,
      retryable: false,
    });
  });

  it('503 while the deployment’s dispatch is closed', async () => {
    const bench = await gateway({ 'chat-a': { engine: 'vllm', baseUrl: nowhere } });
    const id = bench.ids['chat-a']!;
    bench.queue.close([{ deploymentId: id, instanceIndex: 0 }]);
    const res = await postJson(`${bench.url}/v1/completions`, { model: 'chat-a', prompt: 'hi' });
    expect(res.statusCode).toBe(503);
    expect(await res.body.json()).toEqual({
      code: 'unavailable',
      message: `dispatch to deployment ${id} is closed; retry shortly`,
      retryable: true,
    });
  });
});

describe('answers cut short', () => {
  it('a client that hangs up mid-stream stops the engine’s work, and the ticket records the cut', async () => {
    const sim = await startSimulator('vllm', [
      'm',
      '--served-model-name',
      'chat-a',
      '--sim-load-ms',
      '50',
      '--sim-tokens-per-s',
      '20',
    ]);
    const bench = await gateway({ 'chat-a': { engine: 'vllm', baseUrl: sim.baseUrl } });
    const client = new AbortController();
    const res = await postJson(
      `${bench.url}/v1/chat/completions`,
      chat('chat-a', { stream: true, max_tokens: 2000 }),
      client.signal,
    );
    expect(res.statusCode).toBe(200);
    let received = '';
    for await (const chunk of res.body) {
      received += String(chunk);
      if (received.includes('"content":"') && !received.endsWith('"content":""')) break;
    }
    expect((await sim.state()).running).toBe(1);
    client.abort();
    await until('the engine to run nothing', async () => ((await sim.state()).running === 0 ? true : undefined), 3_000);
    await until('the ticket to finish', () => (bench.finishes.length === 1 ? true : undefined), 3_000);
    expect(bench.finishes).toEqual([{ deploymentId: bench.ids['chat-a'], cut: true }]);
    // It had output, so the engine's count of running requests speaks for it.
    expect(bench.queue.cutBeforeOutput([{ deploymentId: bench.ids['chat-a']!, instanceIndex: 0 }])).toEqual([]);
  });

  it('a client that hangs up while a whole answer is generated stops the engine’s work; its output had come', async () => {
    const sim = await startSimulator('vllm', [
      'm',
      '--served-model-name',
      'chat-a',
      '--sim-load-ms',
      '50',
      '--sim-tokens-per-s',
      '20',
    ]);
    const bench = await gateway({ 'chat-a': { engine: 'vllm', baseUrl: sim.baseUrl } });
    const client = new AbortController();
    const pending = postJson(
      `${bench.url}/v1/chat/completions`,
      chat('chat-a', { max_tokens: 2000 }),
      client.signal,
    ).catch(() => undefined);
    // The client sees nothing of a whole answer before its end; the gateway sees the engine's stream of it.
    await until('the first output', () => (bench.outputs.length === 1 ? true : undefined), 3_000);
    client.abort();
    await pending;
    await until('the engine to run nothing', async () => ((await sim.state()).running === 0 ? true : undefined), 3_000);
    await until('the ticket to finish', () => (bench.finishes.length === 1 ? true : undefined), 3_000);
    expect(bench.finishes).toEqual([{ deploymentId: bench.ids['chat-a'], cut: true }]);
    // It had output, so the engine's count of running requests speaks for it.
    expect(bench.queue.cutBeforeOutput([{ deploymentId: bench.ids['chat-a']!, instanceIndex: 0 }])).toEqual([]);
  });

  it('a hang-up before any output marks the deployment cut before output', async () => {
    const sim = await startSimulator('vllm', [
      'm',
      '--served-model-name',
      'chat-a',
      ...FAST,
      '--sim-prefill-ms',
      '5000',
    ]);
    const bench = await gateway({ 'chat-a': { engine: 'vllm', baseUrl: sim.baseUrl } });
    const client = new AbortController();
    const pending = postJson(`${bench.url}/v1/chat/completions`, chat('chat-a', { stream: true }), client.signal).catch(
      () => undefined,
    );
    await until(
      'the engine to take the request',
      async () => ((await sim.state()).running === 1 ? true : undefined),
      3_000,
    );
    client.abort();
    await pending;
    await until('the ticket to finish', () => (bench.finishes.length === 1 ? true : undefined), 3_000);
    expect(bench.finishes).toEqual([{ deploymentId: bench.ids['chat-a'], cut: true }]);
    expect(bench.queue.cutBeforeOutput([{ deploymentId: bench.ids['chat-a']!, instanceIndex: 0 }])).toEqual([
      bench.ids['chat-a'],
    ]);
    await until('the engine to run nothing', async () => ((await sim.state()).running === 0 ? true : undefined), 3_000);
  });

  it('TensorFold’s role chunk is not output: a prefill past the request deadline is answered the queue deadline', async () => {
    const sim = await startSimulator('tensorfold', [
      '--model',
      'm',
      '--served-model-name',
      'chat-t',
      ...FAST,
      '--sim-prefill-ms',
      '3000',
    ]);
    const bench = await gateway(
      { 'chat-t': { engine: 'tensorfold', baseUrl: sim.baseUrl } },
      { limits: { request_deadline: 500 } },
    );
    const id = bench.ids['chat-t']!;
    const startedAt = Date.now();
    const res = await postJson(`${bench.url}/v1/chat/completions`, chat('chat-t', { stream: true }));
    expect(res.statusCode).toBe(503);
    expect(await res.body.json()).toEqual({
      code: 'unavailable',
      message: `deployment ${id} did not become servable within the queue deadline; retry shortly`,
      retryable: true,
    });
    expect(Date.now() - startedAt).toBeLessThan(2_500);
    expect(bench.finishes).toEqual([{ deploymentId: id, cut: true }]);
    await until('the engine to run nothing', async () => ((await sim.state()).running === 0 ? true : undefined), 3_000);
  });
});

/**
 * A stand-in engine that answers every request with `answer`; `bodies` are the requests' bodies as
 * it received them, and `closed` settles when a reply's connection closes before it ended.
 */
async function upstream(answer: (res: ServerResponse) => void) {
  let cut!: () => void;
  const closed = new Promise<number>((resolve) => (cut = () => resolve(Date.now())));
  const bodies: Buffer[] = [];
  const heads: IncomingHttpHeaders[] = [];
  const server: Server = createServer(async (req: IncomingMessage, res) => {
    heads.push(req.headers);
    const parts: Buffer[] = [];
    for await (const part of req) parts.push(part as Buffer);
    bodies.push(Buffer.concat(parts));
    res.once('close', () => {
      if (!res.writableFinished) cut();
    });
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
    answer(res);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const close = async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  };
  upstreams.push(close);
  return { baseUrl: `http://127.0.0.1:${(server.address() as { port: number }).port}`, closed, bodies, heads };
}
const upstreams: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(upstreams.splice(0).map((close) => close()));
});

const event = (delta: Record<string, unknown>) =>
  `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;

describe('the request as the engine gets it', () => {
  const done = (res: ServerResponse) => res.end(event({ content: 'hi' }) + 'data: [DONE]\n\n');
  // Spacing and key order a re-encoding would not keep.
  const written = '{ "max_tokens":8,  "model": "chat-a", "messages":[{"role":"user","content":"hi"}], "stream": true }';
  const send = (bench: Bench, headers: Record<string, string> = {}) =>
    request(`${bench.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer client-key', ...headers },
      body: written,
    });

  it('is the client’s body byte for byte, without the client’s credentials', async () => {
    const engine = await upstream(done);
    const bench = await gateway({ 'chat-a': { engine: 'vllm', baseUrl: engine.baseUrl } });
    const res = await send(bench);
    expect(await res.body.text()).toBe(event({ content: 'hi' }) + 'data: [DONE]\n\n');
    expect(engine.bodies.map(String)).toEqual([written]);
  });

  it('carries the host ingress’s secret when its route asks for it, and never a client’s copy of it', async () => {
    const clientCopy = { [INGRESS_SECRET_HEADER]: 'a-client-copy' };
    const ingress = await upstream(done);
    await (
      await send(
        await gateway(
          { 'chat-a': { engine: 'vllm', baseUrl: ingress.baseUrl } },
          { routeHeaders: { [INGRESS_SECRET_HEADER]: 'the-host-secret' } },
        ),
        clientCopy,
      )
    ).body.text();
    // A standalone's route to its own engine asks for none.
    const engine = await upstream(done);
    await (
      await send(await gateway({ 'chat-a': { engine: 'vllm', baseUrl: engine.baseUrl } }), clientCopy)
    ).body.text();
    expect(ingress.heads[0]?.[INGRESS_SECRET_HEADER]).toBe('the-host-secret');
    expect(engine.heads[0]).not.toHaveProperty(INGRESS_SECRET_HEADER);
    expect([ingress.heads[0], engine.heads[0]]).not.toContainEqual(
      expect.objectContaining({ authorization: expect.anything() }),
    );
  });

  it('asks for the listener’s own token when it has one, and passes it on to no engine', async () => {
    const engine = await upstream(done);
    const bench = await gateway({ 'chat-a': { engine: 'vllm', baseUrl: engine.baseUrl } }, { token: 'inference-key' });
    const refused = apiErrors.unauthorized('inference token');
    for (const headers of [{}, { authorization: 'Bearer wrong-key' }, { authorization: 'Basic inference-key' }]) {
      const res = await request(`${bench.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: written,
      });
      expect(res.statusCode).toBe(401);
      expect(await res.body.json()).toEqual({ code: 'unauthorized', message: refused.message, retryable: false });
    }
    expect((await request(`${bench.url}/v1/models`)).statusCode).toBe(401);
    expect(engine.bodies).toEqual([]);

    const res = await send(bench, { authorization: 'Bearer inference-key' });
    expect(res.statusCode).toBe(200);
    expect(await res.body.text()).toBe(event({ content: 'hi' }) + 'data: [DONE]\n\n');
    expect(engine.heads[0]).not.toHaveProperty('authorization');
  });

  it('names the request with `rid` for SGLang, so an abort can find it', async () => {
    const engine = await upstream(done);
    const bench = await gateway({ 'chat-a': { engine: 'sglang', baseUrl: engine.baseUrl } });
    await (await send(bench)).body.text();
    const { rid, ...rest } = JSON.parse(String(engine.bodies[0]));
    expect(rid).toMatch(/^[0-9a-f-]{36}$/);
    expect(rest).toEqual(JSON.parse(written));
  });

  it('asks a whole answer as a stream with its usage, and answers it whole', async () => {
    const engine = await upstream(done);
    const bench = await gateway({ 'chat-a': { engine: 'vllm', baseUrl: engine.baseUrl } });
    const whole = { max_tokens: 8, model: 'chat-a', messages: [{ role: 'user', content: 'hi' }] };
    const res = await postJson(`${bench.url}/v1/chat/completions`, whole);
    expect(res.headers['content-type']).toBe('application/json');
    expect(await res.body.json()).toEqual({
      id: 'c',
      object: 'chat.completion',
      choices: [{ index: 0, message: { role: 'assistant', content: 'hi', tool_calls: [] }, finish_reason: null }],
    });
    expect(JSON.parse(String(engine.bodies[0]))).toEqual({
      ...whole,
      stream: true,
      stream_options: { include_usage: true },
    });
  });
});

describe('stream bounds', () => {
  it('a single piece larger than 64 KiB ends the stream and the engine’s connection', async () => {
    const engine = await upstream((res) => {
      res.write(event({ role: 'assistant', content: '' }));
      res.write(event({ content: 'Capybaras' }));
      setTimeout(() => res.write(`data: ${'x'.repeat(65 * 1024)}\n\n`), 100);
    });
    const bench = await gateway({ 'chat-a': { engine: 'vllm', baseUrl: engine.baseUrl } });
    const res = await postJson(`${bench.url}/v1/chat/completions`, chat('chat-a', { stream: true }));
    expect(res.statusCode).toBe(200);
    let received = '';
    await expect(
      (async () => {
        for await (const chunk of res.body) received += String(chunk);
      })(),
    ).rejects.toThrow();
    expect(received).toBe(event({ role: 'assistant', content: '' }) + event({ content: 'Capybaras' }));
    await engine.closed;
    await until('the ticket to finish', () => (bench.finishes.length === 1 ? true : undefined), 3_000);
    expect(bench.finishes[0]!.cut).toBe(true);
  });

  it('an engine silent for stream_idle_timeout after its first output ends the stream', async () => {
    const engine = await upstream((res) => res.write(event({ content: 'Capybaras' })));
    const bench = await gateway({ 'chat-a': { engine: 'vllm', baseUrl: engine.baseUrl } }, { streamIdleMs: 300 });
    const startedAt = Date.now();
    const res = await postJson(`${bench.url}/v1/chat/completions`, chat('chat-a', { stream: true }));
    await expect(res.body.text()).rejects.toThrow();
    const endedAt = await engine.closed;
    expect(endedAt - startedAt).toBeGreaterThanOrEqual(300);
    expect(endedAt - startedAt).toBeLessThan(2_000);
  });

  it(
    `a client that reads nothing for ${CLIENT_READ_IDLE_MS / 1000} s has its stream ended`,
    { timeout: 25_000 },
    async () => {
      // An engine that writes as fast as it is read.
      const engine = await upstream((res) => {
        const piece = event({ content: 'capybara '.repeat(100) });
        const more = () => {
          while (!res.destroyed && res.write(piece));
          if (!res.destroyed) res.once('drain', more);
        };
        more();
      });
      const bench = await gateway({ 'chat-a': { engine: 'vllm', baseUrl: engine.baseUrl } });
      const body = JSON.stringify(chat('chat-a', { stream: true }));
      const socket = connect(bench.port, '127.0.0.1');
      socket.write(
        `POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
      await once(socket, 'data');
      // The client stops reading: the socket buffers fill, then the gateway's writes stop draining.
      socket.pause();
      const pausedAt = Date.now();
      try {
        const endedAt = await engine.closed;
        expect(endedAt - pausedAt).toBeGreaterThanOrEqual(CLIENT_READ_IDLE_MS);
        expect(endedAt - pausedAt).toBeLessThan(CLIENT_READ_IDLE_MS + 5_000);
        await until('the ticket to finish', () => (bench.finishes.length === 1 ? true : undefined), 3_000);
        expect(bench.finishes[0]!.cut).toBe(true);
      } finally {
        socket.destroy();
      }
    },
  );
});
