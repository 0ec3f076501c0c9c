import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
/**
 * The switch workflow end to end: real Temporal, real Postgres, a real host agent running simulator
 * engines on a simulated 8 GiB card (one 5 GiB model at a time, so every switch must free the GPU
 * before its target loads), and the in-memory gateway standing in for the request queues.
 */
import { randomUUID } from 'node:crypto';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiErrors, releasedLines } from '../domain/catalogue.js';
import type { InstanceState, ParkTier, SwitchOutcome } from '../domain/vocabulary.js';
import type { Deployment } from '../store/deployments.js';
import { listInstances } from '../store/instances.js';
import { findSwitchReceipt } from '../store/switchReceipts.js';
import { findWakeReference } from '../store/wakeReferences.js';
import { searchAttributes, WORKFLOW_TASK_TIMEOUT_MS, workflowIds } from '../workflows/definitions.js';
import type { InstanceRef, SwitchInput, SwitchResult, VictimPlan } from '../api/lifecycle.js';
import { switchWorkflow } from '../workflows/switch.js';
import { switchSummary } from '../workflows/switchSummary.js';
import { compareAnswers, probeFor } from '../workflows/wakeCheck.js';
import { localActivityType } from '../deploy/demo/switchHistory.js';
import type { Answer } from './support/queueGateway.js';
import { type Lifecycle, simDeployment, startLifecycle } from './support/lifecycle.js';
import { until } from './support/until.js';

const GiB = 2 ** 30;
/** One 5 GiB model (4 GiB of weights, 1 GiB of KV cache) alone on the 8 GiB card. */
const MODEL_MEMORY = { gpuBytes: 8 * GiB, reservedBytes: 5 * GiB, othersBytes: 0 };
const TIMEOUTS: SwitchInput['timeouts'] = { drainMs: 2_000, wakeWindowMs: 5_000, startMs: 30_000 };

let lc: Lifecycle;
beforeAll(async () => {
  lc = await startLifecycle({ gpuMemory: '8GiB' });
});
afterAll(() => lc?.close());

type Model = Deployment;

/** Deploys a simulator model whose name is unique in this run (visibility is shared by every test). */
const deploy = (name: string, extra: string[] = []): Promise<Model> =>
  lc.deploy(simDeployment(`${name}-${randomUUID().slice(0, 6)}`, 'vllm', extra));

const ref = (m: Model, generation = 1): InstanceRef => ({ deploymentId: m.id, instanceIndex: 0, generation });

interface Plan {
  target?: { model: Model; action: 'wake' | 'start'; tier: ParkTier | null; generation?: number };
  victims?: Array<{ model: Model; plan: VictimPlan; generation?: number }>;
  windowMs?: number | null;
  timeouts?: Partial<SwitchInput['timeouts']>;
}

function switchInput(plan: Plan): SwitchInput {
  const t = plan.target;
  return {
    switchId: randomUUID(),
    hostId: lc.hostId,
    serverTaskQueue: lc.serverTaskQueue,
    startedAtMs: Date.now(),
    target: t
      ? {
          name: t.model.name,
          revision: t.model.revision,
          spec: t.model.spec,
          instance: ref(t.model, t.generation),
          action: t.action,
          tier: t.tier,
          gpuIndexes: [0],
          memory: MODEL_MEMORY,
        }
      : null,
    victims: (plan.victims ?? []).map((v) => ({
      name: v.model.name,
      instance: ref(v.model, v.generation),
      plan: v.plan,
      gpuIndexes: [0],
    })),
    admissionWindowMs: plan.windowMs ?? null,
    // These models are not measured: their rows say they hold nothing, as the scheduler would read them.
    checkpoints: {},
    timeouts: { ...TIMEOUTS, ...plan.timeouts },
  };
}

/** Started as a test starts it; the scheduler gives its switches a shorter task timeout (`workflowTaskTimeout`). */
const startSwitch = (input: SwitchInput, options: { workflowTaskTimeout?: number } = {}) =>
  lc.client.workflow.start(switchWorkflow, {
    taskQueue: lc.serverTaskQueue,
    workflowId: workflowIds.switch(input.switchId),
    args: [input],
    ...options,
  });
const runSwitch = async (plan: Plan): Promise<SwitchResult & { input: SwitchInput }> => {
  const input = switchInput(plan);
  return { ...(await (await startSwitch(input)).result()), input };
};

/** A model started by a first switch and serving: its gateway dispatch is open. */
async function ready(m: Model, generation = 1): Promise<void> {
  const r = await runSwitch({ target: { model: m, action: 'start', tier: 'host_ram', generation } });
  expect(r.outcome).toBe('released');
}

/** Stops what a test left loaded (instances of `generation`), so the next one finds the GPU empty. Returns the switch's ID. */
async function stop(models: Model[], generation = 1): Promise<string> {
  const r = await runSwitch({
    victims: models.map((model) => ({ model, generation, plan: { kind: 'stop', reason: 'operator' } })),
  });
  expect(await lc.gpuUsedBytes()).toBe(0);
  return r.input.switchId;
}

