/**
 * The gateway on the lifecycle's bench: the real request queue and its gateway steps, with simulated
 * clients in place of the HTTP routes and the proxy. A simulated request runs `durationMs` once
 * dispatched (its first output at once), and every step a switch took is recorded for the tests.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { ApiError } from '../../domain/catalogue.js';
import type { GatewaySteps, WindowThenRelease } from '../../activities/gatewaySteps.js';
import type { DispatchState } from '../../gateway/dispatchState.js';
import { RequestQueue } from '../../gateway/requestQueue.js';
import type { SharedQueueLimits } from '../../settings/queue.js';
import type { Demand, InstanceRef } from '../../api/lifecycle.js';

/** What a simulated client got. */
export type Answer =
  | { kind: 'served'; deploymentId: string; startedAtMs: number; endedAtMs: number; instance: InstanceRef }
  | { kind: 'error'; error: ApiError; atMs: number };

/** Every step a switch takes; the scheduler's own (its snapshot, a refusal for capacity) are not. */
type SwitchStep = Exclude<keyof GatewaySteps, 'snapshot' | 'capacityRefused'>;
type StepInput<K extends SwitchStep> = Parameters<GatewaySteps[K]>[0];
type StepResult<K extends SwitchStep> = Awaited<ReturnType<GatewaySteps[K]>>;

export interface RecordedStep {
  step: SwitchStep;
  switchId: string;
  atMs: number;
  detail: unknown;
}

export class QueueGateway {
  readonly queue: RequestQueue;
  /** Every step the switches took, in order, for the tests' assertions. */
  readonly steps: RecordedStep[] = [];

  constructor(limits: SharedQueueLimits, onDemand: (demand: Demand) => void = () => {}) {
    this.queue = new RequestQueue({ limits: () => limits, onDemand });
  }

  /**
   * The server's activities as the worker registers them, each gateway step recorded once it is done
   * (a window that began the release is its two steps, `closeAdmission` and `withdrawVictims`).
   */
  recorded<A extends GatewaySteps & WindowThenRelease>(activities: A): A {
    const note = (step: SwitchStep, switchId: string, detail: unknown, atMs = Date.now()) =>
      this.steps.push({ step, switchId, atMs, detail });
    const record = <K extends SwitchStep>(step: K, detail: (input: StepInput<K>, result: StepResult<K>) => unknown) => {
      const run = activities[step] as unknown as (input: StepInput<K>) => Promise<StepResult<K>>;
      const recording = async (input: StepInput<K>) => {
        const result = await run(input);
        note(step, input.switchId, detail(input, result));
        return result;
      };
      return recording as unknown as GatewaySteps[K];
    };
    const closeAdmissionThenRelease: WindowThenRelease['closeAdmissionThenRelease'] = async (input) => {
      const result = await activities.closeAdmissionThenRelease(input);
      const atMs = Date.now();
      note('closeAdmission', input.switchId, { victims: input.victims }, atMs);
      if (result.released) note('withdrawVictims', input.switchId, { victims: input.victims }, atMs);
      return result;
    };
    return {
      ...activities,
      closeAdmissionThenRelease,
      closeAdmission: record('closeAdmission', (i) => ({ victims: i.victims })),
      awaitDrain: record('awaitDrain', (_, r) => r),
      withdrawVictims: record('withdrawVictims', (i) => ({ victims: i.victims })),
      reopen: record('reopen', (i) => ({ victims: i.victims })),
      startWaiters: record('startWaiters', (i, r) => ({ deploymentId: i.instance.deploymentId, ...r })),
      failWaiters: record('failWaiters', (i, r) => ({ deploymentId: i.deploymentId, code: i.error.code, ...r })),
    };
  }

  dispatchOf(deploymentId: string): DispatchState {
    return this.queue.dispatchOf(deploymentId);
  }

  /** A client's request that runs `durationMs` once the queue dispatches it. */
  async request(deploymentId: string, durationMs = 0): Promise<Answer> {
    const admission = await this.queue.admit({ deploymentId, bodyBytes: 0, signal: new AbortController().signal });
    if (admission.kind === 'refused') return { kind: 'error', error: admission.error, atMs: Date.now() };
    const { ticket } = admission;
    const startedAtMs = Date.now();
    ticket.firstOutput();
    await sleep(durationMs);
    ticket.finish({ cut: false });
    return { kind: 'served', deploymentId, startedAtMs, endedAtMs: Date.now(), instance: ticket.instance };
  }
}
