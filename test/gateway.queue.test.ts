/**
 * The request queue's rules and every "Errors while waiting" row, in memory with short durations;
 * and the gateway steps over it, run as activities in the SDK's mock activity environment.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { CancelledFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { type ApiError, apiErrors, renderApiError } from '../domain/catalogue.js';
import { RUNNING_PER_MODEL, SAMPLE_STALE_AFTER_MS } from '../domain/limits.js';
import { createGatewayActivities } from '../gateway/gatewayActivities.js';
import { latestInOrder } from '../gateway/demandReports.js';
import { LoadBoard } from '../gateway/loadBoard.js';
import { type Admission, type Arrival, RequestQueue, type Ticket } from '../gateway/requestQueue.js';
import type { SharedQueueLimits } from '../settings/queue.js';
import type { Demand, InstanceKey, InstanceRef } from '../api/lifecycle.js';
import { gatewayFailureTypes } from '../api/gatewayFailures.js';

const turn = () => sleep(0);

const A = 'dep-a';
const B = 'dep-b';
const instanceOf = (deploymentId: string, generation = 1, instanceIndex = 0): InstanceRef => ({
  deploymentId,
  instanceIndex,
  generation,
});
/** An instance as a switch names its victims. */
const victim = (deploymentId: string, instanceIndex = 0): InstanceKey => ({ deploymentId, instanceIndex });

const LIMITS: SharedQueueLimits = {
  request_deadline: 10_000,
  max_pending_per_deployment: 64,
  max_pending_total: 256,
  max_buffered_bytes_total: 64 * 2 ** 20,
};

interface Bench {
  queue: RequestQueue;
  /** The demands reported, each without `lastRequestMs`, which `lastRequests` keeps beside it. */
  demands: Demand[];
  lastRequests: Record<string, number>[];
  /** The instances' load samples, as the hosts report them; the queue reads the fresh ones, as a server's does. */
  board: LoadBoard;
  /** A client's request; `hangUp` aborts its signal. */
  send(deploymentId: string, more?: Partial<Arrival>): { admission: Promise<Admission>; hangUp: () => void };
}

const benches: RequestQueue[] = [];
afterEach(() => {
  // Settle every request a test left waiting, so no deadline timer outlives it.
  for (const q of benches.splice(0)) for (const id of [A, B]) q.failWaiters(id, apiErrors.internal());
});

function bench(limits: Partial<SharedQueueLimits> = {}): Bench {
  const demands: Demand[] = [];
  const lastRequests: Record<string, number>[] = [];
  const board = new LoadBoard();
  const queue = new RequestQueue({
    limits: () => ({ ...LIMITS, ...limits }),
    onDemand: ({ lastRequestMs, ...d }) => {
      demands.push(d);
      lastRequests.push(lastRequestMs ?? {});
    },
    engineLoad: (deploymentId, instanceIndex) => board.freshEngine(deploymentId, instanceIndex, Date.now()),
  });
  benches.push(queue);
  return {
    queue,
    demands,
    lastRequests,
    board,
    send(deploymentId, more = {}) {
      const client = new AbortController();
      const admission = queue.admit({ deploymentId, bodyBytes: 100, signal: client.signal, ...more });
      // A hang-up rejects; keep the rejection observed so a test that expects it can await it.
      admission.catch(() => {});
      return { admission, hangUp: () => client.abort(new Error('client hung up')) };
    },
  };
}

const ticketOf = async (a: Promise<Admission>): Promise<Ticket> => {
  const r = await a;
  return r.kind === 'dispatch' ? r.ticket : expect.fail(`expected a dispatch, got ${JSON.stringify(r.error)}`);
};
const errorOf = async (a: Promise<Admission>) => {
  const r = await a;
  return r.kind === 'refused' ? r.error : expect.fail('expected a refusal, got a dispatch');
};
/** Whether the admission settled within a turn of the event loop. */
const settled = async (a: Promise<Admission>) => {
  let done = false;
  void a.then(() => (done = true));
  await turn();
  return done;
};

/** `n` requests running on an open model. */
async function fill(b: Bench, deploymentId: string, n = RUNNING_PER_MODEL): Promise<Ticket[]> {
  return Promise.all(Array.from({ length: n }, () => ticketOf(b.send(deploymentId).admission)));
}

