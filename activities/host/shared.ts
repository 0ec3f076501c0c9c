/**
 * What every group of the host's activities shares: the host's parts they are built from, the engine
 * a step acts on, and how an engine's failure reaches the workflows.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { Logger } from 'pino';
import type { EngineName } from '../../domain/vocabulary.js';
import type { VersionRequests } from '../../engines/contracts.js';
import { type EngineAdapter, EngineError } from '../../engines/engine.js';
import type { EngineSupervisor, InstanceKey, InstanceSlot, SupervisedEngine } from '../supervisor.js';
import { hostFailureTypes } from '../../api/hostFailures.js';

export interface HostActivityDeps {
  adapters: Record<EngineName, EngineAdapter>;
  supervisor: EngineSupervisor;
  /** The command each engine's arguments follow (the host document's `engines.<name>.command`). */
  engineCommands: Record<EngineName, readonly string[]>;
  /** The listed version an unlisted one is run as (the host document's `engines.<name>.unlisted_version_as`). */
  unlistedVersionsAs: Partial<Record<EngineName, string>>;
  /** The size of the host's largest GPU: what a deployment's own memory bound is counted against. */
  largestGpuBytes: number;
  /** What a parked engine keeps on each GPU, by engine (the host document's `engines.<name>.parked_residue`; 0 for one that cannot park). */
  parkedResidueBytes: Record<EngineName, number>;
  /**
   * What the process `pid` and its children hold on each of the host's GPUs now: `nvidia-smi`'s compute
   * apps, or the simulated devices' ledgers (the host agent's /metrics reads the same).
   */
  gpuBytesOf: (pid: number) => Promise<Array<{ gpu: number; bytes: number }>>;
  /** Set for every engine when the host's GPUs are simulated. */
  engineEnv: Record<string, string>;
  engineStopGraceMs: number;
  /** The ports engines are launched on (the host document's `engine_ports`); any free port when undefined. */
  enginePorts: { first: number; last: number } | undefined;
  /** Requests being forwarded to an instance now (the ingress's, or a standalone gateway's). */
  ingressInFlight: (key: InstanceSlot) => number;
  logger: Logger;
}

const NON_RETRYABLE: ReadonlySet<EngineError['kind']> = new Set([
  'out_of_memory',
  'reload_failed',
  'refused',
  'version_unsupported',
]);

/** Rethrows an engine's failure as the ApplicationFailure the workflows map to the spec's codes. */
export function asFailure(e: unknown): never {
  if (e instanceof EngineError) {
    throw ApplicationFailure.create({ message: e.message, type: e.kind, nonRetryable: NON_RETRYABLE.has(e.kind) });
  }
  throw e;
}

/**
 * No engine of `key`'s generation runs here, for good: it ended under this agent, or it was launched by
 * an earlier agent of this host and ended with it (the switch's waiters then wait for the next start).
 */
export function notRunning(supervisor: EngineSupervisor, key: InstanceKey) {
  const instance = `instance ${key.deploymentId}/${key.instanceIndex} generation ${key.generation}`;
  return supervisor.launchedHere(key)
    ? ApplicationFailure.nonRetryable(`${instance} is not running on this host`, hostFailureTypes.notRunning)
    : ApplicationFailure.nonRetryable(
        `${instance} was launched by an earlier agent of this host and ended with it`,
        hostFailureTypes.lostWithAgent,
      );
}

/** The engine of `key`'s generation, running; refused for good when there is none. */
export function runningEngine(supervisor: EngineSupervisor, key: InstanceKey): SupervisedEngine {
  const engine = supervisor.get(key);
  if (!engine || engine.key.generation !== key.generation || engine.exit !== undefined)
    throw notRunning(supervisor, key);
  return engine;
}

/**
 * What a park or wake of `engine` sends for its version: checked when its start found it ready, so an
 * engine without it never became ready and is refused.
 */
export function versionRequests(engine: SupervisedEngine): VersionRequests {
  if (!engine.version)
    throw ApplicationFailure.nonRetryable(
      `instance ${engine.key.deploymentId}/${engine.key.instanceIndex} generation ${engine.key.generation} never ` +
        'became ready: its version was not checked',
      hostFailureTypes.notRunning,
    );
  return engine.version.sends;
}

/** Where an adapter says what it skipped (an optional route its engine does not have). */
export const warnFor = (logger: Logger, key: InstanceKey) => (message: string) => logger.warn({ ...key }, message);
