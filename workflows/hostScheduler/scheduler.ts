/**
 * The host scheduler's state and the one place that changes it: the host's ledger, the demands it
 * holds, the queue of operator commands and the switch running now. The workflow function wires
 * Temporal's signals, updates and query to its methods; the operator commands, the serving of
 * waiting requests and the idle timers are in files of their own and act through it.
 */
import {
  allHandlersFinished,
  condition,
  continueAsNew,
  patched,
  proxyActivities,
  proxyLocalActivities,
  startChild,
  uuid4,
  workflowInfo,
} from '@temporalio/workflow';
import { apiErrors } from '../../domain/catalogue.js';
import { measurementState, unmeasuredRefusal } from '../../domain/measurement.js';
import type { LaunchMemory } from '../../engines/memoryBound.js';
import type { GatewaySteps } from '../../activities/gatewaySteps.js';
import type { HostActivities } from '../../activities/hostActivities.js';
import type { DemandReading, StoreActivities } from '../../activities/storeActivities.js';
import type {
  CommandReceipt,
  Demand,
  DeploymentView,
  HostLedger,
  InstanceRef,
  LedgerEntry,
  SwitchInput,
  SwitchResult,
  SwitchTarget,
  SwitchVictim,
  VictimPlan,
  WakeReference,
} from '../../api/lifecycle.js';
import { HEARTBEAT_TIMEOUT_MS } from '../../api/heartbeat.js';
import { adoptEngines } from './adoption.js';
import { serverStepOptions, taskQueues, WORKFLOW_TASK_TIMEOUT_MS, workflowIds } from '../definitions.js';
import { gpusPerInstance, perGpuBytes } from '../../engines/parallelism.js';
import {
  type Checkpoint,
  bringUpNeedOnEach,
  gpuIndexesOf,
  gpuNeed,
  heldOnEach,
  type Holder,
  holdings,
  keptOnEach,
  hostRamFree,
  launchTier,
  planRoom,
  residueOf,
  planVictims,
  type RoomPolicy,
  type VictimFacts,
} from '../ledger.js';
import { refusal } from '../refusal.js';
import { switchWorkflow } from '../switch.js';
import { switchSummary } from '../switchSummary.js';
import { wakeQuestion } from '../wakeCheck.js';
import { runCommand } from './commands.js';
import { hasWaiting, serveDemands, withDemand, withoutDemandsOf } from './demands.js';
import { IdleTimers } from './idleTimers.js';
import { RunningSwitches } from './running.js';
import { type HostSchedulerInput, sameSettings, type SchedulerSettings, type SchedulerState } from './input.js';
import { type Command, Job } from './jobs.js';
import type { hostScheduler } from './workflow.js';

const DEFAULT_MAX_HISTORY_EVENTS = 10_000;
/** The `patched()` name of a wake begun with its switch (`wakeAhead`); older histories left it to the switch. */
const WAKE_AHEAD = 'wake-ahead-of-switch';
/** The `patched()` name of parked instances stopped to free the residue they hold; older histories never stopped one for room. */
const STOP_PARKED_HOLDERS = 'stop-parked-holders';
/** The `patched()` name of room made the cheapest way (ledger.planRoom); older histories chose first fit, LRU victims. */
const CHEAPEST_ROOM = 'cheapest-room';
/** The `patched()` name of a tie between GPUs broken by when their victims were last used; older histories broke it by sharing. */
const RECENTLY_USED_KEPT = 'recently-used-victims-kept';

/** A deployment whose checkpoint is measured: the only kind the scheduler places or releases. */
export type MeasuredView = DeploymentView & { checkpoint: Checkpoint };

/** An instance holding GPU memory, with its deployment as the store describes it. */
export type GpuHolder = Holder & { deployment: MeasuredView };

/** An instance released in a switch: its model, its instance, how it gives its memory back and every GPU it frees. */
const switchVictim = (
  entry: LedgerEntry,
  deployment: Pick<DeploymentView, 'name'>,
  plan: VictimPlan,
): SwitchVictim => ({
  name: deployment.name,
  instance: entry.instance,
  plan,
  gpuIndexes: entry.gpuIndexes,
});

/** What bringing a model up came to: it waits for memory, it was ready already, or a switch ran. */
export type BringUp = { kind: 'waits' } | { kind: 'ready' } | { kind: 'switched'; result: SwitchResult };