const park = (tier: ParkTier): VictimPlan => ({ kind: 'park', tier });

/** `parked` started and parked in host RAM, then `victim` started: a wake of `parked` must park `victim` first. */
async function parkedBeside(parked: Model, victim: Model): Promise<void> {
  await ready(parked);
  expect((await runSwitch({ victims: [{ model: parked, plan: park('host_ram') }] })).outcome).toBe('released');
  await ready(victim);
}

/** A switch just started that parks `a` (its park takes 3 s) to start `b`, with one request waiting for `b`. */
async function switchWithSlowPark(name: string) {
  const a = await deploy(`${name}-a`, ['--sim-park-ms', '3000']);
  const b = await deploy(`${name}-b`);
  await ready(a);
  const waiter = lc.gateway.request(b.id, 10);
  const input = switchInput({
    target: { model: b, action: 'start', tier: 'host_ram' },
    victims: [{ model: a, plan: park('host_ram') }],
  });
  return { a, b, waiter, input, handle: await startSwitch(input) };
}

/** The switch's history: its events, and the remote steps' by their activity's name. */
async function historyOf(switchId: string) {
  const events = (await lc.client.workflow.getHandle(workflowIds.switch(switchId)).fetchHistory()).events ?? [];
  const scheduled = (name: string) =>
    events.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === name);
  const completed = (name: string) => {
    const id = String(scheduled(name)?.eventId);
    return events.find((e) => String(e.activityTaskCompletedEventAttributes?.scheduledEventId) === id);
  };
  return { events, scheduled, completed };
}

/**
 * A request the gateway does not count (it reached `m`'s engine another way) that never finishes
 * until the returned stream is destroyed.
 */