describe('a request for a serving model', () => {
  it('runs at once on its instance, up to 32; beyond that they wait first come first served', async () => {
    const b = bench();
    b.queue.startWaiters(instanceOf(A));
    const running = await fill(b, A);
    expect(running.every((t) => t.instance.deploymentId === A)).toBe(true);
    expect(b.queue.deployment(A)).toEqual({ inFlight: 32, inFlightLimit: 32, waiting: 0, waitingLimit: 64 });

    const first = b.send(A).admission;
    const second = b.send(A).admission;
    expect(await settled(first)).toBe(false);
    expect(b.queue.deployment(A)).toMatchObject({ inFlight: 32, waiting: 2 });

    running[0]!.finish({ cut: false });
    expect(await settled(first)).toBe(true);
    expect(await settled(second)).toBe(false);
    running[1]!.finish({ cut: false });
    expect((await ticketOf(second)).instance).toEqual(instanceOf(A));
    expect(b.queue.instanceInFlight(A, 0)).toBe(32);
    expect(b.queue.instanceInFlight(A, 1)).toBe(0);
    // A deployment the queue never saw: zeros and the limits, and reading it makes no entry.
    expect(b.queue.deployment('never-seen')).toEqual({ inFlight: 0, inFlightLimit: 32, waiting: 0, waitingLimit: 64 });
    expect(b.queue.dispatchOf('never-seen')).toBe('waiting');
    expect(Object.keys(b.queue.snapshot().lastActivityMs)).toEqual([A]);
  });

  it('counts a finish once, however often it is reported', async () => {
    const b = bench();
    b.queue.startWaiters(instanceOf(A));
    const [t] = await fill(b, A, 2);
    t!.finish({ cut: false });
    t!.finish({ cut: false });
    expect(b.queue.deployment(A).inFlight).toBe(1);
  });
});

describe('a request for a model that is not ready', () => {
  it('waits; every waiter joins one demand, reported once per change; starting the waiters runs them together', async () => {
    const b = bench();
    const clients = [1, 2, 3].map(() => b.send(B));
    await turn();
    // Three arrivals in one turn: one report.
    expect(b.demands).toEqual([{ deploymentId: B, waiting: 3, oldestSinceMs: expect.any(Number) }]);
    expect(b.queue.snapshot().demands).toEqual(b.demands);

    expect(b.queue.startWaiters(instanceOf(B))).toBe(3);
    const tickets = await Promise.all(clients.map((c) => ticketOf(c.admission)));
    expect(tickets.map((t) => t.instance)).toEqual([instanceOf(B), instanceOf(B), instanceOf(B)]);
    await turn();
    expect(b.demands.at(-1)).toEqual({ deploymentId: B, waiting: 0, oldestSinceMs: 0 });
    expect(b.queue.snapshot().demands).toEqual([]);
  });

  it('reports with its demand when each model last started or finished a request, for the scheduler to choose what yields', async () => {
    const b = bench();
    b.queue.startWaiters(instanceOf(A));
    const [t] = await fill(b, A, 1);
    const beforeFinish = Date.now();
    t!.finish({ cut: false });
    const afterFinish = Date.now();
    b.send(B);
    await turn();
    expect(b.demands).toEqual([{ deploymentId: B, waiting: 1, oldestSinceMs: expect.any(Number) }]);
    const reported = b.lastRequests.at(-1)!;
    expect(Object.keys(reported).sort()).toEqual([A, B].sort());
    expect(reported[A]).toBeGreaterThanOrEqual(beforeFinish);
    expect(reported[A]).toBeLessThanOrEqual(afterFinish);
    expect(b.queue.snapshot().lastActivityMs).toEqual(reported);
  });

  it('counts the requests waiting on every deployment together, the figure the status page samples', async () => {
    const b = bench();
    const hangUp = b.send(A).hangUp;
    for (let i = 0; i < 3; i++) b.send(B);
    expect([b.queue.waitingTotal(), b.queue.deployment(B).waiting]).toEqual([4, 3]);
    expect(b.queue.startWaiters(instanceOf(B))).toBe(3);
    expect(b.queue.waitingTotal()).toBe(1);
    hangUp();
    expect(b.queue.waitingTotal()).toBe(0);
  });

  it('starts at most 32 waiters together; the rest wait for a slot, in arrival order', async () => {
    const b = bench();
    const clients = Array.from({ length: 34 }, () => b.send(B).admission);
    expect(b.queue.startWaiters(instanceOf(B))).toBe(32);
    const tickets = await Promise.all(clients.slice(0, 32).map(ticketOf));
    expect(await settled(clients[32]!)).toBe(false);
    await turn();
    expect(b.demands.at(-1)).toMatchObject({ waiting: 2 });
    tickets[5]!.finish({ cut: false });
    expect(await settled(clients[32]!)).toBe(true);
    expect(await settled(clients[33]!)).toBe(false);
  });

  it('a hang-up gives up its own place only, and the demand says so', async () => {
    const b = bench();
    const first = b.send(B);
    await sleep(5);
    const second = b.send(B);
    await turn();
    expect(b.demands.at(-1)).toMatchObject({ waiting: 2 });
    const oldest = b.demands.at(-1)!.oldestSinceMs;

    first.hangUp();
    await expect(first.admission).rejects.toThrow('client hung up');
    await turn();
    expect(b.demands.at(-1)!.waiting).toBe(1);
    expect(b.demands.at(-1)!.oldestSinceMs).toBeGreaterThan(oldest);
    expect(b.queue.startWaiters(instanceOf(B))).toBe(1);
    await ticketOf(second.admission);
  });

  it('a request whose client already left is not queued', async () => {
    const b = bench();
    const client = new AbortController();
    client.abort(new Error('gone'));
    await expect(b.queue.admit({ deploymentId: B, bodyBytes: 1, signal: client.signal })).rejects.toThrow('gone');
    expect(b.queue.deployment(B).waiting).toBe(0);
  });
});

