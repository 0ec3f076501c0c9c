/**
 * The contract table (engines/contracts.ts), walked: each adapter sends exactly the
 * table's requests for a park and a wake at every tier (to a scripted engine that records them and
 * answers as the table says), and the simulator, launched from the adapter's own plan, serves every
 * one of them as the table says.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  engineContracts,
  routesTierNeeds,
  type Step,
  type StepFacts,
  type VersionRequests,
} from '../engines/contracts.js';
import { EngineError } from '../engines/engine.js';
import { adapters } from '../activities/engines/index.js';
import type { EngineName, ParkTier } from '../domain/vocabulary.js';
import { deploymentDocument } from '../settings/deploymentDocument.js';
import { startSimulator, stopSimulators } from './support/simulator.js';

interface Exchange {
  request: string;
  body: unknown;
}

interface Scripted {
  request: string;
  body: unknown;
  status: number;
  answer: string;
}

const MODEL_PATH = 'Qwen/Qwen3-4B';

/** The line, body and answer of one table step, as the engine of a version sent `sends` would answer it. */
function scripted(step: Step, sends: VersionRequests = {}): Scripted {
  const { route, role } = step;
  const facts: StepFacts = { modelPath: MODEL_PATH, sends };
  const query = typeof step.query === 'function' ? step.query(facts) : step.query;
  const json = typeof step.json === 'function' ? (step.json as (f: StepFacts) => unknown)(facts) : step.json;
  let answer = route.answer.text ?? JSON.stringify(route.answer.json);
  if (role === 'expect_asleep' || role === 'expect_awake')
    answer = JSON.stringify({ is_sleeping: role === 'expect_asleep' });
  return {
    request: `${route.method} ${route.path}${query ? `?${query}` : ''}`,
    body: json,
    status: route.answer.status,
    answer,
  };
}

/** The existence checks a park makes first: a GET, answered 405 for a POST-only route. */
function preflight(engine: EngineName, tier: ParkTier): Scripted[] {
  return routesTierNeeds(engine, tier)
    .filter((r) => r.probedByGet || r.method === 'GET')
    .map((r) => ({
      request: `GET ${r.path}`,
      body: undefined,
      status: r.method === 'GET' ? r.answer.status : 405,
      answer: r.method === 'GET' ? (r.answer.text ?? JSON.stringify(r.answer.json)) : '{"detail":"Method Not Allowed"}',
    }));
}

/** An engine that answers the script in order and records what it was sent. */
class ScriptedEngine {
  readonly seen: Exchange[] = [];
  private script: Scripted[] = [];
  private readonly server: Server;

