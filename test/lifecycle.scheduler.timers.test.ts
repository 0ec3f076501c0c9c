/**
 * The host scheduler's idle timers, its choice of victims when two models fit, and its continue-as-new
 * under traffic: each on its own host, since each needs its own settings.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configureScheduler, reportDemand } from '../gateway/lifecycleClient.js';
import { IDLE_TIMEOUT_MIN_MS } from '../settings/serverDocument.js';
import { gpuUsage } from '../hostAgent/simulatedGpu.js';
import { workflowIds } from '../workflows/definitions.js';
import type { InstanceKey } from '../api/lifecycle.js';
import type { Answer } from './support/queueGateway.js';
import { type SchedulerBench, startSchedulerBench } from './support/scheduler.js';

describe('idle timers', () => {
  // The shortest the settings allow, so the tests wait as little as a document can make them.
  const IDLE_MS = IDLE_TIMEOUT_MIN_MS;
  let s: SchedulerBench;
  beforeAll(async () => {
    s = await startSchedulerBench({ gpuMemory: '16GiB', settings: { readyIdleMs: IDLE_MS, parkedIdleMs: IDLE_MS } });
  });
  afterAll(() => s?.close());

  it('park a ready model after ready_idle_timeout and stop it after parked_idle_timeout; explicit and warm models stay', async () => {
    const a = await s.deployMeasured('chat-a');
    const x = await s.deployMeasured('chat-x', 'lifecycle: { activation: explicit }');
    const w = await s.deployMeasured('chat-w', 'lifecycle: { warm: true }');
    for (const id of [x, w]) await s.command('start', { deploymentId: id, evict: false });
    await s.command('start', { deploymentId: a, evict: false });
    const readyAt = Date.now();

    await s.until(a, 'parked', 10_000);
    const parkedAt = Date.now();
    expect(parkedAt - readyAt).toBeGreaterThanOrEqual(IDLE_MS - 100);
    await s.until(a, 'stopped', 10_000);
    expect(Date.now() - parkedAt).toBeGreaterThanOrEqual(IDLE_MS - 100);

    expect((await s.entry(x))?.state).toBe('ready');
    expect((await s.entry(w))?.state).toBe('ready');
  });

  it('count a request as use: the ready timer starts again from it', async () => {
    const b = await s.deployMeasured('chat-b');
    await s.command('start', { deploymentId: b, evict: false });
    const readyAt = Date.now();
    // A request every half timer, until the first timer is one and a half timers behind.
    let usedAt = readyAt;
    while (usedAt - readyAt < IDLE_MS * 1.5) {
      await sleep(usedAt + IDLE_MS / 2 - Date.now());
      expect((await s.lc.gateway.request(b)).kind).toBe('served');
      usedAt = Date.now();
    }
    // No switch took it away meanwhile (a park and a wake would serve the requests too).
    const released = s.lc.gateway.steps.filter(
      (step) =>
        step.atMs >= readyAt && (step.detail as { victims?: InstanceKey[] }).victims?.some((v) => v.deploymentId === b),
    );
    expect(released).toEqual([]);
    expect((await s.entry(b))?.state).toBe('ready');
    // It parks one timer after the last request, not after the first timer.
    await s.until(b, 'parked', 10_000);
    expect(Date.now() - usedAt).toBeGreaterThanOrEqual(IDLE_MS - 100);
  });
});

describe('settings sent to a running scheduler', () => {
  let s: SchedulerBench;
  beforeAll(async () => {
    s = await startSchedulerBench({ gpuMemory: '16GiB' });
  });
  afterAll(() => s?.close());

  it('apply from then on: a ready_idle_timeout set later parks the idle model', async () => {
    const a = await s.deployMeasured('chat-a');
    await s.command('start', { deploymentId: a, evict: false });
    // Its timers are off: it stays past the shortest timer a document could have set.
    await sleep(IDLE_TIMEOUT_MIN_MS);
    expect((await s.entry(a))?.state).toBe('ready');
    await configureScheduler(s.lc.client, {
      ...s.ref,
      settings: { ...s.ref.settings, readyIdleMs: IDLE_TIMEOUT_MIN_MS },
    });
    await s.until(a, 'parked', 10_000);
  });
});

describe('victims when two models fit', () => {
  let s: SchedulerBench;
  beforeAll(async () => {
    s = await startSchedulerBench({ gpuMemory: '11GiB' });
  });
  afterAll(() => s?.close());

  it('holds two models at once only because each engine is bounded to what the ledger reserved for it', async () => {
    // Unbounded, vLLM would take 90% of the card and SGLang then could not load its weights beside it.
    const v = await s.deployMeasured('chat-v');
    const g = await s.deployMeasured('chat-g', '', [], 'sglang');
    expect((await s.command('start', { deploymentId: v, evict: false })).state).toBe('ready');
    expect((await s.command('start', { deploymentId: g, evict: false })).state).toBe('ready');
    const { owners, usedBytes, capacityBytes } = await gpuUsage(s.lc.gpuDir, 0);
    // 5 GiB each, 4 GiB of weights and a 1 GiB KV budget (SGLang's float arithmetic may leave a byte).
    expect(owners.map((o) => [o.label, Math.round(o.gpuBytes / 2 ** 10)])).toEqual(
      expect.arrayContaining([
        ['vllm sim/chat-v', 5 * 2 ** 20],
        ['sglang sim/chat-g', 5 * 2 ** 20],
      ]),
    );
    expect(usedBytes).toBeLessThanOrEqual(capacityBytes);
    for (const id of [v, g]) await s.command('stop', { deploymentId: id });
  });

  it('never parks a model with waiting requests, even the least recently used', async () => {
    const [a, b, c] = [
      await s.deployMeasured('chat-a'),
      await s.deployMeasured('chat-b'),
      await s.deployMeasured('chat-c'),
    ];
    await s.command('start', { deploymentId: a, evict: false });
    await s.command('start', { deploymentId: b, evict: false });
    // chat-a, the least recently used, has requests waiting for a free slot.
    await reportDemand(s.lc.client, s.ref, { deploymentId: a, waiting: 1, oldestSinceMs: Date.now() });
    expect((await s.lc.gateway.request(c)).kind).toBe('served');
    await s.settledLedger();
    expect((await s.entry(a))?.state).toBe('ready');
    expect((await s.entry(b))?.state).toBe('parked');
    await reportDemand(s.lc.client, s.ref, { deploymentId: a, waiting: 0, oldestSinceMs: 0 });
  });
});

describe('continue-as-new under traffic', () => {
  let s: SchedulerBench;
  beforeAll(async () => {
    s = await startSchedulerBench({ gpuMemory: '6GiB', settings: { maxHistoryEvents: 150, admissionWindowMs: 50 } });
  });
  afterAll(() => s?.close());

  /** A client that sends `count` requests one after another, retrying a 503 as the spec's message says. */
  async function app(deploymentId: string, count: number): Promise<Answer[]> {
    const answers: Answer[] = [];
    while (answers.length < count) {
      const answer = await s.lc.gateway.request(deploymentId, 20);
      if (answer.kind === 'served') answers.push(answer);
      else expect(answer.error.retryable).toBe(true);
      await sleep(100);
    }
    return answers;
  }

  it('loses no demand and no command across runs', async () => {
    const a = await s.deployMeasured('chat-a');
    const b = await s.deployMeasured('chat-b');
    const first = await s.command('start', { deploymentId: a, evict: false });
    expect(first.state).toBe('ready');
    const scheduler = (runId?: string) =>
      s.lc.client.workflow.getHandle(workflowIds.hostScheduler(s.lc.hostId), runId).describe();
    const { runId: firstRun } = await scheduler();

    // Rounds of requests and commands until the first run has handed over: how many switches a round
    // holds (and so how many history events) depends on the machine's speed, not on what is tested.
    const round = async () => {
      const commands = (async () => {
        const receipts = [];
        for (let i = 0; i < 6; i++) {
          await sleep(700);
          receipts.push(await s.command('park', { deploymentId: i % 2 === 0 ? a : b }));
        }
        return receipts;
      })();
      const [appA, appB, receipts] = await Promise.all([app(a, 12), app(b, 12), commands]);
      expect(appA.length + appB.length).toBe(24);
      expect(receipts).toHaveLength(6);
      // A park of a ready model answers as it begins; of one already parked or stopped, with that state.
      for (const r of receipts) expect(['parking', 'stopping', 'parked', 'stopped']).toContain(r.state);
    };
    for (let rounds = 0; rounds < 5 && (await scheduler(firstRun)).status.name === 'RUNNING'; rounds++) await round();

    expect((await scheduler(firstRun)).status.name).toBe('CONTINUED_AS_NEW');
    const now = await scheduler();
    expect(now.runId).not.toBe(firstRun);
    expect(now.status.name).toBe('RUNNING');
  }, 150_000);
});
