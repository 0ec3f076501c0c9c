/** The simulator's SGLang and TensorFold dialects, and its command line. */
import { afterEach, describe, expect, it } from 'vitest';
import { parseSimArgs } from '../engines/simulatorArgs.js';
import {
  FAST_SIM_ARGS,
  post,
  readEvents,
  type RunningSimulator,
  startSimulator,
  stopSimulators,
  streamFrames,
} from './support/simulator.js';

const GiB = 2 ** 30;

afterEach(stopSimulators);

const sglang = (extra: string[] = []) =>
  startSimulator('sglang', ['--model-path', 'org/m', ...FAST_SIM_ARGS, ...extra]);

async function say(
  sim: RunningSimulator,
  content = 'hello',
  extra: Record<string, unknown> = {},
): Promise<{ status: number; body: any }> {
  const res = await post(`${sim.baseUrl}/v1/chat/completions`, {
    model: 'org/m',
    messages: [{ role: 'user', content }],
    max_tokens: 4,
    ...extra,
  });
  return { status: res.status, body: await res.json() };
}

const slowStream = (sim: RunningSimulator, signal?: AbortSignal, extra: Record<string, unknown> = {}) =>
  post(
    `${sim.baseUrl}/v1/chat/completions`,
    { messages: [{ role: 'user', content: 'x' }], max_tokens: 500, stream: true, ...extra },
    signal,
  );

