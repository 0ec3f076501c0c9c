import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { LaunchInput } from '../activities/hostActivities.js';
import { LoadBoard, type InstanceSample } from '../gateway/loadBoard.js';
import { buildManagementApp } from '../gateway/managementApp.js';
import { storePorts } from '../server/storePorts.js';
import type { EngineExitBody } from '../api/hosts.js';
import { loadSettings } from '../settings/load.js';
import { gpuUsage } from '../hostAgent/simulatedGpu.js';
import { INGRESS_SECRET_HEADER } from '../domain/hostIngress.js';
import { findHost, ingressSecrets, issueHostToken } from '../store/hosts.js';
import { migrate } from '../store/migrate.js';
import { launchAndAwaitReady, measure, parkAndWake, stopEngine } from './fixtures/engineLifecycleWorkflow.js';
import { CAPYCTL } from './support/capyctl.js';
import { type FreshDatabase, freshDatabase } from './support/postgres.js';
import { workerConnection } from './support/temporal.js';
import { simHostYaml } from './support/simHost.js';
import { until } from './support/until.js';

const GiB = 2 ** 30;
const dir = mkdtempSync(join(tmpdir(), 'capyctl-host-'));
const hostId = `gpu-box-${randomUUID().slice(0, 8)}`;

/** A host agent process, its output kept for the assertions' messages. */
function startAgent(file: string): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
  let output = '';
  const child = spawn(process.execPath, [CAPYCTL, 'start', 'host', '--file', file], {
    env: { ...process.env, CAPYCTL_LOG_FORMAT: 'json', CAPYCTL_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  return { child, output: () => output, exited: new Promise((r) => child.once('exit', (code) => r(code))) };
}

describe('the host agent, a real process on the real dev server', () => {
  let fresh: FreshDatabase;
  let app: FastifyInstance;
  let serverUrl: string;
  let agent: ReturnType<typeof startAgent>;
  let client: Client;
  let worker: Worker;
  let workerRun: Promise<void>;
  const taskQueue = `host-test-${randomUUID()}`;
  const received: Array<{ atMs: number; samples: InstanceSample[] }> = [];
  const exits: EngineExitBody[] = [];
  const board = new LoadBoard();
  /** The engine of `input` as its launch answered: the test reaches it directly, as the host's activities do. */
  let engineUrl: string;

  const spec = loadSettings('deployment', {
    text: [
      'name: chat-a',
      'engine: vllm',
      'model: sim/chat-a',
      'extra_args: ["--sim-weights", "4GiB", "--sim-kv", "1GiB", "--sim-load-ms", "300", "--sim-park-ms", "50", "--sim-wake-ms", "50", "--sim-tokens-per-s", "20"]',
    ].join('\n'),
  });
  const input: LaunchInput = {
    key: { deploymentId: '01M3R7A6YJW402N962HH17A66W', instanceIndex: 0, generation: 1 },
    spec,
    gpuIndexes: [0],
    parkTier: 'host_ram',
    memory: { gpuBytes: 16 * 2 ** 30, reservedBytes: 5 * 2 ** 30, othersBytes: 0 },
  };
  const hostYaml = (token: string) =>
    simHostYaml({
      hostId,
      serverUrl,
      token,
      temporalAddress: inject('temporalAddress'),
      dataDir: join(dir, 'host'),
      gpuMemory: '16GiB',
    });

  beforeAll(async () => {
    fresh = await freshDatabase(inject('postgresAdminUrl'));
    await migrate(fresh.db);
    const record = board.record.bind(board);
    board.record = (samples) => {
      received.push({ atMs: Date.now(), samples: [...samples] });
      record(samples);
    };
    app = await buildManagementApp({
      store: storePorts(fresh.db),
      board,
      hostEvents: { registered: async () => {}, engineExited: async (_host, exit) => void exits.push(exit) },
      logger: pino({ level: 'silent' }),
    });
    serverUrl = await app.listen({ host: '127.0.0.1', port: 0 });
    const token = await issueHostToken(fresh.db);
    writeFileSync(join(dir, 'host.yaml'), hostYaml(token));
    agent = startAgent(join(dir, 'host.yaml'));

    client = new Client({ connection: await Connection.connect({ address: inject('temporalAddress') }) });
    worker = await Worker.create({
      connection: await workerConnection(),
      taskQueue,
      workflowsPath: fileURLToPath(new URL('./fixtures/engineLifecycleWorkflow.ts', import.meta.url)),
    });
    workerRun = worker.run();
  });

  afterAll(async () => {
    agent?.child.kill('SIGKILL');
    worker?.shutdown();
    await workerRun;
    await app?.close();
    await fresh?.drop();
  });

  const run = <A extends unknown[], R>(wf: (...args: A) => Promise<R>, ...args: A) =>
    client.workflow.execute(wf, { taskQueue, workflowId: `host-test/${randomUUID()}`, args });

  it('registers its simulated GPU and host RAM with the server', async () => {
    const host = await until('the host to register', () => findHost(fresh.db, hostId), 60_000);
    expect(host.gpus).toEqual([{ index: 0, name: 'sim-0', memoryBytes: 16 * GiB, memoryKind: 'discrete' }]);
    expect(host.hostRamBytes).toBe(64 * GiB);
    expect(host.settings).toMatchObject({ activation: 'on_demand', queue: { max_pending_per_deployment: 64 } });
  });

  it('refuses to start with a token the server did not issue', async () => {
    const file = join(dir, 'stranger.yaml');
    writeFileSync(file, hostYaml('capy_host_not-issued').replace(`id: ${hostId}`, 'id: stranger'));
    const stranger = startAgent(file);
    expect(await stranger.exited).toBe(1);
    expect(stranger.output()).toContain('refused the host token');
    expect(await findHost(fresh.db, 'stranger')).toBeUndefined();
  });

  it('measures a checkpoint through its activity', async () => {
    expect(await run(measure, hostId, input)).toEqual({
      weightBytes: 4 * GiB,
      kvBytes: 1 * GiB,
      residueBytes: 0,
      maxModelLen: null,
      maxModelLenFrom: 'engine_default',
      source: 'simulator',
    });
  });

  it('launches an engine, parks it in host RAM and wakes it with the same answer', async () => {
    engineUrl = await run(launchAndAwaitReady, hostId, input);
    const gpuDir = join(dir, 'host', 'sim-gpus');
    expect((await gpuUsage(gpuDir, 0)).usedBytes).toBe(5 * GiB);
    const probe = { kind: 'prompt' as const, prompt: 'The capital of France is', maxTokens: 8 };
    const { before, after, checkMs } = await run(parkAndWake, hostId, input, probe);
    expect(before.kind).toBe('prompt');
    expect(after).toEqual(before);
    // The check's share of the wake step: the 8 tokens at the simulator's 20 a second, at least.
    expect(checkMs).toBeGreaterThanOrEqual(300);
  });

  it('reports load about once a second, counting what its ingress forwards', async () => {
    const ingressUrl = await until('the ingress URL', () => agent.output().match(/"ingressUrl":"([^"]+)"/)?.[1]);
    const from = Date.now();
    // The server's secret for this host, as the gateway sends it.
    const secret = (await ingressSecrets(fresh.db)).get(hostId)!;
    const reply = await request(`${ingressUrl}/instances/${input.key.deploymentId}/0/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', [INGRESS_SECRET_HEADER]: secret },
      body: JSON.stringify({
        model: 'chat-a',
        messages: [{ role: 'user', content: 'count slowly' }],
        max_tokens: 400,
        stream: true,
      }),
    });
    expect(reply.statusCode).toBe(200);
    expect(reply.headers['content-type']).toContain('text/event-stream');
    const frames = reply.body[Symbol.asyncIterator]();
    expect(String((await frames.next()).value)).toContain('"role":"assistant"');

    const busy = await until('a sample counting the stream', () => {
      const s = board.read(input.key.deploymentId, 0, Date.now());
      return s?.ingressInFlight === 1 && s.engine?.running === 1 ? s : undefined;
    });
    expect(busy).toMatchObject({ hostId, generation: 1, fresh: true, maxRunning: { count: 32, source: 'default' } });
    await new Promise((r) => setTimeout(r, 3_000));
    const reports = received.filter(
      (r) => r.atMs >= from && r.samples.some((s) => s.deploymentId === input.key.deploymentId),
    );
    const seconds = (Date.now() - from) / 1_000;
    expect(reports.length).toBeGreaterThanOrEqual(Math.floor(seconds) - 1);
    expect(reports.length).toBeLessThanOrEqual(Math.ceil(seconds) + 1);

    // Hanging up closes the ingress's connection to the engine, which stops the engine's work.
    reply.body.destroy();
    const idle = await until('a sample after the hang-up', () => {
      const s = board.read(input.key.deploymentId, 0, Date.now());
      return s?.ingressInFlight === 0 && s.engine?.running === 0 ? s : undefined;
    });
    expect(idle.engine).toMatchObject({ running: 0, waiting: 0 });
  });

  it('reports an engine that exits without being asked to', async () => {
    const crash = await request(`${engineUrl}/sim/faults`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ crash: true }),
    }).catch(() => undefined);
    await crash?.body.dump();
    const exit = await until('the exit report', () => exits.find((e) => e.deployment_id === input.key.deploymentId));
    expect(exit).toMatchObject({ instance_index: 0, generation: 1 });
    expect(exit.exit_code === null ? exit.signal : exit.exit_code).not.toBe(0);
    expect(board.read(input.key.deploymentId, 0, Date.now())).toBeNull();
  });

  it('stops its engines and exits cleanly on SIGTERM', async () => {
    const second = { ...input, key: { ...input.key, generation: 2 } };
    await run(launchAndAwaitReady, hostId, second);
    const gpuDir = join(dir, 'host', 'sim-gpus');
    expect((await gpuUsage(gpuDir, 0)).usedBytes).toBe(5 * GiB);
    await run(stopEngine, hostId, second);
    expect((await gpuUsage(gpuDir, 0)).usedBytes).toBe(0);
    await run(launchAndAwaitReady, hostId, { ...input, key: { ...input.key, generation: 3 } });
    agent.child.kill('SIGTERM');
    expect(await agent.exited).toBe(0);
    expect((await gpuUsage(gpuDir, 0)).usedBytes).toBe(0);
  });
});
