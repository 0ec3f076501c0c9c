/**
 * Recovery (issue 18, "Faults, bad input and load"): a server killed outright (SIGKILL) in the middle
 * of a switch, its host agent a separate process that lives on; a server or a host agent killed
 * while a parked model wakes with no victim, the wake begun by the scheduler (issue 14); and a host
 * agent that registers anew while a switch brings its target up. Once recovered, every model is
 * served for its next request.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stepOf } from '../deploy/demo/switchHistory.js';
import { listInstances, saveInstance } from '../store/instances.js';
import { workflowIds } from '../workflows/definitions.js';
import { startWaitersAndRecordReady } from './fixtures/recordInstanceWorkflow.js';
import { type ApiReply, Cluster, type ClusterHost, gpuUsed } from './support/cluster.js';
import { SIM_MODEL_BYTES, simDeployment } from './support/lifecycle.js';
import { startServerBench } from './support/serverBench.js';
import { workerConnection } from './support/temporal.js';
import { until } from './support/until.js';

/** A chat completion answered within `ms`, or word that it was not. */
async function answeredWithin(cluster: Cluster, model: string, ms: number): Promise<ApiReply | 'no answer'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'no answer'>((resolve) => (timer = setTimeout(resolve, ms, 'no answer')));
  try {
    return await Promise.race([cluster.chat(model), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** The port an engine serving `name` was launched on, read from its command line as `ps` shows it. */
function launchedPort(name: string): number | undefined {
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    } catch {
      continue; // it exited meanwhile
    }
    const served = argv.indexOf('--served-model-name');
    const port = argv.indexOf('--port');
    if (served !== -1 && argv[served + 1] === name && port !== -1) return Number(argv[port + 1]);
  }
  return undefined;
}

const occupy = (port: number) =>
  new Promise<Server>((resolve, reject) => {
    const server = createServer().once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });

describe('a server or a host agent killed (SIGKILL) in the middle of a switch', () => {
  let cluster: Cluster;
  /** The phase each case kills a process in lasts 3 s: long enough to be seen and hit. */
  const SLOW_MS = '3000';

  beforeAll(async () => {
    cluster = await Cluster.start({ hosts: [{ gpuMemory: '8GiB' }] });
    await cluster.deploy(simDeployment('victim', 'vllm', ['--sim-park-ms', SLOW_MS]));
    // Two targets: the sleeper starts in the first case and is woken in the second; the newcomer
    // starts only in its own case.
    await cluster.deploy(simDeployment('sleeper', 'vllm', ['--sim-wake-ms', SLOW_MS]));
    await cluster.deploy(simDeployment('newcomer', 'vllm', ['--sim-load-ms', SLOW_MS]));
    // vLLM binds its port once its weights are loaded: the load is the window another process takes it in.
    await cluster.deploy(simDeployment('racer', 'vllm', ['--sim-load-ms', '2000']));
  }, 120_000);

  afterAll(async () => {
    await cluster?.close();
  });

  const stateOf = async (name: string): Promise<string> => (await cluster.status(name)).state;
  const becomes = (name: string, state: string) =>
    until(`${name} ${state}`, async () => ((await stateOf(name)) === state ? true : undefined), 60_000);
  const served = async (name: string) => expect((await cluster.chat(name)).status).toBe(200);

  /**
   * Twenty requests for `target` make the switch; when `who` shows `phase` the server is killed
   * (those requests die with it) and started again. The switch finishes on the new server; then
   * the victim, parked, must be answered for each of its next three requests.
   */
  async function killDuring(target: string, who: string, phase: string) {
    await served('victim');
    for (let i = 0; i < 20; i++) void cluster.chat(target).catch(() => undefined);
    await becomes(who, phase);
    await cluster.server.stop('SIGKILL');
    await cluster.startServer();
    await becomes('victim', 'parked');
    await becomes(target, 'ready');
    for (let i = 0; i < 3; i++) {
      const reply = await answeredWithin(cluster, 'victim', 60_000);
      expect(reply === 'no answer' ? reply : reply.status).toBe(200);
    }
  }

  it('answers the parked victim after a restart, killed while the victim parks', { timeout: 150_000 }, async () => {
    await killDuring('sleeper', 'victim', 'parking');
  });

  it('answers the parked victim after a restart, killed while the target wakes', { timeout: 150_000 }, async () => {
    // The sleeper parks once, so that the switch wakes it.
    if ((await stateOf('sleeper')) !== 'parked') await served('sleeper');
    await killDuring('sleeper', 'sleeper', 'waking');
  });

  it('answers the parked victim after a restart, killed while the target starts', { timeout: 150_000 }, async () => {
    expect(await stateOf('newcomer')).toBe('stopped');
    await killDuring('newcomer', 'newcomer', 'starting');
  });

  it(
    'starts a model whose engine lost the race for its port on a fresh port: its request is answered 200',
    { timeout: 60_000 },
    async () => {
      const reply = cluster.chat('racer');
      // Another process binds the port the host chose for the engine while the engine loads.
      const port = await until("racer's engine launched", () => launchedPort('racer'), 30_000);
      const squatter = await occupy(port);
      try {
        expect((await reply).status).toBe(200);
        expect(await stateOf('racer')).toBe('ready');
        expect(launchedPort('racer')).not.toBe(port);
      } finally {
        squatter.close();
      }
    },
  );

  describe('while a parked model wakes alone, its wake begun with its switch', () => {
    let lonerId: string;

    beforeAll(async () => {
      lonerId = (await cluster.deploy(simDeployment('loner', 'vllm', ['--sim-wake-ms', SLOW_MS]))).deployment_id;
    }, 60_000);

    /**
     * Loner served (it takes the GPU from whichever model holds it), then parked by an operator, so
     * that it wakes with no victim; then three requests wait for its wake, which is under way. Each
     * comes to its reply, or to the error that cut it.
     */
    async function wakeAlone(): Promise<Array<Promise<ApiReply | Error>>> {
      expect((await cluster.chat('loner')).status).toBe(200);
      expect((await cluster.capyctl(['park', 'deployment', 'loner'])).code).toBe(0);
      await becomes('loner', 'parked');
      const waiters = Array.from({ length: 3 }, () => cluster.chat('loner').catch((e: Error) => e));
      await becomes('loner', 'waking');
      return waiters;
    }

    it(
      'finishes the wake on the restarted server, killed as it woke: the next request is served',
      { timeout: 150_000 },
      async () => {
        const waiters = await wakeAlone();
        await cluster.server.stop('SIGKILL');
        // Its requests died with it.
        for (const waiter of await Promise.all(waiters)) expect(waiter).toBeInstanceOf(Error);
        await cluster.startServer();
        await becomes('loner', 'ready');
        expect((await cluster.chat('loner')).status).toBe(200);
      },
    );

    it(
      'serves its waiters and its next request from a fresh start: the wake the scheduler began with the switch died with the agent',
      { timeout: 150_000 },
      async () => {
        const [host] = cluster.hosts as [ClusterHost];
        const waiters = await wakeAlone();
        await host.process.stop('SIGKILL');
        host.process = cluster.startAgent(host.file);
        await host.process.awaitOutput(`${host.hostId} to register again`, /"msg":"host (registered)"/);

        // The engine stopped with its agent: the switch's wake step, joined to the scheduler's, fails on
        // the new agent, which never ran it; the switch stops the model, and its waiters wait for the
        // next start (issue 33).
        for (const reply of await Promise.all(waiters)) expect(reply).toMatchObject({ status: 200 });
        const connection = await Connection.connect({ address: cluster.services.temporalAddress });
        try {
          const scheduler = await new Client({ connection }).workflow
            .getHandle(workflowIds.hostScheduler(host.hostId))
            .fetchHistory();
          // One early wake of loner for each of its two wakes, the server's kill's and this one.
          const wakesOfLoner = scheduler.events!.filter(
            (e) =>
              stepOf(e) === 'wakeEngine' &&
              JSON.parse(Buffer.from(e.activityTaskScheduledEventAttributes!.input!.payloads![0]!.data!).toString()).key
                .deploymentId === lonerId,
          );
          expect(wakesOfLoner).toHaveLength(2);
        } finally {
          await connection.close();
        }
        expect((await cluster.chat('loner')).status).toBe(200);
        expect(await stateOf('loner')).toBe('ready');
        expect(await gpuUsed(host)).toBe(SIM_MODEL_BYTES);
      },
    );
  });
});

describe('a host agent that registers anew while a switch brings its target up', () => {
  it(
    'starts the target afresh for its next request: the switch neither releases nor records ready the engine that stopped with the agent',
    { timeout: 120_000 },
    async () => {
      const bench = await startServerBench({ gpuMemory: '8GiB' });
      try {
        const b = await bench.deploy('chat-b');
        expect((await bench.chat(b)).status).toBe(200);
        const started = await until(`${b.name} recorded ready`, async () =>
          (await listInstances(bench.db, { deploymentId: b.id })).find((i) => i.observedState === 'ready'),
        );
        // What a server stopped after its switch started the target, and before the release, leaves:
        // the catalogue lists the target starting.
        const { updatedAt: _, ...instance } = started;
        await saveInstance(bench.db, { ...instance, observedState: 'starting' });
        await bench.restartServer();
        // The agent starts again, its engine stopped with it, and registers anew.
        await bench.restartHost();

        // The switch, taken up by the new server's worker, releases its target and records it ready.
        const taskQueue = `finish-switch-${b.id}`;
        const worker = await Worker.create({
          connection: await workerConnection(),
          taskQueue,
          workflowsPath: fileURLToPath(new URL('./fixtures/recordInstanceWorkflow.ts', import.meta.url)),
        });
        await worker.runUntil(
          bench.server.client.workflow.execute(startWaitersAndRecordReady, {
            taskQueue,
            workflowId: `finish-switch/${b.id}`,
            args: [bench.server.serverTaskQueue, instance],
          }),
        );
        expect((await listInstances(bench.db, { deploymentId: b.id }))[0]?.observedState).toBe('stopped');

        const reply = await bench.chat(b);
        expect(reply.status).toBe(200);
        // Its waiters are let go just before the switch records the new generation ready.
        await until('a new generation recorded ready', async () => {
          const [now] = await listInstances(bench.db, { deploymentId: b.id });
          return now?.generation === instance.generation + 1 && now.observedState === 'ready' ? true : undefined;
        });
      } finally {
        await bench.close();
      }
    },
  );
});
