/** What one run of the host scheduler starts from: its host, its settings and what the run before it left. Pure. */
import type { Demand, HostLedger } from '../../api/lifecycle.js';

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

/**
 * True when every setting of `a` is the one of `b`: a server's `configure` that changes nothing keeps
 * the run going.
 */
export const sameSettings = (a: SchedulerSettings, b: SchedulerSettings): boolean =>
  (Object.keys({ ...a, ...b }) as Array<keyof SchedulerSettings>).every((key) => a[key] === b[key]);
