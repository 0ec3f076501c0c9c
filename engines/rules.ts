/**
 * The spec's rules for engines, as pure functions: how a deployment parks on a host ("How a model
 * parks"), which models are refused a park (`capability_missing:deep_park`), and where a
 * `max_running` figure comes from ("Reading load"). The host scheduler, the management API and the
 * adapters call them; nothing here does I/O.
 */
import { type ApiError, apiErrors, engineSettingRefusals, releasedLines, releasingLines } from '../domain/catalogue.js';
import type { EngineName, MemoryKind, ParkTier } from '../domain/vocabulary.js';
import type { DeploymentSpec } from '../settings/deploymentDocument.js';
import { engineContracts } from './contracts.js';
import type { MaxRunning, MaxRunningContext } from './engine.js';
import { selfParkOptionIn } from './hostEngines.js';
import { findCount, findOption } from './launchOptions.js';
import { engineTraits } from './traits.js';
import { parallelLayout } from './parallelism.js';
import { declaredLengthRefusal } from './sequencePlan.js';

// ─── Capability ─────────────────────────────────────────────────────────────────────────────────

/**
 * SGLang with speculative decoding parks with its weights in memory: releasing them would also drop
 * the draft model, and a reload would put the target's checkpoint into it.
 */
export function keepsWeightsWhenParked(spec: DeploymentSpec): boolean {
  return spec.engine === 'sglang' && findOption(spec.extra_args, '--speculative-algorithm') !== undefined;
}

/** Why a model is refused a park: the `<reason>` of `capability_missing:deep_park`. */
export const cannotParkReasons = {
  gptOss: 'vLLM and SGLang do not wake gpt-oss correctly',
  nvfp4OnSglang: 'SGLang does not wake NVFP4 (ModelOpt) checkpoints correctly unless it keeps their weights in memory',
  nemotronVlOnVllm:
    'vLLM 0.31.0 answers Nemotron 3.5 Super VL wrongly after a park and a wake (the engine is that version, or its ' +
    'version is not known)',
  /** An engine that does not park at all, asked to by `residency`. */
  engine: (engine: EngineName) => `${engine} does not park (capyctl engine list shows DEEP PARK disabled)`,
} as const;

/** Model names as checkpoints spell them: `openai/gpt-oss-20b`, `nvidia/Nemotron-3.5-Super-VL-FP8`. */
const modelPatterns = {
  gptOss: /gpt[-_]?oss/i,
  nvfp4: /nvfp4/i,
  nemotronSuperVl: /nemotron[\w.-]*?3[._]5[\w.-]*?super[\w.-]*?[-_]vl(?![a-z])/i,
};

const isNvfp4 = (spec: DeploymentSpec): boolean =>
  modelPatterns.nvfp4.test(spec.model) || findOption(spec.extra_args, '--quantization') === 'modelopt_fp4';

/**
 * The vLLM that answers Nemotron 3.5 Super VL wrongly after a wake. An unknown version counts as that
 * one: a wrong answer costs more than a restart, and the management API decides before any host says
 * its version. A local build suffix (`0.31.0+cu128`) is the same release.
 */
const mayAnswerWronglyAfterWake = (vllmVersion: string | undefined): boolean =>
  vllmVersion === undefined || vllmVersion.replace(/^v/, '').split('+')[0] === '0.31.0';

function cannotParkReason(spec: DeploymentSpec, engineVersion: string | undefined): string | undefined {
  const { engine, model } = spec;
  if ((engine === 'vllm' || engine === 'sglang') && modelPatterns.gptOss.test(model)) return cannotParkReasons.gptOss;
  if (engine === 'sglang' && isNvfp4(spec) && !keepsWeightsWhenParked(spec)) return cannotParkReasons.nvfp4OnSglang;
  if (engine === 'vllm' && modelPatterns.nemotronSuperVl.test(model) && mayAnswerWronglyAfterWake(engineVersion)) {
    return cannotParkReasons.nemotronVlOnVllm;
  }
  return undefined;
}

/**
 * `capability_missing:deep_park` for a model its engine cannot wake correctly, unless the deployment
 * declares `residency: restart_only`; null when it may park. `engineVersion` is the host's
 * `engines.<name>.version` or the engine's own report, absent when neither is known.
 */
export function parkRefusal(spec: DeploymentSpec, engineVersion?: string): ApiError | null {
  if (spec.residency === 'restart_only') return null;
  const reason = cannotParkReason(spec, engineVersion);
  return reason === undefined ? null : apiErrors.capabilityMissingDeepPark(spec.name, reason);
}

