/**
 * The catalogue's records as the store returns them: deployments, hosts, instances, switch
 * receipts. Plain data, read by every side (the gateway through its ports, gateway/ports.ts, the
 * server's parts, the activities); only store/ writes them, and the SQL stays there.
 */
import type { Problem } from '../domain/problems.js';
import type { InstanceState, MemoryKind, ParkTier, SwitchOutcome } from '../domain/vocabulary.js';
import type { DeploymentSpec } from '../settings/deploymentDocument.js';
import type { PhaseTiming } from './lifecycle.js';

export interface Deployment {
  id: string;
  name: string;
  revision: number;
  spec: DeploymentSpec;
  operatorStopped: boolean;
  /** The checkpoint measurement of the current revision; null while it is pending or failed. */
  checkpoint: Record<string, unknown> | null;
  /** Why the current revision's measurement failed; null unless it did (never beside a measurement). */
  measureFailure: string | null;
  /** Why its latest start failed; null unless it did. */
  startFailure: string | null;
  /** Its last problem (domain/problems.ts); null when it has had none. */
  lastProblem: Problem | null;
  /** How many times its engine ended unasked. */
  restarts: number;
  /** When the last few of those were, oldest first: a crash loop is read from them. */
  recentEndings: Date[];
  createdAt: Date;
  updatedAt: Date;
}

export interface SaveResult {
  deployment: Deployment;
  /** `created`: a new deployment; `revised`: a changed spec made a new revision; `unchanged`: same spec. */
  outcome: 'created' | 'revised' | 'unchanged';
  /** Its checkpoint is to be measured now: a new revision, or the same one whose measurement failed. */
  measure: boolean;
}

export interface HostGpu {
  index: number;
  name: string;
  memoryBytes: number;
  memoryKind: MemoryKind;
}

export interface Host {
  id: string;
  gpus: HostGpu[];
  hostRamBytes: number | null;
  /** The host's own settings the server needs: its queue limits and activation policy. */
  settings: Record<string, unknown>;
  draining: boolean;
  registeredAt: Date;
  lastSeenAt: Date;
}

export type Registration = Omit<Host, 'draining' | 'registeredAt' | 'lastSeenAt'>;

/**
 * How a registration went: a token is bound to the first host ID that registers with it, and a host
 * ID to the first token that registers it, so no other token can take a registered host over.
 */
export type RegistrationOutcome =
  'registered' | 'unknown_token' | 'token_bound_to_another_host' | 'host_bound_to_another_token';

/** The store's mirror of what a host scheduler's ledger says one instance holds. */
export interface Instance {
  deploymentId: string;
  index: number;
  hostId: string;
  generation: number;
  observedState: InstanceState;
  parkTier: ParkTier | null;
  /** On all its GPUs together: an even share on each (`perGpuBytes`). */
  gpuBytes: number;
  hostRamBytes: number;
  /** The GPUs of its host it holds; empty when not known (a row written before the store recorded them) or stopped. */
  gpuIndexes: number[];
  /**
   * What its engine still holds parked, measured by its host after the park (all its GPUs together):
   * counted instead of the checkpoint's residue. Null when not measured.
   */
  residueBytes: number | null;
  updatedAt: Date;
}

export interface Victim {
  deploymentId: string;
  instanceIndex: number;
  /** The receipt line, from `releasedLines` in the catalogue. */
  released: string;
  /** The GPUs it gave back; absent in a receipt written before instances could span GPUs. */
  gpuIndexes?: number[];
}

export interface SwitchReceipt {
  switchId: string;
  hostId: string;
  targetDeploymentId: string | null;
  victims: Victim[];
  outcome: SwitchOutcome;
  /** One line, as the Web UI shows it: "wake chat-b, park chat-a on gpu-box". */
  summary: string;
  /** Its steps in order, once it ended; empty while it runs. */
  phases: PhaseTiming[];
  startedAt: Date;
  finishedAt: Date | null;
}