/**
 * The `patched()` name of a parked instance counted at the residue its host measured after the park;
 * older histories counted the checkpoint's.
 */
const MEASURED_RESIDUE = 'measured-parked-residue';

/** The room rule this scheduler's history began under (ledger.RoomPolicy). */
const roomPolicy = (): RoomPolicy =>
  !patched(CHEAPEST_ROOM) ? 'first_fit_lru' : patched(RECENTLY_USED_KEPT) ? 'cheapest' : 'cheapest_by_sharing';

export class HostScheduler {
  readonly hostId: string;
  readonly serverTaskQueue: string;
  readonly settings: SchedulerSettings;
  readonly state: SchedulerState;
  /** The store's rows and the gateway's looks run in this worker's process, inside the workflow task. */
  readonly store = proxyLocalActivities<StoreActivities>(serverStepOptions);
  readonly gateway =
    proxyLocalActivities<Pick<GatewaySteps, 'snapshot' | 'failWaiters' | 'capacityRefused'>>(serverStepOptions);
  private readonly idleTimers = new IdleTimers(this);
  private readonly exitedGeneration: Record<string, number>;
  private readonly jobs: Job[] = [];
  /** Something changed since the last turn found nothing to do. */
  private changed = true;
  /** The switches running now: one at a time, or wakes on GPUs apart beside each other (demands.ts). */
  readonly running = new RunningSwitches();
  /** Settings the server sent that differ from this run's: the next run starts with them. */
  private newSettings: SchedulerSettings | null = null;

  constructor(private readonly input: HostSchedulerInput) {
    this.hostId = input.hostId;
    this.serverTaskQueue = input.serverTaskQueue;
    this.settings = input.settings;
    this.state = input.state ?? { ledger: null, demands: [], lastUsedMs: {}, sinceMs: {} };
    this.exitedGeneration = this.state.exitedGeneration ??= {};
    for (const entry of this.state.ledger?.entries ?? []) entry.gpuIndexes = gpuIndexesOf(entry);
  }

  // ─── What the handlers call ───────────────────────────────────────────────────────────────────

  /** One demand per model and server: each server reports its own waiters, none replaces another's. */
  reportDemand({ lastRequestMs, ...demand }: Demand): void {
    // A request counts as use: the victims chosen next are those asked for least recently. Only
    // this host's models are ever victims here; the others' times would only grow the state (all
    // are kept while the ledger is not read yet: a report may come first).
    const here = (id: string) => this.state.ledger === null || this.entryOf(id) !== undefined;
    for (const [id, ms] of Object.entries(lastRequestMs ?? {}))
      if (here(id) && ms > (this.state.lastUsedMs[id] ?? 0)) this.state.lastUsedMs[id] = ms;
    this.state.demands = withDemand(this.state.demands, demand);
    this.changed = true;
  }

  /** A demand nobody withdraws would keep its model from ever yielding the GPU to another. */
  withdrawDemands(whose: { serverTaskQueue?: string } | undefined): void {
    this.state.demands = withoutDemandsOf(this.state.demands, whose);
    this.changed = true;
  }

  engineExited(instance: InstanceRef): void {
    const entry = this.state.ledger?.entries.find(
      (e) => e.deploymentId === instance.deploymentId && e.instance.generation === instance.generation,
    );
    this.exitedGeneration[instance.deploymentId] = Math.max(
      instance.generation,
      this.exitedGeneration[instance.deploymentId] ?? 0,
    );
    if (entry) this.setEntry(entry, 'stopped', null, { gpuBytes: 0, hostRamBytes: 0 });
    this.changed = true;
  }

  /** Something outside the ledger changed (a measurement ended): the next turn looks again. */
  noteChange(): void {
    this.changed = true;
  }

  configure(sent: SchedulerSettings): void {
    this.newSettings = sameSettings(sent, this.settings) ? null : sent;
    this.changed = true;
  }

  /** Queues `command`; the promise settles once, with its receipts or its refusal (jobs.ts). */
  submit(command: Command): Promise<CommandReceipt[]> {
    const job = new Job(command);
    this.jobs.push(job);
    this.changed = true;
    return job.receipts;
  }

  /** A command on one deployment: its receipt is the only one. */
  async firstReceipt(command: Command): Promise<CommandReceipt> {
    return (await this.submit(command))[0]!;
  }

