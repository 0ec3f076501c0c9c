/**
 * The request queue: for each inference request, whether it runs now, waits, or is refused (spec,
 * "How requests wait and models switch", "Errors while waiting", "No waiting"). It holds every
 * waiting and running request in memory, and the switch's gateway steps act on it
 * (`gatewayActivities.ts`). The HTTP route admits a request here and forwards it to the ticket's
 * instance; the queue never touches a body or a socket.
 *
 * A deployment may have several instances, each on its own host. Each instance's dispatch is `open`,
 * `closed` or `waiting`, and changes only as the table in `dispatchState.ts` allows; the model's, as
 * its requests see it, is derived: `open` while any instance is, else `closed` while any is, else
 * `waiting`. A request that runs goes to the least loaded open instance; the 32 running requests are
 * the model's, across its instances.
 */
import { type ApiError, apiErrors } from '../domain/catalogue.js';
import { RUNNING_PER_MODEL } from '../domain/limits.js';
import type { SharedQueueLimits } from '../settings/queue.js';
import type { Demand, InstanceKey, InstanceRef } from '../api/lifecycle.js';
import { type DispatchEvent, type DispatchState, nextDispatch } from './dispatchState.js';
import type { RouterFigures } from './routerFigures.js';

/** A request as it reaches the queue: the body is already read (its size counts while it waits). */
export interface Arrival {
  deploymentId: string;
  bodyBytes: number;
  /** The client's hang-up: a waiting request leaves the queue, a running one is the caller's to cut. */
  signal: AbortSignal;
  /**
   * Why a request must not start or wake this deployment, from the routing table: an operator stopped
   * it, or its activation is explicit and nobody asked it to start. It is then answered 409 unless it
   * serves; while it starts or wakes on a command the caller leaves this out and requests wait. An
   * explicit model an operator stopped is `operator_stopped` (spec: "After your stop, the answer is
   * deployment_stopped as for any model").
   */
  startBlockedBy?: 'operator_stopped' | 'explicit';
}

/** Where a request runs, and how its caller reports its course. */
export interface Ticket {
  readonly instance: InstanceRef;
  /**
   * Calls `then` with the queue-deadline error when the reply's first output has not come by the
   * request deadline (counted from the arrival: the wait, the switch and the prefill); at once if
   * that has happened. One listener: the relay's. (A plain callback, not an AbortSignal: every
   * request has one, and an EventTarget costs more than the rest of the ticket.)
   */
  onDeadline(then: (error: ApiError) => void): void;
  /** The reply's first output arrived (the opening chunk that only names the role is not output). */
  firstOutput(): void;
  /** The request ended; `cut` when it was cut short (a hang-up, a deadline, a stream bound). */
  finish(how: { cut: boolean }): void;
}

export type Admission = { kind: 'dispatch'; ticket: Ticket } | { kind: 'refused'; error: ApiError };

export interface RequestQueueOptions {
  /** The waiting limits and request deadline that apply now: the tightest of the hosts' (`tightestOfHosts`). */
  limits: () => SharedQueueLimits;
  /**
   * Told whenever a deployment's demand changes (`reportDemand`), at most once per change. It must not
   * throw: it runs after the change, where nobody could handle the error.
   */
  onDemand: (demand: Demand) => void;
  /**
   * The engine's own figures for an instance, from its fresh load sample (gateway/loadBoard.ts);
   * undefined when the sample is absent, stale, or has no engine figures. Absent: no samples, each
   * instance's load is the requests this queue runs on it.
   */
  engineLoad?: (deploymentId: string, instanceIndex: number) => { running: number; waiting: number } | undefined;
  now?: () => number;
}

interface Waiter {
  sinceMs: number;
  /** It has waited only for one of the 32 slots, its model serving all along (which error its deadline gets). */
  forSlot: boolean;
  start: () => void;
  refuse: (error: ApiError) => void;
  leave: () => void;
}

/**
 * The request deadline, armed at the arrival, disarmed by the first output or the end; what it does
 * depends on where the request is when it runs out (`onExpiry`).
 */
class DeadlineTimer {
  onExpiry: () => void = nothing;
  private readonly handle: NodeJS.Timeout;

  constructor(ms: number) {
    this.handle = setTimeout(expire, ms, this);
  }

  stop(): void {
    clearTimeout(this.handle);
  }
}

function expire(timer: DeadlineTimer): void {
  timer.onExpiry();
}

function nothing(): void {}

