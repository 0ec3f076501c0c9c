/**
 * The host scheduler on a GPU that holds one model (6 GiB; each simulator model takes 4 GiB of
 * weights and 1 GiB of KV cache) and host RAM that holds one parked copy (6 GiB). The cases run in
 * order on one host: each starts from what the one before left.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiErrors, releasedLines } from '../domain/catalogue.js';
import { awaitMeasurement, sendCommand, startMeasurement } from '../gateway/lifecycleClient.js';
import { gpuUsage } from '../hostAgent/simulatedGpu.js';
import { listInstances, saveInstance } from '../store/instances.js';
import { localActivityType } from '../deploy/demo/switchHistory.js';
import { signals, workflowIds } from '../workflows/definitions.js';
import type { Answer } from './support/queueGateway.js';
import { simDeployment } from './support/lifecycle.js';
import { refusal, released, type SchedulerBench, startSchedulerBench } from './support/scheduler.js';
import { until } from './support/until.js';

const GiB = 2 ** 30;
const servedBy = (answers: Answer[]) => answers.map((a) => (a.kind === 'served' ? a.deploymentId : a.error.code));

describe('the host scheduler', () => {
  let s: SchedulerBench;
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    s = await startSchedulerBench({ gpuMemory: '6GiB', hostRam: '6GiB' });
    for (const name of ['chat-a', 'chat-b', 'chat-c', 'chat-d']) ids[name] = await s.deployMeasured(name);
  });
  afterAll(() => s?.close());

  it('switches on a request: the demand reaches it, the loaded model parks, the waiting ones are started together', async () => {
    const { gateway } = s.lc;
    expect(servedBy([await gateway.request(ids['chat-a']!)])).toEqual([ids['chat-a']]);
    const answers = await Promise.all([1, 2, 3].map(() => gateway.request(ids['chat-b']!)));
    expect(servedBy(answers)).toEqual([ids['chat-b'], ids['chat-b'], ids['chat-b']]);
    const starts = answers.map((a) => (a.kind === 'served' ? a.startedAtMs : 0));
    expect(Math.max(...starts) - Math.min(...starts)).toBeLessThan(50);

    const ledger = await s.settledLedger();
    expect(ledger.gpus).toEqual([{ index: 0, memoryBytes: 6 * GiB, memoryKind: 'discrete' }]);
    expect(ledger.entries.map((e) => [e.name, e.state, e.tier, e.gpuBytes, e.hostRamBytes])).toEqual([
      ['chat-a', 'parked', 'host_ram', 0, 4 * GiB],
      // Launched for the tier it would park at: chat-a's copy left no room for its own.
      ['chat-b', 'ready', 'deep', 5 * GiB, 0],
    ]);
    expect(await s.lc.gpuUsedBytes()).toBe(5 * GiB);
  });

  it('takes the model whose requests waited longest next, of three', async () => {
    const { gateway } = s.lc;
    // chat-b runs a long request: the switch to chat-c drains it while the others queue behind.
    const long = gateway.request(ids['chat-b']!, 1_500);
    await sleep(50);
    const c = gateway.request(ids['chat-c']!);
    await sleep(300);
    const d = gateway.request(ids['chat-d']!);
    await sleep(50);
    const a = [1, 2, 3].map(() => gateway.request(ids['chat-a']!));
    await sleep(50);
    // A later report for chat-d: its oldest request still waited longer than chat-a's.
    const d2 = gateway.request(ids['chat-d']!);
    await Promise.all([long, c, d, d2, ...a]);
    const starts = gateway.steps.filter((x) => x.step === 'startWaiters').slice(-3);
    expect(starts.map((x) => (x.detail as { deploymentId: string }).deploymentId)).toEqual([
      ids['chat-c'],
      ids['chat-d'],
      ids['chat-a'],
    ]);
  });

  it('start without evict parks nothing: refused while the memory is held, nothing waits to act later; stop frees it and answers with its receipt', async () => {
    await s.until(ids['chat-a']!, 'ready');
    const before = await s.entry(ids['chat-b']!);
    expect(await refusal(s.command('start', { deploymentId: ids['chat-b']!, evict: false }))).toEqual(
      apiErrors.memoryHeld(ids['chat-b']!, ['chat-a']),
    );
    expect((await s.entry(ids['chat-a']!))?.state).toBe('ready');

    const stop = await s.command('stop', { deploymentId: ids['chat-a']! });
    expect(stop).toMatchObject({ deploymentId: ids['chat-a'], state: 'stopped', victims: [] });
    expect(stop.switchId).toEqual(expect.any(String));
    // The memory is free now, and the refused start did not stay behind to take it.
    await sleep(1_000);
    expect(await s.entry(ids['chat-b']!)).toEqual(before);
    expect(await s.command('start', { deploymentId: ids['chat-b']!, evict: false })).toMatchObject({
      deploymentId: ids['chat-b'],
      state: 'ready',
      victims: [],
    });
  });

  it('does not start a model an operator stopped on a request', async () => {
    const waiting = s.lc.gateway.request(ids['chat-a']!);
    await sleep(1_000);
    expect((await s.entry(ids['chat-a']!))?.state).toBe('stopped');
    // The operator's start serves it, and the request that waited with it.
    const start = await s.command('start', { deploymentId: ids['chat-a']!, evict: true });
    expect(start).toMatchObject({ state: 'ready', victims: [{ deploymentId: ids['chat-b'], instanceIndex: 0 }] });
    expect(servedBy([await waiting])).toEqual([ids['chat-a']]);
  });

  it('start with evict names its victims and its switch', async () => {
    const start = await s.command('start', { deploymentId: ids['chat-c']!, evict: true });
    expect(start.state).toBe('ready');
    expect(start.switchId).toEqual(expect.any(String));
    // Host RAM holds one copy and chat-b's is there: chat-a parks deep.
    expect(released(start)).toEqual([`${ids['chat-a']} ${releasedLines.parkedDeep}`]);
    expect(await s.command('start', { deploymentId: ids['chat-c']!, evict: true })).toEqual({
      deploymentId: ids['chat-c'],
      victims: [],
      state: 'ready',
    });
  });

  it('parks, preinitializes and deletes on command', async () => {
    // The park answers once its switch has begun, and runs on in the background.
    const park = await s.command('park', { deploymentId: ids['chat-c']! });
    expect(park).toMatchObject({ deploymentId: ids['chat-c'], state: 'parking', switchId: expect.any(String) });
    await s.until(ids['chat-c']!, 'parked');

    const pre = await s.command('preinitialize', { deploymentId: ids['chat-d']! });
    expect(pre).toMatchObject({ deploymentId: ids['chat-d'], state: 'parked' });
    expect((await s.entry(ids['chat-d']!))?.tier).toBe('deep');

    const del = await s.command('delete', { deploymentId: ids['chat-d']! });
    expect(del).toMatchObject({ deploymentId: ids['chat-d'], state: 'stopped' });
    expect(await s.entry(ids['chat-d']!)).toBeUndefined();
  });

  it("checks a woken model's answer against its first one, which the scheduler read with the demand", async () => {
    // chat-c is parked; its engine answers differently once woken.
    const c = ids['chat-c']!;
    const faults = await request(`${s.lc.host.engineUrl({ deploymentId: c, instanceIndex: 0 })}/sim/faults`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ wrong_answer_after_wake: true }),
    });
    expect(faults.statusCode).toBe(200);
    await faults.body.dump();

    const answer = await s.lc.gateway.request(c);
    expect(answer.kind === 'error' && answer.error).toEqual(apiErrors.wakeMismatch(c));
    // One local step read the model, the holders, the live servers and the first answer; the switch read none of them.
    const woke = s.lc.gateway.steps.findLast((x) => x.step === 'failWaiters')!.switchId;
    const switchSteps = (await s.lc.client.workflow.getHandle(workflowIds.switch(woke)).fetchHistory()).events ?? [];
    const local = switchSteps.flatMap((e) => localActivityType(e) ?? []);
    expect(local).not.toContain('findWakeReference');
    expect(local).not.toContain('liveServerQueues');
    const scheduler = (await s.lc.client.workflow.getHandle(workflowIds.hostScheduler(s.lc.hostId)).fetchHistory())
      .events;
    expect((scheduler ?? []).flatMap((e) => localActivityType(e) ?? [])).toContain('readForDemand');

    // The mismatched instance was stopped: the next request starts a fresh one.
    expect(servedBy([await s.lc.gateway.request(c)])).toEqual([c]);
    await s.command('park', { deploymentId: c });
    await s.until(c, 'parked');
  });

  it('refuses a start while the checkpoint is being measured; with --wait, waits for it, then for ready', async () => {
    const d = await s.lc.deploy(simDeployment('chat-new'));
    const error = await refusal(s.command('start', { deploymentId: d.id, evict: true }));
    expect(error).toEqual(apiErrors.checkpointUnmeasured('chat-new', null));

    await startMeasurement(s.lc.client, {
      deploymentId: d.id,
      revision: d.revision,
      hostId: s.lc.hostId,
      serverTaskQueue: s.lc.serverTaskQueue,
    });
    await awaitMeasurement(s.lc.client, d.id, d.revision);
    expect(await s.command('start', { deploymentId: d.id, evict: true })).toMatchObject({
      deploymentId: d.id,
      state: 'ready',
    });
    await s.command('delete', { deploymentId: d.id });
  });

  describe('a model under explicit activation', () => {
    let x: string;
    beforeAll(async () => {
      x = await s.deployMeasured('chat-x', 'lifecycle: { activation: explicit }\nresidency: host_backed');
    });

    it('is never woken or started by a request', async () => {
      const waiting = s.lc.gateway.request(x);
      await sleep(1_000);
      expect(await s.entry(x)).toBeUndefined();
      const start = await s.command('start', { deploymentId: x, evict: true });
      expect(start.state).toBe('ready');
      expect(servedBy([await waiting])).toEqual([x]);
    });

    it('keeps its memory: an evict that needs it is refused for capacity, and so is a request, at once', async () => {
      const error = await refusal(s.command('start', { deploymentId: ids['chat-a']!, evict: true }));
      expect(error).toEqual(apiErrors.insufficientCapacity(ids['chat-a']!, [{ name: 'chat-x', keptBy: 'explicit' }]));
      const refused = await s.lc.gateway.request(ids['chat-b']!);
      expect(refused).toMatchObject({
        kind: 'error',
        error: apiErrors.insufficientCapacity(ids['chat-b']!, [{ name: 'chat-x', keptBy: 'explicit' }]),
      });
      expect((await s.entry(x))?.state).toBe('ready');
      await s.command('stop', { deploymentId: x });
      expect(servedBy([await s.lc.gateway.request(ids['chat-b']!)])).toEqual([ids['chat-b']]);
    });

    it('is refused a park that needs room in the parked set, and serves on', async () => {
      // chat-b's copy fills host RAM; chat-x (host_backed) would have no room for its own.
      const park = await s.command('park', { deploymentId: ids['chat-b']! });
      expect(park.state).toBe('parking');
      await s.until(ids['chat-b']!, 'parked');
      expect((await s.entry(ids['chat-b']!))?.hostRamBytes).toBe(4 * GiB);
      expect(await s.command('start', { deploymentId: x, evict: false })).toMatchObject({ state: 'ready' });

      expect(await refusal(s.command('park', { deploymentId: x }))).toEqual(apiErrors.parkedCapacity(x));
      expect((await s.entry(x))?.state).toBe('ready');
      expect(s.lc.gateway.dispatchOf(x)).toBe('open');
    });

    it('is not restarted by a request after its engine exited', async () => {
      const { instance } = (await s.entry(x))!;
      const engine = (await gpuUsage(s.lc.gpuDir, 0)).owners.find((o) => o.gpuBytes > 0)!;
      process.kill(engine.pid, 'SIGKILL');
      // What the server does when the host reports an engine it did not stop.
      await s.lc.client.workflow
        .getHandle(workflowIds.hostScheduler(s.lc.hostId))
        .signal(signals.engineExited, instance);
      await s.until(x, 'stopped');
      void s.lc.gateway.request(x);
      await sleep(1_000);
      expect((await s.entry(x))?.state).toBe('stopped');
    });
  });

  it('refuses a cancel from the Web UI, keeping its ledger, and serves on', async () => {
    const handle = s.lc.client.workflow.getHandle(workflowIds.hostScheduler(s.lc.hostId));
    const ledger = await s.settledLedger();
    await handle.cancel();
    // The cancel is in its history, and a workflow task after it has run.
    await until('a workflow task after the cancel', async () => {
      const events = (await handle.fetchHistory()).events ?? [];
      const cancelled = events.findIndex((e) => e.workflowExecutionCancelRequestedEventAttributes);
      return cancelled >= 0 && events.slice(cancelled).some((e) => e.workflowTaskCompletedEventAttributes)
        ? true
        : undefined;
    });
    expect((await handle.describe()).status.name).toBe('RUNNING');
    expect(await s.ledger()).toEqual(ledger);
    expect((await s.entry(ids['chat-b']!))?.state).toBe('parked');
    // Woken by the scheduler that knew it parked: the same generation, not a new start.
    const { generation } = (await s.entry(ids['chat-b']!))!.instance;
    expect(servedBy([await s.lc.gateway.request(ids['chat-b']!)])).toEqual([ids['chat-b']]);
    await s.until(ids['chat-b']!, 'ready');
    expect((await s.entry(ids['chat-b']!))!.instance.generation).toBe(generation);
  });

  it("a run started after the last was terminated (the Web UI's Terminate) takes its ledger from the host agent: a parked model is woken, not started over a running one", async () => {
    expect(servedBy([await s.lc.gateway.request(ids['chat-a']!)])).toEqual([ids['chat-a']]);
    const before = await s.settledLedger();
    const ready = before.entries.find((e) => e.state === 'ready')!;
    const parked = before.entries.find((e) => e.state === 'parked')!;
    expect([ready.name, parked.name]).toEqual(['chat-a', 'chat-b']);
    const handle = s.lc.client.workflow.getHandle(workflowIds.hostScheduler(s.lc.hostId));
    await handle.terminate('terminated from the Web UI');

    // The request starts a new run, which learns that chat-a holds the GPU and chat-b waits in host RAM.
    expect(servedBy([await s.lc.gateway.request(ids['chat-b']!)])).toEqual([ids['chat-b']]);
    const after = await s.settledLedger();
    const now = (e: (typeof before.entries)[number]) => after.entries.find((x) => x.deploymentId === e.deploymentId);
    expect(now(parked)).toMatchObject({ state: 'ready', instance: parked.instance });
    expect(now(ready)).toMatchObject({ state: 'parked', instance: ready.instance });
    expect(await s.lc.gpuUsedBytes()).toBe(now(parked)!.gpuBytes);
  });

  it('a run started after the last was terminated stops an engine caught half-way, whose switch ended with that run', async () => {
    const slow = await s.deployMeasured('chat-slow', '', ['--sim-load-ms', '5000']);
    // Answered as its switch begins (no --wait): the switch parks chat-b, then launches chat-slow for 5 s.
    await sendCommand(s.lc.client, s.ref, 'start', { deploymentId: slow, evict: true });
    const row = async () => (await listInstances(s.lc.db, { deploymentId: slow }))[0]?.observedState;
    await until('chat-slow to be starting', async () => ((await row()) === 'starting' ? true : undefined));
    await s.lc.client.workflow
      .getHandle(workflowIds.hostScheduler(s.lc.hostId))
      .terminate('terminated from the Web UI');

    // chat-a's request starts a new run: it stops chat-slow, then wakes chat-a.
    expect(servedBy([await s.lc.gateway.request(ids['chat-a']!)])).toEqual([ids['chat-a']]);
    expect(await row()).toBe('stopped');
    const ledger = await s.settledLedger();
    expect(ledger.entries.find((e) => e.deploymentId === slow)).toBeUndefined();
    expect(await s.lc.gpuUsedBytes()).toBe((await s.entry(ids['chat-a']!))!.gpuBytes);
  });

  it('a run started after the last was terminated sets stopped a row whose switch ended before its engine was launched', async () => {
    const late = await s.deployMeasured('chat-late');
    const row = async () => (await listInstances(s.lc.db, { deploymentId: late }))[0];
    // What a switch terminated between writing its target's row and launching its engine leaves.
    const generation = ((await row())?.generation ?? 0) + 1;
    await saveInstance(s.lc.db, {
      deploymentId: late,
      index: 0,
      generation,
      hostId: s.lc.hostId,
      observedState: 'starting',
      parkTier: null,
      gpuBytes: 0,
      hostRamBytes: 0,
    });
    await s.lc.client.workflow
      .getHandle(workflowIds.hostScheduler(s.lc.hostId))
      .terminate('terminated from the Web UI');

    expect(servedBy([await s.lc.gateway.request(ids['chat-b']!)])).toEqual([ids['chat-b']]);
    expect(await row()).toMatchObject({ generation, observedState: 'stopped', gpuIndexes: [] });
    // Nothing waits for that start: its next request starts it afresh.
    expect(servedBy([await s.lc.gateway.request(late)])).toEqual([late]);
    expect((await row())!.generation).toBeGreaterThan(generation);
  });

  it('drains the host: every instance stops, each with its receipt', async () => {
    const receipts = await sendCommand(s.lc.client, s.ref, 'drainHost');
    expect(receipts.every((r) => r.state === 'stopped')).toBe(true);
    expect((await s.ledger()).entries.filter((e) => e.state !== 'stopped')).toEqual([]);
    expect(await s.lc.gpuUsedBytes()).toBe(0);
  });
});