  /** The ledger as the query answers it: an empty one before the first run has read the host. */
  ledgerNow(): HostLedger {
    return {
      ...(this.state.ledger ?? { hostId: this.hostId, gpus: [], hostRamBytes: 0, entries: [] }),
      runningSwitchId: this.running.first(),
    };
  }

  // ─── The ledger ───────────────────────────────────────────────────────────────────────────────

  get ledger(): HostLedger {
    return this.state.ledger!;
  }

  entryOf(deploymentId: string): LedgerEntry | undefined {
    return this.ledger.entries.find((e) => e.deploymentId === deploymentId);
  }

  /** A new entry for `instance` on `gpuIndexes`, holding nothing until `setEntry` says what it holds. */
  addEntry(deployment: Pick<DeploymentView, 'id' | 'name'>, instance: InstanceRef, gpuIndexes: number[]): LedgerEntry {
    const entry: LedgerEntry = {
      deploymentId: deployment.id,
      name: deployment.name,
      instance,
      state: 'stopped',
      tier: null,
      gpuIndexes,
      gpuBytes: 0,
      hostRamBytes: 0,
    };
    this.ledger.entries.push(entry);
    return entry;
  }

  /** Takes `deploymentId` out of the ledger: it was deleted. */
  forget(deploymentId: string): void {
    this.ledger.entries = this.ledger.entries.filter((e) => e.deploymentId !== deploymentId);
  }

  /** The memory kind of an instance's GPUs: those of one host are alike, so its first GPU's. */
  private memoryKind(gpuIndexes: number[]) {
    return this.ledger.gpus.find((g) => g.index === gpuIndexes[0])?.memoryKind ?? 'discrete';
  }

  /** `residueBytes`: what a parked instance's host measured; any other state forgets it. */
  setEntry(
    entry: LedgerEntry,
    newState: LedgerEntry['state'],
    tier: LedgerEntry['tier'],
    bytes: { gpuBytes: number; hostRamBytes: number },
    residueBytes?: number,
  ): void {
    if (newState !== 'stopped' && (this.exitedGeneration[entry.deploymentId] ?? 0) >= entry.instance.generation) {
      [newState, tier, bytes] = ['stopped', null, { gpuBytes: 0, hostRamBytes: 0 }];
    }
    if (entry.state !== newState) this.state.sinceMs[entry.deploymentId] = Date.now();
    if (newState === 'ready') this.state.lastUsedMs[entry.deploymentId] = Date.now();
    Object.assign(entry, { state: newState, tier, ...bytes });
    if (newState === 'parked' && residueBytes !== undefined) entry.residueBytes = residueBytes;
    else delete entry.residueBytes;
  }

  /** True when `deploymentId` has an instance an operator's stop takes away: ready or parked. */
  readyOrParked(deploymentId: string): boolean {
    const state = this.entryOf(deploymentId)?.state;
    return state === 'ready' || state === 'parked';
  }

  waitingFor(deploymentId: string): boolean {
    return hasWaiting(this.state.demands, deploymentId);
  }

  /** Drops every demand for `deploymentId`: an operator stopped or deleted it. */
  dropDemandsFor(deploymentId: string): void {
    this.state.demands = this.state.demands.filter((d) => d.deploymentId !== deploymentId);
  }

  // ─── Deployments, as the store describes them ─────────────────────────────────────────────────

  readDeployment(deploymentId: string): Promise<DeploymentView> {
    return this.store.describeDeployment({ deploymentId, hostId: this.hostId });
  }

  isMeasured(deployment: DeploymentView): deployment is MeasuredView {
    return measurementState(deployment) === 'measured';
  }

  /** The deployment, refused to an operator while its checkpoint is not measured. */
  async readMeasured(deploymentId: string): Promise<MeasuredView> {
    const deployment = await this.readDeployment(deploymentId);
    if (this.isMeasured(deployment)) return deployment;
    throw refusal(unmeasuredRefusal(deployment.name, deployment)!);
  }

  /** Every instance holding GPU memory, with what decides whether it may yield it. */
  async gpuHolders(): Promise<GpuHolder[]> {
    return Promise.all(
      this.holdingGpu().map(async (entry) => this.holderOf(entry, await this.readDeployment(entry.deploymentId))),
    );
  }

