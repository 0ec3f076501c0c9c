/**
 * The switch: one child workflow `switch/<switch_id>` per transition on a host (spec, "How requests
 * wait and models switch"). It lets the victims serve out their admission window, drains them, parks
 * or stops each, wakes or starts the target, checks a woken target's answer, and starts the
 * requests waiting for it. Each step that changes what serves has its undo, run where a cancellation
 * cannot interrupt it. A release only (no target) is the same path without the target.
 */
import {
  ActivityCancellationType,
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  isCancellation,
  log,
  patched,
  proxyActivities,
  proxyLocalActivities,
  TimeoutFailure,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { ProbeAnswer } from '../engines/engine.js';
import { releasedLine } from '../engines/rules.js';
import type { HostActivities, WakeAfter } from '../activities/hostActivities.js';
import { type EngineBusyDetails, type ExitFailureDetails, hostFailureTypes } from '../api/hostFailures.js';
import type { StoreActivities } from '../activities/storeActivities.js';
import { type ApiError, apiErrors, releasedLines } from '../domain/catalogue.js';
import type { InstanceState, ParkTier, SwitchOutcome, SwitchPhase } from '../domain/vocabulary.js';
import { HEARTBEAT_TIMEOUT_MS } from '../api/heartbeat.js';
import { searchAttributes, serverStepOptions, taskQueues } from './definitions.js';
import type {
  InstanceRef,
  PhaseTiming,
  VictimPlan,
  SwitchInput,
  SwitchResult,
  SwitchTarget,
  SwitchVictim,
  WakeReference,
} from '../api/lifecycle.js';
import { everyGateway, RETRY } from './everyGateway.js';
import { instanceRow } from './ledger.js';
import { switchSummary } from './switchSummary.js';
import { compareAnswers, probeFor, wakeQuestion } from './wakeCheck.js';

type VictimResult = SwitchResult['victims'][number];
/** Why a target was not brought up; `lostWithAgent`: its engine ended with the host agent that launched it. */
interface BringUpFailure {
  outcome: SwitchOutcome;
  error: ApiError;
  lostWithAgent?: true;
}
interface VictimOutcome {
  victim: SwitchVictim;
  result: VictimResult;
  parkFailed: boolean;
  /** Requests its engine still had at the drain bound: not parked, it serves again. */
  requestsStillRunning: number;
  /** Its final row, being written. */
  recorded: Promise<void>;
}

/**
 * The `patched()` name of a wake scheduled beside its switch's parks (the host begins it as they end:
 * `WakeAfter`); older histories scheduled it once the parks had ended.
 */
const WAKE_BESIDE_PARKS = 'wake-beside-parks';
/**
 * The `patched()` name of the victims' release begun by the window's own step once it leaves them
 * drained (`closeAdmissionThenRelease`), with the first receipt written beside it; older histories
 * withdrew the victims and wrote their rows in a local step of its own, after the window.
 */
const RELEASE_WITH_WINDOW = 'release-with-window';
/**
 * The `patched()` name of a target lost with its host agent leaving its waiters to the next start;
 * older histories (a host agent upgraded before its server) answered them the failure.
 */
const LOST_WITH_AGENT_WAITERS_WAIT = 'lost-with-agent-waiters-wait';

export async function switchWorkflow(input: SwitchInput): Promise<SwitchResult> {
  const { switchId, hostId, target, victims, timeouts } = input;
  if (target?.action === 'wake' && target.tier === null) {
    throw ApplicationFailure.nonRetryable(
      `switch ${switchId}: a wake of ${target.name} needs the tier it parked at`,
      'invalid_switch',
    );
  }
  // The gateway's steps act on the victim instances, not on every instance of their deployments.
  const victimInstances = victims.map((v) => v.instance);

  // A host agent that died never picks its tasks up: schedule-to-close bounds every host step. A
  // step cancelled is waited for when its work must not outlive the switch's view of it.
  const host = (withinMs: number, cancellationType?: ActivityCancellationType) =>
    proxyActivities<HostActivities>({
      taskQueue: taskQueues.host(hostId),
      scheduleToCloseTimeout: Math.max(1, withinMs),
      heartbeatTimeout: HEARTBEAT_TIMEOUT_MS,
      retry: RETRY,
      ...(cancellationType === undefined ? {} : { cancellationType }),
    });
  // The store's rows run inside the workflow task (definitions.ts), each whole even when the switch is
  // cancelled (the Web UI's cancel): a row says what is, and the compensation reads and writes them.
  // The gateway's steps run on every server that shares the store (everyGateway.ts); the waits (the
  // window, the drain) are activities of their own, visible while they wait.
  const store = runWhole(proxyLocalActivities<StoreActivities>(serverStepOptions));
  // A wake whose victims give their memory back is scheduled beside their parks or stops: the host
  // begins it as they end, so no round trip through Temporal lies between them. Its first answer is
  // read with the window (the wake step needs it), not after the parks.
  const wakeBesideParks = target?.action === 'wake' && victims.length > 0 && patched(WAKE_BESIDE_PARKS);
  // The target's first answer, as the scheduler read it with the demand, or read here.
  const firstAnswer = (t: SwitchTarget): Promise<WakeReference | null> =>
    input.wakeReference !== undefined
      ? Promise.resolve(input.wakeReference)
      : store.findWakeReference({ deploymentId: t.instance.deploymentId, instanceIndex: t.instance.instanceIndex });
  const wakeReference = wakeBesideParks ? firstAnswer(target) : undefined;
  const releaseWithWindow = victims.length > 0 && patched(RELEASE_WITH_WINDOW);
  // The scheduler reads the live servers with the model a demand wants; a switch started otherwise reads them here.
  const gateway = everyGateway(
    input.serverTaskQueue,
    input.liveServerQueues ? Promise.resolve(input.liveServerQueues) : store.liveServerQueues(),
  );

  upsertSearchAttributes([
    ...(target ? [{ key: searchAttributes.target, value: target.name }] : []),
    { key: searchAttributes.victims, value: victims.map((v) => v.name) },
    { key: searchAttributes.host, value: hostId },
    { key: searchAttributes.outcome, value: 'running' },
  ]);
  // How long each step took, for the server's metrics: sent with the last receipt.
  const phases: PhaseTiming[] = [];
  const timed = async <T>(phase: SwitchPhase, tier: ParkTier | null, step: () => Promise<T>): Promise<T> => {
    const began = Date.now();
    try {
      return await step();
    } finally {
      phases.push({ phase, tier, ms: Date.now() - began });
    }
  };
  const receipt = (outcome: SwitchOutcome, victimResults: VictimResult[], finishedAtMs: number | null) =>
    store.saveSwitchReceipt({
      switchId,
      hostId,
      targetDeploymentId: target?.instance.deploymentId ?? null,
      victims: victimResults.map(({ deploymentId, instanceIndex, released: line }) => ({
        deploymentId,
        instanceIndex,
        released: line,
      })),
      outcome,
      summary: switchSummary(input),
      startedAtMs: input.startedAtMs,
      finishedAtMs,
      ...(finishedAtMs === null ? {} : { phases }),
    });
  // What each instance holds, for the rows `list deployments` and the load endpoint read, as the
  // scheduler read it: every read here would be on the waiters' clock.
  const rowOf = (instance: InstanceRef, state: InstanceState, tier: ParkTier | null) =>
    instanceRow(hostId, instance, state, tier, input.checkpoints[instance.deploymentId] ?? null);
  const saveInstance = (instance: InstanceRef, state: InstanceState, tier: ParkTier | null) =>
    store.saveInstance(rowOf(instance, state, tier));
  /** A victim's row as its release begins: parking, or stopping. */
  const releaseRow = (v: SwitchVictim) =>
    v.plan.kind === 'park' ? rowOf(v.instance, 'parking', v.plan.tier) : rowOf(v.instance, 'stopping', null);
  /**
   * Runs a step while its in-between state (`parking`, `waking` …) is written, so a list shows what
   * is happening without the write adding to the waiters' clock. The write is awaited even when the
   * step fails: it must not land after the state that follows.
   */
  const during = async <T>(
    instance: InstanceRef,
    state: InstanceState,
    tier: ParkTier | null,
    step: () => Promise<T>,
  ): Promise<T> => {
    const saving = saveInstance(instance, state, tier);
    try {
      return await step();
    } finally {
      await saving;
    }
  };

  /**
   * The first receipt ("running"), written beside the first of the switch's own rows rather than
   * before the window: every local step the workflow task waits for is on the waiters' clock.
   */
  let opened: Promise<unknown> | undefined;
  const open = () => (opened ??= receipt('running', [], null));
  /** The target is not brought up: its waiters hear why (`why` of the target); the error they got. */
  const answerWaiters = async (why: (targetId: string) => ApiError): Promise<{ error?: ApiError }> => {
    if (!target) return {};
    const error = why(target.instance.deploymentId);
    await gateway.failWaiters({ switchId, deploymentId: target.instance.deploymentId, error });
    return { error };
  };
  /** The drain did not finish, with `requestsStillRunning` still charged. */
  const drainTimeout = (requestsStillRunning: number) => (targetId: string) =>
    apiErrors.drainTimeout(targetId, timeouts.drainMs, requestsStillRunning);

  const result = await runSwitch();
  await open();
  await CancellationScope.nonCancellable(async () => {
    upsertSearchAttributes([{ key: searchAttributes.outcome, value: result.outcome }]);
    await receipt(result.outcome, result.victims, Date.now());
  });
  return result;

  async function runSwitch(): Promise<SwitchResult> {
    let cut = new Set<string>();
    let drainDeadline = Date.now();
    let victimsWithdrawn: Promise<unknown> = Promise.resolve();
    let released = false;
    if (victims.length === 0 || releaseWithWindow) open();
    if (victims.length > 0) {
      const drain = await admitAndDrain();
      if (!drain.drained) {
        const [, failed] = await CancellationScope.nonCancellable(() =>
          Promise.all([gateway.reopen({ switchId, victims: victimInstances }), answerWaiters(drain.why)]),
        );
        return { switchId, outcome: drain.outcome, victims: [], ...failed };
      }
      ({ cut, deadline: drainDeadline, released } = drain);
      open();
      // Begun in the same workflow task as the parks, which Temporal schedules only once the task
      // completes, so after this local step: the victims' new requests here wait before any park
      // starts (another server's are answered "dispatch closed" until its own step reaches it). The
      // window's step did it already when it `released` them.
      if (!released) victimsWithdrawn = gateway.withdrawVictims({ switchId, victims: victimInstances });
    }
    // Once the victims drained, their release runs to its end, cancelled or not: a park cut midway
    // would leave its victim to be stopped.
    const parked = CancellationScope.nonCancellable(() =>
      Promise.all(victims.map((v) => parkOrStopVictim(v, cut.has(v.instance.deploymentId), drainDeadline, released))),
    );
    const woken = wakeReference?.then((first) =>
      wakeAndCheck(target!, first, { switchId, victims: victimInstances, wakeWindowMs: timeouts.wakeWindowMs }),
    );
    const [outcomes] = await Promise.all([parked, victimsWithdrawn]);
    const requestsStillRunning = outcomes.reduce((sum, r) => sum + r.requestsStillRunning, 0);
    if (requestsStillRunning > 0) return engineNotDrained(outcomes, requestsStillRunning, woken);
    const parkFailed = outcomes.some((r) => r.parkFailed);
    const victimResults = outcomes.map((r) => r.result);
    if (!target) {
      await Promise.all(outcomes.map((r) => r.recorded));
      return { switchId, outcome: parkFailed ? 'park_failed' : 'released', victims: victimResults };
    }

    // Cancelled while the victims were released: the target is not brought up, and ends as after a
    // failed bring-up, stopped (a wake begun beside the parks may have touched its engine).
    const bringingUp = CancellationScope.current().consideredCancelled
      ? cancelledBeforeBringUp(target, woken)
      : bringUp(target, woken);
    // The victims' rows are written while the target comes up: nothing waits for them.
    const [failure] = await Promise.all([bringingUp, ...outcomes.map((r) => r.recorded)]);
    if (failure) {
      await CancellationScope.nonCancellable(async () => {
        await host(timeouts.startMs).stopEngine({ key: target.instance });
        await saveInstance(target.instance, 'stopped', null);
        // The target's engine ended with a host agent that has started again since (the new one
        // answered): nothing failed that the next start would meet, so its waiters, and those that
        // came once the host was back, wait for it; their demand stands in the scheduler.
        if (!(failure.lostWithAgent && patched(LOST_WITH_AGENT_WAITERS_WAIT)))
          await gateway.failWaiters({ switchId, deploymentId: target.instance.deploymentId, error: failure.error });
      });
      return {
        switchId,
        outcome: failure.outcome,
        victims: victimResults,
        target: { instance: target.instance, state: 'stopped', tier: null },
        error: failure.error,
      };
    }
    await timed('release', null, async () => {
      await gateway.startWaiters({ switchId, hostId, instance: target.instance });
      await saveInstance(target.instance, 'ready', null);
    });
    return {
      switchId,
      outcome: parkFailed ? 'park_failed' : 'released',
      victims: victimResults,
      target: { instance: target.instance, state: 'ready', tier: null },
    };
  }

  /**
   * A victim's engine still ran or queued requests at the drain bound (a request that reached it
   * another way, or one it had not yet dropped after its client hung up): it was not parked, and
   * serves again (its row says ready, which opens its dispatch); the target's waiters hear the drain
   * timed out. A victim that did park stays parked, and wakes for its next request. A wake scheduled
   * beside the parks heard that a victim kept its memory, and woke nothing: it is waited for.
   */
  async function engineNotDrained(
    outcomes: VictimOutcome[],
    requestsStillRunning: number,
    woken: Promise<boolean> | undefined,
  ): Promise<SwitchResult> {
    const failed = await CancellationScope.nonCancellable(async () => {
      await Promise.all([...outcomes.map((r) => r.recorded), woken?.catch(() => false)]);
      await Promise.all(
        outcomes.filter((r) => r.requestsStillRunning > 0).map((r) => saveInstance(r.victim.instance, 'ready', null)),
      );
      return answerWaiters(drainTimeout(requestsStillRunning));
    });
    const victimResults = outcomes.filter((r) => r.requestsStillRunning === 0).map((r) => r.result);
    return { switchId, outcome: 'drain_timeout', victims: victimResults, ...failed };
  }

  /**
   * The admission window, then the gateway's drain: its count of running requests on the victims
   * reaches zero (no step of its own when none ran as the window closed). The engines' own count is
   * the park's to wait for, until `deadline`, the end of the same drain bound. A switch cancelled
   * before its victims drained (the Web UI's cancel) ends as one whose drain did not finish: the
   * victims serve again, and its waiters hear it was cancelled.
   */
  async function admitAndDrain(): Promise<
    | { drained: true; cut: Set<string>; deadline: number; released: boolean }
    | { drained: false; outcome: 'drain_timeout' | 'cancelled'; why: (targetId: string) => ApiError }
  > {
    try {
      const closed = await timed('window', null, () =>
        gateway.closeAdmission(
          { switchId, victims: victimInstances, startedAtMs: input.startedAtMs, windowMs: input.admissionWindowMs },
          releaseWithWindow ? victims.map(releaseRow) : undefined,
        ),
      );
      return await timed('drain', null, async () => {
        const deadline = Date.now() + timeouts.drainMs;
        const drain = closed.drained
          ? closed
          : await gateway.awaitDrain({ switchId, victims: victimInstances, timeoutMs: timeouts.drainMs });
        if (!drain.drained)
          return {
            drained: false as const,
            outcome: 'drain_timeout' as const,
            why: drainTimeout(drain.requestsStillRunning),
          };
        return { drained: true as const, cut: new Set(drain.cutBeforeOutput), deadline, released: closed.released };
      });
    } catch (e) {
      if (!isCancellation(e)) throw e;
      log.warn('switch cancelled before its victims drained; they serve again', { switchId });
      return { drained: false, outcome: 'cancelled', why: apiErrors.switchCancelled };
    }
  }

  /**
   * Parks or stops one victim. A park that fails is followed by a stop: never left half-parked. A
   * park waits for the engine to finish its requests until `idleBy` (the drain bound's end); one
   * still busy then is left serving (`requestsStillRunning`). Its final row is being written (`recorded`).
   * A wake beside the parks waits on the host for its word (`WakeAfter`): the park or stop names the switch.
   * `released`: the window's step wrote its row (`releaseRow`) already.
   */
  async function parkOrStopVictim(
    v: SwitchVictim,
    cutBeforeOutput: boolean,
    idleBy: number,
    released: boolean,
  ): Promise<VictimOutcome> {
    const plan: VictimPlan = cutBeforeOutput ? { kind: 'stop', reason: 'cut_before_output' } : v.plan;
    const asPlanned = <T>(state: InstanceState, tier: ParkTier | null, step: () => Promise<T>) =>
      released ? step() : during(v.instance, state, tier, step);
    const forWake = wakeBesideParks ? { switchId } : {};
    const done = (line: string, state: InstanceState, tier: ParkTier | null) => ({
      deploymentId: v.instance.deploymentId,
      instanceIndex: v.instance.instanceIndex,
      released: line,
      state,
      tier,
    });
    let parkFailed = false;
    if (plan.kind === 'park') {
      try {
        await timed('park', plan.tier, () =>
          asPlanned('parking', plan.tier, () =>
            host(timeouts.startMs).parkEngine({
              key: v.instance,
              tier: plan.tier,
              idleWithinMs: Math.max(0, idleBy - Date.now()),
              ...forWake,
            }),
          ),
        );
        const recorded = saveInstance(v.instance, 'parked', plan.tier);
        return {
          victim: v,
          result: done(releasedLine(plan), 'parked', plan.tier),
          parkFailed,
          requestsStillRunning: 0,
          recorded,
        };
      } catch (e) {
        const busy = busyOf(e);
        if (busy)
          return {
            victim: v,
            result: done(releasedLine(plan), 'ready', null),
            parkFailed,
            requestsStillRunning: busy.requestsStillRunning,
            recorded: Promise.resolve(),
          };
        if (!(e instanceof ActivityFailure) && !isCancellation(e)) throw e;
        log.warn('park failed; stopping the victim', {
          switchId,
          deploymentId: v.instance.deploymentId,
          error: String(e),
        });
        parkFailed = true;
      }
    }
    await CancellationScope.nonCancellable(() =>
      timed('stop', null, async () => {
        const stop = () => host(timeouts.startMs).stopEngine({ key: v.instance, ...forWake });
        await (parkFailed ? during(v.instance, 'stopping', null, stop) : asPlanned('stopping', null, stop));
        await saveInstance(v.instance, 'stopped', null);
      }),
    );
    return {
      victim: v,
      result: done(stopLine(plan), 'stopped', null),
      parkFailed,
      requestsStillRunning: 0,
      recorded: Promise.resolve(),
    };
  }

  /**
   * Wakes or starts the target; null when it is ready to serve, else why not. `woken`: its wake,
   * scheduled beside the parks.
   */
  async function bringUp(t: SwitchTarget, woken: Promise<boolean> | undefined): Promise<BringUpFailure | null> {
    const id = t.instance.deploymentId;
    try {
      if (t.action === 'start') {
        await during(t.instance, 'starting', t.tier, () => timed('start', null, () => startAndRecord(t)));
        await store.recordStartFailure({ deploymentId: id, failure: null });
        return null;
      }
      // The first answer is read while the waking row is written: the wake step needs it (one
      // scheduled beside the parks has read it already).
      const woke = woken ?? firstAnswer(t).then((first) => wakeAndCheck(t, first));
      const mismatch = await during(t.instance, 'waking', t.tier, () => woke);
      return mismatch ? { outcome: 'wake_failed', error: apiErrors.wakeMismatch(id) } : null;
    } catch (e) {
      const failure = failureOf(e);
      const lost = failure.kind === hostFailureTypes.lostWithAgent ? { lostWithAgent: true as const } : {};
      if (t.action === 'start') {
        const error = startError(id, failure, timeouts.startMs);
        await store.recordStartFailure({ deploymentId: id, failure: error.message });
        return { outcome: 'start_failed', error, ...lost };
      }
      return { outcome: 'wake_failed', error: wakeError(id, failure, timeouts.wakeWindowMs), ...lost };
    }
  }

  /** Why a target whose switch was cancelled is not brought up; a wake begun beside the parks is waited for. */
  async function cancelledBeforeBringUp(t: SwitchTarget, woken: Promise<boolean> | undefined): Promise<BringUpFailure> {
    await woken?.catch(() => false);
    return { outcome: 'cancelled', error: apiErrors.switchCancelled(t.instance.deploymentId) };
  }

  /** A full start: launch, ready, and the first answer to the wake check, recorded for this generation. */
  async function startAndRecord(t: SwitchTarget): Promise<void> {
    const deadline = Date.now() + timeouts.startMs;
    await host(timeouts.startMs).launchEngine({
      key: t.instance,
      spec: t.spec,
      gpuIndex: t.gpuIndex,
      parkTier: t.tier,
      memory: t.memory,
    });
    await host(deadline - Date.now()).awaitEngineReady({ key: t.instance });
    const probe = probeFor(t.spec);
    const answer = await host(deadline - Date.now()).probeEngine({ key: t.instance, probe });
    await store.recordWakeReference({ ...t.instance, revision: t.revision, probe, answer });
  }

  /**
   * A wake and its check, one step on the host within the wake window. True when the answer differs
   * from the first one (`wakeQuestion`). The host wakes an engine once per switch: a scheduler that
   * began the wake as it started the switch left this step to join it. Given `after`, the host begins it once
   * the switch's victims gave their memory back, and bounds it by the wake window from then; one that
   * kept its memory (its engine still ran requests) leaves the target asleep, and the switch does not
   * bring it up (`engineNotDrained`). Cancelled, it is waited for: a wake must not outlive the switch.
   */
  async function wakeAndCheck(t: SwitchTarget, first: WakeReference | null, after?: WakeAfter): Promise<boolean> {
    const { reference, probe, unchecked } = wakeQuestion(t, first);
    if (unchecked)
      log.warn('no first answer for this generation; the wake is not checked', {
        switchId,
        deploymentId: t.instance.deploymentId,
      });
    const began = Date.now();
    const step = after
      ? // The victims' parks and, if one fails, its stop, each within the start bound, then the window.
        host(2 * timeouts.startMs + timeouts.wakeWindowMs, ActivityCancellationType.WAIT_CANCELLATION_COMPLETED)
      : host(timeouts.wakeWindowMs);
    const woke = await step.wakeEngine({
      switchId,
      key: t.instance,
      tier: t.tier! /* checked at the start */,
      probe,
      ...(after ? { after } : {}),
    });
    if (woke.victimsKept) return false;
    // The host times the wake itself; a history recorded before it did is timed here.
    phases.push({ phase: 'wake', tier: t.tier, ms: woke.wakeMs ?? Date.now() - began - woke.checkMs });
    if (!reference || !woke.answer) return false;
    phases.push({ phase: 'check', tier: t.tier, ms: woke.checkMs });
    return compareAnswers(reference.answer as ProbeAnswer, woke.answer) !== null;
  }
}

/** `steps` with each call run whole, in a scope a cancellation of the workflow does not reach. */
function runWhole<T extends object>(steps: T): T {
  return new Proxy(steps, {
    get: (target, name) => {
      const step = Reflect.get(target, name) as (...args: unknown[]) => Promise<unknown>;
      return (...args: unknown[]) => CancellationScope.nonCancellable(() => step(...args));
    },
  });
}

/** The receipt line of a victim that stopped: only "no room" is said (spec). */
const stopLine = (plan: VictimPlan) =>
  plan.kind === 'stop' && plan.reason === 'no_room' ? releasedLines.stoppedNoRoom : releasedLines.stopped;

/** A park refused because the engine still had requests at the drain bound, with how many. */
function busyOf(e: unknown): EngineBusyDetails | undefined {
  const cause = e instanceof ActivityFailure ? e.cause : undefined;
  return cause instanceof ApplicationFailure && cause.type === hostFailureTypes.engineBusy
    ? (cause.details?.[0] as EngineBusyDetails)
    : undefined;
}

/** What went wrong in a step: its kind, the words of whatever failed, and an exited engine's details. */
interface StepFailure {
  /**
   * An engine error's kind (`reload_failed`, `out_of_memory`, `not_ready`, …) or the host's
   * (`engine_exited`, …); `timeout` when the step ran out of time, `cancelled` when it was cancelled.
   */
  kind: string;
  message: string;
  exit?: ExitFailureDetails;
}

/**
 * What went wrong in a step, by the names the host's failures carry. Anything else is a bug in this
 * code and is rethrown, so the workflow task fails visibly instead of stopping a healthy model.
 */
function failureOf(e: unknown): StepFailure {
  const cause = e instanceof ActivityFailure ? e.cause : e;
  if (cause instanceof ApplicationFailure) {
    return {
      kind: cause.type ?? 'error',
      message: cause.message,
      exit: cause.details?.[0] as ExitFailureDetails | undefined,
    };
  }
  if (cause instanceof TimeoutFailure) return { kind: 'timeout', message: cause.message };
  if (cause instanceof CancelledFailure || isCancellation(e)) return { kind: 'cancelled', message: 'cancelled' };
  throw e;
}

/**
 * The spec's three codes keep their text for their own cases: weights that did not come back
 * (reload_failed, or no memory to take them back), and a wake that ran out its window. Anything else
 * says what happened, in the words of what failed.
 */
function wakeError(deploymentId: string, failure: StepFailure, wakeWindowMs: number): ApiError {
  if (failure.kind === 'reload_failed' || failure.kind === 'out_of_memory')
    return apiErrors.wakeReloadFailed(deploymentId);
  if (failure.kind === 'timeout' || failure.kind === hostFailureTypes.wakeWindowOver)
    return apiErrors.wakeUncertain(deploymentId, wakeWindowMs);
  return apiErrors.wakeFailed(deploymentId, failure.message);
}

/**
 * Why a start failed: an engine that exited says how and its last lines of stderr; a step that ran out
 * of time says so.
 */
function startError(deploymentId: string, failure: StepFailure, startMs: number): ApiError {
  if (failure.exit) {
    const how = `${failure.exit.how}${failure.kind === 'out_of_memory' ? ': out of memory' : ''}`;
    return apiErrors.startFailedEngineExited(deploymentId, how, failure.exit.stderr);
  }
  const reason =
    failure.kind === 'timeout'
      ? `not ready within ${startMs} ms`
      : failure.kind === 'cancelled'
        ? 'the start was cancelled'
        : failure.message;
  return apiErrors.startFailed(deploymentId, reason);
}