describe('SGLang dialect', () => {
  it('listens at once, answers /health 503 while loading, then 200', async () => {
    const sim = await startSimulator('sglang', ['--model-path', 'org/m', '--sim-load-ms', '1500'], {
      waitReady: false,
    });
    await expect
      .poll(
        () =>
          fetch(`${sim.baseUrl}/health`).then(
            (r) => r.status,
            () => 0,
          ),
        { timeout: 15_000, interval: 20 },
      )
      .toBe(503);
    expect((await say(sim)).status).toBe(503);
    await expect
      .poll(
        () =>
          fetch(`${sim.baseUrl}/health`).then(
            (r) => r.status,
            () => 0,
          ),
        { timeout: 15_000, interval: 50 },
      )
      .toBe(200);
    expect(sim.stdout()).toContain('The server is fired up and ready to roll!');
    expect(sim.stdout()).toContain('max_running_requests=256');
  });

  it("from 0.5.18 each scheduler's internal state reports the requests it runs at once, the figure its slots enforce", async () => {
    const [chosen, capped] = await Promise.all([
      sglang(['--sim-version', '0.5.18']),
      sglang(['--sim-version', '0.5.18', '--max-running-requests', '8']),
    ]);
    expect(await (await fetch(`${chosen.baseUrl}/get_server_info`)).json()).toMatchObject({
      max_running_requests: null,
      internal_states: [{ max_running_requests: null, effective_max_running_requests_per_dp: 256 }],
      version: '0.5.18',
    });
    expect(await (await fetch(`${capped.baseUrl}/get_server_info`)).json()).toMatchObject({
      internal_states: [{ effective_max_running_requests_per_dp: 8 }],
    });
  });

  it('reports its server and model info as SGLang does: max_running_requests only as given on its command line', async () => {
    const [plain, capped] = await Promise.all([
      sglang(),
      sglang(['--max-running-requests', '8', '--served-model-name', 'chat']),
    ]);
    // The server args, the scheduler's ready message, each scheduler's state (its server args again) and the version.
    expect(await (await fetch(`${plain.baseUrl}/get_server_info`)).json()).toMatchObject({
      model_path: 'org/m',
      max_running_requests: null,
      status: 'ready',
      max_total_num_tokens: 256 * 64,
      internal_states: [{ max_running_requests: null, memory_usage: { token_capacity: 256 * 64 } }],
      version: '0.5.4',
    });
    expect(await (await fetch(`${capped.baseUrl}/get_server_info`)).json()).toMatchObject({
      max_running_requests: 8,
      internal_states: [{ max_running_requests: 8 }],
    });
    // Before 0.5.18 no scheduler reports the figure it chose.
    const [before] = ((await (await fetch(`${plain.baseUrl}/get_server_info`)).json()) as { internal_states: object[] })
      .internal_states;
    expect(before).not.toHaveProperty('effective_max_running_requests_per_dp');
    expect(await (await fetch(`${plain.baseUrl}/get_model_info`)).json()).toEqual({
      model_path: 'org/m',
      tokenizer_path: 'org/m',
      is_generation: true,
      preferred_sampling_params: null,
      weight_version: 'default',
    });
    const unknown = await post(`${capped.baseUrl}/v1/chat/completions`, {
      model: 'org/m',
      messages: [{ role: 'user', content: 'x' }],
    });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ object: 'error', type: 'Not Found', param: null, code: 404 });
  });

  it('serves metrics only with --enable-metrics', async () => {
    const [off, on] = await Promise.all([sglang(), sglang(['--enable-metrics'])]);
    expect((await fetch(`${off.baseUrl}/metrics`)).status).toBe(404);
    const text = await (await fetch(`${on.baseUrl}/metrics`)).text();
    expect(text).toContain('sglang:num_running_reqs{model_name="org/m"} 0.0\n');
    expect(text).toContain('sglang:num_queue_reqs{model_name="org/m"} 0.0\n');
    expect(text).toContain('sglang:token_usage{model_name="org/m"} 0.0\n');
  });

  it('frees nothing on release without --enable-memory-saver, yet answers 200 null', async () => {
    const sim = await sglang(['--sim-weights', '3GiB', '--sim-kv', '1GiB']);
    const release = await post(`${sim.baseUrl}/release_memory_occupation`, { tags: ['weights', 'kv_cache'] });
    expect(release.status).toBe(200);
    expect(await release.text()).toBe('null');
    expect(await sim.state()).toMatchObject({ state: 'ready', gpu_bytes: 4 * GiB });
  });

  it('without a CPU backup: resume answers garbage until update_weights_from_disk and flush_cache', async () => {
    const sim = await sglang(['--enable-memory-saver', '--sim-weights', '3GiB', '--sim-kv', '1GiB']);
    const good = (await say(sim)).body.choices[0].message.content;
    const paused = await post(`${sim.baseUrl}/pause_generation`);
    expect(await paused.json()).toEqual({ message: 'Generation paused successfully.', status: 'ok' });
    expect(
      (await post(`${sim.baseUrl}/release_memory_occupation`, { tags: ['kv_cache', 'weights', 'cuda_graph'] })).status,
    ).toBe(200);
    expect(await sim.state()).toMatchObject({ state: 'parked', parked_tier: 'deep', gpu_bytes: 0, host_ram_bytes: 0 });
    const resume = await post(`${sim.baseUrl}/resume_memory_occupation`, {});
    expect(resume.status).toBe(200);
    expect(await resume.text()).toBe('null');
    expect(await (await post(`${sim.baseUrl}/continue_generation`)).json()).toEqual({
      message: 'Generation continued successfully.',
      status: 'ok',
    });
    expect((await say(sim)).body.choices[0].message.content).toBe('!!!!');

    const update = await post(`${sim.baseUrl}/update_weights_from_disk`, { model_path: 'org/m' });
    expect(await update.json()).toEqual({
      success: true,
      message: 'Succeeded to update model weights.',
      num_paused_requests: 0,
    });
    expect((await say(sim)).body.choices[0].message.content).toBe('!!!!');

    // flush_cache refuses while a request runs.
    const controller = new AbortController();
    const running = slowStream(sim, controller.signal, { max_tokens: 30000 });
    await expect.poll(async () => (await sim.state()).running).toBe(1);
    expect((await post(`${sim.baseUrl}/flush_cache`)).status).toBe(400);
    controller.abort();
    await running.catch(() => {});
    await expect.poll(async () => (await sim.state()).running).toBe(0);
    const flush = await post(`${sim.baseUrl}/flush_cache`);
    expect(flush.status).toBe(200);
    expect(await flush.text()).toContain('Cache flushed.');
    expect((await say(sim)).body.choices[0].message.content).toBe(good);
    expect((await sim.state()).violations).toEqual([]);
  });

  it('with --enable-weights-cpu-backup: the weights wait in host RAM and come back intact', async () => {
    const sim = await sglang([
      '--enable-memory-saver',
      '--enable-weights-cpu-backup',
      '--sim-weights',
      '3GiB',
      '--sim-kv',
      '1GiB',
    ]);
    const good = (await say(sim)).body.choices[0].message.content;
    await post(`${sim.baseUrl}/release_memory_occupation`, {});
    expect(await sim.state()).toMatchObject({ parked_tier: 'host_ram', gpu_bytes: 0, host_ram_bytes: 3 * GiB });
    const refused = await say(sim);
    expect(refused.status).toBe(500);
    expect(refused.body).toMatchObject({ object: 'error', type: 'Internal Server Error', code: 500 });
    await post(`${sim.baseUrl}/resume_memory_occupation`, {});
    expect((await say(sim)).body.choices[0].message.content).toBe(good);
    expect((await sim.state()).violations).toEqual(['a request reached the engine while it was parked']);
  });

  it('with --speculative-algorithm: releasing the KV cache keeps the draft, releasing the weights wipes it', async () => {
    const sim = await sglang([
      '--enable-memory-saver',
      '--speculative-algorithm',
      'EAGLE',
      '--sim-weights',
      '3GiB',
      '--sim-kv',
      '1GiB',
    ]);
    await post(`${sim.baseUrl}/release_memory_occupation`, { tags: ['kv_cache'] });
    expect(await sim.state()).toMatchObject({
      state: 'parked',
      parked_tier: 'kv_only',
      gpu_bytes: 3 * GiB,
      draft_lost: false,
    });
    await post(`${sim.baseUrl}/resume_memory_occupation`, { tags: ['kv_cache'] });
    expect(await sim.state()).toMatchObject({ state: 'ready', draft_lost: false });
    await post(`${sim.baseUrl}/release_memory_occupation`, { tags: ['weights'] });
    expect((await sim.state()).draft_lost).toBe(true);
  });

  it('aborts a request by rid: its stream ends with finish_reason abort', async () => {
    const sim = await sglang(['--sim-tokens-per-s', '50']);
    const res = await slowStream(sim, undefined, { rid: 'req-1', stream_options: { include_usage: true } });
    const frames = streamFrames(res);
    await frames.next();
    await frames.next();
    expect((await post(`${sim.baseUrl}/abort_request`, { rid: 'req-1' })).status).toBe(200);
    const rest: string[] = [];
    for await (const frame of frames) rest.push(frame);
    const last = rest.slice(-3);
    expect(JSON.parse(last[0]!.slice(6)).choices[0].finish_reason).toBe('abort');
    expect(JSON.parse(last[1]!.slice(6)).usage.completion_tokens).toBeLessThan(500);
    expect(last[2]).toBe('data: [DONE]');
  });

  it('pause holds new requests as waiting; pausing with requests running aborts them and is recorded', async () => {
    const sim = await sglang(['--enable-metrics', '--sim-tokens-per-s', '50']);
    const cut = await slowStream(sim);
    await expect.poll(async () => (await sim.state()).running).toBe(1);
    await post(`${sim.baseUrl}/pause_generation`);
    const events = (await readEvents(cut)) as any[];
    expect(events.at(-2).choices[0].finish_reason).toBe('abort');
    const held = say(sim);
    await expect.poll(async () => (await sim.state()).waiting).toBe(1);
    expect(await (await fetch(`${sim.baseUrl}/metrics`)).text()).toContain(
      'sglang:num_queue_reqs{model_name="org/m"} 1.0',
    );
    await post(`${sim.baseUrl}/continue_generation`);
    expect((await held).status).toBe(200);
    expect((await sim.state()).violations).toEqual(['pause_generation aborted 1 request(s)']);
  });
});

