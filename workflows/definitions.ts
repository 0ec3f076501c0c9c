/**
 * Names shared by every Temporal client and worker: task queues, workflow IDs and the search
 * attributes the Web UI filters switches by. Pure: workflow code imports it too.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { LaunchMemory } from '../engines/memoryBound.js';
import type { ApiError } from '../domain/catalogue.js';
import type { InstanceState, MemoryKind, ParkTier, SwitchOutcome, SwitchPhase } from '../domain/vocabulary.js';
import type { DeploymentSpec } from '../settings/deploymentDocument.js';
import type { SchedulerSettings } from './hostScheduler.js';

export const taskQueues = {
  /**
   * The lifecycle's workflows and the store's steps: every server on one store polls it (the store
   * names it, store/servers.ts), so a server that dies leaves its schedulers and switches to the others.
   */
  workflows: (storeId: string) => `capyctl-workflows-${storeId}`,
  /**
   * A server's gateway steps. Each server has its own (its requests wait and run in its memory);
   * the switch reaches every one the store lists (workflows/everyGateway.ts).
   */
  server: (serverId: string) => `capyctl-server-${serverId}`,
  /** A host agent's engine activities. */
  host: (hostId: string) => `host-${hostId}`,
} as const;

export const workflowIds = {
  hostScheduler: (hostId: string) => `host-scheduler/${hostId}`,
  switch: (switchId: string) => `switch/${switchId}`,
  measure: (deploymentId: string, revision: number) => `measure/${deploymentId}/${revision}`,
} as const;

/**
 * The start-to-close bound of a step on the server's task queue (a store row, a look at the
 * gateway). Not only a guard against slow steps: a task handed to a server that was stopping as it
 * came is lost, and comes back only when this runs out, so it bounds how long a restart can hold a
 * switch or a scheduler up. The steps are single rows; a retry is harmless (they are idempotent).
 */
export const SERVER_STEP_TIMEOUT_MS = 5_000;

/**
 * How soon Temporal gives up on a server that died holding a workflow's task (a server stopped
 * cleanly hands its tasks back; a killed one cannot): a task it held is given to another worker
 * after the task timeout (Temporal's default is 10 s), and a workflow it kept cached, whose next
 * tasks go to its own queue, after the sticky timeout (also 10 s). With these, the first request
 * after a crash waits about as long as after a clean restart (bench/recoveryAfterKill.ts). A task
 * that runs long does not hit it: local steps heartbeat the task, and replays are short (the
 * scheduler continues as new, a switch has a few dozen events).
 */
export const WORKFLOW_TASK_TIMEOUT_MS = 3_000;
export const STICKY_QUEUE_TIMEOUT_MS = 1_000;

/**
 * The steps that run in the server's own process and never wait (a store row, a change of the
 * gateway's dispatch) are local activities: they run inside the workflow task, with no round trip
 * through Temporal's task queues, and are recorded as markers. A local activity's retries are the
 * worker's; past `localRetryThreshold` it waits on a Temporal timer instead, like any backoff.
 */
export const serverStepOptions = {
  startToCloseTimeout: SERVER_STEP_TIMEOUT_MS,
  localRetryThreshold: SERVER_STEP_TIMEOUT_MS,
  retry: { initialInterval: '50ms', backoffCoefficient: 2, maximumInterval: '2s' },
} as const;

/** On every switch, so a person can list "every switch that parked chat-a" in the Web UI. */
export const searchAttributes = {
  target: defineSearchAttributeKey('CapyTarget', SearchAttributeType.KEYWORD),
  victims: defineSearchAttributeKey('CapyVictims', SearchAttributeType.KEYWORD_LIST),
  host: defineSearchAttributeKey('CapyHost', SearchAttributeType.KEYWORD),
  outcome: defineSearchAttributeKey('CapyOutcome', SearchAttributeType.KEYWORD),
} as const;

// ─── The lifecycle's shared shapes: what the host scheduler, the switch and their callers pass ────

/** One start of one instance: a restart is a new generation. */
export interface InstanceRef {
  deploymentId: string;
  instanceIndex: number;
  generation: number;
}

/** What the lifecycle knows of a deployment: the store's row, with its host's policy folded in. */
export interface DeploymentView {
  id: string;
  name: string;
  revision: number;
  spec: DeploymentSpec;
  operatorStopped: boolean;
  /** The measured checkpoint of this revision; null while its measurement is pending or failed. */
  checkpoint: { weightBytes: number; kvBytes: number } | null;
  /** Why this revision's measurement failed; null unless it did. */
  measureFailure: string | null;
  /** `lifecycle.activation: explicit` on the deployment or on the host it may run on. */
  explicit: boolean;
  /**
   * The newest generation the catalogue records of its instance, on any host (0: never started).
   * A start goes on from it: a model moved to another host must not reuse a generation, which the
   * catalogue and the gateway would take for an old one.
   */
  generation: number;
}

/** How a victim gives back its GPU memory in a switch. */
export type Release =
  | { kind: 'park'; tier: ParkTier }
  | { kind: 'stop'; reason: 'restart_only' | 'engine_cannot_park' | 'decision_model' | 'launched_unable_to_park' | 'no_room' | 'cut_before_output' | 'operator' | 'idle' };

export interface SwitchVictim {
  name: string;
  instance: InstanceRef;
  release: Release;
}

