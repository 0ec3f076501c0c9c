/** The simulator's vLLM dialect, as a client sees it over HTTP: routes, JSON, SSE, sleep mode, metrics. */
import { afterEach, describe, expect, it } from 'vitest';
import {
  FAST_SIM_ARGS,
  post,
  readEvents,
  type RunningSimulator,
  startSimulator,
  stopSimulators,
  streamFrames,
  VLLM_DEV_MODE,
} from './support/simulator.js';

const MODEL = 'Qwen/Qwen3-4B';

afterEach(stopSimulators);

function vllm(extra: string[] = [], env: Record<string, string> = VLLM_DEV_MODE): Promise<RunningSimulator> {
  return startSimulator('vllm', [MODEL, '--enable-sleep-mode', ...FAST_SIM_ARGS, ...extra], { env });
}

async function chat(sim: RunningSimulator, content: string, extra: Record<string, unknown> = {}) {
  const res = await post(`${sim.baseUrl}/v1/chat/completions`, {
    model: MODEL,
    messages: [{ role: 'user', content }],
    ...extra,
  });
  return { status: res.status, body: (await res.json()) as any };
}

describe('vLLM dialect: serving', () => {
  it('refuses connections until loaded, then answers /health 200 with an empty body', async () => {
    const sim = await startSimulator('vllm', [MODEL, '--sim-load-ms', '1500'], { waitReady: false });
    // Wait until the process has started (and is loading), then check the socket is still closed.
    await expect
      .poll(
        () =>
          sim.state().then(
            () => 'up',
            (e: Error) => (e.cause as { code?: string })?.code,
          ),
        { timeout: 1_000 },
      )
      .toBe('ECONNREFUSED');
    await expect
      .poll(
        () =>
          fetch(`${sim.baseUrl}/health`).then(
            (r) => r.status,
            () => 0,
          ),
        { timeout: 10_000, interval: 50 },
      )
      .toBe(200);
    const health = await fetch(`${sim.baseUrl}/health`);
    expect(await health.text()).toBe('');
    expect(sim.stdout()).toContain('Application startup complete.');
    expect(await (await fetch(`${sim.baseUrl}/version`)).json()).toEqual({ version: '0.10.1' });
  });

  it('lists its model in vLLM’s shape, under --served-model-name when given', async () => {
    const sim = await startSimulator('vllm', [
      MODEL,
      '--served-model-name',
      'chat-a',
      '--tensor-parallel-size',
      '1',
      '--trust-remote-code',
      ...FAST_SIM_ARGS,
    ]);
    const models = (await (await fetch(`${sim.baseUrl}/v1/models`)).json()) as any;
    expect(models).toMatchObject({
      object: 'list',
      data: [{ id: 'chat-a', object: 'model', owned_by: 'vllm', root: MODEL, parent: null, max_model_len: 40960 }],
    });
    expect(models.data[0].permission).toHaveLength(1);
    const named = await post(`${sim.baseUrl}/v1/chat/completions`, {
      model: 'chat-a',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(named.status).toBe(200);
  });

  it('answers deterministically per prompt, honouring max_tokens (16 by default)', async () => {
    const sim = await vllm();
    const first = await chat(sim, 'What is a capybara?');
    const again = await chat(sim, 'What is a capybara?');
    const other = await chat(sim, 'Where do capybaras live?');
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({
      object: 'chat.completion',
      model: MODEL,
      choices: [{ index: 0, message: { role: 'assistant' }, finish_reason: 'length' }],
      usage: { completion_tokens: 16 },
    });
    expect(first.body.id).toMatch(/^chatcmpl-/);
    expect(first.body.choices[0].message.content.split(' ')).toHaveLength(16);
    expect(again.body.choices[0].message.content).toBe(first.body.choices[0].message.content);
    expect(other.body.choices[0].message.content).not.toBe(first.body.choices[0].message.content);
    const short = await chat(sim, 'What is a capybara?', { max_tokens: 3 });
    expect(short.body.choices[0].message.content).toBe(
      first.body.choices[0].message.content.split(' ').slice(0, 3).join(' '),
    );
    expect(short.body.usage.total_tokens).toBe(short.body.usage.prompt_tokens + 3);

    const text = await post(`${sim.baseUrl}/v1/completions`, {
      model: MODEL,
      prompt: 'Once upon a time',
      max_tokens: 4,
    });
    expect(await text.json()).toMatchObject({
      object: 'text_completion',
      choices: [{ index: 0, finish_reason: 'length' }],
      usage: { completion_tokens: 4 },
    });
  });

  it('reads a prompt at --sim-prefill-tokens-per-s: a long prompt’s answer comes later', async () => {
    const sim = await vllm(['--sim-prefill-tokens-per-s', '1000']);
    const timed = async (words: number) => {
      const started = Date.now();
      const answer = await chat(sim, Array.from({ length: words }, () => 'capybara').join(' '), { max_tokens: 1 });
      expect(answer.body.usage.prompt_tokens).toBe(words + 1); // "user:" is a word of the prompt too
      return Date.now() - started;
    };
    // 600 prompt tokens at 1,000 a second: 600 ms before the first token; 2 tokens: 2 ms.
    expect(await timed(599)).toBeGreaterThanOrEqual(590);
    expect(await timed(1)).toBeLessThan(300);
  });

  it('streams SSE: the role chunk, one chunk per token, finish_reason on the last, usage, then [DONE]', async () => {
    const sim = await vllm();
    const plain = await chat(sim, 'Tell me about rivers', { max_tokens: 5 });
    const res = await post(`${sim.baseUrl}/v1/chat/completions`, {
      model: MODEL,
      messages: [{ role: 'user', content: 'Tell me about rivers' }],
      max_tokens: 5,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const events = (await readEvents(res)) as any[];
    expect(events).toHaveLength(1 + 5 + 1 + 1);
    expect(events[0].choices[0]).toEqual({
      index: 0,
      delta: { role: 'assistant', content: '' },
      logprobs: null,
      finish_reason: null,
    });
    const tokens = events.slice(1, 6);
    expect(tokens[0]).toEqual({
      id: events[0].id,
      object: 'chat.completion.chunk',
      created: events[0].created,
      model: MODEL,
      choices: [{ index: 0, delta: { content: expect.any(String) }, logprobs: null, finish_reason: null }],
    });
    expect(tokens.map((e) => e.choices[0].finish_reason)).toEqual([null, null, null, null, 'length']);
    expect(tokens.map((e) => e.choices[0].delta.content).join('')).toBe(plain.body.choices[0].message.content);
    expect(new Set(events.slice(0, 7).map((e) => e.id)).size).toBe(1);
    expect(events[6]).toMatchObject({ object: 'chat.completion.chunk', choices: [], usage: { completion_tokens: 5 } });
    expect(events[7]).toBe('[DONE]');

    const textStream = await post(`${sim.baseUrl}/v1/completions`, {
      model: MODEL,
      prompt: 'abc',
      max_tokens: 2,
      stream: true,
    });
    const textEvents = (await readEvents(textStream)) as any[];
    expect(textEvents.map((e) => (e === '[DONE]' ? e : e.choices[0].finish_reason))).toEqual([
      null,
      'length',
      '[DONE]',
    ]);
  });

  it('answers an unknown model or a bad body in vLLM’s error JSON', async () => {
    const sim = await vllm();
    const unknown = await post(`${sim.baseUrl}/v1/chat/completions`, {
      model: 'nope',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({
      error: { message: 'The model `nope` does not exist.', type: 'NotFoundError', param: null, code: 404 },
    });
    const bad = await post(`${sim.baseUrl}/v1/chat/completions`, { model: MODEL });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: { type: 'BadRequestError', code: 400 } });
    const long = await post(`${sim.baseUrl}/v1/completions`, { model: MODEL, prompt: 'one two', max_tokens: 40959 });
    expect(long.status).toBe(400);
    expect(((await long.json()) as any).error.message).toContain(
      "This model's maximum context length is 40960 tokens. However, you requested 40961 tokens",
    );
    const route = await fetch(`${sim.baseUrl}/nowhere`);
    expect(route.status).toBe(404);
    expect(await route.json()).toEqual({ detail: 'Not Found' });
  });

  it('answers a decision model with one option and every option in top_logprobs', async () => {
    const sim = await vllm(['--sim-decision', 'yes,no,maybe']);
    const ask = () =>
      chat(sim, 'Is the river warm?', { logprobs: true, top_logprobs: 3, max_tokens: 1, temperature: 0.7 });
    const { status, body } = await ask();
    expect(status).toBe(200);
    const choice = body.choices[0];
    expect(['yes', 'no', 'maybe']).toContain(choice.message.content);
    const top = choice.logprobs.content[0].top_logprobs as Array<{ token: string; logprob: number }>;
    expect(top.map((t) => t.token).sort()).toEqual(['maybe', 'no', 'yes']);
    expect(top[0]!.token).toBe(choice.message.content);
    expect(top.reduce((sum, t) => sum + Math.exp(t.logprob), 0)).toBeCloseTo(1, 6);
    expect((await ask()).body.choices[0].logprobs).toEqual(choice.logprobs);
  });

  it('aborts a request when its client hangs up', async () => {
    const sim = await vllm(['--sim-tokens-per-s', '20']);
    const controller = new AbortController();
    const res = await post(
      `${sim.baseUrl}/v1/chat/completions`,
      { model: MODEL, messages: [{ role: 'user', content: 'long' }], max_tokens: 200, stream: true },
      controller.signal,
    );
    const frames = streamFrames(res);
    await frames.next();
    expect((await sim.state()).running).toBe(1);
    controller.abort();
    await expect.poll(async () => (await sim.state()).running, { timeout: 2_000 }).toBe(0);
  });

  it('counts running and waiting requests in its metrics, with KV use moving with load', async () => {
    const sim = await vllm(['--max-num-seqs', '1', '--sim-tokens-per-s', '20']);
    const controller = new AbortController();
    const body = { model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 100, stream: true };
    const requests = [
      post(`${sim.baseUrl}/v1/chat/completions`, body, controller.signal),
      post(`${sim.baseUrl}/v1/chat/completions`, body, controller.signal),
    ];
    await expect.poll(async () => (await sim.state()).waiting, { timeout: 2_000 }).toBe(1);
    const res = await fetch(`${sim.baseUrl}/metrics`);
    expect(res.headers.get('content-type')).toContain('text/plain');
    const text = await res.text();
    expect(text).toContain(`vllm:num_requests_running{engine="0",model_name="${MODEL}"} 1.0\n`);
    expect(text).toContain(`vllm:num_requests_waiting{engine="0",model_name="${MODEL}"} 1.0\n`);
    expect(text).toContain(`vllm:kv_cache_usage_perc{engine="0",model_name="${MODEL}"} 1.0\n`);
    expect(text).toContain('# TYPE vllm:num_requests_running gauge');
    controller.abort();
    await Promise.allSettled(requests);
    await expect
      .poll(async () => await fetch(`${sim.baseUrl}/metrics`).then((r) => r.text()), { timeout: 2_000 })
      .toContain('vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-4B"} 0.0');
  });
});

describe('vLLM dialect: sleep mode', () => {
  it('has no sleep routes without VLLM_SERVER_DEV_MODE=1 or without --enable-sleep-mode', async () => {
    const [noDevMode, noSleepMode] = await Promise.all([
      vllm([], {}),
      startSimulator('vllm', [MODEL, ...FAST_SIM_ARGS], { env: VLLM_DEV_MODE }),
    ]);
    for (const sim of [noDevMode, noSleepMode]) {
      for (const [method, path] of [
        ['POST', '/sleep?level=1'],
        ['POST', '/wake_up'],
        ['GET', '/is_sleeping'],
      ] as const) {
        const res = await fetch(`${sim.baseUrl}${path}`, { method });
        expect(res.status, `${path}`).toBe(404);
      }
    }
    expect((await post(`${noDevMode.baseUrl}/collective_rpc`, { method: 'reload_weights' })).status).toBe(404);
  });

  it('level 1 copies the weights to host RAM, frees the GPU, and wakes with the same answers', async () => {
    const sim = await vllm(['--sim-weights', '4GiB', '--sim-kv', '1GiB']);
    const before = await chat(sim, 'hello');
    const sleep = await post(`${sim.baseUrl}/sleep?level=1`);
    expect(sleep.status).toBe(200);
    expect(await sleep.text()).toBe('');
    expect(await (await fetch(`${sim.baseUrl}/is_sleeping`)).json()).toEqual({ is_sleeping: true });
    expect(await sim.state()).toMatchObject({
      state: 'parked',
      parked_level: 1,
      parked_tier: 'host_ram',
      gpu_bytes: 0,
      host_ram_bytes: 4 * 2 ** 30,
    });
    expect((await fetch(`${sim.baseUrl}/health`)).status).toBe(200);

    const wake = await post(`${sim.baseUrl}/wake_up`);
    expect(wake.status).toBe(200);
    expect(await (await fetch(`${sim.baseUrl}/is_sleeping`)).json()).toEqual({ is_sleeping: false });
    expect(await sim.state()).toMatchObject({
      state: 'ready',
      parked_level: null,
      gpu_bytes: 5 * 2 ** 30,
      host_ram_bytes: 0,
      violations: [],
    });
    expect((await chat(sim, 'hello')).body.choices[0].message.content).toBe(before.body.choices[0].message.content);
  });

  it('level 2 drops the weights: a wake without reload_weights answers garbage, with no error', async () => {
    const sim = await vllm();
    const before = await chat(sim, 'hello');
    await post(`${sim.baseUrl}/sleep?level=2`);
    expect(await sim.state()).toMatchObject({ parked_level: 2, parked_tier: 'deep', gpu_bytes: 0, host_ram_bytes: 0 });
    expect((await post(`${sim.baseUrl}/wake_up?tags=weights`)).status).toBe(200);
    expect(await (await fetch(`${sim.baseUrl}/is_sleeping`)).json()).toEqual({ is_sleeping: true });
    expect((await post(`${sim.baseUrl}/wake_up?tags=kv_cache`)).status).toBe(200);
    const garbage = await chat(sim, 'hello', { max_tokens: 4 });
    expect(garbage.status).toBe(200);
    expect(garbage.body.choices[0].message.content).toBe('!!!!');

    const reload = await post(`${sim.baseUrl}/collective_rpc`, {
      method: 'reload_weights',
      args: [],
      kwargs: {},
      timeout: null,
    });
    expect(reload.status).toBe(200);
    expect(await reload.json()).toEqual({ results: [null] });
    expect((await chat(sim, 'hello')).body.choices[0].message.content).toBe(before.body.choices[0].message.content);
    expect((await post(`${sim.baseUrl}/reset_prefix_cache`)).status).toBe(200);
  });

  it('records misuse: a request to a sleeping engine gets 500, a sleep with requests running still answers 200', async () => {
    const sim = await vllm(['--sim-tokens-per-s', '20']);
    const controller = new AbortController();
    const running = post(
      `${sim.baseUrl}/v1/chat/completions`,
      { model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 100, stream: true },
      controller.signal,
    );
    await expect.poll(async () => (await sim.state()).running).toBe(1);
    expect((await post(`${sim.baseUrl}/sleep?level=1`)).status).toBe(200);
    controller.abort();
    await running.catch(() => {});
    const refused = await chat(sim, 'hello');
    expect(refused.status).toBe(500);
    expect(refused.body).toMatchObject({ error: { type: 'InternalServerError', code: 500 } });
    const { violations } = await sim.state();
    expect(violations).toEqual([
      'sleep (level 1) with 1 request(s) in flight',
      'a request reached the engine while it was parked',
    ]);
  });
});

describe('vLLM dialect: versions', () => {
  /** A request of 40 tokens (2 s at 20 a second), streaming, running when this returns. */
  async function running(sim: RunningSimulator) {
    const reply = post(`${sim.baseUrl}/v1/chat/completions`, {
      model: MODEL,
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 40,
      stream: true,
    }).then(readEvents);
    await expect.poll(async () => (await sim.state()).running).toBe(1);
    // Wrapped: an async function's returned promise would be awaited with it.
    return { reply };
  }

  it('reports the version it plays (--sim-version)', async () => {
    const sim = await vllm(['--sim-version', '0.17.0']);
    expect(await (await fetch(`${sim.baseUrl}/version`)).json()).toEqual({ version: '0.17.0' });
  });

  it('from 0.17.0 a sleep reads mode: abort, its default, cuts what is in flight; wait lets it finish first', async () => {
    const sim = await vllm(['--sim-version', '0.17.0', '--sim-tokens-per-s', '20']);
    const cut = await running(sim);
    expect((await post(`${sim.baseUrl}/sleep?level=1`)).status).toBe(200);
    expect((await cut.reply).at(-2)).not.toMatchObject({ choices: [{ finish_reason: 'length' }] });
    expect((await sim.state()).violations).toEqual(['sleep (mode abort) aborted 1 request(s)']);

    expect((await post(`${sim.baseUrl}/wake_up`)).status).toBe(200);
    const whole = await running(sim);
    expect((await post(`${sim.baseUrl}/sleep?level=1&mode=wait`)).status).toBe(200);
    const events = await whole.reply;
    expect(events.filter((e) => (e as any).choices?.[0]?.delta?.content !== undefined)).toHaveLength(41);
    expect((await sim.state()).violations).toHaveLength(1);
    expect(await (await fetch(`${sim.baseUrl}/is_sleeping`)).json()).toEqual({ is_sleeping: true });
  });

  it('before 0.17.0 a sleep reads no mode: it runs over what is in flight whatever it is sent', async () => {
    const sim = await vllm(['--sim-version', '0.16.0', '--sim-tokens-per-s', '20']);
    const { reply } = await running(sim);
    expect((await post(`${sim.baseUrl}/sleep?level=1&mode=wait`)).status).toBe(200);
    expect((await sim.state()).violations).toEqual(['sleep (level 1) with 1 request(s) in flight']);
    await reply.catch(() => undefined);
  });
});