function refused(error: ApiError): Promise<Admission> {
  return Promise.resolve({ kind: 'refused', error });
}

/** Requests running on the model now, on all its instances: at most 32. */
function runningOn(m: Model): number {
  let running = 0;
  for (const i of m.instances.values()) running += i.running;
  return running;
}

/** One instance of a deployment, by its index. */
interface Instance {
  index: number;
  dispatch: DispatchState;
  /** The start it serves on; null before its first and once withdrawn. */
  ref: InstanceRef | null;
  /** Requests this queue runs on it now. */
  running: number;
  /** A request was cut there before any output: its next release stops it (`awaitDrain`). */
  cutBeforeOutput: boolean;
}

interface Model {
  id: string;
  instances: Map<number, Instance>;
  waiters: Waiter[];
  /** The last time a request started or finished there, or a dispatch of its opened (idle since). */
  lastChangeMs: number;
  /**
   * With no waiting allowed, a refused request still asks for the wake or start: it counts as one
   * waiting request in the demand, since when, until the model serves or its switch fails.
   */
  askedSinceMs: number | null;
}

class RunningRequest implements Ticket {
  private expired: ApiError | undefined;
  private onExpiry: ((error: ApiError) => void) | undefined;
  private sawOutput = false;
  private finished = false;

  constructor(
    readonly instance: InstanceRef,
    private readonly onFinish: (cutBeforeOutput: boolean) => void,
    private readonly deadline: DeadlineTimer,
  ) {}

  expire(error: ApiError) {
    if (this.sawOutput || this.finished || this.expired) return;
    this.expired = error;
    this.onExpiry?.(error);
  }

  onDeadline(then: (error: ApiError) => void) {
    this.onExpiry = then;
    if (this.expired) then(this.expired);
  }

  firstOutput() {
    this.sawOutput = true;
    this.deadline.stop();
  }

  finish({ cut }: { cut: boolean }) {
    if (this.finished) return;
    this.finished = true;
    this.deadline.stop();
    this.onFinish(cut && !this.sawOutput);
  }
}

export class RequestQueue implements RouterFigures {
  private readonly models = new Map<string, Model>();
  private readonly now: () => number;
  private bufferedBytes = 0;
  private waitingCount = 0;
  /** Deployments whose demand may have changed; reported together once the current turn ends. */
  private readonly touched = new Set<string>();
  private readonly reported = new Map<string, Demand>();
  /** The process is stopping: nothing is taken or started any more. */
  private stopping = false;

  constructor(private readonly options: RequestQueueOptions) {
    this.now = options.now ?? Date.now;
  }

  // ─── Requests ────────────────────────────────────────────────────────────────────────────────

  /** Runs the request now, makes it wait, or refuses it. A hang-up while it waits rejects with the signal's reason. */
  admit(arrival: Arrival): Promise<Admission> {
    if (arrival.signal.aborted) return Promise.reject(arrival.signal.reason);
    const { deploymentId: id, startBlockedBy, bodyBytes } = arrival;
    const m = this.model(id);
    const limits = this.options.limits();
    const dispatch = this.dispatchOfModel(m);
    const slotFree = runningOn(m) < RUNNING_PER_MODEL && m.waiters.length === 0;

    if (dispatch === 'open' && slotFree)
      return Promise.resolve({ kind: 'dispatch', ticket: this.run(m, new DeadlineTimer(limits.request_deadline)) });
    if (dispatch === 'closed' || this.stopping) return refused(apiErrors.dispatchClosed(id));
    if (dispatch === 'waiting' && startBlockedBy)
      return refused(
        startBlockedBy === 'explicit' ? apiErrors.deploymentInactive(id) : apiErrors.deploymentStopped(id),
      );
    if (limits.max_pending_per_deployment === 0) {
      if (dispatch === 'open') return refused(apiErrors.inFlightNoWait(id));
      if (m.askedSinceMs === null) {
        m.askedSinceMs = this.now();
        this.touch(id);
      }
      return refused(apiErrors.notServableNoWait(id));
    }
    if (m.waiters.length >= limits.max_pending_per_deployment || this.waitingCount >= limits.max_pending_total) {
      return refused(apiErrors.waitingLimit(id));
    }
    if (this.bufferedBytes + bodyBytes > limits.max_buffered_bytes_total) return refused(apiErrors.bufferedBytes());
    return this.wait(m, arrival, limits, dispatch === 'open');
  }