/** Why `residency: host_backed` is refused where it cannot hold. */
export const hostBackedRefusals = {
  unifiedMemory: (name: string) =>
    `deployment ${name}: residency: host_backed needs a discrete card, and this host's GPU has unified memory; use ` +
    `residency: deep`,
  /** At deploy, naming a host the deployment may run on. */
  unifiedMemoryOn: (name: string, hostId: string) =>
    `deployment ${name}: residency: host_backed needs a discrete card, and host ${hostId}, which it may run on, ` +
    `has unified memory; ` +
    'use residency: deep, or name only hosts with discrete cards in hosts',
  keepsWeights: (name: string) =>
    `deployment ${name}: residency: host_backed is refused for SGLang with speculative decoding ` +
    `(--speculative-algorithm), ` +
    'which parks with its weights in memory',
} as const;

/** `host_backed` where it cannot hold; `memoryKind` is absent before a host is known. */
function hostBackedRefusal(spec: DeploymentSpec, memoryKind: MemoryKind | undefined): ApiError | null {
  if (spec.residency !== 'host_backed') return null;
  if (keepsWeightsWhenParked(spec)) return apiErrors.invalidRequest(hostBackedRefusals.keepsWeights(spec.name));
  if (memoryKind === 'unified') return apiErrors.invalidRequest(hostBackedRefusals.unifiedMemory(spec.name));
  return null;
}

/** How many instances the deployment may run at once (its document's `instances`). */
export const instanceCount = (spec: Pick<DeploymentSpec, 'instances'>): number => spec.instances ?? 1;

/** A document asking for more instances than the hosts it names: each instance runs on a host of its own. */
export const instancesBeyondHosts = (name: string, instances: number, hosts: number) =>
  `deployment ${name}: instances: ${instances} is more than the ${hosts} hosts it may run on (hosts); ` +
  'each instance runs on a host of its own';

/**
 * Data parallelism in one engine process (vLLM `--data-parallel-size`, SGLang `--dp-size` without DP
 * attention) holds the whole model once per group, which the ledger's even split of one checkpoint
 * over the instance's GPUs does not count: it would launch each GPU with too small a bound.
 */
export const dataParallelRefusal = (name: string, ranks: number, modelShards: number) =>
  `deployment ${name}: its extra_args ask for ${ranks / modelShards} data-parallel groups of ${modelShards} ` +
  `GPU${modelShards === 1 ? '' : 's'}; capyctl sizes an instance's memory for tensor and pipeline parallelism ` +
  `only: serve copies with instances: ${ranks / modelShards} instead`;

/** A document's refusal, and the field `settings check` names for it: the one to change. */
export interface DocumentRefusal {
  field: 'instances' | 'extra_args' | 'residency' | 'max_model_len';
  error: ApiError;
}

/**
 * What a deployment document is refused for on its own, at deploy and by `settings check
 * deployment`, before it could be refused a park: a model its engine does not wake correctly
 * (`parkRefusal`) unless it declares `residency: restart_only`, whether it names another residency
 * or none (a deployment parks by default); a residency that asks for a park (`deep`,
 * `host_backed`) its engine cannot do (DEEP PARK disabled in `capyctl engine list`), and
 * `host_backed` for SGLang with speculative decoding; more `instances` than the `hosts` it
 * names; `extra_args` holding an option that parks the engine on its own (vLLM's `--sleep-idle-ttl`);
 * and `extra_args` asking for data parallelism inside one engine (`dataParallelRefusal`).
 * A deployment left without a residency on an engine that cannot park is not refused: it stops.
 */
export function documentRefusal(spec: DeploymentSpec): DocumentRefusal | null {
  if (spec.hosts && instanceCount(spec) > spec.hosts.length) {
    const error = apiErrors.invalidRequest(instancesBeyondHosts(spec.name, instanceCount(spec), spec.hosts.length));
    return { field: 'instances', error };
  }
  const selfPark = selfParkOptionIn(spec.engine, spec.extra_args);
  if (selfPark) {
    const { label } = engineContracts[spec.engine];
    const where = `deployment ${spec.name}: its extra_args`;
    return {
      field: 'extra_args',
      error: apiErrors.invalidRequest(engineSettingRefusals.selfParkOption(where, selfPark, label)),
    };
  }
  const { ranks, modelShards } = parallelLayout(spec.engine, spec.extra_args);
  if (ranks > modelShards)
    return { field: 'extra_args', error: apiErrors.invalidRequest(dataParallelRefusal(spec.name, ranks, modelShards)) };
  const length = declaredLengthRefusal(spec);
  if (length !== undefined) return { field: 'max_model_len', error: apiErrors.invalidRequest(length) };
  const asksForPark = spec.residency === 'deep' || spec.residency === 'host_backed';
  const error =
    asksForPark && engineTraits[spec.engine].parkTiers.length === 0
      ? apiErrors.capabilityMissingDeepPark(spec.name, cannotParkReasons.engine(spec.engine))
      : (parkRefusal(spec) ?? hostBackedRefusal(spec, undefined));
  return error && { field: 'residency', error };
}