  constructor() {
    this.server = createServer((req, res) => {
      let text = '';
      req.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      req.on('end', () => {
        this.seen.push({ request: `${req.method} ${req.url}`, body: text === '' ? undefined : JSON.parse(text) });
        const next = this.script.shift();
        res
          .writeHead(next?.status ?? 599, { 'content-type': 'application/json' })
          .end(next?.answer ?? '{"detail":"off script"}');
      });
    });
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  play(script: Scripted[]): void {
    this.script = [...script];
    this.seen.length = 0;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

const tiersOf = (engine: EngineName) => Object.keys(engineContracts[engine].park) as ParkTier[];
/** Every tier each engine parks at, for each range of its versions capyctl knows. */
const parking = (['vllm', 'sglang'] as const).flatMap((engine) =>
  engineContracts[engine].versions.flatMap(({ from, sends }) =>
    tiersOf(engine).map((tier) => ({ engine, tier, from, sends })),
  ),
);

describe('each adapter sends exactly the table’s requests', () => {
  const scriptedEngine = new ScriptedEngine();
  let baseUrl: string;
  beforeAll(async () => {
    baseUrl = await scriptedEngine.listen();
  });
  afterAll(() => scriptedEngine.close());

  it.each(parking)('$engine from $from parks and wakes at $tier', async ({ engine, tier, sends }) => {
    const endpoint = { baseUrl, model: 'my-model' };
    const contract = engineContracts[engine];
    const park = [...preflight(engine, tier), ...contract.park[tier]!.map((step) => scripted(step, sends))];
    scriptedEngine.play(park);
    await adapters[engine].park(endpoint, tier, sends);
    expect(scriptedEngine.seen).toEqual(park.map(({ request, body }) => ({ request, body })));

    const wake = contract.wake[tier]!.map((step) => scripted(step, sends));
    scriptedEngine.play(wake);
    await adapters[engine].wake(endpoint, tier, sends);
    expect(scriptedEngine.seen).toEqual(wake.map(({ request, body }) => ({ request, body })));
  });
});

describe('the wake check', () => {
  const scriptedEngine = new ScriptedEngine();
  let baseUrl: string;
  beforeAll(async () => {
    baseUrl = await scriptedEngine.listen();
  });
  afterAll(() => scriptedEngine.close());

  it.each(['vllm', 'sglang', 'tensorfold'] as const)(
    '%s is asked with every determinism knob the table lists',
    async (engine) => {
      scriptedEngine.play([
        { request: '', body: undefined, status: 200, answer: JSON.stringify({ choices: [{ text: 'the river' }] }) },
      ]);
      const probe = { kind: 'prompt', prompt: 'Describe the river.', maxTokens: 8 } as const;
      expect(await adapters[engine].probe({ baseUrl, model: 'my-model' }, probe)).toEqual({
        kind: 'prompt',
        text: 'the river',
      });
      expect(scriptedEngine.seen).toEqual([
        {
          request: 'POST /v1/completions',
          body: {
            model: 'my-model',
            prompt: probe.prompt,
            max_tokens: 8,
            ...engineContracts[engine].determinism,
            stream: false,
          },
        },
      ]);
    },
  );
});

describe('the simulator serves the table', () => {
  afterEach(stopSimulators);

  it.each(parking)(
    '$engine from $from launched for $tier answers each park and wake request as the table says',
    async ({ engine, tier, from, sends }) => {
      const spec = deploymentDocument.parse({ name: 'my-model', engine, model: MODEL_PATH });
      const plan = adapters[engine].launch({
        spec,
        command: [],
        port: 0,
        gpuIndexes: [0],
        parkTier: tier,
        memory: { gpuBytes: 24 * 2 ** 30, reservedBytes: 6 * 2 ** 30, othersBytes: 0 },
      });
      const sim = await startSimulator(
        engine,
        [
          ...plan.argv,
          ...['--sim-version', from, '--sim-load-ms', '0', '--sim-park-ms', '0', '--sim-wake-ms', '0'],
          ...['--sim-reload-ms', '0'],
        ],
        {
          env: plan.env,
        },
      );
      const contract = engineContracts[engine];
      for (const { request, status } of preflight(engine, tier)) {
        expect((await fetch(`${sim.baseUrl}${request.slice('GET '.length)}`)).status, request).toBe(status);
      }
      for (const step of [...contract.park[tier]!, ...contract.wake[tier]!]) {
        const { request, body, status, answer } = scripted(step, sends);
        const [method, path] = request.split(' ') as [string, string];
        const res = await fetch(`${sim.baseUrl}${path}`, {
          method,
          headers: body === undefined ? {} : { 'content-type': 'application/json' },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        expect(res.status, request).toBe(status);
        const text = await res.text();
        if (step.route.answer.json !== undefined) {
          const expected = JSON.parse(answer) as unknown;
          // The same shape: the table's fields, with the values the engine's state gives.
          const got = JSON.parse(text) as unknown;
          if (expected !== null && typeof expected === 'object')
            expect(Object.keys(got as object), request).toEqual(expect.arrayContaining(Object.keys(expected)));
          else expect(got, request).toEqual(expected);
        }
        if (step.role === 'expect_asleep' || step.role === 'expect_awake')
          expect(JSON.parse(text), request).toEqual(JSON.parse(answer));
      }
    },
  );
});

describe('every error of the adapters names what really happened', () => {
  const scriptedEngine = new ScriptedEngine();
  let baseUrl: string;
  let endpoint: { baseUrl: string; model: string };
  beforeAll(async () => {
    baseUrl = await scriptedEngine.listen();
    endpoint = { baseUrl, model: 'my-model' };
  });
  afterAll(() => scriptedEngine.close());

  const answer = (status: number, body: unknown): Scripted => ({
    request: '',
    body: undefined,
    status,
    answer: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const vllmPark = (tier: ParkTier) => preflight('vllm', tier);
  const vllmWake = (tier: ParkTier) => engineContracts.vllm.wake[tier]!.map((step) => scripted(step));
  const error = (call: Promise<unknown>) =>
    call.then(
      () => expect.unreachable('it succeeded'),
      (e: unknown) => e as EngineError,
    );
  const notFound = answer(404, { detail: 'Not Found' });

  it.each([
    {
      case: 'a step answered with an error',
      script: () => [...vllmPark('host_ram'), answer(500, { error: { message: 'boom' } })],
      call: () => adapters.vllm.park(endpoint, 'host_ram', {}),
      kind: 'refused',
      message: () => `vLLM at ${baseUrl} answered POST /sleep?level=1 with 500: {"error":{"message":"boom"}}`,
    },
    {
      case: 'a wake the GPU has no room for',
      script: () => [answer(500, { error: { message: 'CUDA out of memory. Tried to allocate 2.00 GiB' } })],
      call: () => adapters.vllm.wake(endpoint, 'host_ram', {}),
      kind: 'out_of_memory',
      message: () =>
        `vLLM at ${baseUrl} answered POST /wake_up with 500: {"error":{"message":"CUDA out of memory. Tried to allocate 2.00 GiB"}}`,
    },
    {
      case: 'a route the wake needs that the engine does not have',
      script: () => [notFound],
      call: () => adapters.vllm.wake(endpoint, 'host_ram', {}),
      kind: 'refused',
      message: () => `vLLM at ${baseUrl} answered POST /wake_up with 404: has no such route`,
    },
    {
      case: 'a sleep answered 200 that did not sleep',
      script: () => [...vllmPark('host_ram'), answer(200, ''), answer(200, { is_sleeping: false })],
      call: () => adapters.vllm.park(endpoint, 'host_ram', {}),
      kind: 'refused',
      message: () => `vLLM at ${baseUrl} answered the sleep with 200 but GET /is_sleeping says it is not sleeping`,
    },
    {
      case: 'a wake answered 200 that is still sleeping',
      script: () => [...vllmWake('host_ram').slice(0, 2), answer(200, { is_sleeping: true })],
      call: () => adapters.vllm.wake(endpoint, 'host_ram', {}),
      kind: 'not_ready',
      message: () => `vLLM at ${baseUrl} answered the wake with 200 but GET /is_sleeping says it is still sleeping`,
    },
    {
      case: 'an answer that does not parse',
      script: () => [...vllmPark('deep'), answer(200, ''), answer(200, 'asleep')],
      call: () => adapters.vllm.park(endpoint, 'deep', {}),
      kind: 'refused',
      message: () => `vLLM at ${baseUrl} answered GET /is_sleeping with 200 but an unexpected body: asleep`,
    },
    {
      case: 'a weight reload the engine failed',
      script: () => [vllmWake('deep')[0]!, answer(500, { error: { message: 'reload_weights failed' } })],
      call: () => adapters.vllm.wake(endpoint, 'deep', {}),
      kind: 'reload_failed',
      message: () =>
        `vLLM at ${baseUrl} did not reload its weights: vLLM at ${baseUrl} answered POST /collective_rpc with 500: {"error":{"message":"reload_weights failed"}}`,
    },
    {
      case: 'a weight reload SGLang answered with success false',
      script: () => [
        ...engineContracts.sglang.wake.deep!.map((step) => scripted(step)).slice(0, 2),
        answer(200, { success: false, message: 'no such file' }),
      ],
      call: () => adapters.sglang.wake(endpoint, 'deep', {}),
      kind: 'reload_failed',
      message: () =>
        `SGLang at ${baseUrl} did not reload its weights: POST /update_weights_from_disk answered no such file`,
    },
    {
      case: 'a park whose wake route is missing, refused before it parks',
      script: () => [...vllmPark('deep').slice(0, 3), notFound, answer(200, { version: '0.9.2' })],
      call: () => adapters.vllm.park(endpoint, 'deep', {}),
      kind: 'refused',
      message: () =>
        `vLLM 0.9.2 at ${baseUrl} cannot park at tier deep: it has no POST /collective_rpc ` +
        '(GET answered 404 {"detail":"Not Found"}); its POST /sleep, GET /is_sleeping, POST /wake_up answer, so ' +
        'what switches these routes on is set and this vLLM build lacks it',
    },
    {
      case: 'a tier the engine does not park at',
      script: () => [],
      call: () => adapters.vllm.park(endpoint, 'kv_only', {}),
      kind: 'refused',
      message: () => 'vLLM cannot park at tier kv_only',
    },
  ])('$case', async ({ script, call, kind, message }) => {
    scriptedEngine.play(script());
    const e = await error(call());
    expect(e).toBeInstanceOf(EngineError);
    expect({ kind: e.kind, message: e.message }).toEqual({ kind, message: message() });
  });

  it('skips an optional route the engine does not have, with a warning, and the wake goes on', async () => {
    const [wake, , check] = vllmWake('host_ram');
    scriptedEngine.play([wake!, notFound, check!]);
    const warnings: string[] = [];
    await adapters.vllm.wake(endpoint, 'host_ram', {}, { warn: (w) => warnings.push(w) });
    expect(warnings).toEqual([
      `vLLM at ${baseUrl} has no POST /reset_prefix_cache (404); skipped, since it only refines the step`,
    ]);
    // The version probe is optional too: an engine without it has not said.
    scriptedEngine.play([notFound]);
    expect(await adapters.vllm.version(endpoint)).toBeNull();
  });

  it('says nothing answered, or that the call was cut, naming the request', async () => {
    const closed = { baseUrl: 'http://127.0.0.1:9', model: 'my-model' };
    const unreachable = await error(adapters.vllm.wake(closed, 'host_ram', {}));
    expect(unreachable.kind).toBe('unreachable');
    expect(unreachable.message).toMatch(/^POST \/wake_up on http:\/\/127\.0\.0\.1:9: .*ECONNREFUSED/);
    scriptedEngine.play([]);
    const cut = await error(
      adapters.vllm.wake(endpoint, 'host_ram', {}, { signal: AbortSignal.abort('the wake window ended') }),
    );
    expect({ kind: cut.kind, message: cut.message }).toEqual({
      kind: 'timeout',
      message: `POST /wake_up on ${baseUrl} was aborted: the wake window ended`,
    });
    expect((await error(adapters.tensorfold.park(endpoint, 'host_ram', {}))).message).toBe(
      'TensorFold cannot park; it stops instead',
    );
  });
});