  /** `forSlot`: the model serves, and the request waits for a free slot rather than for a load. */
  private wait(m: Model, arrival: Arrival, limits: SharedQueueLimits, forSlot: boolean): Promise<Admission> {
    return new Promise<Admission>((resolve, reject) => {
      const timer = new DeadlineTimer(limits.request_deadline);
      const onHangUp = () => {
        waiter.leave();
        timer.stop();
        reject(arrival.signal.reason);
      };
      const waiter: Waiter = {
        sinceMs: this.now(),
        forSlot,
        start: () => {
          waiter.leave();
          resolve({ kind: 'dispatch', ticket: this.run(m, timer) });
        },
        refuse: (error) => {
          waiter.leave();
          timer.stop();
          resolve({ kind: 'refused', error });
        },
        leave: () => {
          arrival.signal.removeEventListener('abort', onHangUp);
          const at = m.waiters.indexOf(waiter);
          if (at < 0) return;
          m.waiters.splice(at, 1);
          this.waitingCount--;
          this.bufferedBytes -= arrival.bodyBytes;
          this.touch(m.id);
        },
      };
      // While it waits, the deadline refuses it: after 32 running requests kept it out the whole
      // time, with the in-flight error; otherwise its model did not become servable in time.
      timer.onExpiry = () =>
        waiter.refuse(waiter.forSlot ? apiErrors.inFlightDeadline(m.id) : apiErrors.queueDeadline(m.id));
      arrival.signal.addEventListener('abort', onHangUp, { once: true });
      m.waiters.push(waiter);
      this.waitingCount++;
      this.bufferedBytes += arrival.bodyBytes;
      this.touch(m.id);
    });
  }

  /** Runs a request on the least loaded open instance; only a model with one runs requests, and an open instance has its start. */
  private run(m: Model, timer: DeadlineTimer): RunningRequest {
    const instance = this.leastLoaded(m)!;
    const request = new RunningRequest(
      instance.ref!,
      (cutBeforeOutput) => this.finished(m, instance, cutBeforeOutput),
      timer,
    );
    timer.onExpiry = () => request.expire(apiErrors.queueDeadline(m.id));
    instance.running++;
    m.lastChangeMs = this.now();
    return request;
  }

  /**
   * The open instance with the least load, the lower index on a tie: the requests this queue runs
   * there, or the engine's own running count when its fresh sample says more, plus the requests
   * waiting in the engine. With one open instance there is nothing to weigh, and no sample is read.
   */
  private leastLoaded(m: Model): Instance | undefined {
    // One pass and no array: it runs for every request, and almost every model has one instance.
    let best: Instance | undefined;
    let bestLoad: number | undefined;
    for (const i of m.instances.values()) {
      if (i.dispatch !== 'open') continue;
      if (!best) {
        best = i;
        continue;
      }
      bestLoad ??= this.loadOf(m.id, best);
      const load = this.loadOf(m.id, i);
      if (load < bestLoad || (load === bestLoad && i.index < best.index)) {
        best = i;
        bestLoad = load;
      }
    }
    return best;
  }

  private loadOf(deploymentId: string, i: Instance): number {
    const engine = this.options.engineLoad?.(deploymentId, i.index);
    return engine ? Math.max(i.running, engine.running) + engine.waiting : i.running;
  }

  private finished(m: Model, instance: Instance, cutBeforeOutput: boolean) {
    instance.running--;
    m.lastChangeMs = this.now();
    // The engine may not have started it yet, so its count of running requests proves nothing.
    if (cutBeforeOutput) instance.cutBeforeOutput = true;
    this.fillSlots(m);
  }

  /** Fills the free slots of a serving model from its waiters, first come first served; how many started. */
  private fillSlots(m: Model): number {
    let started = 0;
    while (this.dispatchOfModel(m) === 'open' && runningOn(m) < RUNNING_PER_MODEL && m.waiters.length > 0) {
      m.waiters[0]!.start();
      started++;
    }
    return started;
  }

  // ─── What the switch's gateway steps do ──────────────────────────────────────────────────────

  /** The deployment's dispatch as its requests see it: `open` if any instance is, else `closed` if any is, else `waiting`. */
  dispatchOf(deploymentId: string): DispatchState {
    const m = this.models.get(deploymentId);
    return m ? this.dispatchOfModel(m) : 'waiting';
  }