/** A host as the host-dependent rules see it: the memory of its GPUs. */
export interface HostMemory {
  id: string;
  gpus: ReadonlyArray<{ memoryKind: MemoryKind }>;
}

/**
 * What a deployment is refused for on the hosts it may run on, at deploy: `host_backed` where one of
 * them has unified memory. A park on such a host refuses it too (`parkPlan`), for a host that
 * registers later.
 */
export function hostsRefusal(spec: DeploymentSpec, hosts: readonly HostMemory[]): ApiError | null {
  if (spec.residency !== 'host_backed') return null;
  const unified = hosts.find((h) => h.gpus.some((g) => g.memoryKind === 'unified'));
  return unified ? apiErrors.invalidRequest(hostBackedRefusals.unifiedMemoryOn(spec.name, unified.id)) : null;
}

// ─── Park tier ──────────────────────────────────────────────────────────────────────────────────

export interface ParkSituation {
  spec: DeploymentSpec;
  /** The kind of memory of the GPU the deployment runs on. */
  memoryKind: MemoryKind;
  /** What a copy of its weights takes in host RAM (the measured checkpoint). */
  weightsBytes: number;
  /** Host RAM free for that copy now: not counting what other parked copies hold. */
  hostRamFreeBytes: number;
  /** See `parkRefusal`. */
  engineVersion?: string;
  /**
   * Absent when choosing how to launch (the plan's tier is `LaunchContext.parkTier`); at a park, the
   * tier the engine was launched for (null: launched unable to park).
   */
  launchedTier?: ParkTier | null;
}

/** Why a model stops where another would park. Only `no_room` is said in the receipt (spec). */
export type StopReason =
  'restart_only' | 'engine_cannot_park' | 'decision_model' | 'launched_unable_to_park' | 'no_room';

export type ParkPlan =
  { kind: 'park'; tier: ParkTier } | { kind: 'stop'; reason: StopReason } | { kind: 'refused'; error: ApiError };

const park = (tier: ParkTier): ParkPlan => ({ kind: 'park', tier });
const stop = (reason: StopReason): ParkPlan => ({ kind: 'stop', reason });

/** The tier the deployment asks for or the hardware implies, before host RAM is counted. */
function wantedTier(spec: DeploymentSpec, memoryKind: MemoryKind): ParkTier {
  if (keepsWeightsWhenParked(spec)) return 'kv_only';
  if (spec.residency === 'deep' || memoryKind === 'unified') return 'deep';
  return 'host_ram';
}

/**
 * How a deployment gives back its GPU memory: parked at a tier, stopped, or refused.
 *
 * - `residency: restart_only`, an engine that cannot park (TensorFold) and a decision model (they
 *   restart instead of parking in this release) stop.
 * - A model its engine cannot wake is refused (`parkRefusal`), as is `host_backed` where it cannot
 *   hold: on unified memory, and for SGLang with speculative decoding.
 * - SGLang with speculative decoding parks `kv_only` (its weights stay), whatever else it says.
 * - Unified memory and `residency: deep` park deep; a discrete card parks in host RAM when the copy
 *   fits in the host RAM free, and deep when it does not, unless the deployment asked for host RAM
 *   (`host_backed`) or SGLang was launched for it: then there is no room to park and it stops.
 *
 * When launching, `host_backed` is planned as host RAM even if it does not fit yet: the fit is
 * counted again when it parks. An engine whose tier is fixed at launch (SGLang) parks at that tier.
 */