  /**
   * What serving a demand for `deploymentId` reads, in one local step: the model, the GPU holders,
   * the live servers and, when its instance here is parked, its first answer to the wake check.
   */
  async readForDemand(deploymentId: string): Promise<Omit<DemandReading, 'holders'> & { holders: GpuHolder[] }> {
    const holding = this.holdingGpu();
    const entry = this.entryOf(deploymentId);
    const read = await this.store.readForDemand({
      deploymentId,
      hostId: this.hostId,
      holderIds: holding.map((e) => e.deploymentId),
      ...(entry?.state === 'parked' ? { wakeReferenceOf: { instanceIndex: entry.instance.instanceIndex } } : {}),
    });
    return { ...read, holders: holding.map((e, i) => this.holderOf(e, read.holders[i]!)) };
  }

  private holdingGpu(): LedgerEntry[] {
    return this.ledger.entries.filter((e) => e.gpuBytes > 0);
  }

  /** A holding entry, with its deployment as the store describes it. */
  private holderOf(entry: LedgerEntry, view: DeploymentView): GpuHolder {
    const deployment = view as MeasuredView;
    return {
      entry,
      deployment,
      name: deployment.name,
      explicit: deployment.explicit,
      warm: deployment.spec.lifecycle.warm,
      waiting: this.waitingFor(entry.deploymentId),
      lastUsedMs: this.state.lastUsedMs[entry.deploymentId] ?? 0,
      residueBytes: deployment.checkpoint ? residueOf(deployment.checkpoint) : 0,
    };
  }

  // ─── Transitions: every one is a child switch ──────────────────────────────────────────────────

  private async runSwitch(
    target: SwitchTarget | null,
    victims: SwitchVictim[],
    admissionWindowMs: number | null,
    checkpoints: Record<string, Checkpoint>,
    opts: {
      begun?: (switchId: string) => void;
      liveServerQueues?: string[];
      wakeReference?: WakeReference | null;
      /** Host RAM its victims' parked copies take. */
      hostRamBytes?: number;
    } = {},
  ): Promise<SwitchResult> {
    const { settings } = this;
    const switchInput: SwitchInput = {
      switchId: uuid4(),
      hostId: this.hostId,
      serverTaskQueue: this.serverTaskQueue,
      startedAtMs: Date.now(),
      target,
      victims,
      admissionWindowMs,
      checkpoints,
      ...(opts.liveServerQueues ? { liveServerQueues: opts.liveServerQueues } : {}),
      ...(target?.action === 'wake' && opts.wakeReference !== undefined ? { wakeReference: opts.wakeReference } : {}),
      timeouts: { drainMs: settings.drainMs, wakeWindowMs: settings.wakeWindowMs, startMs: settings.startMs },
    };
    this.running.add(switchInput.switchId, target, victims, opts.hostRamBytes ?? 0);
    try {
      if (target?.action === 'wake' && victims.length === 0 && opts.wakeReference !== undefined)
        this.wakeAhead(switchInput, target, opts.wakeReference);
      const child = await startChild(switchWorkflow, {
        workflowId: workflowIds.switch(switchInput.switchId),
        taskQueue: this.serverTaskQueue,
        workflowTaskTimeout: WORKFLOW_TASK_TIMEOUT_MS,
        args: [switchInput],
        staticSummary: switchSummary(switchInput),
      });
      // Told once the switch exists: a caller that follows it at once finds it.
      opts.begun?.(switchInput.switchId);
      const result = await child.result();
      this.applyResult(result, target, checkpoints);
      return result;
    } finally {
      this.running.remove(switchInput.switchId);
    }
  }

  /**
   * Begins `target`'s wake on the host in the workflow task that starts its switch, when no victim
   * has to give memory back first: the engine wakes while Temporal starts the switch's workflow, and
   * the switch's own wake step joins this one (activities/switchWakes.ts) and reports it. Its result
   * and any failure are the switch's to report; here they are dropped.
   */
  private wakeAhead(input: SwitchInput, target: SwitchTarget, first: WakeReference | null): void {
    const { tier } = target;
    // A wake without its tier is the switch's to refuse.
    if (tier === null || !patched(WAKE_AHEAD)) return;
    const host = proxyActivities<Pick<HostActivities, 'wakeEngine'>>({
      taskQueue: taskQueues.host(this.hostId),
      scheduleToCloseTimeout: input.timeouts.wakeWindowMs,
      heartbeatTimeout: HEARTBEAT_TIMEOUT_MS,
      retry: { maximumAttempts: 1 },
      summary: `the wake of switch ${input.switchId}, begun as it starts`,
    });
    const { probe } = wakeQuestion(target, first);
    void host.wakeEngine({ switchId: input.switchId, key: target.instance, tier, probe }).catch(() => undefined);
  }