describe('SGLang dialect: versions', () => {
  it('after 0.5.5 pause_generation reads mode: retract keeps what runs, abort (its default) cuts it, another is refused', async () => {
    const sim = await sglang(['--sim-version', '0.5.6', '--sim-tokens-per-s', '50']);
    expect(await (await fetch(`${sim.baseUrl}/get_server_info`)).json()).toMatchObject({ version: '0.5.6' });
    const kept = await slowStream(sim);
    await expect.poll(async () => (await sim.state()).running).toBe(1);
    expect((await post(`${sim.baseUrl}/pause_generation`, { mode: 'retract' })).status).toBe(200);
    expect((await sim.state()).violations).toEqual([]);
    const wrong = await post(`${sim.baseUrl}/pause_generation`, { mode: 'later' });
    expect(wrong.status).toBe(400);
    expect(await wrong.json()).toMatchObject({
      message: "Invalid mode: 'later'. Expected one of ['abort', 'retract', 'in_place'].",
    });
    expect((await post(`${sim.baseUrl}/pause_generation`, { mode: 'abort' })).status).toBe(200);
    expect(((await readEvents(kept)) as any[]).at(-2).choices[0].finish_reason).toBe('abort');
    expect((await sim.state()).violations).toEqual(['pause_generation aborted 1 request(s)']);
  });

  it('0.5.4 pause_generation reads no body: it aborts whatever mode it is sent', async () => {
    const sim = await sglang(['--sim-tokens-per-s', '50']);
    const cut = await slowStream(sim);
    await expect.poll(async () => (await sim.state()).running).toBe(1);
    expect((await post(`${sim.baseUrl}/pause_generation`, { mode: 'retract' })).status).toBe(200);
    expect(((await readEvents(cut)) as any[]).at(-2).choices[0].finish_reason).toBe('abort');
  });
});