export interface SwitchTarget {
  name: string;
  revision: number;
  spec: DeploymentSpec;
  instance: InstanceRef;
  /** `wake` a parked instance (at `tier`), or `start` a new generation (that will park at `tier`). */
  action: 'wake' | 'start';
  tier: ParkTier | null;
  gpuIndex: number;
  /** What the engine's memory bound is computed from (a start passes it; a wake keeps its own). */
  memory: LaunchMemory;
}

/**
 * One transition on one host. With a target, a switch: release the victims, then wake or start the
 * target and release its waiters. Without, a release only (an operator's park or stop, an idle
 * timer, a host drain): every path that takes a serving instance away is this one.
 */
export interface SwitchInput {
  switchId: string;
  hostId: string;
  /**
   * The queue the switch runs on (`taskQueues.workflows` in a server); its gateway's waits go there
   * too when no server is registered in the store (workflows/everyGateway.ts).
   */
  serverTaskQueue: string;
  /** When the switch began (ms since the epoch): the admission window counts from it. */
  startedAtMs: number;
  target: SwitchTarget | null;
  victims: SwitchVictim[];
  /** The host's admission window; null for no window (an operator command, or a victim ready elsewhere). */
  admissionWindowMs: number | null;
  /**
   * The measured checkpoint of the target and of each victim, by deployment ID, as the scheduler
   * read them to plan the switch: what the rows it writes say each instance holds.
   */
  checkpoints: Record<string, DeploymentView['checkpoint']>;
  timeouts: { drainMs: number; wakeWindowMs: number; startMs: number };
}

export interface SwitchResult {
  switchId: string;
  outcome: SwitchOutcome;
  /** Each victim and its receipt line (`releaseLines`). */
  victims: Array<{ deploymentId: string; instanceIndex: number; released: string; state: InstanceState; tier: ParkTier | null }>;
  /** Where the target stands after the switch; absent for a release only. */
  target?: { instance: InstanceRef; state: InstanceState; tier: ParkTier | null };
  /** The error the target's waiters got, when the switch failed. */
  error?: ApiError;
}

/** How long one step of a switch took; `tier` is the park tier of a park or a wake. */
export interface PhaseTiming {
  phase: SwitchPhase;
  tier: ParkTier | null;
  ms: number;
}

/** A gateway's report: `deploymentId` has `waiting` requests, the oldest since `oldestSinceMs` (0 waiting: none). */
export interface Demand {
  deploymentId: string;
  waiting: number;
  oldestSinceMs: number;
  /**
   * The reporting server's own task queue: each server's report stands beside the others' for the
   * same model, and a refusal is answered to the server whose requests wait. Absent: the worker's own.
   */
  serverTaskQueue?: string;
}

/** What the host scheduler gives back for a command: the receipt. */
export interface CommandReceipt {
  deploymentId: string;
  /** The switch that carried it out, to open in the Web UI; absent when nothing had to change. */
  switchId?: string;
  /** Instances released to make room (start with evict), with their receipt lines. */
  victims: Array<{ deploymentId: string; instanceIndex: number; released: string }>;
  state: InstanceState;
}

/** One entry of the host's ledger: what one instance holds. */
export interface LedgerEntry {
  deploymentId: string;
  name: string;
  instance: InstanceRef;
  state: InstanceState;
  tier: ParkTier | null;
  gpuIndex: number;
  /** GPU memory it holds now. */
  gpuBytes: number;
  /** Host RAM its parked copy holds now. */
  hostRamBytes: number;
}

export interface HostLedger {
  hostId: string;
  gpus: Array<{ index: number; memoryBytes: number; memoryKind: MemoryKind }>;
  hostRamBytes: number;
  entries: LedgerEntry[];
  /** The switch running now, if any. */
  runningSwitchId: string | null;
}

export const signals = {
  /** From the gateway: who waits, since when. */
  demand: defineSignal<[Demand]>('demand'),
  /**
   * From the server when it starts: the requests its previous run held are gone with that run, and
   * so is every demand it reported (a run killed outright never reports them withdrawn). From a
   * server that found another gone: that one's. `serverTaskQueue` names whose; absent: every demand.
   */
  gatewayRestarted: defineSignal<[{ serverTaskQueue?: string }?]>('gatewayRestarted'),
  /** From the server, when a host reports an engine it did not stop. */
  engineExited: defineSignal<[InstanceRef]>('engineExited'),
  /**
   * From a checkpoint's measurement, once its result or its failure is recorded: requests waiting
   * for that model can be served, or are answered with the failure.
   */
  measurementEnded: defineSignal<[{ deploymentId: string }]>('measurementEnded'),
  /**
   * From the server when it starts, and when the host registers: the settings as they are now. A
   * scheduler keeps the settings it started with until told (it outlives server restarts).
   */
  configure: defineSignal<[SchedulerSettings]>('configure'),
} as const;

export const updates = {
  start: defineUpdate<CommandReceipt, [{ deploymentId: string; evict: boolean }]>('start'),
  stop: defineUpdate<CommandReceipt, [{ deploymentId: string }]>('stop'),
  park: defineUpdate<CommandReceipt, [{ deploymentId: string }]>('park'),
  preinitialize: defineUpdate<CommandReceipt, [{ deploymentId: string }]>('preinitialize'),
  delete: defineUpdate<CommandReceipt, [{ deploymentId: string }]>('delete'),
  drainHost: defineUpdate<CommandReceipt[], []>('drainHost'),
} as const;

export const queries = {
  ledger: defineQuery<HostLedger>('ledger'),
} as const;
