/**
 * The engine activities a host agent runs on its task queue `host-<hostId>`. Built by a factory
 * from the host's parts, so tests and the standalone wire the same code. Each is idempotent per
 * instance generation: a retry after a lost reply finds the work done.
 */
import { ApplicationFailure } from '@temporalio/common';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { freePort } from '../processes/freePort.js';
import type { EngineName, ParkTier } from '../domain/vocabulary.js';
import {
  type EngineStage,
  type EngineSupervisor,
  type InstanceKey,
  type InstanceSlot,
  sameStart,
  type SupervisedEngine,
} from './supervisor.js';
import type { DeploymentSpec } from '../settings/deploymentDocument.js';
import { type Checkpoint, reservedCheckpoint } from './checkpoint.js';
import { type EngineAdapter, EngineError, type Probe, type ProbeAnswer } from '../engines/engine.js';
import type { LaunchMemory } from '../engines/memoryBound.js';
import { whileHeartbeating } from './heartbeat.js';
import { ReleaseBoard, type VictimRelease } from './releaseBoard.js';
import { SwitchWakes } from './switchWakes.js';
import { type EngineBusyDetails, type ExitFailureDetails, hostFailureTypes } from '../api/hostFailures.js';

/** About the last screen of an engine's stderr: a Python traceback's tail and the line before it. */
const STDERR_LINES = 20;

/** How often a park waiting for its engine to finish asks it again. */
const IDLE_POLL_MS = 50;

const NON_RETRYABLE: ReadonlySet<EngineError['kind']> = new Set(['out_of_memory', 'reload_failed', 'refused']);
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

export interface HostActivityDeps {
  adapters: Record<EngineName, EngineAdapter>;
  supervisor: EngineSupervisor;
  /** The command each engine's arguments follow (the host document's `engines.<name>.command`). */
  engineCommands: Record<EngineName, readonly string[]>;
  /** The size of the host's largest GPU: what a deployment's own memory bound is counted against. */
  largestGpuBytes: number;
  /** Set for every engine when the host's GPUs are simulated. */
  engineEnv: Record<string, string>;
  engineStopGraceMs: number;
  /** Requests being forwarded to an instance now (the ingress's, or a standalone gateway's). */
  ingressInFlight: (key: InstanceSlot) => number;
  logger: Logger;
}

export interface LaunchInput {
  key: InstanceKey;
  spec: DeploymentSpec;
  gpuIndex: number;
  parkTier: ParkTier | null;
  memory: LaunchMemory;
}

/**
 * A wake scheduled beside its switch's parks (one round trip through Temporal fewer): it begins once
 * every victim's park or stop for `switchId` gave its memory back, and the wake window runs from then.
 */
export interface WakeAfter {
  switchId: string;
  victims: InstanceKey[];
  wakeWindowMs: number;
}

/**
 * A wake's answer: the wake check's (`null` without a probe) and how long the wake and the check
 * took on the host. `victimsKept`: a victim kept its memory (its engine still ran requests), so
 * nothing was woken.
 */
export interface WakeResult {
  answer: ProbeAnswer | null;
  checkMs: number;
  wakeMs?: number;
  victimsKept?: true;
}

/** An engine alive on the host, as `listEngines` reports it. */
export interface RunningEngine {
  instance: InstanceKey;
  stage: EngineStage;
  gpuIndex: number;
  /** Parked: the tier it parked at; otherwise the tier it was launched to park at. */
  tier: ParkTier | null;
  /** The GPU memory the ledger reserved for it at launch: its weights and KV budget. */
  reservedBytes: number;
}

export interface LaunchResult {
  baseUrl: string;
  pid: number;
}

/** `signal`, also aborted by `bound` when there is one. */
const boundedBy = (signal: AbortSignal, bound: AbortSignal | undefined) =>
  bound ? AbortSignal.any([signal, bound]) : signal;

/** Rethrows an engine's failure as the ApplicationFailure the workflows map to the spec's codes. */
function asFailure(e: unknown): never {
  if (e instanceof EngineError) {
    throw ApplicationFailure.create({ message: e.message, type: e.kind, nonRetryable: NON_RETRYABLE.has(e.kind) });
  }
  throw e;
}

