import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { randomUUID } from 'node:crypto';
import OpenAI from 'openai';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { fileURLToPath } from 'node:url';
import { Worker } from '@temporalio/worker';
import type { Deployment } from '../store/deployments.js';
import { listInstances, saveInstance } from '../store/instances.js';
import { recordInstance } from './fixtures/recordInstanceWorkflow.js';
import { CAPYCTL, capyctl } from './support/capyctl.js';
import { freshDatabase } from './support/postgres.js';
import { ADMIN_TOKEN, type ServerBench, startServerBench } from './support/serverBench.js';
import { workerConnection } from './support/temporal.js';
import { until } from './support/until.js';

describe('the server with a host agent: a request starts its model, and another switches the GPU', () => {
  let bench: ServerBench;
  let a: Deployment;
  let b: Deployment;

  beforeAll(async () => {
    // One 5 GiB model at a time.
    bench = await startServerBench({
      gpuMemory: '8GiB',
      hostYaml: 'resource_policy: { queue: { admission_window: 200ms } }',
    });
    a = await bench.deploy('chat-a');
    b = await bench.deploy('chat-b');
  });

  afterAll(async () => {
    await bench?.close();
  });

  /** A chat completion through the server's inference listener, as a client sends it. */
  async function ask(d: Deployment): Promise<string> {
    const reply = await bench.chat(d);
    expect(reply.status).toBe(200);
    return (reply.body as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content;
  }
  const instanceOf = (d: Deployment) => bench.server.table.get(d.id)?.instances[0];
  const load = () => bench.load();

  it('starts a stopped model for its first request and answers it', async () => {
    const text = await ask(a);
    expect(text.split(' ')).toHaveLength(4);
    expect(await ask(a)).toBe(text);
    expect(bench.server.table.get(a.id)?.instances).toMatchObject([
      { index: 0, hostId: bench.hostId, generation: 1, observedState: 'ready' },
    ]);
    // A sample taken after the answers: the engine idle again.
    const sampled = await until('a load sample of chat-a, idle', async () => {
      const d = (await load()).deployments.find((x) => x.name === 'chat-a');
      const sample = d?.instances[0]?.sample as { engine?: { running: number } } | null | undefined;
      return sample?.engine?.running === 0 ? d : undefined;
    });
    expect(sampled.instances[0]).toMatchObject({
      observed_state: 'ready',
      host_id: bench.hostId,
      sample: { fresh: true, engine: { running: 0, waiting: 0 } },
    });
  });

  it('parks the loaded model and starts the other for a request, then wakes the first again', async () => {
    const stateOf = bench.stateOf;
    await ask(b);
    expect(stateOf(b)).toBe('ready');
    expect(stateOf(a)).toBe('parked');
    await ask(a);
    expect(instanceOf(a)?.generation).toBe(1);
    expect(stateOf(a)).toBe('ready');
    expect(stateOf(b)).toBe('parked');
    const { deployments } = await load();
    expect(deployments.map((d) => [d.name, d.instances[0]?.observed_state])).toEqual([
      ['chat-a', 'ready'],
      ['chat-b', 'parked'],
    ]);
  });

  it('restarts a model whose engine crashed for its next request, as a new generation', async () => {
    await bench.fault(a, { crash: true });
    await until('the exit to reach the table', () => (bench.stateOf(a) === 'stopped' ? true : undefined));
    await ask(a);
    expect(instanceOf(a)).toMatchObject({ generation: 2, observedState: 'ready' });
  });

  it('serves the official openai client, streamed and not, unchanged', async () => {
    const openai = new OpenAI({ baseURL: `${bench.server.inferenceUrl}/v1`, apiKey: 'unused' });
    const whole = await openai.chat.completions.create({
      model: b.name,
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 5,
    });
    expect(whole.choices[0]?.message.content?.split(' ')).toHaveLength(5);
    expect(instanceOf(b)?.observedState).toBe('ready');
    let streamed = '';
    for await (const chunk of await openai.chat.completions.create({
      model: b.name,
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 5,
      stream: true,
    })) {
      streamed += chunk.choices[0]?.delta.content ?? '';
    }
    expect(streamed).toBe(whole.choices[0]?.message.content);
  });

  /** The deployment's instance once the catalogue lists it ready: its switch records that just after its answers. */
  const recordedReady = (d: Deployment) =>
    until(`${d.name} to be recorded ready`, async () =>
      (await listInstances(bench.db, { deploymentId: d.id })).find((i) => i.observedState === 'ready'),
    );

  it('serves a loaded model at once after the server restarts', async () => {
    await recordedReady(b);
    await bench.restartServer();
    const started = Date.now();
    expect((await ask(b)).split(' ')).toHaveLength(4);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('serves a switch’s target when the server restarted between the switch’s release and its record', async () => {
    // What a stop in that moment leaves: the catalogue still lists the target waking.
    const instance = await recordedReady(b);
    await saveInstance(bench.db, { ...instance, observedState: 'waking' });
    await bench.restartServer();
    expect(bench.stateOf(b)).toBe('waking');
    const reply = bench.chat(b);

    // The switch, on the new server's worker, records its target ready.
    const taskQueue = `record-${randomUUID()}`;
    const worker = await Worker.create({
      connection: await workerConnection(),
      taskQueue,
      workflowsPath: fileURLToPath(new URL('./fixtures/recordInstanceWorkflow.ts', import.meta.url)),
    });
    const { updatedAt: _, ...ready } = instance;
    await worker.runUntil(
      bench.server.client.workflow.execute(recordInstance, {
        taskQueue,
        workflowId: `record/${randomUUID()}`,
        args: [bench.server.serverTaskQueue, ready],
      }),
    );
    const recordedAt = Date.now();
    expect((await reply).status).toBe(200);
    expect(Date.now() - recordedAt).toBeLessThan(2_000);
    expect(bench.stateOf(b)).toBe('ready');
  });

  it('stops within a moment though a client connected and never sent its request', async () => {
    const { port } = new URL(bench.server.inferenceUrl);
    const silent = connect(Number(port), '127.0.0.1');
    await once(silent, 'connect');
    try {
      const started = Date.now();
      await bench.restartServer();
      // The stop waits for nothing to run, then a second for replies to leave; the start is quick.
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(silent.destroyed || silent.readableEnded).toBe(true);
    } finally {
      silent.destroy();
    }
  });

  it('refuses the load endpoint without the admin token', async () => {
    const reply = await request(`${bench.server.managementUrl}/management/v1/metrics/load`);
    expect(reply.statusCode).toBe(401);
    expect(await reply.body.json()).toMatchObject({ code: 'unauthorized' });
  });
});

describe('a host that registers after the server started', () => {
  it('bounds the silence of its engines’ replies by its own stream_idle_timeout', async () => {
    // The server starts with no host known; the host agent registers after it, with a 1 s bound.
    const bench = await startServerBench({ hostYaml: 'resource_policy: { queue: { stream_idle_timeout: 1s } }' });
    try {
      const a = await bench.deploy('chat-a');
      // The model starts (its wake check answered as usual), then its engine goes silent mid-answer.
      expect((await bench.chat(a)).status).toBe(200);
      const faulted = await request(`${bench.host.engineUrl({ deploymentId: a.id, instanceIndex: 0 })}/sim/faults`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ streams_go_silent: true }),
      });
      expect(faulted.statusCode).toBe(200);
      const stream = await bench.stream(a, { max_tokens: 50 });
      const headAt = Date.now();
      expect(stream.status).toBe(200);
      const ended = await Promise.race([
        stream.rest().then(
          () => 'the whole answer',
          () => 'cut',
        ),
        sleep(5_000).then(() => 'still open after 5 s'),
      ]);
      stream.end();
      expect(ended).toBe('cut');
      expect(Date.now() - headAt).toBeGreaterThanOrEqual(900);
      expect(Date.now() - headAt).toBeLessThan(3_000);
    } finally {
      await bench.close();
    }
  });
});

