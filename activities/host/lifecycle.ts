/**
 * An engine's life on the host: launched on a free port, waited for until ready, parked, stopped, and
 * a request of it aborted. Each is idempotent per instance generation: a retry after a lost reply
 * finds the work done.
 */
import { ApplicationFailure } from '@temporalio/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { hostStepFailures } from '../../domain/catalogue.js';
import { exitHow, lastStderrLines } from '../../domain/problems.js';
import { freePort, freePortIn } from '../../processes/freePort.js';
import type { ParkTier } from '../../domain/vocabulary.js';
import type { DeploymentSpec } from '../../settings/deploymentDocument.js';
import type { LaunchMemory } from '../../engines/memoryBound.js';
import type { ParkResult } from '../../api/lifecycle.js';
import { type EngineBusyDetails, type ExitFailureDetails, hostFailureTypes } from '../../api/hostFailures.js';
import { whileHeartbeating } from '../heartbeat.js';
import type { ReleaseBoard, VictimRelease } from '../releaseBoard.js';
import { type InstanceKey, sameStart, type SupervisedEngine } from '../supervisor.js';
import { checkEngineVersion } from '../engines/versionCheck.js';
import { busyUntil } from './probes.js';
import { asFailure, type HostActivityDeps, notRunning, runningEngine, versionRequests, warnFor } from './shared.js';

const READY_POLL_MS = 250;
/**
 * One readiness call: whatever holds the port may accept a connection and never answer (another
 * process that took the engine's port), so each call gives up and the next one asks again.
 */
const READY_CALL_MS = 2_000;
/**
 * What an engine that lost the race for its port says as it exits (uvicorn's words for vLLM and
 * SGLang, Node's for the simulator): another process bound the free port between our choosing it
 * and the engine binding it. The start then launches the same generation on a fresh port, this many
 * times in all; an engine told a fixed port (`--port` in its extra_args) fails the same way each time.
 */
const PORT_TAKEN = /address already in use/i;
const PORT_RACE_LAUNCHES = 3;

export interface LaunchInput {
  key: InstanceKey;
  spec: DeploymentSpec;
  /** The GPUs it runs on (`CUDA_VISIBLE_DEVICES`). */
  gpuIndexes: number[];
  parkTier: ParkTier | null;
  memory: LaunchMemory;
}

export interface LaunchResult {
  baseUrl: string;
  pid: number;
}

type LifecycleDeps = Pick<
  HostActivityDeps,
  | 'adapters'
  | 'supervisor'
  | 'engineCommands'
  | 'unlistedVersionsAs'
  | 'engineEnv'
  | 'engineStopGraceMs'
  | 'enginePorts'
  | 'ingressInFlight'
  | 'gpuBytesOf'
  | 'logger'
>;

/**
 * An engine that exited: how, and its last lines of stderr (why, in its own words), in the failure's
 * message for the Temporal history and in its details for the start's refusal.
 */
function exitFailure(engine: SupervisedEngine) {
  const exit = engine.exit!;
  const lines = lastStderrLines(exit.stderrTail);
  const oom = lines.some((l) => /out of memory/i.test(l));
  const how = exitHow(exit.code, exit.signal);
  const failure: ExitFailureDetails = { how, stderr: lines };
  return ApplicationFailure.create({
    message:
      `engine of ${engine.key.deploymentId}/${engine.key.instanceIndex} exited ` +
      `(${how})${oom ? ': out of memory' : ''}; its last lines of stderr:\n${lines.join('\n')}`,
    type: oom ? 'out_of_memory' : hostFailureTypes.engineExited,
    nonRetryable: true,
    details: [failure],
  });
}

/** The port in `baseUrl` (`http://127.0.0.1:PORT`). */
const portOf = (baseUrl: string) => Number(new URL(baseUrl).port);

/**
 * A port for an engine: any free one, or one of the host's `engine_ports`, not one an engine of
 * this host holds (an engine just launched may not have bound its port yet). None left fails the
 * launch for good: only a model stopped on this host, or a wider range, frees one.
 */
