/**
 * Each adapter against a simulator process of its engine's dialect, started from the adapter's own
 * launch plan with the host's command replaced by `capyctl sim <dialect>`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type EngineAdapter, type EngineEndpoint, EngineError, type Probe } from '../engines/engine.js';
import { adapters } from '../activities/engines/index.js';
import type { EngineName, ParkTier } from '../domain/vocabulary.js';
import { type DeploymentSpec, deploymentDocument } from '../settings/deploymentDocument.js';
import { createSimulatedGpu, gpuUsage } from '../hostAgent/simulatedGpu.js';
import { checkEngineVersion } from '../activities/engines/versionCheck.js';
import { hostStepFailures } from '../domain/catalogue.js';
import { post, readEvents, type RunningSimulator, startSimulator, stopSimulators } from './support/simulator.js';

const GiB = 2 ** 30;
const WEIGHTS = GiB;
const KV = GiB / 2;
const GPU = 0;
const GPU_BYTES = 24 * GiB;
const HOST_COMMAND = ['engine-command-of-the-host'];
/** Quick timings; a load long enough to see the engine not ready yet. */
const SIM_FLAGS = [
  '--sim-weights',
  '1GiB',
  '--sim-kv',
  '512MiB',
  '--sim-load-ms',
  '300',
  '--sim-park-ms',
  '10',
  '--sim-wake-ms',
  '10',
  '--sim-reload-ms',
  '20',
  '--sim-tokens-per-s',
  '5000',
];
const QUESTION: Probe = { kind: 'prompt', prompt: 'Describe the river.', maxTokens: 8 };

let gpuDir: string;
beforeAll(async () => {
  gpuDir = mkdtempSync(join(tmpdir(), 'capyctl-engines-'));
  await createSimulatedGpu(gpuDir, GPU, GPU_BYTES);
});
afterEach(stopSimulators);
afterAll(() => rmSync(gpuDir, { recursive: true, force: true }));

interface Launched {
  adapter: EngineAdapter;
  spec: DeploymentSpec;
  sim: RunningSimulator;
  endpoint: EngineEndpoint;
}