describe('a victim', () => {
  it('answers 503 dispatch closed while it drains; once it began parking, its requests wait and become the next demand', async () => {
    const b = bench();
    b.queue.startWaiters(instanceOf(A));
    const [running] = await fill(b, A, 1);
    b.queue.close([victim(A)]);
    expect(await errorOf(b.send(A).admission)).toEqual(apiErrors.dispatchClosed(A));
    expect(renderApiError(apiErrors.dispatchClosed(A))).toMatchObject({
      status: 503,
      body: { code: 'unavailable', message: `dispatch to deployment ${A} is closed; retry shortly`, retryable: true },
    });
    expect(b.queue.runningOn([victim(A)])).toBe(1);
    running!.finish({ cut: false });
    expect(b.queue.runningOn([victim(A)])).toBe(0);

    b.queue.withdrawVictims([victim(A)]);
    const next = b.send(A).admission;
    await turn();
    expect(b.demands.at(-1)).toMatchObject({ deploymentId: A, waiting: 1 });
    b.queue.startWaiters(instanceOf(A, 2));
    expect((await ticketOf(next)).instance).toEqual(instanceOf(A, 2));
  });

  it('serves again when reopened after a drain that did not finish', async () => {
    const b = bench();
    b.queue.startWaiters(instanceOf(A));
    b.queue.close([victim(A)]);
    b.queue.reopen([victim(A)]);
    expect(b.queue.dispatchOf(A)).toBe('open');
    expect((await ticketOf(b.send(A).admission)).instance).toEqual(instanceOf(A));
  });

  it('recorded as no longer serving, it is dispatched to no more: its requests wait and become the next demand (a record of another generation changes nothing)', async () => {
    const b = bench();
    // What a restarted server does with an instance the catalogue read ready while a switch parked it.
    b.queue.startWaiters(instanceOf(A, 2));
    b.queue.withdraw(instanceOf(A, 1));
    expect(b.queue.dispatchOf(A)).toBe('open');
    b.queue.withdraw(instanceOf(A, 2));
    expect(b.queue.dispatchOf(A)).toBe('waiting');
    const next = b.send(A).admission;
    await turn();
    expect(await settled(next)).toBe(false);
    expect(b.demands.at(-1)).toMatchObject({ deploymentId: A, waiting: 1 });
  });

  it('a request cut before any output makes the next release a stop; one cut after output does not', async () => {
    const b = bench();
    b.queue.startWaiters(instanceOf(A));
    const [early, late] = await fill(b, A, 2);
    late!.firstOutput();
    late!.finish({ cut: true });
    expect(b.queue.cutBeforeOutput([victim(A)])).toEqual([]);
    early!.finish({ cut: true });
    expect(b.queue.cutBeforeOutput([victim(A), victim(B)])).toEqual([A]);
    // The release that stops it carries the cut out: the next one starts clean.
    b.queue.withdrawVictims([victim(A)]);
    expect(b.queue.cutBeforeOutput([victim(A)])).toEqual([]);
  });
});

