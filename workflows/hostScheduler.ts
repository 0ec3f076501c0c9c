/**
 * The host scheduler: one long-lived workflow per host (`host-scheduler/<hostId>`), the only thing
 * that changes what that host's GPUs hold. It keeps the host's ledger, takes demands from the gateway
 * (signals) and commands from the management API (updates answered with the receipt), and runs one
 * transition at a time, each a child switch workflow. It continues as new before its history grows
 * large, carrying its ledger and the demands it still holds as plain objects.
 */
import {
  allHandlersFinished,
  condition,
  continueAsNew,
  log,
  proxyLocalActivities,
  setHandler,
  startChild,
  uuid4,
  workflowInfo,
} from '@temporalio/workflow';
import { apiErrors } from '../domain/catalogue.js';
import { measurementState, unmeasuredRefusal } from '../domain/measurement.js';
import { releasingLine } from '../engines/rules.js';
import type { LaunchMemory } from '../engines/memoryBound.js';
import type { GatewaySteps } from '../activities/gatewaySteps.js';
import type { StoreActivities } from '../activities/storeActivities.js';
import { queries, serverStepOptions, signals, updates, WORKFLOW_TASK_TIMEOUT_MS, workflowIds } from './definitions.js';
import type {
  CommandReceipt,
  Demand,
  DeploymentView,
  HostLedger,
  LedgerEntry,
  Release,
  SwitchInput,
  SwitchResult,
  SwitchTarget,
  SwitchVictim,
} from '../api/lifecycle.js';
import {
  byLongestWait,
  type Checkpoint,
  gpuNeed,
  type Holder,
  holdings,
  hostRamFree,
  launchTier,
  planRoom,
  releasePlans,
  type VictimFacts,
} from './ledger.js';
import { gatewayOn, serverGone } from './everyGateway.js';
import { refusal, refusedWith } from './refusal.js';
import { switchWorkflow } from './switch.js';
import { switchSummary } from './switchSummary.js';

export interface SchedulerSettings {
  /** The host's `resource_policy.queue.admission_window`, for request-driven switches. */
  admissionWindowMs: number;
  drainMs: number;
  wakeWindowMs: number;
  /** How long a start may take to become ready. */
  startMs: number;
  /** `lifecycle_defaults.ready_idle_timeout`; null: off. */
  readyIdleMs: number | null;
  /** `lifecycle_defaults.parked_idle_timeout`; null: off. */
  parkedIdleMs: number | null;
  /** Continues as new past this many history events (Temporal's own suggestion also counts). */
  maxHistoryEvents?: number;
}

/** What one run hands the next: plain objects only (a Map would not survive the JSON). */
export interface SchedulerState {
  /** Null until the first run has read the host's GPUs and host RAM. */
  ledger: HostLedger | null;
  /** The latest demand of each deployment with waiting requests. */
  demands: Demand[];
  /** Per deployment: when it last became ready or was seen serving (the least recently used yields first). */
  lastUsedMs: Record<string, number>;
  /** Per deployment: when its instance entered its current state (the idle timers count from it). */
  sinceMs: Record<string, number>;
  /**
   * Per deployment: the newest generation whose engine exited without being asked. A switch that
   * finishes after the exit was reported must not list that generation as serving again.
   */
  exitedGeneration?: Record<string, number>;
}

export interface HostSchedulerInput {
  hostId: string;
  serverTaskQueue: string;
  settings: SchedulerSettings;
  state?: SchedulerState;
}

const DEFAULT_MAX_HISTORY_EVENTS = 10_000;

type Command =
  | { kind: 'start'; deploymentId: string; evict: boolean }
  | { kind: 'stop' | 'park' | 'preinitialize' | 'delete'; deploymentId: string }
  | { kind: 'drainHost' };

/** A command waiting its turn; its update handler awaits the promise these settle. */
interface Job {
  command: Command;
  resolve: (receipt: CommandReceipt[]) => void;
  reject: (failure: unknown) => void;
}