async function enginePort(deps: LifecycleDeps): Promise<number> {
  const range = deps.enginePorts;
  if (range === undefined) return freePort();
  const held = new Set(
    deps.supervisor
      .list()
      .filter((e) => e.exit === undefined)
      .map((e) => portOf(e.endpoint.baseUrl)),
  );
  const port = await freePortIn(range, held);
  if (port !== undefined) return port;
  const ownEngines = [...held].filter((p) => p >= range.first && p <= range.last).length;
  throw ApplicationFailure.create({
    message: hostStepFailures.enginePortsExhausted(range.first, range.last, ownEngines),
    type: hostFailureTypes.enginePortsExhausted,
    nonRetryable: true,
  });
}

/**
 * Launches the engine on a port of its own. One launch at a time chooses its port: two starting at
 * once would otherwise both find the same port free before either engine binds it.
 */
function portedLauncher(deps: LifecycleDeps) {
  let previous: Promise<unknown> = Promise.resolve();
  return (input: LaunchInput): Promise<SupervisedEngine> => {
    const launched = previous.catch(() => undefined).then(() => launchOn(deps, input));
    previous = launched;
    return launched;
  };
}

async function launchOn(deps: LifecycleDeps, input: LaunchInput): Promise<SupervisedEngine> {
  const adapter = deps.adapters[input.spec.engine];
  const port = await enginePort(deps);
  const command = deps.engineCommands[input.spec.engine];
  const plan = adapter.launch({
    spec: input.spec,
    command,
    port,
    gpuIndexes: input.gpuIndexes,
    parkTier: input.parkTier,
    memory: input.memory,
  });
  plan.env = { ...deps.engineEnv, ...plan.env };
  return deps.supervisor.launch({
    key: input.key,
    spec: input.spec,
    adapter,
    command,
    plan,
    endpoint: { baseUrl: `http://127.0.0.1:${port}`, model: input.spec.name },
    gpuIndexes: input.gpuIndexes,
    parkTier: input.parkTier,
    memory: input.memory,
  });
}

/**
 * What a parked engine still holds on each of its GPUs, its child processes counted (vLLM's workers),
 * for the ledger to count instead of the checkpoint's residue. Nothing when the devices cannot be
 * read: the checkpoint's figure then stands, and the park is not failed for it.
 */
async function parkedResidue(deps: LifecycleDeps, engine: SupervisedEngine): Promise<ParkResult> {
  const pid = engine.process.pid;
  if (pid === undefined) return {};
  try {
    const held = await deps.gpuBytesOf(pid);
    const residueOnGpus = engine.gpuIndexes.map((gpuIndex) => ({
      gpuIndex,
      bytes: held.filter((h) => h.gpu === gpuIndex).reduce((sum, h) => sum + h.bytes, 0),
    }));
    deps.logger.info({ ...engine.key, residueOnGpus }, 'parked engine residue measured');
    return { residueOnGpus };
  } catch (e) {
    deps.logger.warn(
      { ...engine.key, err: e },
      "could not read what the parked engine holds; the checkpoint's residue stands",
    );
    return {};
  }
}

