/**
 * The lifecycle's shared shapes: what the gateway, the host scheduler, the switch, the store and
 * the activities pass each other through Temporal (signals, updates, activity inputs and results),
 * and what a command's receipt says. Plain types: every side of the lifecycle imports them, the
 * store and the activities too, which the workflows import in turn.
 */
import type { ApiError } from '../domain/catalogue.js';
import type { ReservedMemory } from '../domain/measurement.js';
import type { InstanceState, MemoryKind, ParkTier, SwitchOutcome, SwitchPhase } from '../domain/vocabulary.js';
import type { LaunchMemory } from '../engines/memoryBound.js';
import type { DeploymentSpec } from '../settings/deploymentDocument.js';

/** One start of one instance: a restart is a new generation. */
export interface InstanceRef {
  deploymentId: string;
  instanceIndex: number;
  generation: number;
}

/** One instance of a deployment, whatever its start: what a switch's gateway steps name as a victim. */
export type InstanceKey = Pick<InstanceRef, 'deploymentId' | 'instanceIndex'>;

/** What the lifecycle knows of a deployment: the store's row, with its host's policy folded in. */
export interface DeploymentView {
  id: string;
  name: string;
  revision: number;
  spec: DeploymentSpec;
  operatorStopped: boolean;
  /** The measured checkpoint of this revision; null while its measurement is pending or failed. */
  checkpoint: ReservedMemory | null;
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
  /** Another host holds a ready instance of it: as a victim it has no admission window (spec). */
  readyElsewhere: boolean;
}

/** How a victim gives back its GPU memory in a switch. */
export type VictimPlan =
  | { kind: 'park'; tier: ParkTier }
  | {
      kind: 'stop';
      reason:
        | 'restart_only'
        | 'engine_cannot_park'
        | 'decision_model'
        | 'launched_unable_to_park'
        | 'no_room'
        | 'cut_before_output'
        | 'operator'
        | 'idle'
        /** It was parked, and what its engine still held on its GPUs was needed. */
        | 'parked_residue';
    };

export interface SwitchVictim {
  name: string;
  instance: InstanceRef;
  plan: VictimPlan;
  /** The GPUs it gives back (absent in a switch begun before instances could span GPUs). */
  gpuIndexes?: number[];
}

export interface SwitchTarget {
  name: string;
  revision: number;
  spec: DeploymentSpec;
  instance: InstanceRef;
  /** `wake` a parked instance (at `tier`), or `start` a new generation (that will park at `tier`). */
  action: 'wake' | 'start';
  tier: ParkTier | null;
  /** The GPUs it runs on: a start's chosen ones, a wake's own (`CUDA_VISIBLE_DEVICES`). */
  gpuIndexes: number[];
  /** What the engine's memory bound is computed from (a start passes it; a wake keeps its own). */
  memory: LaunchMemory;
}

/** An instance's first answer to the wake check (store/wakeReferences.ts), as a switch compares a woken engine's with it. */
export interface WakeReference {
  generation: number;
  probe: unknown;
  answer: unknown;
}

/**
 * One transition on one host. With a target, a switch: release the victims, then wake or start the
 * target and start its waiters. Without, a release only (an operator's park or stop, an idle
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
  /**
   * The task queues of the live servers, read by the scheduler with the model a demand wants: every
   * read in the switch would be on its waiters' clock. Absent, the switch reads them.
   */
  liveServerQueues?: string[];
  /**
   * A woken target's first answer (null: none recorded), read by the scheduler with the model a demand
   * wants, for the same reason. Absent, the switch reads it.
   */
  wakeReference?: WakeReference | null;
  timeouts: { drainMs: number; wakeWindowMs: number; startMs: number };
}

export interface SwitchResult {
  switchId: string;
  outcome: SwitchOutcome;
  /** Each victim and its receipt line (`releasedLines`). */
  victims: Array<{
    deploymentId: string;
    instanceIndex: number;
    released: string;
    state: InstanceState;
    tier: ParkTier | null;
    /** The GPUs it gave back. */
    gpuIndexes: number[];
    /** What its engine still holds parked, measured by the host (all its GPUs together); absent when not read. */
    residueBytes?: number;
  }>;
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
  /**
   * The instance of the deployment this host runs, as the server placed it (gateway/placement.ts,
   * `instanceIndexes`): the index a start here takes. Absent: 0.
   */
  instanceIndex?: number;
  /**
   * When each deployment last started or finished a request on the reporting server (its gateway's
   * clock): what "least recently used" means when the scheduler chooses what yields. Absent from
   * reports sent before it was.
   */
  lastRequestMs?: Record<string, number>;
}

/** What the host scheduler gives back for a command: the receipt. */
export interface CommandReceipt {
  deploymentId: string;
  /** The switch that carried it out, to open in the Web UI; absent when nothing had to change. */
  switchId?: string;
  /** Instances released to make room (start with evict), with their receipt lines and the GPUs each freed. */
  victims: Array<{ deploymentId: string; instanceIndex: number; released: string; gpuIndexes: number[] }>;
  state: InstanceState;
}

/** One entry of the host's ledger: what one instance holds. */
export interface LedgerEntry {
  deploymentId: string;
  name: string;
  instance: InstanceRef;
  state: InstanceState;
  tier: ParkTier | null;
  /** The GPUs it runs on; what it holds is split evenly over them (ledger.ts, `heldOnEach`). */
  gpuIndexes: number[];
  /** GPU memory it holds now, on all its GPUs together. */
  gpuBytes: number;
  /** Host RAM its parked copy holds now. */
  hostRamBytes: number;
  /**
   * Parked: what its engine still holds, as its host measured it after the park (all its GPUs
   * together), counted instead of the checkpoint's residue; absent when not measured.
   */
  residueBytes?: number;
}

/** What a park measured: what the engine still holds on each of its GPUs; absent when its host could not read them. */
export interface ParkResult {
  residueOnGpus?: Array<{ gpuIndex: number; bytes: number }>;
}

export interface HostLedger {
  hostId: string;
  gpus: Array<{ index: number; memoryBytes: number; memoryKind: MemoryKind }>;
  hostRamBytes: number;
  entries: LedgerEntry[];
  /** The switch running now, if any. */
  runningSwitchId: string | null;
}