describe('TensorFold dialect', () => {
  it('sends the role chunk on arrival, before the prompt’s prefill; vLLM sends it with the first token', async () => {
    const args = ['--sim-load-ms', '50', '--sim-prefill-ms', '600'];
    const [tf, vllm] = await Promise.all([
      startSimulator('tensorfold', ['--model', 'm', ...args]),
      startSimulator('vllm', ['m', ...args]),
    ]);
    for (const [sim, roleFirst] of [
      [tf, true],
      [vllm, false],
    ] as const) {
      const started = Date.now();
      const res = await post(`${sim.baseUrl}/v1/chat/completions`, {
        messages: [{ role: 'user', content: 'x' }],
        max_tokens: 2,
        stream: true,
      });
      const frames = streamFrames(res);
      const role = JSON.parse((await frames.next()).value!.slice(6));
      const roleAt = Date.now() - started;
      expect(role.choices[0].delta).toEqual({ role: 'assistant', content: '' });
      await frames.next();
      const tokenAt = Date.now() - started;
      expect(tokenAt).toBeGreaterThanOrEqual(590);
      if (roleFirst) expect(roleAt).toBeLessThan(300);
      else expect(roleAt).toBeGreaterThanOrEqual(590);
      for await (const _ of frames);
    }
  });

  it('runs 8 at once by default, counts the rest as waiting in its metrics, and has no park routes', async () => {
    const sim = await startSimulator('tensorfold', ['--model', 'm', '--sim-load-ms', '50', '--sim-tokens-per-s', '20']);
    const controller = new AbortController();
    const requests = Array.from({ length: 9 }, () => slowStream(sim, controller.signal).catch(() => {}));
    await expect.poll(async () => (await sim.state()).waiting).toBe(1);
    const text = await (await fetch(`${sim.baseUrl}/metrics`)).text();
    expect(text).toContain('tensorfold:requests_running{model_name="m"} 8.0\n');
    expect(text).toContain('tensorfold:requests_waiting{model_name="m"} 1.0\n');
    expect(text).toContain('tensorfold:kv_cache_usage_ratio{model_name="m"} 1.0\n');
    controller.abort();
    await Promise.all(requests);
    for (const path of ['/sleep', '/release_memory_occupation', '/wake_up'])
      expect((await post(`${sim.baseUrl}${path}`)).status).toBe(404);
    const unknown = await post(`${sim.baseUrl}/v1/completions`, { model: 'other', prompt: 'x' });
    expect(await unknown.json()).toMatchObject({ error: { type: 'Not Found', code: 404 } });
  });
});

describe('simulator command line', () => {
  it('reads the engines’ flags, accepts and ignores unknown ones in both forms', () => {
    const config = parseSimArgs([
      'vllm',
      '--dtype',
      'auto',
      'org/model',
      '--enforce-eager',
      '--port=9000',
      '--max-num-seqs',
      '32',
      '--gpu-memory-utilization=0.9',
      '--sim-weights',
      '512MiB',
      '--sim-load-ms',
      '2s',
    ]);
    expect(config).toMatchObject({
      dialect: 'vllm',
      model: 'org/model',
      servedModelName: 'org/model',
      host: '127.0.0.1',
      port: 9000,
      maxRunning: 32,
      weightsBytes: 512 * 2 ** 20,
    });
    expect(config.timings.loadMs).toBe(2000);
    expect(parseSimArgs(['sglang', '--model-path', 'm', '--enable-metrics', '--tp', '2']).maxRunning).toBe(256);
    expect(parseSimArgs(['tensorfold', '--model', 'm']).maxRunning).toBe(8);
    expect(() => parseSimArgs(['llamacpp'])).toThrow(/dialect/);
    expect(() => parseSimArgs(['sglang', '--port', '1'])).toThrow(/--model-path/);
    expect(() => parseSimArgs(['vllm', 'm', '--sim-kv', 'lots'])).toThrow(/--sim-kv lots/);
  });
});