export function parkPlan(s: ParkSituation): ParkPlan {
  const { spec } = s;
  if (spec.residency === 'restart_only') return stop('restart_only');
  const traits = engineTraits[spec.engine];
  if (traits.parkTiers.length === 0) return stop('engine_cannot_park');
  const refusal = parkRefusal(spec, s.engineVersion) ?? hostBackedRefusal(spec, s.memoryKind);
  if (refusal) return { kind: 'refused', error: refusal };
  if (spec.decision) return stop('decision_model');
  if (s.launchedTier === null) return stop('launched_unable_to_park');

  const fixedTier = traits.tierFixedAtLaunch ? s.launchedTier : undefined;
  const tier = fixedTier ?? wantedTier(spec, s.memoryKind);
  if (tier !== 'host_ram' || s.weightsBytes <= s.hostRamFreeBytes) return park(tier);
  const launching = s.launchedTier === undefined;
  if (spec.residency === 'host_backed') return launching ? park('host_ram') : stop('no_room');
  return fixedTier ? stop('no_room') : park('deep');
}

/** A victim's receipt line: a stop's (only "no room" is said), or a park's by its tier. */
function victimLine(
  plan: { kind: 'park'; tier: ParkTier } | { kind: 'stop'; reason: string },
  lines: { stop: string; stopNoRoom: string } & Record<ParkTier, string>,
): string {
  if (plan.kind === 'stop') return plan.reason === 'no_room' ? lines.stopNoRoom : lines.stop;
  return lines[plan.tier];
}

/** The receipt's line for a victim released by `plan`. */
export function releasedLine(plan: Exclude<ParkPlan, { kind: 'refused' }>): string {
  return victimLine(plan, {
    stop: releasedLines.stopped,
    stopNoRoom: releasedLines.stoppedNoRoom,
    host_ram: releasedLines.parkedHostRam,
    deep: releasedLines.parkedDeep,
    kv_only: releasedLines.parkedKvOnly,
  });
}

/** The line of a victim whose release has begun: a start's receipt answers before it ends. */
export function releasingLine(plan: { kind: 'park'; tier: ParkTier } | { kind: 'stop'; reason: string }): string {
  return victimLine(plan, {
    stop: releasingLines.stopping,
    stopNoRoom: releasingLines.stoppingNoRoom,
    host_ram: releasingLines.parkingHostRam,
    deep: releasingLines.parkingDeep,
    kv_only: releasingLines.parkingKvOnly,
  });
}

// ─── Requests run at once ───────────────────────────────────────────────────────────────────────

const figure = (source: MaxRunning['source'], count: number | undefined): MaxRunning =>
  count === undefined ? { source } : { count, source };

/**
 * What CapyCTL passes to the engine or expects of it, before the engine says. In order: an option in
 * the deployment's extra_args wins (they come last on the command line); an option in the host's
 * command (`host_fixed`); `max_concurrent_requests` (`declared`); CapyCTL's default for the engine
 * (`default`); or the engine chooses at start (`engine_default`). Where the host's command is not
 * known (the server), a declared figure is still what CapyCTL passes, and anything else is sized by
 * the host at launch (`on_host`). `count` is absent when an option does not hold a whole number and
 * for `engine_default` and `on_host`.
 */
export function expectedMaxRunning({ spec, command }: MaxRunningContext): MaxRunning {
  const { option } = engineContracts[spec.engine].maxRunning;
  const { defaultMaxRunning } = engineTraits[spec.engine];
  if (findOption(spec.extra_args, option) !== undefined)
    return figure('extra_args', findCount(spec.extra_args, option));
  if (command !== undefined && findOption(command, option) !== undefined)
    return figure('host_fixed', findCount(command, option));
  if (spec.max_concurrent_requests !== undefined) return figure('declared', spec.max_concurrent_requests);
  if (command === undefined) return { source: 'on_host' };
  return defaultMaxRunning === undefined ? { source: 'engine_default' } : figure('default', defaultMaxRunning);
}

/** The count CapyCTL puts on the command line, when it passes one (the option is not already there). */
export function maxRunningToPass(ctx: Required<MaxRunningContext>): number | undefined {
  const expected = expectedMaxRunning(ctx);
  return expected.source === 'declared' || expected.source === 'default' ? expected.count : undefined;
}

/**
 * The figure once the engine reports its own (`reported`; undefined while it has not said).
 *
 * The state_cache rule: an engine runs fewer requests than it was told only when a hybrid model's
 * recurrent state pool holds fewer sequences than that (SGLang caps max_running_requests at its
 * Mamba cache, `resolve_max_num_reqs`). So a report below the count CapyCTL passed or expects is
 * `state_cache` with the engine's count; any other report is `engine`.
 */
export function reportedMaxRunning(expected: MaxRunning, reported: number | undefined): MaxRunning {
  if (reported === undefined) return expected;
  const fewer = expected.count !== undefined && reported < expected.count;
  return figure(fewer ? 'state_cache' : 'engine', reported);
}
