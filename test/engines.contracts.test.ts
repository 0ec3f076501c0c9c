/**
 * The contract table (activities/engines/contracts.ts), walked: each adapter sends exactly the
 * table's requests for a park and a wake at every tier (to a scripted engine that records them and
 * answers as the table says), and the simulator, launched from the adapter's own plan, serves every
 * one of them as the table says.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { engineContracts, routesTierNeeds, type Step } from '../activities/engines/contracts.js';
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

/** The line, body and answer of one table step, as the engine would answer it. */
function scripted(step: Step): Scripted {
  const { route, query, role } = step;
  const json = typeof step.json === 'function' ? (step.json as (f: { modelPath: string }) => unknown)({ modelPath: MODEL_PATH }) : step.json;
  let answer = route.answer.text ?? JSON.stringify(route.answer.json);
  if (role === 'expect_asleep' || role === 'expect_awake') answer = JSON.stringify({ is_sleeping: role === 'expect_asleep' });
  return { request: `${route.method} ${route.path}${query ? `?${query}` : ''}`, body: json, status: route.answer.status, answer };
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
        res.writeHead(next?.status ?? 599, { 'content-type': 'application/json' }).end(next?.answer ?? '{"detail":"off script"}');
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
const parking = (['vllm', 'sglang'] as const).flatMap((engine) => tiersOf(engine).map((tier) => ({ engine, tier })));

describe('each adapter sends exactly the table’s requests', () => {
  const scriptedEngine = new ScriptedEngine();
  let baseUrl: string;
  beforeAll(async () => {
    baseUrl = await scriptedEngine.listen();
  });
  afterAll(() => scriptedEngine.close());

  it.each(parking)('$engine parks and wakes at $tier', async ({ engine, tier }) => {
    const endpoint = { baseUrl, model: 'my-model' };
    const contract = engineContracts[engine];
    const park = [...preflight(engine, tier), ...contract.park[tier]!.map(scripted)];
    scriptedEngine.play(park);
    await adapters[engine].park(endpoint, tier);
    expect(scriptedEngine.seen).toEqual(park.map(({ request, body }) => ({ request, body })));

    const wake = contract.wake[tier]!.map(scripted);
    scriptedEngine.play(wake);
    await adapters[engine].wake(endpoint, tier);
    expect(scriptedEngine.seen).toEqual(wake.map(({ request, body }) => ({ request, body })));
  });
});

describe('the simulator serves the table', () => {
  afterEach(stopSimulators);

  it.each(parking)('$engine launched for $tier answers each park and wake request as the table says', async ({ engine, tier }) => {
    const spec = deploymentDocument.parse({ name: 'my-model', engine, model: MODEL_PATH });
    const plan = adapters[engine].launch({ spec, command: [], port: 0, gpuIndex: 0, parkTier: tier, memory: { gpuBytes: 24 * 2 ** 30, reservedBytes: 6 * 2 ** 30, othersBytes: 0 } });
    const sim = await startSimulator(engine, [...plan.argv, '--sim-load-ms', '0', '--sim-park-ms', '0', '--sim-wake-ms', '0', '--sim-reload-ms', '0'], {
      env: plan.env,
    });
    const contract = engineContracts[engine];
    for (const { request, status } of preflight(engine, tier)) {
      expect((await fetch(`${sim.baseUrl}${request.slice('GET '.length)}`)).status, request).toBe(status);
    }
    for (const step of [...contract.park[tier]!, ...contract.wake[tier]!]) {
      const { request, body, status, answer } = scripted(step);
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
        if (expected !== null && typeof expected === 'object') expect(Object.keys(got as object), request).toEqual(expect.arrayContaining(Object.keys(expected)));
        else expect(got, request).toEqual(expected);
      }
      if (step.role === 'expect_asleep' || step.role === 'expect_awake') expect(JSON.parse(text), request).toEqual(JSON.parse(answer));
    }
  });
});