  /** One instance's own dispatch (`waiting` for one the queue never saw). */
  instanceDispatchOf(deploymentId: string, instanceIndex: number): DispatchState {
    return this.models.get(deploymentId)?.instances.get(instanceIndex)?.dispatch ?? 'waiting';
  }

  /** Requests running on the instances now. */
  runningOn(victims: readonly InstanceKey[]): number {
    return victims.reduce((sum, v) => sum + (this.existing(v)?.running ?? 0), 0);
  }

  /** No request runs on the deployment, and none started or finished there for `windowMs` (or ever). */
  idleFor(deploymentId: string, windowMs: number): boolean {
    const m = this.models.get(deploymentId);
    return !m || (runningOn(m) === 0 && this.now() - m.lastChangeMs >= windowMs);
  }

  /**
   * The victim instances drain: dispatched to no more. A model with no other open instance answers
   * its new requests 503 until they park or serve again; one with another sends them there.
   */
  close(victims: readonly InstanceKey[]): void {
    for (const v of victims) {
      const m = this.model(v.deploymentId);
      this.setDispatch(m, this.instance(m, v.instanceIndex), 'close');
    }
  }

  /**
   * The victim instances begin parking or stopping: dispatched to no more. A model with no other open
   * instance has its new requests wait, and they become the next switch.
   */
  withdrawVictims(victims: readonly InstanceKey[]): void {
    for (const v of victims) {
      const m = this.model(v.deploymentId);
      const i = this.instance(m, v.instanceIndex);
      this.setDispatch(m, i, 'withdraw');
      i.ref = null;
      // This release carries out the stop a cut request asked for.
      i.cutBeforeOutput = false;
    }
  }

  /**
   * The catalogue records this instance as no longer serving (parking, parked, stopping …): if it is
   * the start its index serves on, it is withdrawn, as by `withdrawVictims`. A switch that began
   * releasing it in the process before this one (a restart in between) closed it there.
   */
  withdraw(instance: InstanceRef): void {
    const serving = this.existing(instance)?.ref;
    if (serving && serving.generation === instance.generation) this.withdrawVictims([instance]);
  }

  /** The victim instances serve again (a drain that did not finish). */
  reopen(victims: readonly InstanceKey[]): void {
    for (const v of victims) {
      const m = this.model(v.deploymentId);
      const i = this.instance(m, v.instanceIndex);
      // A waiting one has begun parking or was withdrawn since: reopening it would route to a parking engine.
      if (i.ref && i.dispatch !== 'waiting') this.open(m, i, i.ref, 'reopen');
    }
  }

  /** The deployments of the victims a request was cut from before any output since their last release. */
  cutBeforeOutput(victims: readonly InstanceKey[]): string[] {
    return [...new Set(victims.filter((v) => this.existing(v)?.cutBeforeOutput === true).map((v) => v.deploymentId))];
  }

  /** The instance serves: its model's waiting requests run together, up to the running bound; how many started. */
  startWaiters(instance: InstanceRef): number {
    const m = this.model(instance.deploymentId);
    m.askedSinceMs = null;
    this.touch(m.id);
    return this.open(m, this.instance(m, instance.instanceIndex), instance, 'serve');
  }

  /** Every request waiting for the deployment is answered `error`; how many. */
  failWaiters(deploymentId: string, error: ApiError): number {
    const m = this.model(deploymentId);
    const waiters = [...m.waiters];
    for (const w of waiters) w.refuse(error);
    m.askedSinceMs = null;
    this.touch(m.id);
    return waiters.length;
  }

  /** Who waits, since when, for every deployment with waiting requests; and when each last saw traffic. */
  snapshot(): { demands: Demand[]; lastActivityMs: Record<string, number> } {
    const demands = [...this.models.values()].map((m) => this.demandOf(m)).filter((d) => d.waiting > 0);
    return { demands, lastActivityMs: this.lastActivity() };
  }

  /** When each deployment last started or finished a request here (or began to serve). */
  private lastActivity(): Record<string, number> {
    return Object.fromEntries([...this.models.values()].map((m) => [m.id, m.lastChangeMs]));
  }

  private open(m: Model, i: Instance, ref: InstanceRef, event: 'serve' | 'reopen'): number {
    i.ref = ref;
    this.setDispatch(m, i, event);
    m.lastChangeMs = this.now();
    return this.fillSlots(m);
  }