describe('a model with two instances', () => {
  /** A bench where deployment A serves on instances 0 and 1. */
  function twoInstances(limits: Partial<SharedQueueLimits> = {}): Bench {
    const b = bench(limits);
    b.queue.startWaiters(instanceOf(A, 1, 0));
    b.queue.startWaiters(instanceOf(A, 1, 1));
    return b;
  }
  /** The instance index each ticket names. */
  const indexes = (tickets: Ticket[]) => tickets.map((t) => t.instance.instanceIndex);
  /** A load sample of instance `index` of A, taken `ageMs` ago; `engine` null: the host could not read it. */
  const sample = (index: number, engine: { running: number; waiting: number } | null, ageMs = 0) => ({
    hostId: `host-${index}`,
    deploymentId: A,
    instanceIndex: index,
    generation: 1,
    sampledAtMs: Date.now() - ageMs,
    ingressInFlight: 0,
    engine: engine && { ...engine, kv_usage_ppm: 0 },
    maxRunning: { count: 32, source: 'default' as const },
  });

  it('spreads its requests evenly over both while no sample says otherwise', async () => {
    const b = twoInstances();
    const tickets = await fill(b, A, 10);
    expect(indexes(tickets)).toEqual([0, 1, 0, 1, 0, 1, 0, 1, 0, 1]);
    expect(b.queue.instanceInFlight(A, 0)).toBe(5);
    expect(b.queue.instanceInFlight(A, 1)).toBe(5);
    expect(b.queue.deployment(A).inFlight).toBe(10);
  });

  it("counts the engine's own running and waiting requests from a fresh sample", async () => {
    const b = twoInstances();
    // Instance 0's engine runs 6 and has 2 waiting (sent by another server, say): a load of 8.
    b.board.record([sample(0, { running: 6, waiting: 2 })]);
    const tickets = await fill(b, A, 9);
    // Instance 1 takes the next 8; at 8 each, the tie goes to the lower index.
    expect(indexes(tickets)).toEqual([1, 1, 1, 1, 1, 1, 1, 1, 0]);
  });

  it('a stale sample, or one without engine figures, adds nothing', async () => {
    const b = twoInstances();
    b.board.record([sample(0, { running: 6, waiting: 2 }, SAMPLE_STALE_AFTER_MS + 1), sample(1, null)]);
    expect(indexes(await fill(b, A, 4))).toEqual([0, 1, 0, 1]);
  });

  it('a victim instance drains while the other serves its new requests; withdrawn, it is dispatched to no more', async () => {
    const b = twoInstances();
    const [onVictim] = await fill(b, A, 1);
    expect(onVictim!.instance).toEqual(instanceOf(A, 1, 0));

    b.queue.close([victim(A, 0)]);
    // Not 503: the model still has an open instance.
    expect(b.queue.dispatchOf(A)).toBe('open');
    expect((await ticketOf(b.send(A).admission)).instance).toEqual(instanceOf(A, 1, 1));
    expect((await ticketOf(b.send(A).admission)).instance).toEqual(instanceOf(A, 1, 1));
    // The drain counts the victim's requests only.
    expect(b.queue.runningOn([victim(A, 0)])).toBe(1);
    expect(b.queue.runningOn([victim(A, 1)])).toBe(2);
    onVictim!.finish({ cut: false });
    expect(b.queue.runningOn([victim(A, 0)])).toBe(0);

    b.queue.withdrawVictims([victim(A, 0)]);
    expect(b.queue.instanceDispatchOf(A, 0)).toBe('waiting');
    expect(b.queue.dispatchOf(A)).toBe('open');
    expect(indexes(await fill(b, A, 3))).toEqual([1, 1, 1]);
  });

  it('the store recording one instance no longer serving withdraws that one only', async () => {
    const b = twoInstances();
    b.queue.withdraw(instanceOf(A, 1, 1));
    expect(b.queue.instanceDispatchOf(A, 0)).toBe('open');
    expect(b.queue.instanceDispatchOf(A, 1)).toBe('waiting');
    expect(indexes(await fill(b, A, 2))).toEqual([0, 0]);
  });

  it('the 32 running requests are the model’s, across both instances', async () => {
    const b = twoInstances();
    const running = await fill(b, A, RUNNING_PER_MODEL);
    expect(b.queue.instanceInFlight(A, 0)).toBe(16);
    expect(b.queue.instanceInFlight(A, 1)).toBe(16);
    const next = b.send(A).admission;
    expect(await settled(next)).toBe(false);
    expect(b.queue.deployment(A)).toMatchObject({ inFlight: 32, waiting: 1 });
    // A slot frees on instance 1: the waiter runs there, the less loaded one.
    running.find((t) => t.instance.instanceIndex === 1)!.finish({ cut: false });
    expect((await ticketOf(next)).instance).toEqual(instanceOf(A, 1, 1));
  });

  it('one instance closed and none open: 503 dispatch closed, as with one instance', async () => {
    const b = twoInstances();
    b.queue.close([victim(A, 0)]);
    b.queue.withdrawVictims([victim(A, 1)]);
    expect(b.queue.dispatchOf(A)).toBe('closed');
    expect(await errorOf(b.send(A).admission)).toEqual(apiErrors.dispatchClosed(A));
  });

  it('none open or closed: requests wait and ask for a start; the next instance to serve runs them', async () => {
    const b = twoInstances();
    b.queue.withdrawVictims([victim(A, 0), victim(A, 1)]);
    expect(b.queue.dispatchOf(A)).toBe('waiting');
    const next = b.send(A).admission;
    await turn();
    expect(await settled(next)).toBe(false);
    expect(b.demands.at(-1)).toMatchObject({ deploymentId: A, waiting: 1 });
    b.queue.startWaiters(instanceOf(A, 2, 1));
    expect((await ticketOf(next)).instance).toEqual(instanceOf(A, 2, 1));
  });

  it('a cut before output marks its own instance: the release of the other is no stop', async () => {
    const b = twoInstances();
    const [onZero] = await fill(b, A, 1);
    onZero!.finish({ cut: true });
    expect(b.queue.cutBeforeOutput([victim(A, 1)])).toEqual([]);
    expect(b.queue.cutBeforeOutput([victim(A, 0), victim(A, 1)])).toEqual([A]);
  });

  it('closeAdmission closes the victim instance only', async () => {
    const b = twoInstances();
    const steps = createGatewayActivities({ queue: b.queue, pollMs: 5 });
    const drain = await new MockActivityEnvironment().run(steps.closeAdmission, {
      switchId: 's',
      victims: [victim(A, 1)],
      startedAtMs: Date.now(),
      windowMs: null,
    });
    expect(drain).toEqual({ drained: true, requestsStillRunning: 0, cutBeforeOutput: [] });
    expect(b.queue.instanceDispatchOf(A, 0)).toBe('open');
    expect(b.queue.instanceDispatchOf(A, 1)).toBe('closed');
    expect(indexes(await fill(b, A, 2))).toEqual([0, 0]);
  });
});