async function requestTheGatewayDoesNotCount(m: Model) {
  await fault(m, { requests_never_finish: true });
  const stream = await request(`${lc.host.engineUrl({ deploymentId: m.id, instanceIndex: 0 })}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: m.name,
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 50,
      stream: true,
    }),
  });
  await stream.body[Symbol.asyncIterator]().next();
  return stream;
}

async function fault(m: Model, faults: Record<string, boolean | readonly string[] | undefined>): Promise<void> {
  const reply = await request(`${lc.host.engineUrl({ deploymentId: m.id, instanceIndex: 0 })}/sim/faults`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(faults),
  }).catch(() => undefined);
  await reply?.body.dump();
}

const stepOf = (switchId: string, step: string) =>
  lc.gateway.steps.find((s) => s.switchId === switchId && s.step === step);
const served = (a: Answer) =>
  a.kind === 'served' ? a : expect.fail(`expected a served request, got ${JSON.stringify(a)}`);
const failed = (a: Answer) =>
  a.kind === 'error' ? a.error : expect.fail(`expected an error, got ${JSON.stringify(a)}`);

/**
 * The switch ended `outcome` with its target stopped, saying why (`error`: an error, or a matcher of
 * one); the target's waiter got the same answer, its row says stopped, and nothing holds the GPU.
 */
async function expectStopped(ended: {
  result: SwitchResult;
  outcome: SwitchOutcome;
  target: Model;
  waiter: Promise<Answer>;
  error: unknown;
}) {
  const { result, outcome, target, waiter, error } = ended;
  expect(result).toMatchObject({ outcome, target: { state: 'stopped' }, error });
  expect(failed(await waiter)).toEqual(error);
  expect(await lc.gpuUsedBytes()).toBe(0);
  expect((await listInstances(lc.db)).find((i) => i.deploymentId === target.id)?.observedState).toBe('stopped');
}

describe('a switch', () => {
  /** The switches that named chat-a as a victim, and those of them that parked it. */
  const releasedA: string[] = [];
  const parkedA: string[] = [];
  let a: Model;
  let wakeOfA = '';

  it('parks the victim in host RAM, starts the target, starts its waiters together and writes the receipt', async () => {
    a = await deploy('chat-a');
    const b = await deploy('chat-b');
    await ready(a);
    expect(await lc.gpuUsedBytes()).toBe(5 * GiB);

    const waiters = [1, 2, 3].map(() => lc.gateway.request(b.id, 50));
    const r = await runSwitch({
      target: { model: b, action: 'start', tier: 'host_ram' },
      victims: [{ model: a, plan: park('host_ram') }],
      windowMs: 300,
    });
    parkedA.push(r.input.switchId);

    expect(r).toMatchObject({
      outcome: 'released',
      victims: [
        {
          deploymentId: a.id,
          instanceIndex: 0,
          released: releasedLines.parkedHostRam,
          state: 'parked',
          tier: 'host_ram',
        },
      ],
      target: { instance: ref(b), state: 'ready' },
    });
    const answers = (await Promise.all(waiters)).map(served);
    expect(answers.map((w) => w.instance)).toEqual([ref(b), ref(b), ref(b)]);
    // Started together: they ran at the same time, not one after another.
    expect(
      Math.max(...answers.map((w) => w.startedAtMs)) - Math.min(...answers.map((w) => w.startedAtMs)),
    ).toBeLessThan(40);
    expect(await lc.gpuUsedBytes()).toBe(5 * GiB);

    const receipt = await findSwitchReceipt(lc.db, r.input.switchId);
    expect(receipt).toMatchObject({
      hostId: lc.hostId,
      targetDeploymentId: b.id,
      victims: [{ deploymentId: a.id, instanceIndex: 0, released: 'released: parked (host RAM)' }],
      outcome: 'released',
      summary: `start ${b.name}, park ${a.name} on ${lc.hostId}`,
    });
    expect(receipt?.finishedAt).toBeInstanceOf(Date);
    const instances = await listInstances(lc.db, { hostId: lc.hostId });
    // Each row names the GPUs the switch had it on: the victim's it parked from, the target's it started on.
    expect(instances.find((i) => i.deploymentId === a.id)).toMatchObject({
      observedState: 'parked',
      parkTier: 'host_ram',
      generation: 1,
      gpuIndexes: [0],
    });
    expect(instances.find((i) => i.deploymentId === b.id)).toMatchObject({
      observedState: 'ready',
      generation: 1,
      gpuIndexes: [0],
    });
    expect(await findWakeReference(lc.db, b.id, 0)).toMatchObject({
      generation: 1,
      answer: { kind: 'prompt', text: expect.any(String) },
    });

    // And back: chat-a wakes from host RAM, passes the wake check, and serves its waiter.
    const waiter = lc.gateway.request(a.id, 10);
    const back = await runSwitch({
      target: { model: a, action: 'wake', tier: 'host_ram' },
      victims: [{ model: b, plan: park('host_ram') }],
      windowMs: 300,
    });
    expect(back).toMatchObject({ outcome: 'released', target: { instance: ref(a), state: 'ready' } });
    wakeOfA = back.input.switchId;
    expect(served(await waiter).instance).toEqual(ref(a));
    expect((await findSwitchReceipt(lc.db, back.input.switchId))?.summary).toBe(
      `wake ${a.name}, park ${b.name} on ${lc.hostId}`,
    );
    expect(await lc.gpuUsedBytes()).toBe(5 * GiB);

    // A drain that times out names chat-a as a victim too, but parks nothing.
    const busy = lc.gateway.request(a.id, 2_500);
    const timedOut = await runSwitch({
      target: { model: b, action: 'wake', tier: 'host_ram' },
      victims: [{ model: a, plan: park('host_ram') }],
      timeouts: { drainMs: 1_000 },
    });
    expect(timedOut.outcome).toBe('drain_timeout');
    served(await busy);
    releasedA.push(await stop([a, b]));
  });

  it("shows every step in the switch's history: the host's as activities, the server's own as local-activity markers", async () => {
    const events = (await lc.client.workflow.getHandle(workflowIds.switch(wakeOfA)).fetchHistory()).events ?? [];
    const remote = events.flatMap((e) => e.activityTaskScheduledEventAttributes?.activityType?.name ?? []);
    const local = events.flatMap((e) => localActivityType(e) ?? []);
    // The victim was idle as the window closed: no drain step of its own.
    expect(remote).toEqual(['parkEngine', 'wakeEngine']);
    // The wake was scheduled with the park, in the same workflow task, and waited on the host for it.
    const { scheduled, completed } = await historyOf(wakeOfA);
    const wakeScheduled = scheduled('wakeEngine')!.activityTaskScheduledEventAttributes!;
    expect(String(wakeScheduled.workflowTaskCompletedEventId)).toBe(
      String(scheduled('parkEngine')!.activityTaskScheduledEventAttributes!.workflowTaskCompletedEventId),
    );
    expect(Number(scheduled('wakeEngine')!.eventId)).toBeLessThan(Number(completed('parkEngine')!.eventId));
    // It reads which servers share the store: none here, so the gateway's steps, the window too, are
    // the worker's own. The window's step withdrew the idle victim and wrote its parking row.
    expect(new Set(local)).toEqual(
      new Set([
        'liveServerQueues',
        'closeAdmissionThenRelease',
        'saveSwitchReceipt',
        'saveInstance',
        'findWakeReference',
        'startWaiters',
      ]),
    );
  });

  it('lists every switch that parked chat-a by its search attributes', async () => {
    // The victims attribute names chat-a whether it was parked or stopped; the receipt line says which.
    const query = `${searchAttributes.victims.name} = '${a.name}' AND ${searchAttributes.outcome.name} = 'released'`;
    const listed = await until('the switches to be visible', async () => {
      const found: Array<{ id: string; host?: string }> = [];
      for await (const wf of lc.client.workflow.list({ query })) {
        found.push({ id: wf.workflowId, host: wf.typedSearchAttributes.get(searchAttributes.host) });
      }
      return found.length === parkedA.length + releasedA.length ? found : undefined;
    });
    expect(listed.map((w) => w.id).sort()).toEqual([...parkedA, ...releasedA].map(workflowIds.switch).sort());
    expect(listed.every((w) => w.host === lc.hostId)).toBe(true);
    const parked = [];
    for (const w of listed) {
      const receipt = await findSwitchReceipt(lc.db, w.id.replace(/^switch\//, ''));
      if (receipt?.victims.some((v) => v.deploymentId === a.id && v.released.startsWith('released: parked')))
        parked.push(w.id);
    }
    expect(parked).toEqual(parkedA.map(workflowIds.switch));
  });
});

describe('the admission window', () => {
  it('serves the victim for the window from the switch start, not extended by its traffic', async () => {
    const a = await deploy('win-a');
    await ready(a);
    const input = switchInput({ victims: [{ model: a, plan: park('host_ram') }], windowMs: 500 });
    const handle = await startSwitch(input);

    // Traffic until the window closes: a new 300 ms request every 50 ms, then one more while it drains.
    const answers: Array<Promise<Answer>> = [];
    while (!stepOf(input.switchId, 'closeAdmission')) {
      answers.push(lc.gateway.request(a.id, 300));
      await new Promise((r) => setTimeout(r, 50));
    }
    answers.push(lc.gateway.request(a.id, 300));
    expect((await handle.result()).outcome).toBe('released');
    const closedAtMs = stepOf(input.switchId, 'closeAdmission')!.atMs;
    expect(closedAtMs - input.startedAtMs).toBeGreaterThanOrEqual(500);
    // Traffic every 50 ms would extend a window without end; the margin is the workflow's own latency.
    expect(closedAtMs - input.startedAtMs).toBeLessThan(1_500);

    const settled = await Promise.all(answers);
    const servedAnswers = settled.filter((x) => x.kind === 'served');
    const refused = settled.filter((x) => x.kind === 'error');
    expect(servedAnswers.length).toBeGreaterThanOrEqual(7);
    // The step's time is taken once it closed; a request admitted just before, in the same
    // millisecond (a loaded machine runs the two timers in one turn), started at that time too.
    expect(servedAnswers.every((x) => x.startedAtMs <= closedAtMs)).toBe(true);
    expect(refused.map(failed)).toEqual([apiErrors.dispatchClosed(a.id)]);
    await stop([a]);
  });

  it('closes at once for a victim idle for one window length', async () => {
    const a = await deploy('idle-a');
    await ready(a);
    await new Promise((r) => setTimeout(r, 2_000));
    const r = await runSwitch({ victims: [{ model: a, plan: park('host_ram') }], windowMs: 2_000 });
    expect(r.outcome).toBe('released');
    // Sooner than the window it would otherwise have kept.
    expect(stepOf(r.input.switchId, 'closeAdmission')!.atMs - r.input.startedAtMs).toBeLessThan(2_000);
    await stop([a]);
  });
});

describe('the drain', () => {
  it('times out: the victim serves again, the waiters get the spec message, the target is untouched', async () => {
    const a = await deploy('drain-a');
    const b = await deploy('drain-b');
    await ready(a);
    const long = lc.gateway.request(a.id, 3_000);
    const waiter = lc.gateway.request(b.id, 10);

    const r = await runSwitch({
      target: { model: b, action: 'start', tier: 'host_ram' },
      victims: [{ model: a, plan: park('host_ram') }],
      timeouts: { drainMs: 1_000 },
    });
    expect(r).toMatchObject({
      outcome: 'drain_timeout',
      victims: [],
      error: { status: 503, code: 'unavailable', retryable: true },
    });
    expect(failed(await waiter).message).toBe(
      `switch to ${b.id} failed: drain timeout after 1000 ms with 1 request(s) still charged; the victims serve again; retry shortly`,
    );
    expect(lc.gateway.dispatchOf(a.id)).toBe('open');
    expect(served(await lc.gateway.request(a.id, 10)).deploymentId).toBe(a.id);
    served(await long);
    expect(await lc.gpuUsedBytes()).toBe(5 * GiB);
    expect(await findSwitchReceipt(lc.db, r.input.switchId)).toMatchObject({ outcome: 'drain_timeout', victims: [] });
    await stop([a]);
  });

  it.each(['start', 'wake'] as const)(
    "also waits for the victim's engine to report nothing running, not only the gateway's count (the target a $0)",
    async (action) => {
      const a = await deploy(`engine-${action}-a`);
      const b = await deploy(`engine-${action}-b`);
      await (action === 'wake' ? parkedBeside(b, a) : ready(a));
      const stream = await requestTheGatewayDoesNotCount(a);

      const waiter = lc.gateway.request(b.id, 10);
      const r = await runSwitch({
        target: { model: b, action, tier: 'host_ram' },
        victims: [{ model: a, plan: park('host_ram') }],
        timeouts: { drainMs: 1_000 },
      });
      expect(r).toMatchObject({ outcome: 'drain_timeout', victims: [] });
      expect(failed(await waiter)).toEqual(apiErrors.drainTimeout(b.id, 1_000, 1));
      expect(lc.gateway.dispatchOf(a.id)).toBe('open');
      // The target is untouched: the GPU holds the victim alone. A wake scheduled beside the park
      // ended without waking: the target is still parked.
      expect(await lc.gpuUsedBytes()).toBe(5 * GiB);
      if (action === 'wake') {
        expect((await historyOf(r.input.switchId)).completed('wakeEngine')).toBeDefined();
        expect((await listInstances(lc.db)).find((i) => i.deploymentId === b.id)?.observedState).toBe('parked');
      }

      // The client hangs up, which stops the engine's work: the next switch drains and parks.
      stream.body.destroy();
      expect(
        (await runSwitch({ victims: [{ model: a, plan: park('host_ram') }], timeouts: { drainMs: 5_000 } })).outcome,
      ).toBe('released');
      await stop(action === 'wake' ? [a, b] : [a]);
    },
  );

  it('a wake scheduled beside a slow park has the whole wake window from the moment the victim parked', async () => {
    const a = await deploy('slowpark-a', ['--sim-park-ms', '1500']);
    const b = await deploy('slowpark-b');
    await parkedBeside(b, a);
    const waiter = lc.gateway.request(b.id, 10);
    const r = await runSwitch({
      target: { model: b, action: 'wake', tier: 'host_ram' },
      victims: [{ model: a, plan: park('host_ram') }],
      timeouts: { wakeWindowMs: 1_000 },
    });
    expect(r).toMatchObject({ outcome: 'released', target: { state: 'ready' } });
    served(await waiter);

    // And its bound holds: a wake that hangs is given up after the window, with the spec's code.
    await fault(a, { wake_hangs: true });
    const back = await runSwitch({
      target: { model: a, action: 'wake', tier: 'host_ram' },
      victims: [{ model: b, plan: park('host_ram') }],
      timeouts: { wakeWindowMs: 1_000 },
    });
    expect(back).toMatchObject({
      outcome: 'wake_failed',
      target: { state: 'stopped' },
      error: apiErrors.wakeUncertain(a.id, 1_000),
    });
    expect(await lc.gpuUsedBytes()).toBe(0);
    await stop([b]);
  });
});

describe('a victim that does not park', () => {
  it('stops when there is no room for a parked copy, and says so', async () => {
    const a = await deploy('noroom-a');
    const b = await deploy('noroom-b');
    await ready(a);
    const r = await runSwitch({
      target: { model: b, action: 'start', tier: 'host_ram' },
      victims: [{ model: a, plan: { kind: 'stop', reason: 'no_room' } }],
    });
    expect(r).toMatchObject({
      outcome: 'released',
      victims: [{ released: 'released: stopped (no room to park)', state: 'stopped', tier: null }],
    });
    expect((await findSwitchReceipt(lc.db, r.input.switchId))?.victims).toEqual([
      { deploymentId: a.id, instanceIndex: 0, released: releasedLines.stoppedNoRoom, gpuIndexes: [0] },
    ]);
    expect(await lc.gpuUsedBytes()).toBe(5 * GiB);
    await stop([b]);
  });

  it('stops when a request was cut from it before any output, though it drained as the window closed', async () => {
    const a = await deploy('cut-a');
    await ready(a);
    // A client that hung up before the engine said anything: the gateway marks the victim cut.
    const admission = await lc.gateway.queue.admit({
      deploymentId: a.id,
      bodyBytes: 0,
      signal: new AbortController().signal,
    });
    if (admission.kind !== 'dispatch') expect.fail(`expected a dispatch, got ${JSON.stringify(admission)}`);
    admission.ticket.finish({ cut: true });

    const r = await runSwitch({ victims: [{ model: a, plan: park('host_ram') }] });
    expect(r).toMatchObject({
      outcome: 'released',
      victims: [{ released: releasedLines.stopped, state: 'stopped', tier: null }],
    });
    // The window's step left it to the switch, which withdrew the victim in a step of its own (its
    // marker in the history; a release begun by the window's step would have none).
    expect(stepOf(r.input.switchId, 'withdrawVictims')).toBeDefined();
    const { events } = await historyOf(r.input.switchId);
    expect(events.flatMap((e) => localActivityType(e) ?? [])).toContain('withdrawVictims');
    expect((await listInstances(lc.db)).find((i) => i.deploymentId === a.id)?.observedState).toBe('stopped');
    expect(await lc.gpuUsedBytes()).toBe(0);
  });

  it.each(['start', 'wake'] as const)(
    'is stopped when its park fails, never left half-parked, and the target (a $0) comes up',
    async (action) => {
      const a = await deploy(`crash-${action}-a`);
      const b = await deploy(`crash-${action}-b`);
      await (action === 'wake' ? parkedBeside(b, a) : ready(a));
      await fault(a, { crash: true });
      const waiter = lc.gateway.request(b.id, 10);
      const r = await runSwitch({
        target: { model: b, action, tier: 'host_ram' },
        victims: [{ model: a, plan: park('host_ram') }],
      });
      expect(r).toMatchObject({
        outcome: 'park_failed',
        victims: [
          {
            // Its engine had exited: the park's failure says so.
            released: expect.stringMatching(/^released: stopped \(its park failed: .* is not running on this host\)$/),
            state: 'stopped',
            tier: null,
          },
        ],
        target: { state: 'ready' },
      });
      served(await waiter);
      expect((await listInstances(lc.db)).find((i) => i.deploymentId === a.id)?.observedState).toBe('stopped');
      expect(await lc.gpuUsedBytes()).toBe(5 * GiB);
      await stop([b]);
    },
  );
});

describe('a failed wake', () => {
  /** A wake that failed for another reason says what happened: the engine, the request, its answer. */
  const refusedWake = (id: string) => ({
    status: 503,
    code: 'wake_uncertain',
    message: expect.stringMatching(
      new RegExp(
        `^wake of deployment ${id} failed: vLLM at http://127\\.0\\.0\\.1:\\d+ answered POST /wake_up with 404: has no such route; the model was stopped`,
      ),
    ),
    retryable: true,
  });
  it.each([
    {
      code: 'wake_mismatch',
      tier: 'host_ram',
      faults: { wrong_answer_after_wake: true },
      wakeWindowMs: 5_000,
      expected: apiErrors.wakeMismatch,
    },
    {
      code: 'wake_reload_failed',
      tier: 'deep',
      faults: { reload_fails: true },
      wakeWindowMs: 5_000,
      expected: apiErrors.wakeReloadFailed,
    },
    {
      code: 'wake_uncertain',
      tier: 'host_ram',
      faults: { wake_hangs: true },
      wakeWindowMs: 1_500,
      expected: (id: string) => apiErrors.wakeUncertain(id, 1_500),
    },
    // A 404 after 3 ms is not "did not finish within the wake window".
    {
      code: 'wake_uncertain (refused)',
      tier: 'host_ram',
      faults: { missing_routes: ['/wake_up'] },
      wakeWindowMs: 5_000,
      expected: refusedWake,
    },
  ] as const)(
    '$code: stops the target, frees the GPU, fails its waiters; a fresh start then works',
    async ({ code, tier, faults, wakeWindowMs, expected }) => {
      const m = await deploy(code.replace(/[^a-z]+/g, '-').replace(/-$/, ''));
      await ready(m);
      await runSwitch({ victims: [{ model: m, plan: park(tier) }] });
      expect(await lc.gpuUsedBytes()).toBe(0);
      await fault(m, faults);

      const waiter = lc.gateway.request(m.id, 10);
      const r = await runSwitch({ target: { model: m, action: 'wake', tier }, timeouts: { wakeWindowMs } });
      await expectStopped({ result: r, outcome: 'wake_failed', target: m, waiter, error: expected(m.id) });

      const again = lc.gateway.request(m.id, 10);
      const fresh = await runSwitch({ target: { model: m, action: 'start', tier, generation: 2 } });
      expect(fresh.outcome).toBe('released');
      expect(served(await again).instance).toEqual(ref(m, 2));
      await stop([m], 2);
    },
  );
});