/** `releases`: where a park or stop told a switch's id says what its victim did with its memory. */
export function engineLifecycleActivities(deps: LifecycleDeps, releases: ReleaseBoard) {
  const launchOnFreePort = portedLauncher(deps);
  return {
    async launchEngine(input: LaunchInput): Promise<LaunchResult> {
      const existing = deps.supervisor.get(input.key);
      if (existing && existing.key.generation === input.key.generation && existing.exit === undefined) {
        return { baseUrl: existing.endpoint.baseUrl, pid: existing.process.pid ?? 0 };
      }
      const engine = await launchOnFreePort(input);
      return { baseUrl: engine.endpoint.baseUrl, pid: engine.process.pid ?? 0 };
    },

    /**
     * Waits for the engine's readiness route, then checks its version (a version capyctl does not
     * know is refused: `version_unsupported`); the workflow bounds both with its start timeout. An
     * engine that exited because its port was taken is launched again, same generation, on a fresh port.
     */
    async awaitEngineReady(input: { key: InstanceKey }): Promise<void> {
      const first = deps.supervisor.get(input.key);
      // An engine that exited while starting is still this start's to launch again or to fail.
      if (!first || !sameStart(first.key, input.key) || (first.exit !== undefined && first.stage !== 'starting'))
        throw notRunning(deps.supervisor, input.key);
      let engine = first;
      await whileHeartbeating(async (signal) => {
        for (let launches = 1; ;) {
          if (engine.exit !== undefined) {
            if (!PORT_TAKEN.test(engine.exit.stderrTail) || launches === PORT_RACE_LAUNCHES) throw exitFailure(engine);
            deps.logger.warn(
              { ...input.key, baseUrl: engine.endpoint.baseUrl },
              'engine lost the race for its port; launching it on a fresh one',
            );
            engine = await launchOnFreePort(engine);
            launches++;
          }
          const call = AbortSignal.any([signal, AbortSignal.timeout(READY_CALL_MS)]);
          const ready = engine.adapter.isReady(engine.endpoint, { signal: call }).catch(() => false);
          if (await Promise.race([ready, engine.exited.then(() => false)])) break;
          await Promise.race([sleep(READY_POLL_MS, undefined, { signal }), engine.exited]);
        }
        const unlistedAs = deps.unlistedVersionsAs[engine.spec.engine];
        engine.version = await checkEngineVersion(engine.adapter, engine.endpoint, unlistedAs, { signal }).catch(
          asFailure,
        );
      });
      deps.logger.info({ ...input.key, version: engine.version }, 'engine ready');
      engine.stage = 'ready';
    },

    /**
     * Parks at `tier` once the engine runs and queues nothing, waiting up to `idleWithinMs` for that
     * (what is left of the drain bound: a hung-up request's work stops a moment later, and an
     * engine's own count lags its last answer): a vLLM put to sleep busy crashes. Still busy then,
     * it refuses for good, saying how many requests it still had (`EngineBusyDetails`).
     */
    async parkEngine(input: {
      key: InstanceKey;
      tier: ParkTier;
      idleWithinMs?: number;
      /** The switch whose wake waits for this park (`WakeAfter`). */
      switchId?: string;
    }): Promise<ParkResult> {
      const said = (release: VictimRelease) => input.switchId && releases.say(input.switchId, input.key, release);
      const engine = runningEngine(deps.supervisor, input.key);
      if (engine.stage === 'parked') {
        said('released');
        return parkedResidue(deps, engine);
      }
      const busy = await whileHeartbeating((signal) =>
        busyUntil(engine, () => deps.ingressInFlight(input.key), Date.now() + (input.idleWithinMs ?? 0), signal),
      );
      if (busy > 0) {
        said('kept');
        const details: EngineBusyDetails = { requestsStillRunning: busy };
        throw ApplicationFailure.create({
          message: `instance ${input.key.deploymentId}/${input.key.instanceIndex} still has ${busy} request(s)`,
          type: hostFailureTypes.engineBusy,
          nonRetryable: true,
          details: [details],
        });
      }
      engine.stage = 'parking';
      await whileHeartbeating((signal) =>
        engine.adapter.park(engine.endpoint, input.tier, versionRequests(engine), {
          signal,
          warn: warnFor(deps.logger, input.key),
        }),
      ).catch(asFailure);
      engine.stage = 'parked';
      engine.parkedTier = input.tier;
      said('released');
      return parkedResidue(deps, engine);
    },

    async stopEngine(input: { key: InstanceKey; switchId?: string }): Promise<void> {
      await deps.supervisor.stop(input.key, deps.engineStopGraceMs);
      if (input.switchId) releases.say(input.switchId, input.key, 'released');
    },

    async abortRequest(input: { key: InstanceKey; requestId: string }): Promise<void> {
      const engine = runningEngine(deps.supervisor, input.key);
      await engine.adapter.abort(engine.endpoint, input.requestId).catch(asFailure);
    },
  };
}