describe('the bounds', () => {
  it('429 when the waiting requests per model are at the limit', async () => {
    const b = bench({ max_pending_per_deployment: 2 });
    b.send(B);
    b.send(B);
    const error = await errorOf(b.send(B).admission);
    expect(error).toEqual(apiErrors.waitingLimit(B));
    expect(renderApiError(error)).toEqual({
      status: 429,
      headers: { 'content-type': 'application/json; charset=utf-8', 'retry-after': '1' },
      body: { code: 'queue_full', message: `too many requests are waiting for deployment ${B}`, retryable: true },
    });
    // Another model still has room.
    expect(await settled(b.send(A).admission)).toBe(false);
  });

  it('429 when the waiting requests in total are at the limit', async () => {
    const b = bench({ max_pending_total: 2 });
    b.send(A);
    b.send(B);
    expect(await errorOf(b.send(A).admission)).toEqual(apiErrors.waitingLimit(A));
  });

  it('429 when the waiting bodies would pass the byte bound; a request that runs at once buffers nothing', async () => {
    const b = bench({ max_buffered_bytes_total: 1_000 });
    b.send(B, { bodyBytes: 600 });
    const error = await errorOf(b.send(B, { bodyBytes: 500 }).admission);
    expect(error).toEqual(apiErrors.bufferedBytes());
    expect(error).toMatchObject({
      status: 429,
      code: 'queue_full',
      message: 'waiting requests exceed the buffered-bytes bound',
    });
    expect(await settled(b.send(B, { bodyBytes: 400 }).admission)).toBe(false);
    b.queue.startWaiters(instanceOf(A));
    await ticketOf(b.send(A, { bodyBytes: 5_000 }).admission);
  });

  it('a request that leaves frees its place and its bytes', async () => {
    const b = bench({ max_pending_per_deployment: 1, max_buffered_bytes_total: 1_000 });
    const first = b.send(B, { bodyBytes: 900 });
    first.hangUp();
    // It leaves with its hang-up, not an error of the queue's own.
    await expect(first.admission).rejects.toThrow(new Error('client hung up'));
    expect(await settled(b.send(B, { bodyBytes: 900 }).admission)).toBe(false);
  });

  it('503 queue deadline when the model does not become servable within the request deadline', async () => {
    const b = bench({ request_deadline: 100 });
    const started = Date.now();
    const error = await errorOf(b.send(B).admission);
    expect(Date.now() - started).toBeGreaterThanOrEqual(95);
    expect(error).toEqual(apiErrors.queueDeadline(B));
    expect(error).toMatchObject({
      status: 503,
      code: 'unavailable',
      message: `deployment ${B} did not become servable within the queue deadline; retry shortly`,
    });
    await turn();
    expect(b.demands.at(-1)).toEqual({ deploymentId: B, waiting: 0, oldestSinceMs: 0 });
  });

  it('429 in-flight deadline when 32 requests kept running for the whole request deadline', async () => {
    const b = bench({ request_deadline: 100 });
    b.queue.startWaiters(instanceOf(A));
    await fill(b, A);
    const error = await errorOf(b.send(A).admission);
    expect(error).toEqual(apiErrors.inFlightDeadline(A));
    expect(error).toMatchObject({
      status: 429,
      code: 'queue_full',
      message: `deployment ${A} stayed at its in-flight bound for the queue deadline`,
    });
  });

  it('a slot waiter whose model stopped serving meanwhile gets the queue deadline instead', async () => {
    const b = bench({ request_deadline: 100 });
    b.queue.startWaiters(instanceOf(A));
    await fill(b, A);
    const waiting = b.send(A).admission;
    b.queue.close([victim(A)]);
    expect(await errorOf(waiting)).toEqual(apiErrors.queueDeadline(A));
  });

  it('the deadline runs on until the first output: the ticket is told the queue deadline', async () => {
    const b = bench({ request_deadline: 80 });
    const waiting = b.send(B).admission;
    await sleep(40);
    b.queue.startWaiters(instanceOf(B));
    const ticket = await ticketOf(waiting);
    const told: ApiError[] = [];
    ticket.onDeadline((error) => told.push(error));
    expect(told).toEqual([]);
    await sleep(60);
    expect(told).toEqual([apiErrors.queueDeadline(B)]);
    // A listener that comes late is told at once.
    const late: ApiError[] = [];
    ticket.onDeadline((error) => late.push(error));
    expect(late).toEqual([apiErrors.queueDeadline(B)]);

    b.queue.startWaiters(instanceOf(A));
    const answered = await ticketOf(b.send(A).admission);
    const toldAnswered: ApiError[] = [];
    answered.onDeadline((error) => toldAnswered.push(error));
    answered.firstOutput();
    await sleep(120);
    expect(toldAnswered).toEqual([]);
  });
});