/**
 * The Web UI's "Request Cancellation" on a running switch (RequestCancelWorkflowExecution, as
 * `handle.cancel()` sends it). The spec says nothing of it; what a user would expect is what every
 * failed switch does: nothing is left half-done, and every waiting request gets one answer.
 */
describe('a switch cancelled from the Web UI', () => {
  /** Cancels the switch as the Web UI's button does once `m`'s row says `state`; what the switch returned. */
  async function cancelWhen(handle: Awaited<ReturnType<typeof startSwitch>>, m: Model, state: InstanceState) {
    await until(`${m.name} ${state}`, async () =>
      (await listInstances(lc.db)).find((i) => i.deploymentId === m.id && i.observedState === state),
    );
    await handle.cancel();
    return handle.result();
  }

  it('during its admission window: the victim serves again, the waiters get a retryable error, the target is untouched', async () => {
    const a = await deploy('cancel-window-a');
    const b = await deploy('cancel-window-b');
    await ready(a);
    const waiter = lc.gateway.request(b.id, 10);
    const input = switchInput({
      target: { model: b, action: 'start', tier: 'host_ram' },
      victims: [{ model: a, plan: park('host_ram') }],
      windowMs: 10_000,
    });
    const handle = await startSwitch(input, { workflowTaskTimeout: WORKFLOW_TASK_TIMEOUT_MS });
    // The first receipt is written beside the window's step: the window is open.
    await until('the switch to begin', () => findSwitchReceipt(lc.db, input.switchId).then((r) => r ?? undefined));
    await handle.cancel();

    // The window's step runs inside the workflow task, which hears of the cancel when it next reports
    // (at 80% of the task timeout): long before the 10 s window would have closed.
    const cancelledAtMs = Date.now();
    const r = await handle.result();
    expect(Date.now() - cancelledAtMs).toBeLessThan(WORKFLOW_TASK_TIMEOUT_MS + 2_000);
    expect(r).toMatchObject({ outcome: 'cancelled', victims: [], error: apiErrors.switchCancelled(b.id) });
    expect(failed(await waiter)).toEqual(apiErrors.switchCancelled(b.id));
    expect(lc.gateway.dispatchOf(a.id)).toBe('open');
    expect(served(await lc.gateway.request(a.id, 10)).deploymentId).toBe(a.id);
    expect(await lc.gpuUsedBytes()).toBe(5 * GiB);
    const rows = await listInstances(lc.db);
    expect(rows.find((i) => i.deploymentId === a.id)?.observedState).toBe('ready');
    expect(rows.find((i) => i.deploymentId === b.id)).toBeUndefined();
    expect(await findSwitchReceipt(lc.db, input.switchId)).toMatchObject({ outcome: 'cancelled', victims: [] });
    await stop([a]);
  });

  it('during its park: the park completes, the target is not started, its waiters get a retryable error', async () => {
    const { a, b, waiter, handle } = await switchWithSlowPark('cancel-park');
    const result = await cancelWhen(handle, a, 'parking');
    expect(result.victims).toMatchObject([
      { deploymentId: a.id, state: 'parked', released: releasedLines.parkedHostRam },
    ]);
    await expectStopped({ result, outcome: 'cancelled', target: b, waiter, error: apiErrors.switchCancelled(b.id) });
    expect((await listInstances(lc.db)).find((i) => i.deploymentId === a.id)?.observedState).toBe('parked');
    await stop([a]);
  });

  it('during its start: the target stops, its waiters get the start error, the GPU is free', async () => {
    const m = await deploy('cancel-start', ['--sim-load-ms', '30000']);
    const waiter = lc.gateway.request(m.id, 10);
    const handle = await startSwitch(switchInput({ target: { model: m, action: 'start', tier: 'host_ram' } }));

    await expectStopped({
      result: await cancelWhen(handle, m, 'starting'),
      outcome: 'start_failed',
      target: m,
      waiter,
      error: apiErrors.startFailed(m.id, 'the start was cancelled'),
    });
  });

  it('during its wake: the target stops, its waiters get the wake error, the GPU is free; the next start works', async () => {
    const m = await deploy('cancel-wake');
    await ready(m);
    await runSwitch({ victims: [{ model: m, plan: park('host_ram') }] });
    await fault(m, { wake_hangs: true });
    const waiter = lc.gateway.request(m.id, 10);
    const input = switchInput({
      target: { model: m, action: 'wake', tier: 'host_ram' },
      timeouts: { wakeWindowMs: 30_000 },
    });
    const handle = await startSwitch(input);

    await expectStopped({
      result: await cancelWhen(handle, m, 'waking'),
      outcome: 'wake_failed',
      target: m,
      waiter,
      error: apiErrors.wakeFailed(m.id, 'cancelled'),
    });

    const again = lc.gateway.request(m.id, 10);
    expect((await runSwitch({ target: { model: m, action: 'start', tier: 'host_ram', generation: 2 } })).outcome).toBe(
      'released',
    );
    expect(served(await again).instance).toEqual(ref(m, 2));
    await stop([m], 2);
  });
});