describe('a server restarted with other settings', () => {
  it('gives them to the host scheduler that outlived it: a ready_idle_timeout set now parks the idle model', async () => {
    const bench = await startServerBench({ gpuMemory: '8GiB' });
    try {
      const a = await bench.deploy('chat-a');
      expect((await bench.chat(a)).status).toBe(200);
      // Its start is over once recorded (the answer comes just before): the restart interrupts no switch.
      await until('chat-a to be recorded ready', async () =>
        (await listInstances(bench.db, { deploymentId: a.id }))[0]?.observedState === 'ready' ? true : undefined,
      );
      await bench.restartServer(
        'switching: { drain_timeout: 5s, start_timeout: 60s }\nlifecycle_defaults: { ready_idle_timeout: 1s }',
      );
      await until('chat-a to park', () => (bench.stateOf(a) === 'parked' ? true : undefined), 30_000);
    } finally {
      await bench.close();
    }
  });
});

describe('capyctl start server, as a process', () => {
  it('says what it needs when the database or the admin token is missing', async () => {
    const result = await capyctl(['start', 'server'], { DATABASE_URL: '', CAPYCTL_ADMIN_TOKEN: '' });
    expect(result.code).toBe(2);
    expect(result.stderr).toBe('capyctl: the server needs database_url (or DATABASE_URL) and CAPYCTL_ADMIN_TOKEN\n');
  });

  it('serves the management API with its admin token and stops cleanly on SIGTERM', async () => {
    const fresh = await freshDatabase(inject('postgresAdminUrl'));
    try {
      const child = spawn(
        process.execPath,
        [
          CAPYCTL,
          'start',
          'server',
          '--set',
          `temporal.address=${inject('temporalAddress')}`,
          '--set',
          'listen.management=127.0.0.1:0',
          '--set',
          'listen.inference=127.0.0.1:0',
        ],
        {
          env: {
            ...process.env,
            DATABASE_URL: fresh.url,
            CAPYCTL_ADMIN_TOKEN: ADMIN_TOKEN,
            CAPYCTL_SERVER_ID: randomUUID().slice(0, 8),
            CAPYCTL_LOG_FORMAT: 'json',
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let output = '';
      child.stdout!.on('data', (d) => (output += d));
      child.stderr!.on('data', (d) => (output += d));
      const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
      const url = await until('the server to start', () => output.match(/"managementUrl":"([^"]+)"/)?.[1], 60_000);
      const reply = await request(`${url}/management/v1/metrics/load`, {
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      });
      expect(reply.statusCode).toBe(200);
      expect(await reply.body.json()).toMatchObject({ stale_after_ms: 3000, deployments: [] });
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      await fresh.drop();
    }
  });
});