describe('no waiting (max_pending_per_deployment 0)', () => {
  it('429 at once beyond the 32 running requests', async () => {
    const b = bench({ max_pending_per_deployment: 0 });
    b.queue.startWaiters(instanceOf(A));
    await fill(b, A);
    const error = await errorOf(b.send(A).admission);
    expect(error).toEqual(apiErrors.inFlightNoWait(A));
    expect(renderApiError(error)).toMatchObject({
      status: 429,
      headers: { 'retry-after': '1' },
      body: {
        code: 'queue_full',
        message: `deployment ${A} is at its in-flight bound and lets no request wait; retry shortly`,
      },
    });
    expect(b.queue.deployment(A)).toEqual({ inFlight: 32, inFlightLimit: 32, waiting: 0, waitingLimit: 0 });
  });

  it('429 at once for a model that is not loaded, still asking for its wake or start once', async () => {
    const b = bench({ max_pending_per_deployment: 0 });
    const error = await errorOf(b.send(B).admission);
    expect(error).toEqual(apiErrors.notServableNoWait(B));
    expect(error).toMatchObject({
      status: 429,
      code: 'queue_full',
      message: `deployment ${B} is not servable now and lets no request wait; retry shortly`,
    });
    await errorOf(b.send(B).admission);
    await turn();
    expect(b.demands).toEqual([{ deploymentId: B, waiting: 1, oldestSinceMs: expect.any(Number) }]);
    expect(b.queue.snapshot().demands).toEqual(b.demands);

    // Once it serves, the ask is answered and the retry runs.
    b.queue.startWaiters(instanceOf(B));
    await turn();
    expect(b.demands.at(-1)).toEqual({ deploymentId: B, waiting: 0, oldestSinceMs: 0 });
    await ticketOf(b.send(B).admission);
  });
});

describe('a model requests do not start or wake', () => {
  it.each([
    ['operator_stopped', apiErrors.deploymentStopped(B), 'deployment_stopped'],
    ['explicit', apiErrors.deploymentInactive(B), 'deployment_inactive'],
  ] as const)('%s: 409 at once, nothing queued, nothing asked', async (startBlockedBy, expected, code) => {
    for (const limit of [64, 0]) {
      const b = bench({ max_pending_per_deployment: limit });
      const error = await errorOf(b.send(B, { startBlockedBy }).admission);
      expect(error).toEqual(expected);
      expect(error).toMatchObject({ status: 409, code, retryable: false });
      await turn();
      expect(b.demands).toEqual([]);
      expect(b.queue.deployment(B).waiting).toBe(0);
    }
  });

  it('serves an explicit model that is running', async () => {
    const b = bench();
    b.queue.startWaiters(instanceOf(B));
    await ticketOf(b.send(B, { startBlockedBy: 'explicit' }).admission);
  });
});