  /**
   * The ledger after a switch. A ready instance's `tier` is the one its engine was launched for (what
   * it parks at next time), which the switch does not repeat, so it comes from the target.
   */
  private applyResult(
    result: SwitchResult,
    target: SwitchTarget | null,
    checkpoints: Record<string, Checkpoint>,
  ): void {
    for (const victim of result.victims) {
      const entry = this.entryOf(victim.deploymentId);
      if (!entry) continue;
      const measured = victim.residueBytes !== undefined && patched(MEASURED_RESIDUE) ? victim.residueBytes : undefined;
      const c = checkpoints[victim.deploymentId]!;
      this.setEntry(entry, victim.state, victim.tier, holdings(c, victim.state, victim.tier, measured), measured);
    }
    const entry = result.target && this.entryOf(result.target.instance.deploymentId);
    if (!result.target || !target || !entry) return;
    const { instance, state } = result.target;
    const tier = state === 'ready' ? target.tier : result.target.tier;
    entry.instance = instance;
    this.setEntry(entry, state, tier, holdings(checkpoints[instance.deploymentId]!, state, tier));
  }

  /**
   * How `victims`, released together now, give back their memory (ledger.planVictims: one decision
   * for every path), and the host RAM they leave free. A refusal is thrown: the operator hears it.
   */
  private howToReleaseTogether(
    victims: VictimFacts[],
    operator: boolean,
  ): { releases: VictimPlan[]; hostRamFreeBytes: number } {
    const { plans, hostRamFreeBytes } = planVictims({
      victims,
      memoryKind: (gpuIndexes) => this.memoryKind(gpuIndexes),
      hostRamFreeBytes: hostRamFree(this.ledger) - this.running.hostRamBytes(),
      operator,
    });
    const releases = plans.map((plan) => {
      if (plan.kind === 'refused') throw refusal(plan.error);
      return plan;
    });
    return { releases, hostRamFreeBytes };
  }

  /**
   * How `deployment`'s instance alone gives back its memory now: an operator's park or preinitialize, an
   * idle timer.
   */
  howToRelease(deployment: MeasuredView, operator: boolean): VictimPlan {
    return this.howToReleaseTogether([{ entry: this.entryOf(deployment.id)!, deployment }], operator).releases[0]!;
  }