export function createHostActivities(deps: HostActivityDeps) {
  const releases = new ReleaseBoard();
  const wakes = new SwitchWakes();
  const notRunning = (key: InstanceKey) => {
    const instance = `instance ${key.deploymentId}/${key.instanceIndex} generation ${key.generation}`;
    return deps.supervisor.launchedHere(key)
      ? ApplicationFailure.nonRetryable(`${instance} is not running on this host`, hostFailureTypes.notRunning)
      : ApplicationFailure.nonRetryable(
          `${instance} was launched by an earlier agent of this host and ended with it`,
          hostFailureTypes.lostWithAgent,
        );
  };
  const running = (key: InstanceKey): SupervisedEngine => {
    const engine = deps.supervisor.get(key);
    if (!engine || engine.key.generation !== key.generation || engine.exit !== undefined) throw notRunning(key);
    return engine;
  };

  /** No GPU memory held by `victim` on this host: its engine is parked, or no engine of its generation runs. */
  const holdsNothing = (victim: InstanceKey) => {
    const engine = deps.supervisor.live(victim);
    return !engine || engine.key.generation !== victim.generation || engine.stage === 'parked';
  };

  /** Where an adapter says what it skipped (an optional route its engine does not have). */
  const warnFor = (key: InstanceKey) => (message: string) => deps.logger.warn({ ...key }, message);

  /**
   * An engine that exited: how, and its last lines of stderr (why, in its own words), in the failure's
   * message for the Temporal history and in its details for the start's refusal.
   */
  const exitFailure = (engine: SupervisedEngine) => {
    const exit = engine.exit!;
    const lines = exit.stderrTail
      .split('\n')
      .filter((l) => l.trim() !== '')
      .slice(-STDERR_LINES);
    const oom = lines.some((l) => /out of memory/i.test(l));
    const how = exit.signal !== null ? `signal ${exit.signal}` : `code ${exit.code}`;
    const failure: ExitFailureDetails = { how, stderr: lines };
    return ApplicationFailure.create({
      message:
        `engine of ${engine.key.deploymentId}/${engine.key.instanceIndex} exited ` +
        `(${how})${oom ? ': out of memory' : ''}; its last lines of stderr:\n${lines.join('\n')}`,
      type: oom ? 'out_of_memory' : hostFailureTypes.engineExited,
      nonRetryable: true,
      details: [failure],
    });
  };

  /**
   * What the engine still runs or queues (counting the ingress's requests on their way), polled until
   * none or `untilMs`.
   */
  const busyUntil = async (
    engine: SupervisedEngine,
    key: InstanceKey,
    untilMs: number,
    signal: AbortSignal,
  ): Promise<number> => {
    for (;;) {
      const load = await engine.adapter.sampleLoad(engine.endpoint).catch(() => null);
      const busy = deps.ingressInFlight(key) + (load ? load.running + load.waiting : 0);
      if (busy === 0 || Date.now() + IDLE_POLL_MS > untilMs) return busy;
      await sleep(IDLE_POLL_MS, undefined, { signal });
    }
  };

  /** The wake check's question, asked of a running engine. */
  const ask = (engine: SupervisedEngine, probe: Probe, signal: AbortSignal): Promise<ProbeAnswer> =>
    engine.adapter.probe(engine.endpoint, probe, { signal }).catch(asFailure);

  /** Wakes `engine` from `tier` unless it is awake, then asks it `probe`; `signal` bounds both. */
  const wakeAndAsk = async (
    engine: SupervisedEngine,
    input: { key: InstanceKey; tier: ParkTier; probe?: Probe },
    signal: AbortSignal,
  ): Promise<WakeResult> => {
    const began = Date.now();
    if (engine.stage !== 'ready') {
      engine.stage = 'waking';
      await engine.adapter.wake(engine.endpoint, input.tier, { signal, warn: warnFor(input.key) }).catch(asFailure);
      engine.stage = 'ready';
    }
    const wakeMs = Date.now() - began;
    if (!input.probe) return { answer: null, checkMs: 0, wakeMs };
    const answer = await ask(engine, input.probe, signal);
    return { answer, checkMs: Date.now() - began - wakeMs, wakeMs };
  };

  const launchOnFreePort = async (input: LaunchInput): Promise<SupervisedEngine> => {
    const adapter = deps.adapters[input.spec.engine];
    const port = await freePort();
    const command = deps.engineCommands[input.spec.engine];
    const plan = adapter.launch({
      spec: input.spec,
      command,
      port,
      gpuIndex: input.gpuIndex,
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
      gpuIndex: input.gpuIndex,
      parkTier: input.parkTier,
      memory: input.memory,
    });
  };

  return {
    /** Measures the checkpoint a revision brings: its weights' bytes on the GPU and its KV budget. */
    async measureCheckpoint(input: { spec: DeploymentSpec }): Promise<Checkpoint> {
      try {
        return reservedCheckpoint(input.spec, deps.engineCommands[input.spec.engine], deps.largestGpuBytes);
      } catch (e) {
        throw ApplicationFailure.nonRetryable((e as Error).message, hostFailureTypes.checkpointMissing);
      }
    },

    async launchEngine(input: LaunchInput): Promise<LaunchResult> {
      const existing = deps.supervisor.get(input.key);
      if (existing && existing.key.generation === input.key.generation && existing.exit === undefined) {
        return { baseUrl: existing.endpoint.baseUrl, pid: existing.process.pid ?? 0 };
      }
      const engine = await launchOnFreePort(input);
      return { baseUrl: engine.endpoint.baseUrl, pid: engine.process.pid ?? 0 };
    },

    /**
     * Waits for the engine's readiness route; the workflow bounds it with its start timeout. An engine
     * that exited because its port was taken is launched again, same generation, on a fresh port.
     */
    async awaitEngineReady(input: { key: InstanceKey }): Promise<void> {
      const first = deps.supervisor.get(input.key);
      // An engine that exited while starting is still this start's to launch again or to fail.
      if (!first || !sameStart(first.key, input.key) || (first.exit !== undefined && first.stage !== 'starting'))
        throw notRunning(input.key);
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
      });
      engine.stage = 'ready';
    },

    async probeEngine(input: { key: InstanceKey; probe: Probe }): Promise<ProbeAnswer> {
      const engine = running(input.key);
      return whileHeartbeating((signal) => ask(engine, input.probe, signal));
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
    }): Promise<void> {
      const said = (release: VictimRelease) => input.switchId && releases.say(input.switchId, input.key, release);
      const engine = running(input.key);
      if (engine.stage === 'parked') return void said('released');
      const busy = await whileHeartbeating((signal) =>
        busyUntil(engine, input.key, Date.now() + (input.idleWithinMs ?? 0), signal),
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
        engine.adapter.park(engine.endpoint, input.tier, { signal, warn: warnFor(input.key) }),
      ).catch(asFailure);
      engine.stage = 'parked';
      engine.parkedTier = input.tier;
      said('released');
    },

    /**
     * Wakes from `tier` and, given the wake check's `probe`, asks it at once: one step on the host
     * for both (each step is a round trip through Temporal). The workflow bounds the two with the
     * wake window (then: wake_uncertain) and compares the answer; `checkMs` is the check's share.
     * Given `after`, it first waits for the switch's victims, and bounds itself with the wake window.
     * Given `switchId`, the engine wakes once for that switch, however many ask (`SwitchWakes`).
     */
    async wakeEngine(input: {
      key: InstanceKey;
      tier: ParkTier;
      probe?: Probe;
      after?: WakeAfter;
      switchId?: string;
    }): Promise<WakeResult> {
      const { after, switchId } = input;
      if (after) {
        // A victim that holds nothing here now has nothing to say: a host agent that restarted lost
        // its engines, and with them the words their parks or stops said before.
        const holding = after.victims.filter((victim) => !holdsNothing(victim));
        const release = await whileHeartbeating((signal) => releases.heard(after.switchId, holding, signal));
        if (release === 'kept') return { answer: null, checkMs: 0, victimsKept: true };
      }
      const window = after && AbortSignal.timeout(after.wakeWindowMs);
      try {
        const engine = running(input.key);
        return await whileHeartbeating((signal) => {
          const bounded = boundedBy(signal, window);
          const wake = () => wakeAndAsk(engine, input, bounded);
          return switchId === undefined ? wake() : wakes.once(switchId, engine, bounded, wake);
        });
      } catch (e) {
        if (!window?.aborted) throw e;
        throw ApplicationFailure.nonRetryable(
          `the wake of ${input.key.deploymentId}/${input.key.instanceIndex} did not finish within ${after!.wakeWindowMs} ms`,
          hostFailureTypes.wakeWindowOver,
        );
      }
    },

    /**
     * The engines alive here: a scheduler that starts without a ledger learns from it what the GPUs
     * hold (engines end with their agent, so nothing else holds them).
     */
    async listEngines(): Promise<RunningEngine[]> {
      return deps.supervisor
        .list()
        .filter((e) => e.exit === undefined)
        .map((e) => ({
          instance: e.key,
          stage: e.stage,
          gpuIndex: e.gpuIndex,
          tier: e.stage === 'parked' ? e.parkedTier : e.parkTier,
          reservedBytes: e.memory.reservedBytes,
        }));
    },

    async stopEngine(input: { key: InstanceKey; switchId?: string }): Promise<void> {
      await deps.supervisor.stop(input.key, deps.engineStopGraceMs);
      if (input.switchId) releases.say(input.switchId, input.key, 'released');
    },

    async abortRequest(input: { key: InstanceKey; requestId: string }): Promise<void> {
      const engine = running(input.key);
      await engine.adapter.abort(engine.endpoint, input.requestId).catch(asFailure);
    },
  };
}

export type HostActivities = ReturnType<typeof createHostActivities>;