describe('failWaiters and snapshot', () => {
  it('every waiter of the deployment gets the error; the others wait on', async () => {
    const b = bench();
    const forB = [b.send(B).admission, b.send(B).admission];
    const forA = b.send(A).admission;
    const error = apiErrors.drainTimeout(B, 30_000, 1);
    expect(b.queue.failWaiters(B, error)).toBe(2);
    expect(await Promise.all(forB.map(errorOf))).toEqual([error, error]);
    expect(error.message).toBe(
      `switch to ${B} failed: drain timeout after 30000 ms with 1 request(s) still charged; the victims serve again; retry shortly`,
    );
    expect(await settled(forA)).toBe(false);
    expect(b.queue.snapshot().demands.map((d) => d.deploymentId)).toEqual([A]);
  });

  it('reports when each deployment last saw a request start or finish', async () => {
    const b = bench();
    b.queue.startWaiters(instanceOf(A));
    const [t] = await fill(b, A, 1);
    await sleep(20);
    const before = Date.now();
    t!.finish({ cut: false });
    expect(b.queue.snapshot().lastActivityMs[A]).toBeGreaterThanOrEqual(before);
  });
});

describe('the gateway steps as activities', () => {
  const env = () => new MockActivityEnvironment();
  const stepsOn = (b: Bench) => createGatewayActivities({ queue: b.queue, pollMs: 5 });

  it('closeAdmission keeps the victim open for the window from the switch start, not extended by its traffic', async () => {
    const b = bench();
    b.queue.startWaiters(instanceOf(A));
    const startedAtMs = Date.now();
    // A 30 ms request every 10 ms: the victim is never idle.
    const traffic = setInterval(async () => {
      const r = await b.send(A).admission;
      if (r.kind === 'dispatch') setTimeout(() => r.ticket.finish({ cut: false }), 30);
    }, 10);
    await env().run(stepsOn(b).closeAdmission, { switchId: 's', victims: [victim(A)], startedAtMs, windowMs: 150 });
    clearInterval(traffic);
    expect(Date.now() - startedAtMs).toBeGreaterThanOrEqual(150);
    expect(Date.now() - startedAtMs).toBeLessThan(250);
    expect(b.queue.dispatchOf(A)).toBe('closed');
  });

  it('closeAdmission closes at once for a victim idle one window length, and at once with no window', async () => {
    const b = bench();
    b.queue.startWaiters(instanceOf(A));
    await sleep(60);
    const startedAtMs = Date.now();
    await env().run(stepsOn(b).closeAdmission, { switchId: 's', victims: [victim(A)], startedAtMs, windowMs: 50 });
    expect(Date.now() - startedAtMs).toBeLessThan(30);

    b.queue.startWaiters(instanceOf(B));
    await ticketOf(b.send(B).admission);
    await env().run(stepsOn(b).closeAdmission, {
      switchId: 's',
      victims: [victim(B)],
      startedAtMs: Date.now(),
      windowMs: null,
    });
    expect(b.queue.dispatchOf(B)).toBe('closed');
  });

  it('closeAdmission meant for another server refuses, non-retryable, and closes nothing here', async () => {
    const b = bench();
    b.queue.startWaiters(instanceOf(A));
    const here = createGatewayActivities({ queue: b.queue, pollMs: 5, serverTaskQueue: 'server-here' });
    const input = { switchId: 's', victims: [victim(A)], startedAtMs: Date.now(), windowMs: null };
    await expect(env().run(here.closeAdmission, { ...input, onlyOn: 'server-there' })).rejects.toMatchObject({
      type: gatewayFailureTypes.notThisServer,
      nonRetryable: true,
      message: `the admission window of ${A}/0 is server-there's to close, not server-here's`,
    });
    expect(b.queue.dispatchOf(A)).toBe('open');
    await env().run(here.closeAdmission, { ...input, onlyOn: 'server-here' });
    expect(b.queue.dispatchOf(A)).toBe('closed');
  });

  it('awaitDrain waits for the running requests, or reports how many are still charged', async () => {
    const b = bench();
    b.queue.startWaiters(instanceOf(A));
    const [t, cut] = await fill(b, A, 2);
    cut!.finish({ cut: true });
    const steps = stepsOn(b);
    expect(await env().run(steps.awaitDrain, { switchId: 's', victims: [victim(A)], timeoutMs: 50 })).toEqual({
      drained: false,
      requestsStillRunning: 1,
      cutBeforeOutput: [A],
    });
    setTimeout(() => t!.finish({ cut: false }), 30);
    expect(await env().run(steps.awaitDrain, { switchId: 's', victims: [victim(A)], timeoutMs: 1_000 })).toEqual({
      drained: true,
      requestsStillRunning: 0,
      cutBeforeOutput: [A],
    });
  });

  it('a cancelled step stops waiting', async () => {
    const b = bench();
    b.queue.startWaiters(instanceOf(A));
    await fill(b, A, 1);
    const e = env();
    const startedAtMs = Date.now();
    const drain = e.run(stepsOn(b).awaitDrain, { switchId: 's', victims: [victim(A)], timeoutMs: 5_000 });
    setTimeout(() => e.cancel(), 20);
    // Temporal's cancellation, as its worker reports it, and at once rather than after the 5 s drain.
    const error = await drain.then(
      () => expect.fail('the drain answered instead of stopping'),
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(CancelledFailure);
    expect(error).toMatchObject({ message: 'CANCELLED' });
    expect(Date.now() - startedAtMs).toBeLessThan(1_000);
  });

  it('startWaiters, failWaiters, withdrawVictims, reopen and snapshot act on the queue', async () => {
    const b = bench();
    const steps = stepsOn(b);
    const waiting = [b.send(B).admission, b.send(B).admission];
    expect(await steps.snapshot()).toMatchObject({ demands: [{ deploymentId: B, waiting: 2 }] });
    expect(await steps.startWaiters({ switchId: 's', hostId: 'h', instance: instanceOf(B) })).toEqual({ started: 2 });
    await Promise.all(waiting.map(ticketOf));
    const failing = b.send(A).admission;
    expect(await steps.failWaiters({ switchId: 's', deploymentId: A, error: apiErrors.wakeMismatch(A) })).toEqual({
      failed: 1,
    });
    expect(await errorOf(failing)).toEqual(apiErrors.wakeMismatch(A));
    await steps.withdrawVictims({ switchId: 's', victims: [victim(B)] });
    expect(b.queue.dispatchOf(B)).toBe('waiting');
    b.queue.startWaiters(instanceOf(A));
    b.queue.close([victim(A)]);
    await steps.reopen({ switchId: 's', victims: [victim(A)] });
    expect(b.queue.dispatchOf(A)).toBe('open');
  });
  it('a step a switch scheduled before the steps named instances (a server upgraded meanwhile) acts on instance 0', async () => {
    const b = bench();
    b.queue.startWaiters(instanceOf(A));
    const steps = stepsOn(b);
    // As such a switch's history holds the input: the deployment IDs alone.
    const named = { switchId: 's', victims: [A] as unknown as InstanceKey[] };
    await env().run(steps.closeAdmission, { ...named, startedAtMs: Date.now(), windowMs: null });
    expect(b.queue.instanceDispatchOf(A, 0)).toBe('closed');
    await steps.withdrawVictims(named);
    expect(b.queue.instanceDispatchOf(A, 0)).toBe('waiting');
  });
});

describe('demand reports on their way to the scheduler', () => {
  /** A send that finishes when the test says, recording what it was given. */
  function slowSend() {
    const sent: Demand[] = [];
    const finishers: Array<(error?: Error) => void> = [];
    const send = (demand: Demand) =>
      new Promise<void>((resolve, reject) => {
        sent.push(demand);
        finishers.push((error) => (error ? reject(error) : resolve()));
      });
    /** Finishes the oldest send still on its way, then lets its follow-up start. */
    const finishOne = async (error?: Error) => {
      finishers.shift()!(error);
      await new Promise((r) => setImmediate(r));
    };
    return { sent, send, finishOne };
  }
  const demand = (deploymentId: string, waiting: number): Demand => ({
    deploymentId,
    waiting,
    oldestSinceMs: waiting > 0 ? 1_000 : 0,
  });

  it('sends one at a time per deployment, and only the newest of those that waited', async () => {
    const { sent, send, finishOne } = slowSend();
    const report = latestInOrder(send, () => {});
    report(demand(A, 1));
    for (let waiting = 2; waiting <= 100; waiting++) report(demand(A, waiting));
    report(demand(A, 0));
    report(demand(B, 3));
    expect(sent).toEqual([demand(A, 1), demand(B, 3)]);
    await finishOne();
    // Of the 100 reports for A made meanwhile, the last: nobody waits any more.
    expect(sent).toEqual([demand(A, 1), demand(B, 3), demand(A, 0)]);
    await finishOne();
    await finishOne();
    expect(sent).toHaveLength(3);
    // With nothing on its way, the next report goes at once.
    report(demand(A, 2));
    expect(sent.at(-1)).toEqual(demand(A, 2));
  });

  it('a report that fails is told, and the newer one still goes', async () => {
    const { sent, send, finishOne } = slowSend();
    const failed: Demand[] = [];
    const report = latestInOrder(send, (_, d) => failed.push(d));
    report(demand(A, 1));
    report(demand(A, 2));
    await finishOne(new Error('Temporal is away'));
    expect(failed).toEqual([demand(A, 1)]);
    expect(sent).toEqual([demand(A, 1), demand(A, 2)]);
  });
});