async function until(condition: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Spawns the engine as the host would, minus the command; the helper's own `--port` comes last and wins. */
async function launch(
  engine: EngineName,
  parkTier: ParkTier | null,
  fields: Record<string, unknown> = {},
  options: {
    simFlags?: string[];
    dropArgs?: string[];
    gpu?: { dir: string; index: number };
    gpuBytes?: number;
    othersBytes?: number;
  } = {},
): Promise<Launched> {
  const adapter = adapters[engine];
  const spec = deploymentDocument.parse({ name: 'my-model', engine, model: 'Qwen3-4B', ...fields });
  // Bounded to what the ledger reserves for it, alone on its card unless told what the others hold.
  const memory = {
    gpuBytes: options.gpuBytes ?? GPU_BYTES,
    reservedBytes: WEIGHTS + KV,
    othersBytes: options.othersBytes ?? 0,
  };
  const plan = adapter.launch({ spec, command: HOST_COMMAND, port: 0, gpuIndexes: [GPU], parkTier, memory });
  expect(plan.argv.slice(0, HOST_COMMAND.length)).toEqual(HOST_COMMAND);
  const args = plan.argv.slice(HOST_COMMAND.length).filter((a) => !options.dropArgs?.includes(a));
  const sim = await startSimulator(engine, [...args, ...SIM_FLAGS, ...(options.simFlags ?? [])], {
    env: plan.env,
    gpu: options.gpu ?? { dir: gpuDir, index: GPU },
    waitReady: false,
  });
  const endpoint = { baseUrl: sim.baseUrl, model: spec.name };
  return { adapter, spec, sim, endpoint };
}

const ready = async (e: Launched): Promise<Launched> => {
  await until(() => e.adapter.isReady(e.endpoint));
  return e;
};

const fault = async (e: Launched, name: string) =>
  expect((await post(`${e.sim.baseUrl}/sim/faults`, { [name]: true })).status).toBe(200);

/** The EngineError a call rejects with. */
async function engineError(call: Promise<unknown>): Promise<EngineError> {
  const error = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(EngineError);
  return error as EngineError;
}

describe.each([
  { engine: 'vllm', maxRunning: { count: 32, source: 'default' }, version: '0.10.1' },
  // SGLang chooses its own bound when none is passed and reports only the command-line value: engine_default.
  { engine: 'sglang', maxRunning: { source: 'engine_default' }, version: '0.5.4' },
  { engine: 'tensorfold', maxRunning: { count: 8, source: 'default' }, version: null },
] as const)('$engine', ({ engine, maxRunning, version }) => {
  it('becomes ready from its launch plan, reports load, bound and version, and frees the GPU when killed', async () => {
    const e = await launch(engine, engine === 'tensorfold' ? null : 'host_ram');
    expect(await e.adapter.isReady(e.endpoint)).toBe(false);
    await ready(e);
    expect(await e.adapter.sampleLoad(e.endpoint)).toEqual({ running: 0, waiting: 0, kv_usage_ppm: 0 });
    expect(await e.adapter.maxRunning(e.endpoint, { spec: e.spec, command: HOST_COMMAND })).toEqual(maxRunning);
    expect(await e.adapter.version(e.endpoint)).toBe(version);
    expect((await gpuUsage(gpuDir, GPU)).usedBytes).toBe(WEIGHTS + KV);

    await e.sim.stop();
    expect((await gpuUsage(gpuDir, GPU)).usedBytes).toBe(0);
    expect(await e.adapter.isReady(e.endpoint)).toBe(false);
    expect((await engineError(e.adapter.sampleLoad(e.endpoint))).kind).toBe('unreachable');
  });

  it('answers the prompt probe greedily, the same each time', async () => {
    const e = await ready(await launch(engine, null));
    const first = await e.adapter.probe(e.endpoint, QUESTION);
    expect(first).toMatchObject({ kind: 'prompt', text: expect.stringMatching(/\S/) });
    expect(await e.adapter.probe(e.endpoint, QUESTION)).toEqual(first);
  });

  it('answers the decision probe with an option and a probability per option', async () => {
    const decision = { prompt: 'Is this spam?', options: ['yes', 'no'] };
    const e = await ready(await launch(engine, null, { decision }, { simFlags: ['--sim-decision', 'yes,no'] }));
    const answer = await e.adapter.probe(e.endpoint, { kind: 'decision', ...decision });
    if (answer.kind !== 'decision') throw new Error('not a decision');
    expect(decision.options).toContain(answer.option);
    expect(Object.keys(answer.probabilities)).toEqual(decision.options);
    expect(answer.probabilities.yes! + answer.probabilities.no!).toBeCloseTo(1, 6);
    expect(answer.probabilities[answer.option]).toBe(Math.max(...Object.values(answer.probabilities)));
  });

  it('counts a request in its load while it runs, and stops its work when aborted', async () => {
    const e = await ready(await launch(engine, null));
    await fault(e, 'requests_never_finish');
    const client = new AbortController();
    // SGLang aborts by request id; vLLM and TensorFold when the connection closes.
    const body = {
      model: e.spec.name,
      prompt: 'Go on.',
      max_tokens: 50,
      ...(engine === 'sglang' ? { rid: 'req-1' } : {}),
    };
    const request = post(`${e.sim.baseUrl}/v1/completions`, body, client.signal).catch(() => undefined);
    await until(async () => (await e.adapter.sampleLoad(e.endpoint))?.running === 1);

    await e.adapter.abort(e.endpoint, 'req-1');
    if (engine !== 'sglang') {
      expect((await e.adapter.sampleLoad(e.endpoint))?.running).toBe(1);
      client.abort();
    }
    await until(async () => (await e.adapter.sampleLoad(e.endpoint))?.running === 0);
    await request;
    expect((await e.sim.state()).violations).toEqual([]);
  });
});

describe.each([
  { engine: 'vllm', tier: 'host_ram', fields: {}, parked: { gpu_bytes: 0, host_ram_bytes: WEIGHTS } },
  { engine: 'vllm', tier: 'deep', fields: {}, parked: { gpu_bytes: 0, host_ram_bytes: 0 } },
  { engine: 'sglang', tier: 'host_ram', fields: {}, parked: { gpu_bytes: 0, host_ram_bytes: WEIGHTS } },
  { engine: 'sglang', tier: 'deep', fields: {}, parked: { gpu_bytes: 0, host_ram_bytes: 0 } },
  {
    engine: 'sglang',
    tier: 'kv_only',
    fields: { extra_args: ['--speculative-algorithm', 'EAGLE'] },
    parked: { gpu_bytes: WEIGHTS, host_ram_bytes: 0 },
  },
] as const)('$engine parked at $tier', ({ engine, tier, fields, parked }) => {
  it('gives back its GPU memory, takes it back, and answers as before', async () => {
    const e = await ready(await launch(engine, tier, fields));
    const first = await e.adapter.probe(e.endpoint, QUESTION);

    await e.adapter.park(e.endpoint, tier, {});
    expect(await e.sim.state()).toMatchObject({ state: 'parked', parked_tier: tier, ...parked, violations: [] });
    expect((await gpuUsage(gpuDir, GPU)).usedBytes).toBe(parked.gpu_bytes);
    expect(await e.adapter.isReady(e.endpoint)).toBe(true);

    await e.adapter.wake(e.endpoint, tier, {});
    expect(await e.sim.state()).toMatchObject({
      state: 'ready',
      gpu_bytes: WEIGHTS + KV,
      host_ram_bytes: 0,
      violations: [],
      draft_lost: false,
      wakes: 1,
    });
    expect(await e.adapter.probe(e.endpoint, QUESTION)).toEqual(first);
  });
});

describe.each(['vllm', 'sglang'] as const)('%s wake faults', (engine) => {
  it('a wrong answer after a wake shows in the probe (→ wake_mismatch)', async () => {
    const e = await ready(await launch(engine, 'host_ram'));
    const first = await e.adapter.probe(e.endpoint, QUESTION);
    await fault(e, 'wrong_answer_after_wake');
    await e.adapter.park(e.endpoint, 'host_ram', {});
    await e.adapter.wake(e.endpoint, 'host_ram', {});
    expect(await e.adapter.probe(e.endpoint, QUESTION)).not.toEqual(first);
  });

  it('a failed weight reload is reload_failed (→ wake_reload_failed)', async () => {
    const e = await ready(await launch(engine, 'deep'));
    await e.adapter.park(e.endpoint, 'deep', {});
    await fault(e, 'reload_fails');
    expect((await engineError(e.adapter.wake(e.endpoint, 'deep', {}))).kind).toBe('reload_failed');
  });

  it('a wake that hangs is cut by its signal as a timeout (→ wake_uncertain)', async () => {
    const e = await ready(await launch(engine, 'host_ram'));
    await e.adapter.park(e.endpoint, 'host_ram', {});
    await fault(e, 'wake_hangs');
    const started = Date.now();
    expect(
      (await engineError(e.adapter.wake(e.endpoint, 'host_ram', {}, { signal: AbortSignal.timeout(300) }))).kind,
    ).toBe('timeout');
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('an engine that samples at temperature 0 still answers the wake check the same: the check pins its seed and top_k', async () => {
    const e = await ready(await launch(engine, 'host_ram'));
    const first = await e.adapter.probe(e.endpoint, QUESTION);
    await post(`${e.sim.baseUrl}/sim/faults`, { ignores_temperature: true });
    // Asked with temperature 0 alone, it answers differently each time.
    const ask = async () => {
      const res = await post(`${e.sim.baseUrl}/v1/completions`, {
        model: e.spec.name,
        prompt: QUESTION.prompt,
        max_tokens: QUESTION.maxTokens,
        temperature: 0,
      });
      return ((await res.json()) as { choices: Array<{ text: string }> }).choices[0]!.text;
    };
    expect(await ask()).not.toBe(await ask());
    await e.adapter.park(e.endpoint, 'host_ram', {});
    await e.adapter.wake(e.endpoint, 'host_ram', {});
    expect(await e.adapter.probe(e.endpoint, QUESTION)).toEqual(first);
  });
});

describe('vLLM', () => {
  it('a wake the GPU has no room for is out_of_memory', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'capyctl-engines-small-'));
    try {
      await createSimulatedGpu(dir, GPU, 2 * GiB);
      const gpu = { gpu: { dir, index: GPU }, gpuBytes: 2 * GiB };
      const parked = await ready(await launch('vllm', 'host_ram', {}, gpu));
      await parked.adapter.park(parked.endpoint, 'host_ram', {});
      await ready(await launch('vllm', null, { name: 'other' }, gpu));
      expect((await engineError(parked.adapter.wake(parked.endpoint, 'host_ram', {}))).kind).toBe('out_of_memory');
    } finally {
      await stopSimulators();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses to park when launched unable to (no sleep mode), naming the route and its version', async () => {
    const e = await ready(await launch('vllm', null));
    const refused = await engineError(e.adapter.park(e.endpoint, 'host_ram', {}));
    expect({ kind: refused.kind, message: refused.message }).toEqual({
      kind: 'refused',
      message:
        `vLLM 0.10.1 at ${e.endpoint.baseUrl} cannot park at tier host_ram: it has no POST /sleep, GET /is_sleeping, POST /wake_up ` +
        '(GET answered 404 {"detail":"Not Found"}); ' +
        'its sleep routes exist only when it runs with --enable-sleep-mode and VLLM_SERVER_DEV_MODE=1',
    });
    expect((await e.sim.state()).gpu_bytes).toBe(WEIGHTS + KV);
  });

  it('skips a prefix-cache reset it does not have, with a warning; refuses a deep park without the weight reload, still holding its memory', async () => {
    const e = await ready(await launch('vllm', 'deep'));
    await post(`${e.sim.baseUrl}/sim/faults`, { missing_routes: ['/reset_prefix_cache'] });
    const before = await e.adapter.probe(e.endpoint, QUESTION);
    await e.adapter.park(e.endpoint, 'host_ram', {});
    const warnings: string[] = [];
    await e.adapter.wake(e.endpoint, 'host_ram', {}, { warn: (w) => warnings.push(w) });
    expect(warnings).toEqual([
      `vLLM at ${e.endpoint.baseUrl} has no POST /reset_prefix_cache (404); skipped, since it only refines the step`,
    ]);
    expect(await e.adapter.probe(e.endpoint, QUESTION)).toEqual(before);

    // Its other dev-mode routes answer: dev mode and sleep mode are on, so the hint to set them would be false.
    await post(`${e.sim.baseUrl}/sim/faults`, { missing_routes: ['/collective_rpc'] });
    const refused = await engineError(e.adapter.park(e.endpoint, 'deep', {}));
    expect(refused.message).toBe(
      `vLLM 0.10.1 at ${e.endpoint.baseUrl} cannot park at tier deep: it has no POST /collective_rpc ` +
        '(GET answered 404 {"detail":"Not Found"}); its POST /sleep, GET /is_sleeping, POST /wake_up answer, so what ' +
        'switches these routes on is set and this vLLM build lacks it',
    );
    expect((await e.sim.state()).gpu_bytes).toBe(WEIGHTS + KV);
  });
});

describe('SGLang', () => {
  it('before 0.5.18 never reports the bound it chose (engine_default, starting or ready); a declared one stays declared', async () => {
    const e = await launch('sglang', 'host_ram', {}, { simFlags: ['--sim-load-ms', '2000'] });
    const ctx = { spec: e.spec, command: HOST_COMMAND };
    expect(await e.adapter.maxRunning(null, ctx)).toEqual({ source: 'engine_default' });
    await until(async () => (await e.sim.state().catch(() => undefined)) !== undefined);
    expect(await e.adapter.maxRunning(e.endpoint, ctx)).toEqual({ source: 'engine_default' });

    // The first one still holds its memory: SGLang fills the card up to its share, counting it.
    const declared = await ready(
      await launch('sglang', 'host_ram', { max_concurrent_requests: 16 }, { othersBytes: WEIGHTS + KV }),
    );
    expect(
      await declared.adapter.maxRunning(declared.endpoint, { spec: declared.spec, command: HOST_COMMAND }),
    ).toEqual({
      count: 16,
      source: 'declared',
    });
    expect(await e.adapter.maxRunning(e.endpoint, ctx)).toEqual({ source: 'engine_default' });
  });

  it("from 0.5.18 reports its schedulers' own bound: engine, whether it chose it or was passed it", async () => {
    const reports = ['--sim-version', '0.5.18'];
    const chosen = await ready(await launch('sglang', 'host_ram', {}, { simFlags: reports }));
    const ctx = { spec: chosen.spec, command: HOST_COMMAND };
    expect(await chosen.adapter.maxRunning(null, ctx)).toEqual({ source: 'engine_default' });
    expect(await chosen.adapter.maxRunning(chosen.endpoint, ctx)).toEqual({ count: 256, source: 'engine' });

    // The simulator's slots enforce 16; capyctl passed 16.
    const declared = await ready(
      await launch(
        'sglang',
        'host_ram',
        { max_concurrent_requests: 16 },
        { simFlags: reports, othersBytes: WEIGHTS + KV },
      ),
    );
    const declaredCtx = { spec: declared.spec, command: HOST_COMMAND };
    expect(await declared.adapter.maxRunning(declared.endpoint, declaredCtx)).toEqual({ count: 16, source: 'engine' });
  });

  it('samples no load without metrics', async () => {
    const e = await ready(await launch('sglang', null, {}, { dropArgs: ['--enable-metrics'] }));
    expect(await e.adapter.sampleLoad(e.endpoint)).toBeNull();
  });
});

describe('vLLM from 0.17.0', () => {
  it('is parked with the mode its version check pins, wait: a request that slipped past the drain finishes whole', async () => {
    const flags = ['--sim-version', '0.17.0', '--sim-tokens-per-s', '50'];
    const e = await ready(await launch('vllm', 'host_ram', {}, { simFlags: flags }));
    const checked = await checkEngineVersion(e.adapter, e.endpoint, undefined);
    expect(checked).toEqual({ reported: '0.17.0', treatedAs: '0.17.0', sends: { sleepMode: 'wait' } });
    const stream = post(`${e.sim.baseUrl}/v1/chat/completions`, {
      model: e.spec.name,
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 40,
      stream: true,
    }).then(readEvents);
    await until(async () => (await e.sim.state()).running === 1);
    await e.adapter.park(e.endpoint, 'host_ram', checked.sends);
    expect(((await stream) as any[]).at(-2).choices[0].finish_reason).toBe('length');
    expect((await e.sim.state()).violations).toEqual([]);
  });

  it('of a version the table does not list is refused, naming it and the versions capyctl knows', async () => {
    const e = await ready(await launch('vllm', 'host_ram', {}, { simFlags: ['--sim-version', '0.40.2+cu130'] }));
    const refused = await engineError(checkEngineVersion(e.adapter, e.endpoint, undefined));
    expect(refused.kind).toBe('version_unsupported');
    expect(refused.message).toBe(
      hostStepFailures.engineVersionUnsupported(
        'vLLM',
        '0.40.2+cu130',
        'GET /version',
        '0.10.1 up to (not including) 0.32.0',
        'engines.vllm.unlisted_version_as',
      ),
    );
  });
});

describe('TensorFold', () => {
  it('cannot park: it stops instead', async () => {
    const e = await ready(await launch('tensorfold', null));
    expect((await engineError(e.adapter.park(e.endpoint, 'host_ram', {}))).kind).toBe('refused');
    expect((await engineError(e.adapter.wake(e.endpoint, 'host_ram', {}))).kind).toBe('refused');
  });
});
