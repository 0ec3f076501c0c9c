/** Faults on demand (`POST /sim/faults`): each produces the failure a client would see. */
import { afterEach, describe, expect, it } from 'vitest';
import {
  FAST_SIM_ARGS,
  post,
  type RunningSimulator,
  startSimulator,
  stopSimulators,
  streamFrames,
  VLLM_DEV_MODE,
} from './support/simulator.js';

afterEach(stopSimulators);

const vllm = (extra: string[] = []) =>
  startSimulator('vllm', ['m', '--enable-sleep-mode', ...FAST_SIM_ARGS, ...extra], { env: VLLM_DEV_MODE });
const sglang = (extra: string[] = []) =>
  startSimulator('sglang', ['--model-path', 'm', '--enable-memory-saver', ...FAST_SIM_ARGS, ...extra]);

async function fault(sim: RunningSimulator, faults: Record<string, boolean>): Promise<void> {
  const res = await post(`${sim.baseUrl}/sim/faults`, faults);
  expect(res.status).toBe(200);
}

async function answer(sim: RunningSimulator, extra: Record<string, unknown> = {}): Promise<any> {
  const res = await post(`${sim.baseUrl}/v1/chat/completions`, {
    messages: [{ role: 'user', content: 'the wake check' }],
    ...extra,
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as any).choices[0];
}

describe('simulator faults', () => {
  it('wrong_answer_after_wake: answers change after the next wake, not before', async () => {
    const sim = await vllm();
    const first = (await answer(sim)).message.content;
    await fault(sim, { wrong_answer_after_wake: true });
    expect((await answer(sim)).message.content).toBe(first);
    await post(`${sim.baseUrl}/sleep?level=1`);
    await post(`${sim.baseUrl}/wake_up`);
    expect((await answer(sim)).message.content).not.toBe(first);
    expect((await sim.state()).faults.wrong_answer_after_wake).toBe(true);
  });

  it('wrong_answer_after_wake on a decision model: another option is chosen', async () => {
    const sim = await sglang(['--enable-weights-cpu-backup', '--sim-decision', 'left,right,straight']);
    const probe = { logprobs: true, top_logprobs: 3, max_tokens: 1 };
    const first = (await answer(sim, probe)).message.content;
    await fault(sim, { wrong_answer_after_wake: true });
    await post(`${sim.baseUrl}/release_memory_occupation`, {});
    await post(`${sim.baseUrl}/resume_memory_occupation`, {});
    expect((await answer(sim, probe)).message.content).not.toBe(first);
  });

  it('reload_fails: vLLM’s reload_weights and SGLang’s update_weights_from_disk answer 500', async () => {
    const [v, s] = await Promise.all([vllm(), sglang()]);
    await Promise.all([fault(v, { reload_fails: true }), fault(s, { reload_fails: true })]);
    const rpc = await post(`${v.baseUrl}/collective_rpc`, {
      method: 'reload_weights',
      args: [],
      kwargs: {},
      timeout: null,
    });
    expect(rpc.status).toBe(500);
    expect(await rpc.json()).toMatchObject({ error: { type: 'InternalServerError', code: 500 } });
    const update = await post(`${s.baseUrl}/update_weights_from_disk`, { model_path: 'm' });
    expect(update.status).toBe(500);
    expect(await update.json()).toMatchObject({ success: false });
  });

  it('wake_hangs: wake_up and resume_memory_occupation never answer', async () => {
    const [v, s] = await Promise.all([vllm(), sglang()]);
    await post(`${v.baseUrl}/sleep?level=1`);
    await post(`${s.baseUrl}/release_memory_occupation`, {});
    await Promise.all([fault(v, { wake_hangs: true }), fault(s, { wake_hangs: true })]);
    await expect(post(`${v.baseUrl}/wake_up`, undefined, AbortSignal.timeout(400))).rejects.toThrow(/abort|timeout/i);
    await expect(post(`${s.baseUrl}/resume_memory_occupation`, {}, AbortSignal.timeout(400))).rejects.toThrow(
      /abort|timeout/i,
    );
    expect(await v.state()).toMatchObject({ state: 'waking', gpu_bytes: 0 });
    expect(await (await fetch(`${v.baseUrl}/is_sleeping`)).json()).toEqual({ is_sleeping: true });
  });

  it('requests_never_finish: a stream stops after its role chunk, a plain request never answers, both stay running', async () => {
    const sim = await vllm();
    await fault(sim, { requests_never_finish: true });
    const controller = new AbortController();
    const res = await post(
      `${sim.baseUrl}/v1/chat/completions`,
      { messages: [{ role: 'user', content: 'x' }], stream: true },
      controller.signal,
    );
    expect(res.status).toBe(200);
    const frames = streamFrames(res);
    const first = JSON.parse((await frames.next()).value!.slice('data: '.length));
    expect(first.choices[0].delta).toEqual({ role: 'assistant', content: '' });
    const next = frames.next();
    const quiet = await Promise.race([next.then(() => 'more'), new Promise((r) => setTimeout(() => r('quiet'), 400))]);
    expect(quiet).toBe('quiet');
    await expect(post(`${sim.baseUrl}/v1/completions`, { prompt: 'x' }, AbortSignal.timeout(300))).rejects.toThrow();
    // The plain request's client gave up (and was aborted); the stream is still running.
    await expect.poll(async () => (await sim.state()).running).toBe(1);
    controller.abort();
    await next.catch(() => {});
    await expect.poll(async () => (await sim.state()).running).toBe(0);
  });

  it('streams_go_silent: a stream stops after its first token and stays running; a plain request is answered', async () => {
    const sim = await vllm();
    await fault(sim, { streams_go_silent: true });
    const controller = new AbortController();
    const res = await post(
      `${sim.baseUrl}/v1/chat/completions`,
      { messages: [{ role: 'user', content: 'x' }], stream: true },
      controller.signal,
    );
    const frames = streamFrames(res);
    const deltas = [
      JSON.parse((await frames.next()).value!.slice('data: '.length)),
      JSON.parse((await frames.next()).value!.slice('data: '.length)),
    ];
    expect(deltas[0].choices[0].delta).toEqual({ role: 'assistant', content: '' });
    expect(deltas[1].choices[0].delta.content).toMatch(/\S/);
    const next = frames.next();
    const quiet = await Promise.race([next.then(() => 'more'), new Promise((r) => setTimeout(() => r('quiet'), 400))]);
    expect(quiet).toBe('quiet');
    expect((await post(`${sim.baseUrl}/v1/completions`, { prompt: 'x', max_tokens: 4 })).status).toBe(200);
    expect((await sim.state()).running).toBe(1);
    controller.abort();
    await next.catch(() => {});
    await expect.poll(async () => (await sim.state()).running).toBe(0);
  });

  it('crash: the process exits at once with a non-zero code', async () => {
    const sim = await sglang();
    await expect(post(`${sim.baseUrl}/sim/faults`, { crash: true })).rejects.toThrow();
    const exit = await sim.exited;
    expect(exit.code).not.toBe(0);
    expect(exit.code).not.toBeNull();
  });

  it('refuses an unknown fault by name', async () => {
    const sim = await vllm();
    const res = await post(`${sim.baseUrl}/sim/faults`, { slow: true });
    expect(res.status).toBe(400);
    expect(JSON.stringify(await res.json())).toContain('slow');
  });
});