/** A model that cannot come up yet: the memory it needs is not there (a waiting demand stays waiting). */
const WAIT = Symbol('wait');

type Viewed = DeploymentView & { checkpoint: Checkpoint };

export async function hostScheduler(input: HostSchedulerInput): Promise<never> {
  const { hostId, serverTaskQueue, settings } = input;
  const state: SchedulerState = input.state ?? { ledger: null, demands: [], lastUsedMs: {}, sinceMs: {} };
  const exited = (state.exitedGeneration ??= {});
  const jobs: Job[] = [];
  /** Something changed since the last pass found nothing to do. */
  let dirty = true;
  let runningSwitchId: string | null = null;

  // The store's rows and the gateway's looks run in this worker's process, inside the workflow task.
  const store = proxyLocalActivities<StoreActivities>(serverStepOptions);
  const gateway = proxyLocalActivities<Pick<GatewaySteps, 'snapshot' | 'failWaiters' | 'capacityRefused'>>(serverStepOptions);
  /** `demand`'s requests answered on the server that holds them; one gone took them with it. */
  const answerOn = <K extends 'failWaiters' | 'capacityRefused'>(demand: Demand, step: K, input: Parameters<GatewaySteps[K]>[0]) => {
    const steps = demand.serverTaskQueue === undefined ? gateway : gatewayOn(demand.serverTaskQueue);
    return (steps[step] as (i: typeof input) => Promise<unknown>)(input).catch(serverGone(demand.serverTaskQueue ?? serverTaskQueue, step));
  };
  /** When each deployment last saw a request, on any server that shares the store. */
  async function lastActivity(): Promise<Record<string, number>> {
    const queues = await store.liveServerQueues();
    const seen = queues.length === 0 ? [await gateway.snapshot()] : await Promise.all(queues.map((q) => gatewayOn(q).snapshot().catch(serverGone(q, 'snapshot'))));
    const latest: Record<string, number> = {};
    for (const { lastActivityMs } of seen.filter((x) => x !== null)) {
      for (const [id, ms] of Object.entries(lastActivityMs)) latest[id] = Math.max(latest[id] ?? 0, ms);
    }
    return latest;
  }

  // ─── Handlers: all set before the first await, so no signal or update is dropped ──────────────

  // One demand per model and server: each server reports its own waiters, none replaces another's.
  setHandler(signals.demand, (demand) => {
    state.demands = state.demands.filter((d) => d.deploymentId !== demand.deploymentId || d.serverTaskQueue !== demand.serverTaskQueue);
    if (demand.waiting > 0) state.demands.push(demand);
    dirty = true;
  });
  // A demand nobody withdraws would keep its model from ever yielding the GPU to another.
  setHandler(signals.gatewayRestarted, (whose) => {
    state.demands = whose?.serverTaskQueue === undefined ? [] : state.demands.filter((d) => d.serverTaskQueue !== whose.serverTaskQueue);
    dirty = true;
  });
  setHandler(signals.engineExited, (instance) => {
    const entry = state.ledger?.entries.find((e) => e.deploymentId === instance.deploymentId && e.instance.generation === instance.generation);
    exited[instance.deploymentId] = Math.max(instance.generation, exited[instance.deploymentId] ?? 0);
    if (entry) setEntry(entry, 'stopped', null, { gpuBytes: 0, hostRamBytes: 0 });
    dirty = true;
  });
  setHandler(signals.measurementEnded, () => {
    dirty = true;
  });
  /** Settings the server sent that differ from this run's: the next run starts with them. */
  let newSettings: SchedulerSettings | null = null;
  setHandler(signals.configure, (sent) => {
    newSettings = sameSettings(sent, settings) ? null : sent;
    dirty = true;
  });
  const enqueue = (command: Command) =>
    new Promise<CommandReceipt[]>((resolve, reject) => {
      jobs.push({ command, resolve, reject });
      dirty = true;
    });
  const one = async (command: Command) => (await enqueue(command))[0]!;
  setHandler(updates.start, ({ deploymentId, evict }) => one({ kind: 'start', deploymentId, evict }));
  setHandler(updates.stop, ({ deploymentId }) => one({ kind: 'stop', deploymentId }));
  setHandler(updates.park, ({ deploymentId }) => one({ kind: 'park', deploymentId }));
  setHandler(updates.preinitialize, ({ deploymentId }) => one({ kind: 'preinitialize', deploymentId }));
  setHandler(updates.delete, ({ deploymentId }) => one({ kind: 'delete', deploymentId }));
  setHandler(updates.drainHost, () => enqueue({ kind: 'drainHost' }));
  setHandler(queries.ledger, () => ({ ...(state.ledger ?? { hostId, gpus: [], hostRamBytes: 0, entries: [] }), runningSwitchId }));

  // ─── The ledger ───────────────────────────────────────────────────────────────────────────────

  if (!state.ledger) {
    const host = await store.describeHost({ hostId });
    state.ledger = {
      hostId,
      gpus: host.gpus.map((g) => ({ index: g.index, memoryBytes: g.memoryBytes, memoryKind: g.memoryKind })),
      // Unknown host RAM holds no copies: models then park deep.
      hostRamBytes: host.hostRamBytes ?? 0,
      entries: [],
      runningSwitchId: null,
    };
  }
  const ledger = (): HostLedger => state.ledger!;
  const entryOf = (deploymentId: string) => ledger().entries.find((e) => e.deploymentId === deploymentId);
  const memoryKind = (gpuIndex: number) => ledger().gpus.find((g) => g.index === gpuIndex)?.memoryKind ?? 'discrete';

  function setEntry(entry: LedgerEntry, s: LedgerEntry['state'], tier: LedgerEntry['tier'], bytes: { gpuBytes: number; hostRamBytes: number }) {
    if (s !== 'stopped' && (exited[entry.deploymentId] ?? 0) >= entry.instance.generation) {
      [s, tier, bytes] = ['stopped', null, { gpuBytes: 0, hostRamBytes: 0 }];
    }
    if (entry.state !== s) state.sinceMs[entry.deploymentId] = Date.now();
    if (s === 'ready') state.lastUsedMs[entry.deploymentId] = Date.now();
    Object.assign(entry, { state: s, tier, ...bytes });
  }

  const view = (deploymentId: string) => store.describeDeployment({ deploymentId, hostId });
  const measured = (v: DeploymentView): v is Viewed => measurementState(v) === 'measured';
  const viewMeasured = async (deploymentId: string): Promise<Viewed> => {
    const v = await view(deploymentId);
    if (measured(v)) return v;
    throw refusal(unmeasuredRefusal(v.name, v)!);
  };
  const waitingFor = (deploymentId: string) => state.demands.some((d) => d.deploymentId === deploymentId && d.waiting > 0);

  /** The names of the models other than `deploymentId` holding GPU memory: what a refused start or preinitialize waits for. */
  const othersHolding = (all: readonly Holder[], deploymentId: string) => all.filter((h) => h.entry.deploymentId !== deploymentId).map((h) => h.name);

  /** Every instance holding GPU memory, with what decides whether it may yield it. */
  async function holders(): Promise<Array<Holder & { view: Viewed }>> {
    const held = ledger().entries.filter((e) => e.gpuBytes > 0);
    return Promise.all(
      held.map(async (entry) => {
        const v = (await view(entry.deploymentId)) as Viewed;
        return {
          entry,
          view: v,
          name: v.name,
          explicit: v.explicit,
          warm: v.spec.lifecycle.warm,
          waiting: waitingFor(entry.deploymentId),
          lastUsedMs: state.lastUsedMs[entry.deploymentId] ?? 0,
        };
      }),
    );
  }

  // ─── Transitions: every one is a child switch ──────────────────────────────────────────────────

  async function runSwitch(
    target: SwitchTarget | null,
    victims: SwitchVictim[],
    admissionWindowMs: number | null,
    checkpoints: Record<string, Checkpoint>,
    begun?: (switchId: string) => void,
  ) {
    const switchInput: SwitchInput = {
      switchId: uuid4(),
      hostId,
      serverTaskQueue,
      startedAtMs: Date.now(),
      target,
      victims,
      admissionWindowMs,
      checkpoints,
      timeouts: { drainMs: settings.drainMs, wakeWindowMs: settings.wakeWindowMs, startMs: settings.startMs },
    };
    runningSwitchId = switchInput.switchId;
    try {
      const child = await startChild(switchWorkflow, {
        workflowId: workflowIds.switch(switchInput.switchId),
        taskQueue: serverTaskQueue,
        workflowTaskTimeout: WORKFLOW_TASK_TIMEOUT_MS,
        args: [switchInput],
        staticSummary: switchSummary(switchInput),
      });
      // Told once the switch exists: a caller that follows it at once finds it.
      begun?.(switchInput.switchId);
      const result = await child.result();
      applyResult(result, target, checkpoints);
      return result;
    } finally {
      runningSwitchId = null;
    }
  }

  /**
   * The ledger after a switch. A ready instance's `tier` is the one its engine was launched for (what
   * it parks at next time), which the switch does not repeat, so it comes from the target.
   */
  function applyResult(result: SwitchResult, target: SwitchTarget | null, checkpoints: Record<string, Checkpoint>) {
    for (const v of result.victims) {
      const entry = entryOf(v.deploymentId);
      if (entry) setEntry(entry, v.state, v.tier, holdings(checkpoints[v.deploymentId]!, v.state, v.tier));
    }
    const entry = result.target && entryOf(result.target.instance.deploymentId);
    if (!result.target || !target || !entry) return;
    const { instance, state: s } = result.target;
    const tier = s === 'ready' ? target.tier : result.target.tier;
    entry.instance = instance;
    setEntry(entry, s, tier, holdings(checkpoints[instance.deploymentId]!, s, tier));
  }

  /**
   * How `victims`, released together now, give back their memory (ledger.releasePlans: one decision
   * for every path), and the host RAM they leave free. A refusal is thrown: the operator hears it.
   */
  function releasesOf(victims: VictimFacts[], operator: boolean): { releases: Release[]; hostRamFreeBytes: number } {
    const { plans, hostRamFreeBytes } = releasePlans({ victims, memoryKind, hostRamFreeBytes: hostRamFree(ledger()), operator });
    const releases = plans.map((plan) => {
      if (plan.kind === 'refused') throw refusal(plan.error);
      return plan;
    });
    return { releases, hostRamFreeBytes };
  }

  /**
   * Makes `v` ready: wakes its parked instance or starts a new generation, parking `evict`-able
   * holders when it must. WAIT when memory is not there yet; throws a refusal for capacity.
   * `beforeSwitch` runs once the switch is decided, `begun` as it begins.
   */
  async function bringUp(
    v: Viewed,
    all: Array<Holder & { view: Viewed }>,
    opts: {
      evict: boolean;
      admissionWindowMs: number | null;
      beforeSwitch?: () => Promise<void>;
      begun?: (begun: { switchId: string; target: SwitchTarget; victims: SwitchVictim[] }) => void;
    },
  ): Promise<{ result?: SwitchResult } | typeof WAIT> {
    const existing = entryOf(v.id);
    if (existing?.state === 'ready') return {};
    const wake = existing?.state === 'parked';
    const room = planRoom({
      ledger: ledger(),
      gpuIndexes: wake ? [existing!.gpuIndex] : ledger().gpus.map((g) => g.index),
      need: gpuNeed(v.checkpoint) - (existing?.gpuBytes ?? 0),
      holders: all.filter((h) => h.entry.deploymentId !== v.id),
      evict: opts.evict,
    });
    if (room.kind === 'wait') return WAIT;
    if (room.kind === 'refused') throw refusal(apiErrors.insufficientCapacity(v.id, room.holders));
    const victims = room.kind === 'evict' ? all.filter((h) => room.victims.some((r) => r.entry === h.entry)) : [];
    const gpuIndex = room.gpuIndex;
    const { releases, hostRamFreeBytes } = releasesOf(victims, false);
    const released: SwitchVictim[] = victims.map(({ entry, view: h }, i) => ({ name: h.name, instance: entry.instance, release: releases[i]! }));
    const memory = launchMemory(v, gpuIndex, victims);
    const target: SwitchTarget = wake
      ? { name: v.name, revision: v.revision, spec: v.spec, instance: existing!.instance, action: 'wake', tier: existing!.tier, gpuIndex, memory }
      : {
          name: v.name,
          revision: v.revision,
          spec: v.spec,
          // Past every generation of it, here or on another host (where it may have run since).
          instance: { deploymentId: v.id, instanceIndex: 0, generation: Math.max(existing?.instance.generation ?? 0, v.generation) + 1 },
          action: 'start',
          tier: launchTier({ view: v, memoryKind: memoryKind(gpuIndex), hostRamFreeBytes }),
          gpuIndex,
          memory,
        };
    if (!existing) {
      ledger().entries.push({ deploymentId: v.id, name: v.name, instance: target.instance, state: 'stopped', tier: null, gpuIndex, gpuBytes: 0, hostRamBytes: 0 });
    } else if (!wake) {
      existing.gpuIndex = gpuIndex;
    }
    const checkpoints = Object.fromEntries([[v.id, v.checkpoint], ...victims.map((h) => [h.entry.deploymentId, h.view.checkpoint])]);
    await opts.beforeSwitch?.();
    const begun = opts.begun && ((switchId: string) => opts.begun!({ switchId, target, victims: released }));
    // A victim ready elsewhere has no window; on one host there is no elsewhere, so the window applies.
    const result = await runSwitch(target, released, victims.length > 0 ? opts.admissionWindowMs : null, checkpoints, begun);
    return { result };
  }

  /**
   * The GPU's size, the model's reservation and what the others on that GPU hold once the victims
   * are released (a victim parked `kv_only` keeps its weights, so SGLang finds less free and sizes a
   * smaller KV cache, never a larger one).
   */
  function launchMemory(v: Viewed, gpuIndex: number, victims: Holder[]): LaunchMemory {
    const leaving = new Set(victims.map((h) => h.entry.deploymentId));
    const othersBytes = ledger()
      .entries.filter((e) => e.gpuIndex === gpuIndex && e.deploymentId !== v.id && !leaving.has(e.deploymentId))
      .reduce((sum, e) => sum + e.gpuBytes, 0);
    const gpuBytes = ledger().gpus.find((g) => g.index === gpuIndex)?.memoryBytes ?? 0;
    return { gpuBytes, reservedBytes: gpuNeed(v.checkpoint), othersBytes };
  }

  /** Takes `v`'s ready or parked instance away, with no target: an operator's park or stop, an idle timer. */
  function release(v: Viewed, how: Release, begun?: (switchId: string) => void) {
    const entry = entryOf(v.id)!;
    return runSwitch(null, [{ name: v.name, instance: entry.instance, release: how }], null, { [v.id]: v.checkpoint }, begun);
  }
  const operatorStop: Release = { kind: 'stop', reason: 'operator' };

  /** How `v`'s instance alone gives back its memory now: an operator's park or preinitialize, an idle timer. */
  const releaseOf = (v: Viewed, operator: boolean): Release => releasesOf([{ entry: entryOf(v.id)!, view: v }], operator).releases[0]!;

  const receipt = (deploymentId: string, result?: SwitchResult): CommandReceipt => ({
    deploymentId,
    ...(result ? { switchId: result.switchId } : {}),
    victims: (result?.victims ?? []).filter((x) => x.deploymentId !== deploymentId).map(({ deploymentId: d, instanceIndex, released }) => ({ deploymentId: d, instanceIndex, released })),
    state: entryOf(deploymentId)?.state ?? 'stopped',
  });

  /** Fails a command whose switch did not bring its target up, with the error its waiters got. */
  const targetFailed = (result: SwitchResult | undefined, deploymentId: string) =>
    result?.error && entryOf(deploymentId)?.state !== 'ready' ? refusal(result.error) : undefined;

  const held = (deploymentId: string) => {
    const s = entryOf(deploymentId)?.state;
    return s === 'ready' || s === 'parked';
  };

  // ─── Commands ─────────────────────────────────────────────────────────────────────────────────

  /** `answer` settles the command's update before the command has finished (a park runs in the background). */
  async function runCommand(command: Command, answer: (receipts: CommandReceipt[]) => void): Promise<CommandReceipt[]> {
    if (command.kind === 'drainHost') return drainHost();
    const { deploymentId } = command;
    switch (command.kind) {
      case 'start': {
        const [v, all] = await Promise.all([viewMeasured(deploymentId), holders()]);
        // Un-stopped before its switch begins: a request sent once the switch has ended finds it startable.
        const unstop = () => store.setOperatorStopped({ deploymentId: v.id, stopped: false });
        // The receipt answers as the switch begins, naming it and its victims, after every refusal
        // was decided: whatever the start does, its caller has seen it begin, and `--wait` follows it.
        const up = await bringUp(v, all, {
          evict: command.evict,
          admissionWindowMs: null,
          beforeSwitch: unstop,
          begun: ({ switchId, target, victims }) =>
            answer([
              {
                deploymentId: v.id,
                switchId,
                victims: victims.map(({ instance, release: how }) => ({ deploymentId: instance.deploymentId, instanceIndex: instance.instanceIndex, released: releasingLine(how) })),
                state: target.action === 'wake' ? 'waking' : 'starting',
              },
            ]),
        });
        // A start does not wait here for memory: it would act later for a caller that may be gone.
        // It is refused, retryably; `start --wait` asks again until the memory is free.
        if (up === WAIT) throw refusal((command.evict ? apiErrors.memoryBusy : apiErrors.memoryHeld)(v.id, othersHolding(all, v.id)));
        if (!up.result) await unstop();
        const failed = targetFailed(up.result, v.id);
        if (failed) throw failed;
        return [receipt(v.id, up.result)];
      }
      case 'preinitialize': {
        const [v, all] = await Promise.all([viewMeasured(deploymentId), holders()]);
        if (entryOf(v.id)?.state === 'parked') return [receipt(v.id)];
        const up = await bringUp(v, all, { evict: false, admissionWindowMs: null });
        // Refused, retryably, as a start is: queued, it would act later for a caller that may be gone.
        if (up === WAIT) throw refusal(apiErrors.memoryHeldToPreinitialize(v.id, othersHolding(all, v.id)));
        const failed = targetFailed(up.result, v.id);
        if (failed) throw failed;
        return [receipt(v.id, await release(v, releaseOf(v, true)))];
      }
      case 'park': {
        const v = await viewMeasured(deploymentId);
        if (entryOf(v.id)?.state !== 'ready') return [receipt(v.id)];
        // Parking runs in the background (spec, "Park and wake"): the receipt answers once the
        // switch has begun, after every refusal was decided, and names it.
        const how = releaseOf(v, true);
        const state = how.kind === 'park' ? 'parking' : 'stopping';
        return [receipt(v.id, await release(v, how, (switchId) => answer([{ deploymentId: v.id, switchId, victims: [], state }])))];
      }
      case 'stop':
      case 'delete': {
        const v = await view(deploymentId);
        const result = held(v.id) ? await release(v as Viewed, operatorStop) : undefined;
        state.demands = state.demands.filter((d) => d.deploymentId !== v.id);
        if (command.kind === 'stop') {
          await store.setOperatorStopped({ deploymentId: v.id, stopped: true });
          return [receipt(v.id, result)];
        }
        const r = receipt(v.id, result);
        await store.deleteDeployment({ deploymentId: v.id });
        ledger().entries = ledger().entries.filter((e) => e.deploymentId !== v.id);
        return [{ ...r, state: 'stopped' }];
      }
    }
  }

  /** A host drain stops every instance on the host, in one switch. */
  async function drainHost(): Promise<CommandReceipt[]> {
    const entries = ledger().entries.filter((e) => held(e.deploymentId));
    if (entries.length === 0) return [];
    const views = (await Promise.all(entries.map((e) => view(e.deploymentId)))) as Viewed[];
    const victims = entries.map((entry, i) => ({ name: views[i]!.name, instance: entry.instance, release: operatorStop }));
    const result = await runSwitch(null, victims, null, Object.fromEntries(views.map((v) => [v.id, v.checkpoint])));
    return entries.map((e) => ({ ...receipt(e.deploymentId, result), victims: [] }));
  }

  // ─── Demands ──────────────────────────────────────────────────────────────────────────────────

  /** Serves the longest-waiting model that can go now; true when a switch ran. */
  async function serveDemands(): Promise<boolean> {
    for (const demand of byLongestWait(state.demands)) {
      const drop = () => (state.demands = state.demands.filter((d) => d !== demand));
      // A ready model's requests wait for a free slot, not for a switch; they keep it from being a victim.
      if (entryOf(demand.deploymentId)?.state === 'ready') continue;
      // The holders are read with the model, not after it: a request waits for every round trip here.
      const [v, all] = await Promise.all([view(demand.deploymentId), holders()]);
      // Requests never start or wake an explicit model or one an operator stopped: the gateway answers 409.
      if (v.explicit || v.operatorStopped) {
        drop();
        continue;
      }
      // Its requests wait for the measurement, which signals `measurementEnded`; if it failed, a start
      // cannot help, and they are answered with why.
      if (!measured(v)) {
        if (measurementState(v) === 'failed') {
          const error = apiErrors.startFailed(v.id, `its checkpoint could not be measured: ${v.measureFailure}`);
          await answerOn(demand, 'failWaiters', { switchId: workflowIds.measure(v.id, v.revision), deploymentId: v.id, error });
          drop();
        }
        continue;
      }
      try {
        const up = await bringUp(v, all, { evict: true, admissionWindowMs: settings.admissionWindowMs });
        if (up !== WAIT) return true;
      } catch (e) {
        // Only models kept loaded (explicit, warm) hold the memory: waiting would not free it, so the
        // requests are refused at once, unless another host can serve them. Checked on every pass,
        // so requests that were waiting when a holder became explicit or warm are refused too.
        const error = refusedWith(e);
        if (error?.code !== 'insufficient_capacity') {
          log.warn('demand not served', { deploymentId: v.id, error: String(e) });
          continue;
        }
        await answerOn(demand, 'capacityRefused', { hostId, deploymentId: v.id, error });
        drop();
      }
    }
    return false;
  }

  // ─── Idle timers ──────────────────────────────────────────────────────────────────────────────

  /** When each idle timer runs out, for the entries it applies to (the explicit and warm are skipped when it fires). */
  function idleDeadlines(): Array<{ entry: LedgerEntry; atMs: number }> {
    return ledger().entries.flatMap((entry) => {
      const idleMs = entry.state === 'ready' ? settings.readyIdleMs : entry.state === 'parked' ? settings.parkedIdleMs : null;
      if (idleMs === null || waitingFor(entry.deploymentId)) return [];
      const since = Math.max(state.sinceMs[entry.deploymentId] ?? 0, entry.state === 'ready' ? (state.lastUsedMs[entry.deploymentId] ?? 0) : 0);
      return [{ entry, atMs: since + idleMs }];
    });
  }
  /** Entries whose timer fired but that an operator's policy keeps: not looked at again until they change state. */
  const exempt = new Set<string>();

  async function runIdleTimers(): Promise<boolean> {
    const due = idleDeadlines().filter((d) => d.atMs <= Date.now() && !exempt.has(exemptKey(d.entry)));
    if (due.length === 0) return false;
    const lastActivityMs = due.some((d) => d.entry.state === 'ready') ? await lastActivity() : {};
    for (const { entry } of due) {
      const v = (await view(entry.deploymentId)) as Viewed;
      if (v.explicit || v.spec.lifecycle.warm) {
        exempt.add(exemptKey(entry));
        continue;
      }
      if (entry.state === 'ready') {
        // Requests count as use: the timer starts again from the last one the gateway saw.
        const seen = lastActivityMs[entry.deploymentId] ?? 0;
        if (seen > (state.lastUsedMs[entry.deploymentId] ?? 0)) {
          state.lastUsedMs[entry.deploymentId] = seen;
          if (seen + settings.readyIdleMs! > Date.now()) continue;
        }
      }
      try {
        // A parked model's timer stops it; a ready one's releases it as a switch would.
        await release(v, entry.state === 'parked' ? { kind: 'stop', reason: 'idle' } : releaseOf(v, false));
      } catch (e) {
        // A timer whose release failed is not retried until the instance changes state: the
        // scheduler must outlive it, and a failing release must not run again at once, forever.
        log.warn('idle release failed', { deploymentId: v.id, error: String(e) });
        exempt.add(exemptKey(entry));
      }
      return true;
    }
    return false;
  }
  const exemptKey = (e: LedgerEntry) => `${e.deploymentId}/${e.instance.generation}/${e.state}`;

  // ─── The loop ─────────────────────────────────────────────────────────────────────────────────

  const maxHistory = settings.maxHistoryEvents ?? DEFAULT_MAX_HISTORY_EVENTS;
  const historyFull = () => workflowInfo().continueAsNewSuggested || workflowInfo().historyLength > maxHistory;

  /**
   * One pass: the oldest command (each runs or is refused, none waits), else the longest-waiting
   * model; true when something ran.
   */
  async function pass(): Promise<boolean> {
    if (await runIdleTimers()) return true;
    const job = jobs[0];
    if (!job) return serveDemands();
    try {
      job.resolve(await runCommand(job.command, job.resolve));
    } catch (e) {
      job.reject(e);
    }
    jobs.shift();
    return true;
  }

  for (;;) {
    const next = idleDeadlines().filter((d) => !exempt.has(exemptKey(d.entry))).map((d) => d.atMs);
    const timeout = next.length > 0 ? Math.max(1, Math.min(...next) - Date.now()) : undefined;
    await condition(() => dirty, timeout);
    dirty = false;
    if (await pass()) dirty = true;
    if ((historyFull() || newSettings !== null) && jobs.length === 0) {
      // Between transitions, once every update has answered (a command that comes meanwhile runs
      // first); demands that arrive meanwhile are in `state`, which the next run starts from.
      await condition(() => allHandlersFinished() || jobs.length > 0);
      if (jobs.length === 0) await continueAsNew<typeof hostScheduler>({ ...input, settings: newSettings ?? settings, state });
    }
  }
}

const sameSettings = (a: SchedulerSettings, b: SchedulerSettings) =>
  (Object.keys({ ...a, ...b }) as Array<keyof SchedulerSettings>).every((key) => a[key] === b[key]);