  /**
   * Makes `deployment` ready: wakes its parked instance or starts a new generation, parking
   * `evict`-able holders when it must. Waits when memory is not there yet; throws a refusal for
   * capacity. A start takes `instanceIndex` (the server placed each instance on its host), at a
   * generation past every one the deployment had, here or on another host (where it may have run
   * since). `beforeSwitch` runs once the switch is decided, `begun` as it begins.
   */
  async bringUp(
    deployment: MeasuredView,
    holders: GpuHolder[],
    opts: {
      evict: boolean;
      instanceIndex: number;
      admissionWindowMs: number | null;
      /** The live servers, read with the model (SwitchInput). */
      liveServerQueues?: string[];
      /** A parked instance's first answer, read with the model (SwitchInput). */
      wakeReference?: WakeReference | null;
      beforeSwitch?: () => Promise<void>;
      begun?: (begun: { switchId: string; target: SwitchTarget; victims: SwitchVictim[] }) => void;
    },
  ): Promise<BringUp> {
    const existing = this.entryOf(deployment.id);
    if (existing?.state === 'ready') return { kind: 'ready' };
    const wake = existing?.state === 'parked';
    // Beside a running switch only a wake on GPUs it does not hold goes: a start waits to choose among all.
    if (this.running.size > 0 && (!wake || this.running.holdsAny(existing!.gpuIndexes))) return { kind: 'waits' };
    // A parked engine's process keeps its CUDA devices (CUDA_VISIBLE_DEVICES is read at its start): it wakes on them.
    const gpus = wake ? existing!.gpuIndexes.length : gpusPerInstance(deployment.spec);
    const others = holders.filter(
      (h) => h.entry.deploymentId !== deployment.id && !this.running.holdsAny(h.entry.gpuIndexes),
    );
    const room = planRoom({
      ledger: this.ledger,
      gpuIndexes: wake ? existing!.gpuIndexes : this.ledger.gpus.map((g) => g.index),
      count: gpus,
      need: bringUpNeedOnEach(deployment.checkpoint, gpus, existing),
      holders: others,
      evict: opts.evict,
      parkedMayStop: others.some((h) => h.entry.state === 'parked') && patched(STOP_PARKED_HOLDERS),
      policy: roomPolicy(),
    });
    if (room.kind === 'wait') return { kind: 'waits' };
    if (room.kind === 'refused') throw refusal(apiErrors.insufficientCapacity(deployment.id, room.holders));
    const victims = room.kind === 'evict' ? holders.filter((h) => room.victims.some((r) => r.entry === h.entry)) : [];
    const { gpuIndexes } = room;
    const { releases, hostRamFreeBytes } = this.howToReleaseTogether(victims, false);
    const copiesBytes = hostRamFree(this.ledger) - this.running.hostRamBytes() - hostRamFreeBytes;
    const released = victims.map(({ entry, deployment: victim }, i) => switchVictim(entry, victim, releases[i]!));
    const instance: InstanceRef = wake
      ? existing!.instance
      : {
          deploymentId: deployment.id,
          instanceIndex: opts.instanceIndex,
          generation: Math.max(existing?.instance.generation ?? 0, deployment.generation) + 1,
        };
    const memory = this.launchMemory(deployment, gpuIndexes, victims);
    const target: SwitchTarget = {
      name: deployment.name,
      revision: deployment.revision,
      spec: deployment.spec,
      instance,
      action: wake ? 'wake' : 'start',
      tier: wake
        ? existing!.tier
        : launchTier({ deployment, memoryKind: this.memoryKind(gpuIndexes), hostRamFreeBytes }),
      gpuIndexes,
      memory,
    };
    if (!existing) {
      this.addEntry(deployment, target.instance, gpuIndexes);
    } else if (!wake) {
      existing.gpuIndexes = gpuIndexes;
    }
    const checkpoints = Object.fromEntries([
      [deployment.id, deployment.checkpoint],
      ...victims.map((h) => [h.entry.deploymentId, h.deployment.checkpoint]),
    ]);
    await opts.beforeSwitch?.();
    const begun = opts.begun && ((switchId: string) => opts.begun!({ switchId, target, victims: released }));
    // A victim ready elsewhere has no window (spec): its requests go there meanwhile; a parked one serves none.
    const windowed = victims.some((v) => v.entry.state === 'ready' && !v.deployment.readyElsewhere);
    const result = await this.runSwitch(target, released, windowed ? opts.admissionWindowMs : null, checkpoints, {
      begun,
      liveServerQueues: opts.liveServerQueues,
      wakeReference: opts.wakeReference,
      hostRamBytes: copiesBytes,
    });
    return { kind: 'switched', result };
  }

  /**
   * One of the instance's GPUs as its engine's memory bound is computed: the smallest of them, the
   * model's reservation on each, and the most the others hold on any of them once the victims are
   * released (a victim parked `kv_only` keeps its weights, so SGLang finds less free and sizes a
   * smaller KV cache, never a larger one).
   */
  private launchMemory(deployment: MeasuredView, gpuIndexes: number[], victims: Holder[]): LaunchMemory {
    const leaving = new Set(victims.map((h) => h.entry.deploymentId));
    const others = this.ledger.entries.filter((e) => e.deploymentId !== deployment.id && !leaving.has(e.deploymentId));
    const othersOn = (gpuIndex: number) =>
      others.filter((e) => e.gpuIndexes.includes(gpuIndex)).reduce((sum, e) => sum + heldOnEach(e), 0) +
      victims.filter((h) => h.entry.gpuIndexes.includes(gpuIndex)).reduce((sum, h) => sum + keptOnEach(h), 0);
    const sizeOf = (gpuIndex: number) => this.ledger.gpus.find((g) => g.index === gpuIndex)?.memoryBytes ?? 0;
    return {
      gpuBytes: Math.min(...gpuIndexes.map(sizeOf)),
      reservedBytes: perGpuBytes(gpuNeed(deployment.checkpoint), gpuIndexes.length),
      othersBytes: Math.max(...gpuIndexes.map(othersOn)),
      maxModelLen: deployment.checkpoint.maxModelLen ?? null,
    };
  }