/** The server's workflow worker in a process of its own, on `taskQueue`; resolves once it polls. */
function workerProcess(taskQueue: string) {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', fileURLToPath(new URL('./fixtures/serverWorkerProcess.ts', import.meta.url))],
    {
      env: {
        ...process.env,
        CAPYCTL_TEMPORAL_ADDRESS: lc.temporalAddress,
        CAPYCTL_DATABASE_URL: lc.databaseUrl,
        CAPYCTL_TASK_QUEUE: taskQueue,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const running = new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => d.toString().includes('worker running') && resolve());
    void exited.then(() => reject(new Error('the worker process exited before it ran')));
  });
  return { child, running, exited };
}

describe('a restarted server', () => {
  it.each(['start', 'wake'] as const)(
    'finishes a switch whose worker process was killed with SIGKILL in the middle of a park (its target a $0)',
    async (action) => {
      const a = await deploy(`killed-${action}-a`, ['--sim-park-ms', '3000']);
      const b = await deploy(`killed-${action}-b`);
      await (action === 'wake' ? parkedBeside(b, a) : ready(a));
      const taskQueue = `${lc.serverTaskQueue}-killable`;
      const first = workerProcess(taskQueue);
      await first.running;
      const input = {
        ...switchInput({
          target: { model: b, action, tier: 'host_ram' },
          victims: [{ model: a, plan: park('host_ram') }],
        }),
        serverTaskQueue: taskQueue,
      };
      const handle = await lc.client.workflow.start(switchWorkflow, {
        taskQueue,
        workflowId: workflowIds.switch(input.switchId),
        args: [input],
      });
      await until('the park to run', async () =>
        (await handle.describe()).raw.pendingActivities?.some((p) => p.activityType?.name === 'parkEngine')
          ? true
          : undefined,
      );
      first.child.kill('SIGKILL');
      await first.exited;

      const second = workerProcess(taskQueue);
      try {
        await second.running;
        expect(await handle.result()).toMatchObject({
          outcome: 'released',
          victims: [{ state: 'parked' }],
          target: { state: 'ready' },
        });
        expect(await lc.gpuUsedBytes()).toBe(5 * GiB);
      } finally {
        second.child.kill('SIGKILL');
      }
      await stop([a, b]);
    },
  );

  it("finishes a switch whose worker was restarted during its window: the window's step runs again, whole, and releases the victim", async () => {
    const a = await deploy('window-a');
    const b = await deploy('window-b');
    await ready(a);
    // A request that ends well before the window does: the victim is not idle, so the window runs its
    // length, and it has drained when the window closes.
    const busy = lc.gateway.request(a.id, 200);
    const waiter = lc.gateway.request(b.id, 10);
    const input = switchInput({
      target: { model: b, action: 'start', tier: 'host_ram' },
      victims: [{ model: a, plan: park('host_ram') }],
      windowMs: 3_000,
    });
    const handle = await startSwitch(input);
    await new Promise((r) => setTimeout(r, 500));
    expect(stepOf(input.switchId, 'closeAdmission')).toBeUndefined();
    // The worker's grace (1 s) ends before the window: its step is cancelled, and the next worker's runs.
    await lc.restartServerWorker();

    expect(await handle.result()).toMatchObject({
      outcome: 'released',
      victims: [{ state: 'parked' }],
      target: { state: 'ready' },
    });
    served(await busy);
    served(await waiter);
    // The window kept its length from the switch's start, and the victim was withdrawn once, as it closed.
    const closed = stepOf(input.switchId, 'closeAdmission')!;
    expect(closed.atMs - input.startedAtMs).toBeGreaterThanOrEqual(3_000);
    expect(lc.gateway.steps.filter((x) => x.switchId === input.switchId && x.step === 'withdrawVictims')).toEqual([
      expect.objectContaining({ atMs: closed.atMs }),
    ]);
    await stop([a, b]);
  });

  it('finishes a switch whose worker was restarted in the middle of a slow park', async () => {
    const { a, b, waiter, input, handle } = await switchWithSlowPark('slow');
    await until('the victim to begin parking', () => stepOf(input.switchId, 'withdrawVictims'));
    await lc.restartServerWorker();

    expect(await handle.result()).toMatchObject({
      outcome: 'released',
      victims: [{ state: 'parked' }],
      target: { state: 'ready' },
    });
    served(await waiter);
    expect(await lc.gpuUsedBytes()).toBe(5 * GiB);
    await stop([a, b]);
  });
});

