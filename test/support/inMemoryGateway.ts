/**
 * A stand-in for the gateway's switch steps, holding simulated requests in memory, so the
 * lifecycle's workflows can be tested before (and apart from) the real gateway. It keeps the
 * spec's rules: a closed victim answers 503 dispatch closed, a victim that began parking makes its
 * new requests wait, waiters are released together or failed together.
 */
import { type ApiError, apiErrors } from '../../domain/catalogue.js';
import { whileHeartbeating } from '../../activities/heartbeat.js';
import type { DrainOutcome, GatewaySteps } from '../../activities/gatewaySteps.js';
import type { Demand, InstanceRef } from '../../workflows/definitions.js';

/** What a simulated client got. */
export type Answer =
  | { kind: 'served'; deploymentId: string; startedAtMs: number; endedAtMs: number; instance?: InstanceRef }
  | { kind: 'error'; error: ApiError; atMs: number };

type Dispatch = 'open' | 'closed' | 'waiting';

interface Waiter {
  sinceMs: number;
  durationMs: number;
  resolve: (answer: Answer) => void;
}

interface Model {
  dispatch: Dispatch;
  inFlight: number;
  /** The last time a request started or finished there. */
  lastChangeMs: number;
  waiters: Waiter[];
  instance?: InstanceRef;
}

const POLL_MS = 20;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class InMemoryGateway implements GatewaySteps {
  private readonly models = new Map<string, Model>();
  /** Every step the switches took, in order, for the tests' assertions. */
  readonly steps: Array<{ step: string; switchId: string; atMs: number; detail?: unknown }> = [];

  /** `onDemand` is told whenever a deployment's waiting requests change (the scheduler's demand signal). */
  constructor(private readonly onDemand: (demand: Demand) => void = () => {}) {}

  private model(deploymentId: string): Model {
    let m = this.models.get(deploymentId);
    if (!m) {
      m = { dispatch: 'waiting', inFlight: 0, lastChangeMs: Date.now(), waiters: [] };
      this.models.set(deploymentId, m);
    }
    return m;
  }

  private demandOf(deploymentId: string): Demand {
    const m = this.model(deploymentId);
    return { deploymentId, waiting: m.waiters.length, oldestSinceMs: m.waiters[0]?.sinceMs ?? 0 };
  }

  /** Marks a deployment as serving (its instance is ready), as a release would. */
  open(deploymentId: string, instance?: InstanceRef): void {
    const m = this.model(deploymentId);
    m.dispatch = 'open';
    m.instance = instance;
  }

  dispatchOf(deploymentId: string): Dispatch {
    return this.model(deploymentId).dispatch;
  }

  inFlightOf(deploymentId: string): number {
    return this.model(deploymentId).inFlight;
  }

  /**
   * A client's request that runs `durationMs` once dispatched: at once when its model is open, after
   * a release when it must wait, or refused with 503 while its model drains.
   */
  request(deploymentId: string, durationMs = 0): Promise<Answer> {
    const m = this.model(deploymentId);
    if (m.dispatch === 'closed') {
      return Promise.resolve({ kind: 'error', error: apiErrors.dispatchClosed(deploymentId), atMs: Date.now() });
    }
    if (m.dispatch === 'open') return this.run(deploymentId, durationMs);
    return new Promise<Answer>((resolve) => {
      m.waiters.push({ sinceMs: Date.now(), durationMs, resolve });
      this.onDemand(this.demandOf(deploymentId));
    });
  }

  private async run(deploymentId: string, durationMs: number): Promise<Answer> {
    const m = this.model(deploymentId);
    const startedAtMs = Date.now();
    m.inFlight++;
    m.lastChangeMs = startedAtMs;
    await sleep(durationMs);
    m.inFlight--;
    m.lastChangeMs = Date.now();
    return { kind: 'served', deploymentId, startedAtMs, endedAtMs: m.lastChangeMs, ...(m.instance ? { instance: m.instance } : {}) };
  }

  private note(step: string, switchId: string, detail?: unknown) {
    this.steps.push({ step, switchId, atMs: Date.now(), ...(detail === undefined ? {} : { detail }) });
  }

  async closeAdmission({ switchId, victims, startedAtMs, windowMs }: Parameters<GatewaySteps['closeAdmission']>[0]) {
    await whileHeartbeating(async () => {
      if (windowMs !== null) {
        const idle = (id: string) => {
          const m = this.model(id);
          return m.inFlight === 0 && Date.now() - m.lastChangeMs >= windowMs;
        };
        while (Date.now() < startedAtMs + windowMs && !victims.every(idle)) await sleep(POLL_MS);
      }
    });
    for (const id of victims) this.model(id).dispatch = 'closed';
    this.note('closeAdmission', switchId, { victims });
  }

  async awaitDrain({ switchId, victims, timeoutMs }: Parameters<GatewaySteps['awaitDrain']>[0]): Promise<DrainOutcome> {
    const deadline = Date.now() + timeoutMs;
    const charged = () => victims.reduce((sum, id) => sum + this.model(id).inFlight, 0);
    await whileHeartbeating(async () => {
      while (charged() > 0 && Date.now() < deadline) await sleep(POLL_MS);
    });
    const stillCharged = charged();
    this.note('awaitDrain', switchId, { stillCharged });
    return { drained: stillCharged === 0, stillCharged, cutBeforeOutput: [] };
  }

  async beginRelease({ switchId, victims }: Parameters<GatewaySteps['beginRelease']>[0]) {
    for (const id of victims) this.model(id).dispatch = 'waiting';
    this.note('beginRelease', switchId, { victims });
  }

  async reopen({ switchId, victims }: Parameters<GatewaySteps['reopen']>[0]) {
    for (const id of victims) this.model(id).dispatch = 'open';
    this.note('reopen', switchId, { victims });
  }

  async release({ switchId, instance }: Parameters<GatewaySteps['release']>[0]) {
    const m = this.model(instance.deploymentId);
    m.dispatch = 'open';
    m.instance = instance;
    const waiters = m.waiters.splice(0);
    for (const w of waiters) void this.run(instance.deploymentId, w.durationMs).then(w.resolve);
    this.note('release', switchId, { deploymentId: instance.deploymentId, released: waiters.length });
    this.onDemand(this.demandOf(instance.deploymentId));
    return { released: waiters.length };
  }

  async failWaiters({ switchId, deploymentId, error }: Parameters<GatewaySteps['failWaiters']>[0]) {
    const waiters = this.model(deploymentId).waiters.splice(0);
    for (const w of waiters) w.resolve({ kind: 'error', error, atMs: Date.now() });
    this.note('failWaiters', switchId, { deploymentId, failed: waiters.length, code: error.code });
    this.onDemand(this.demandOf(deploymentId));
    return { failed: waiters.length };
  }

  async snapshot() {
    const demands = [...this.models.keys()].map((id) => this.demandOf(id)).filter((d) => d.waiting > 0);
    const lastActivityMs = Object.fromEntries([...this.models].map(([id, m]) => [id, m.lastChangeMs]));
    return { demands, lastActivityMs };
  }
}
