/**
 * One switch's state and the steps every phase shares: its input, the host's, the store's and the
 * gateway's steps, what the `patched()` markers decided for this run, the phases' timings and the
 * receipts. The constructor reads the run's markers and writes its search attributes, in the order
 * recorded histories hold them; the phases (window and drain, the victims' release, the target's
 * bring-up, the compensation) are the files beside it, each acting through this.
 */
import {
  ActivityCancellationType,
  ApplicationFailure,
  CancellationScope,
  patched,
  proxyActivities,
  proxyLocalActivities,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { HostActivities } from '../../activities/hostActivities.js';
import type { ProblemInput, StoreActivities } from '../../activities/storeActivities.js';
import type { ProblemKind } from '../../domain/problems.js';
import type { InstanceState, ParkTier, SwitchOutcome, SwitchPhase } from '../../domain/vocabulary.js';
import { HEARTBEAT_TIMEOUT_MS } from '../../api/heartbeat.js';
import type {
  InstanceRef,
  PhaseTiming,
  SwitchInput,
  SwitchResult,
  SwitchTarget,
  WakeReference,
} from '../../api/lifecycle.js';
import { searchAttributes, serverStepOptions, taskQueues } from '../definitions.js';
import { everyGateway, RETRY } from '../everyGateway.js';
import { instanceRow } from '../ledger.js';
import { switchSummary } from '../switchSummary.js';

export type VictimResult = SwitchResult['victims'][number];

/**
 * The `patched()` name of a wake scheduled beside its switch's parks (the host begins it as they end:
 * `WakeAfter`); older histories scheduled it once the parks had ended.
 */
const WAKE_BESIDE_PARKS = 'wake-beside-parks';
/**
 * The `patched()` name of the victims' release begun by the window's own step once it leaves them
 * drained (`closeAdmissionThenRelease`), with the first receipt written beside it; older histories
 * withdrew the victims and wrote their rows in a local step of its own, after the window.
 */
const RELEASE_WITH_WINDOW = 'release-with-window';

export class SwitchRun {
  /** The gateway's steps act on the victim instances, not on every instance of their deployments. */
  readonly victimInstances: InstanceRef[];
  /**
   * The store's rows run inside the workflow task (definitions.ts), each whole even when the switch is
   * cancelled (the Web UI's cancel): a row says what is, and the compensation reads and writes them.
   */
  readonly store = runWhole(proxyLocalActivities<StoreActivities>(serverStepOptions));
  /**
   * A wake whose victims give their memory back is scheduled beside their parks or stops: the host
   * begins it as they end, so no round trip through Temporal lies between them.
   */
  readonly wakeBesideParks: boolean;
  /** That wake's first answer, read with the window (the wake step needs it), not after the parks. */
  readonly wakeReference: Promise<WakeReference | null> | undefined;
  /** The window's step begins the victims' release once they drained (`closeAdmissionThenRelease`). */
  readonly releaseWithWindow: boolean;
  /**
   * The gateway's steps run on every server that shares the store (everyGateway.ts); the waits (the
   * window, the drain) are activities of their own, visible while they wait.
   */
  readonly gateway: ReturnType<typeof everyGateway>;
  /** How long each step took, for the server's metrics: sent with the last receipt. */
  readonly phases: PhaseTiming[] = [];
  private opened: Promise<unknown> | undefined;

  constructor(readonly input: SwitchInput) {
    const { switchId, hostId, target, victims } = input;
    if (target?.action === 'wake' && target.tier === null) {
      throw ApplicationFailure.nonRetryable(
        `switch ${switchId}: a wake of ${target.name} needs the tier it parked at`,
        'invalid_switch',
      );
    }
    this.victimInstances = victims.map((v) => v.instance);
    const wakeBesideParks = target?.action === 'wake' && victims.length > 0 && patched(WAKE_BESIDE_PARKS);
    this.wakeBesideParks = wakeBesideParks;
    this.wakeReference = wakeBesideParks ? this.firstAnswer(target) : undefined;
    this.releaseWithWindow = victims.length > 0 && patched(RELEASE_WITH_WINDOW);
    // The scheduler reads the live servers with the model a demand wants; a switch started otherwise reads them here.
    this.gateway = everyGateway(
      input.serverTaskQueue,
      input.liveServerQueues ? Promise.resolve(input.liveServerQueues) : this.store.liveServerQueues(),
    );
    upsertSearchAttributes([
      ...(target ? [{ key: searchAttributes.target, value: target.name }] : []),
      { key: searchAttributes.victims, value: victims.map((v) => v.name) },
      { key: searchAttributes.host, value: hostId },
      { key: searchAttributes.outcome, value: 'running' },
    ]);
  }

  /**
   * The host's steps. A host agent that died never picks its tasks up: schedule-to-close bounds every
   * host step. A step cancelled is waited for when its work must not outlive the switch's view of it.
   */
  host(withinMs: number, cancellationType?: ActivityCancellationType) {
    return proxyActivities<HostActivities>({
      taskQueue: taskQueues.host(this.input.hostId),
      scheduleToCloseTimeout: Math.max(1, withinMs),
      heartbeatTimeout: HEARTBEAT_TIMEOUT_MS,
      retry: RETRY,
      ...(cancellationType === undefined ? {} : { cancellationType }),
    });
  }

  /** The target's first answer, as the scheduler read it with the demand, or read here. */
  firstAnswer(t: SwitchTarget): Promise<WakeReference | null> {
    return this.input.wakeReference !== undefined
      ? Promise.resolve(this.input.wakeReference)
      : this.store.findWakeReference({
          deploymentId: t.instance.deploymentId,
          instanceIndex: t.instance.instanceIndex,
        });
  }

  async timed<T>(phase: SwitchPhase, tier: ParkTier | null, step: () => Promise<T>): Promise<T> {
    const began = Date.now();
    try {
      return await step();
    } finally {
      this.phases.push({ phase, tier, ms: Date.now() - began });
    }
  }

  /**
   * What each instance holds, for the rows `list deployments` and the load endpoint read, as the
   * scheduler read it: every read here would be on the waiters' clock.
   */
  rowOf(instance: InstanceRef, state: InstanceState, tier: ParkTier | null, measuredResidue?: number) {
    const { hostId, checkpoints } = this.input;
    return instanceRow(
      hostId,
      instance,
      state,
      tier,
      checkpoints[instance.deploymentId] ?? null,
      this.gpusOf(instance),
      measuredResidue,
    );
  }

  /** The GPUs the instance holds, as the scheduler planned the switch; none known for a victim of a switch from before. */
  private gpusOf(instance: InstanceRef): number[] {
    const { target, victims } = this.input;
    const same = (other: InstanceRef) =>
      other.deploymentId === instance.deploymentId && other.instanceIndex === instance.instanceIndex;
    if (target && same(target.instance)) return target.gpuIndexes;
    return victims.find((v) => same(v.instance))?.gpuIndexes ?? [];
  }

  /** A failed step of `instance` as its deployment's last problem, in the words of what failed. */
  problemOf(instance: InstanceRef, kind: ProblemKind, message: string): ProblemInput {
    const { instanceIndex, generation } = instance;
    return { kind, host_id: this.input.hostId, instance_index: instanceIndex, generation, message };
  }

  /** Records a failed step of `instance` (a park, a wake) as its deployment's last problem. */
  recordProblem(instance: InstanceRef, kind: ProblemKind, message: string): Promise<void> {
    return this.store.recordProblem({
      deploymentId: instance.deploymentId,
      problem: this.problemOf(instance, kind, message),
    });
  }

  /** `measuredResidue`: what a parked instance's host measured its engine still holds. */
  saveInstance(instance: InstanceRef, state: InstanceState, tier: ParkTier | null, measuredResidue?: number) {
    return this.store.saveInstance(this.rowOf(instance, state, tier, measuredResidue));
  }

  /**
   * Runs a step while its in-between state (`parking`, `waking` …) is written, so a list shows what
   * is happening without the write adding to the waiters' clock. The write is awaited even when the
   * step fails: it must not land after the state that follows.
   */
  async during<T>(
    instance: InstanceRef,
    state: InstanceState,
    tier: ParkTier | null,
    step: () => Promise<T>,
  ): Promise<T> {
    const saving = this.saveInstance(instance, state, tier);
    try {
      return await step();
    } finally {
      await saving;
    }
  }

  /**
   * The first receipt ("running"), written beside the first of the switch's own rows rather than
   * before the window: every local step the workflow task waits for is on the waiters' clock.
   */
  open(): Promise<unknown> {
    return (this.opened ??= this.receipt('running', [], null));
  }

  /** The last receipt, with the phases, and the outcome the Web UI lists: written whole, cancelled or not. */
  async finish(result: SwitchResult): Promise<void> {
    await this.open();
    await CancellationScope.nonCancellable(async () => {
      upsertSearchAttributes([{ key: searchAttributes.outcome, value: result.outcome }]);
      await this.receipt(result.outcome, result.victims, Date.now());
    });
  }

  private receipt(outcome: SwitchOutcome, victimResults: VictimResult[], finishedAtMs: number | null) {
    const { input } = this;
    return this.store.saveSwitchReceipt({
      switchId: input.switchId,
      hostId: input.hostId,
      targetDeploymentId: input.target?.instance.deploymentId ?? null,
      victims: victimResults.map(({ deploymentId, instanceIndex, released: line, gpuIndexes }) => ({
        deploymentId,
        instanceIndex,
        released: line,
        gpuIndexes,
      })),
      outcome,
      summary: switchSummary(input),
      startedAtMs: input.startedAtMs,
      finishedAtMs,
      ...(finishedAtMs === null ? {} : { phases: this.phases }),
    });
  }
}

/** `steps` with each call run whole, in a scope a cancellation of the workflow does not reach. */
function runWhole<T extends object>(steps: T): T {
  return new Proxy(steps, {
    get: (target, name) => {
      const step = Reflect.get(target, name) as (...args: unknown[]) => Promise<unknown>;
      return (...args: unknown[]) => CancellationScope.nonCancellable(() => step(...args));
    },
  });
}