describe('the wake check and the summary, as pure functions', () => {
  const decision = (option: string, yes: number) => ({
    kind: 'decision' as const,
    option,
    probabilities: { yes, no: 1 - yes },
  });

  it('passes a decision with the same option and every probability within 0.05, and nothing else', () => {
    expect(compareAnswers(decision('yes', 0.8), decision('yes', 0.76))).toBeNull();
    expect(compareAnswers(decision('yes', 0.8), decision('yes', 0.74))).toBe('wake_mismatch');
    expect(compareAnswers(decision('yes', 0.52), decision('no', 0.49))).toBe('wake_mismatch');
    expect(compareAnswers({ kind: 'prompt', text: 'one, two' }, { kind: 'prompt', text: 'one, two' })).toBeNull();
    expect(compareAnswers({ kind: 'prompt', text: 'one, two' }, { kind: 'prompt', text: '!!!!' })).toBe(
      'wake_mismatch',
    );
  });

  it('asks a decision model its own decision and any other model the fixed greedy prompt', async () => {
    const spec = (await deploy('probe')).spec;
    expect(probeFor(spec)).toMatchObject({ kind: 'prompt', maxTokens: expect.any(Number) });
    expect(probeFor({ ...spec, decision: { prompt: 'Approve?', options: ['yes', 'no'] } })).toEqual({
      kind: 'decision',
      prompt: 'Approve?',
      options: ['yes', 'no'],
    });
  });

  it('names what a switch does in one line', async () => {
    const [a, b] = [await deploy('chat-a'), await deploy('chat-b')];
    const input = switchInput({
      target: { model: b, action: 'wake', tier: 'host_ram' },
      victims: [{ model: a, plan: park('host_ram') }],
    });
    expect(switchSummary(input)).toBe(`wake ${b.name}, park ${a.name} on ${lc.hostId}`);
    expect(
      switchSummary({
        ...input,
        target: null,
        victims: input.victims.map((v) => ({ ...v, plan: { kind: 'stop', reason: 'operator' } })),
      }),
    ).toBe(`stop ${a.name} on ${lc.hostId}`);
  });
});