  private setDispatch(m: Model, i: Instance, event: DispatchEvent) {
    const next = nextDispatch(i.dispatch, event);
    // A switch finishing while the process stops does not reopen what the stop closed.
    i.dispatch = this.stopping ? 'closed' : next;
    // Once the model stops serving, its waiters wait for it to load, not for a slot.
    if (this.dispatchOfModel(m) !== 'open') for (const w of m.waiters) w.forSlot = false;
  }

  private dispatchOfModel(m: Model): DispatchState {
    let closed = false;
    for (const i of m.instances.values()) {
      if (i.dispatch === 'open') return 'open';
      if (i.dispatch === 'closed') closed = true;
    }
    // Stopping, a model with no instance yet is closed too.
    return closed || this.stopping ? 'closed' : 'waiting';
  }

  // ─── Stopping ───────────────────────────────────────────────────────────────────────────────

  /**
   * The process is stopping: every instance's dispatch closes, as a victim's does before it parks
   * (new requests and the waiting ones are answered 503 dispatch closed); running requests go on.
   */
  stopTaking(): void {
    this.stopping = true;
    for (const m of this.models.values()) {
      for (const i of m.instances.values()) this.setDispatch(m, i, 'stop');
      this.failWaiters(m.id, apiErrors.dispatchClosed(m.id));
    }
  }

  /** Requests waiting now, on every deployment: the count `max_pending_total` bounds. */
  waitingTotal(): number {
    return this.waitingCount;
  }

  /** Requests running now, on every deployment. */
  runningTotal(): number {
    let total = 0;
    for (const m of this.models.values()) total += runningOn(m);
    return total;
  }

  // ─── The load endpoint's figures ─────────────────────────────────────────────────────────────

  deployment(deploymentId: string) {
    const m = this.models.get(deploymentId);
    return {
      inFlight: m ? runningOn(m) : 0,
      inFlightLimit: RUNNING_PER_MODEL,
      waiting: m?.waiters.length ?? 0,
      waitingLimit: this.options.limits().max_pending_per_deployment,
    };
  }

  instanceInFlight(deploymentId: string, instanceIndex: number): number {
    return this.existing({ deploymentId, instanceIndex })?.running ?? 0;
  }

  // ─── Models, their instances and their demand ────────────────────────────────────────────────

  /** The deployment's state, made on first use; reads that need none use `models.get` so they make none. */
  private model(deploymentId: string): Model {
    let m = this.models.get(deploymentId);
    if (!m) {
      m = {
        id: deploymentId,
        instances: new Map(),
        waiters: [],
        lastChangeMs: this.now(),
        askedSinceMs: null,
      };
      this.models.set(deploymentId, m);
    }
    return m;
  }

  /** The instance's state, made on first use (waiting, with no start); `existing` reads without making one. */
  private instance(m: Model, index: number): Instance {
    let i = m.instances.get(index);
    if (!i) {
      i = { index, dispatch: 'waiting', ref: null, running: 0, cutBeforeOutput: false };
      m.instances.set(index, i);
    }
    return i;
  }

  private existing(key: InstanceKey): Instance | undefined {
    return this.models.get(key.deploymentId)?.instances.get(key.instanceIndex);
  }

  private demandOf(m: Model): Demand {
    const asked = m.askedSinceMs === null ? [] : [m.askedSinceMs];
    const since = [...m.waiters.map((w) => w.sinceMs), ...asked];
    return {
      deploymentId: m.id,
      waiting: Math.max(m.waiters.length, asked.length),
      oldestSinceMs: since.length > 0 ? Math.min(...since) : 0,
    };
  }

  /**
   * Reports the deployment's demand once the current turn ends, and only if it changed: a burst of
   * arrivals, or starting many waiters at once, is one report.
   */
  private touch(deploymentId: string) {
    if (this.touched.size === 0) queueMicrotask(() => this.reportTouched());
    this.touched.add(deploymentId);
  }

  private reportTouched() {
    // Read once for the whole turn's reports, however many models they are for.
    let lastRequestMs: Record<string, number> | undefined;
    for (const id of this.touched) {
      const demand = this.demandOf(this.model(id));
      const last = this.reported.get(id) ?? { deploymentId: id, waiting: 0, oldestSinceMs: 0 };
      if (demand.waiting === last.waiting && demand.oldestSinceMs === last.oldestSinceMs) continue;
      this.reported.set(id, demand);
      // The scheduler that serves it chooses what yields by when each model was last asked for.
      this.options.onDemand({ ...demand, lastRequestMs: (lastRequestMs ??= this.lastActivity()) });
    }
    this.touched.clear();
  }
}