  /** Takes `deployment`'s ready or parked instance away, with no target: an operator's park or stop, an idle timer. */
  takeAway(deployment: MeasuredView, plan: VictimPlan, begun?: (switchId: string) => void): Promise<SwitchResult> {
    const entry = this.entryOf(deployment.id)!;
    return this.runSwitch(
      null,
      [switchVictim(entry, deployment, plan)],
      null,
      { [deployment.id]: deployment.checkpoint },
      { begun },
    );
  }

  /** Stops every instance in `entries` in one switch: a host drain. */
  stopAll(entries: LedgerEntry[], views: MeasuredView[], plan: VictimPlan): Promise<SwitchResult> {
    const victims = entries.map((entry, i) => switchVictim(entry, views[i]!, plan));
    return this.runSwitch(null, victims, null, Object.fromEntries(views.map((v) => [v.id, v.checkpoint])));
  }

  receipt(deploymentId: string, result?: SwitchResult): CommandReceipt {
    return {
      deploymentId,
      ...(result ? { switchId: result.switchId } : {}),
      victims: (result?.victims ?? [])
        .filter((x) => x.deploymentId !== deploymentId)
        .map(({ deploymentId: d, instanceIndex, released, gpuIndexes }) => ({
          deploymentId: d,
          instanceIndex,
          released,
          gpuIndexes,
        })),
      state: this.entryOf(deploymentId)?.state ?? 'stopped',
    };
  }

  /** The refusal for a command whose switch did not bring its target up, with the error its waiters got. */
  targetFailed(result: SwitchResult, deploymentId: string) {
    return result.error && this.entryOf(deploymentId)?.state !== 'ready' ? refusal(result.error) : undefined;
  }

  // ─── The loop ─────────────────────────────────────────────────────────────────────────────────

  /** Reads the host, then takes turns for as long as the run lasts; continues as new between transitions. */
  async run(): Promise<never> {
    if (!this.state.ledger) {
      const host = await this.store.describeHost({ hostId: this.hostId });
      this.state.ledger = {
        hostId: this.hostId,
        gpus: host.gpus.map((g) => ({ index: g.index, memoryBytes: g.memoryBytes, memoryKind: g.memoryKind })),
        // Unknown host RAM holds no copies: models then park deep.
        hostRamBytes: host.hostRamBytes ?? 0,
        entries: [],
        runningSwitchId: null,
      };
      await adoptEngines(this);
    }
    for (;;) {
      // A timer waits for the running switches, which tell their end.
      const timeout = this.running.size > 0 ? undefined : this.idleTimers.msToNext();
      await condition(() => this.changed, timeout);
      this.changed = false;
      if (await this.takeTurn()) this.changed = true;
      if ((this.historyFull() || this.newSettings !== null) && this.jobs.length === 0 && this.running.size === 0) {
        // Between transitions, once every update has answered (a command that comes meanwhile runs
        // first); demands that arrive meanwhile are in `state`, which the next run starts from.
        await condition(() => allHandlersFinished() || this.jobs.length > 0);
        if (this.jobs.length === 0)
          await continueAsNew<typeof hostScheduler>({
            ...this.input,
            settings: this.newSettings ?? this.settings,
            state: this.state,
          });
      }
    }
  }

  private historyFull(): boolean {
    const maxHistory = this.settings.maxHistoryEvents ?? DEFAULT_MAX_HISTORY_EVENTS;
    return workflowInfo().continueAsNewSuggested || workflowInfo().historyLength > maxHistory;
  }

  /**
   * One turn: a due idle timer, else the oldest command (each runs or is refused, none waits), else
   * the longest-waiting model; true when something ran.
   */
  private async takeTurn(): Promise<boolean> {
    // Beside running switches only wakes on other GPUs go; a command or a timer waits for them to end.
    if (this.running.size > 0) return this.jobs.length === 0 && serveDemands(this);
    if (await this.idleTimers.runDue()) return true;
    const job = this.jobs[0];
    if (!job) return serveDemands(this);
    try {
      // A command that answered as its switch began ends with nothing more to say (jobs.ts).
      const receipts = await runCommand(this, job.command, (early) => job.answer(early));
      if (receipts) job.answer(receipts);
    } catch (e) {
      job.fail(e);
    }
    this.jobs.shift();
    return true;
  }
}
