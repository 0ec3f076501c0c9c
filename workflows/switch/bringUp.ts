/**
 * The target's bring-up: a start (launch, ready, its first answer to the wake check recorded) or a
 * wake and its check, one step on the host. A wake whose victims give their memory back is scheduled
 * beside their parks (`wakeAfterVictims`). What the switch does when the target is not up is the
 * compensation's (`targetNotUp`).
 */
import { ActivityCancellationType, log, patched } from '@temporalio/workflow';
import type { ProbeAnswer } from '../../engines/engine.js';
import type { WakeAfter } from '../../activities/hostActivities.js';
import { hostFailureTypes } from '../../api/hostFailures.js';
import type { SwitchTarget, WakeReference } from '../../api/lifecycle.js';
import { type ApiError, apiErrors } from '../../domain/catalogue.js';
import type { SwitchOutcome } from '../../domain/vocabulary.js';
import { gpuIndexesOf } from '../ledger.js';
import { compareAnswers, probeFor, wakeQuestion } from '../wakeCheck.js';
import { failureOf, startError, wakeError } from './failures.js';
import type { SwitchRun } from './run.js';

/** Why a target was not brought up; `lostWithAgent`: its engine ended with the host agent its step began on. */
export interface BringUpFailure {
  outcome: SwitchOutcome;
  error: ApiError;
  lostWithAgent?: true;
}

/**
 * The target's wake, scheduled beside its victims' parks (`SwitchRun.wakeBesideParks`): the host
 * begins it once they gave their memory back. True when its answer differs from the first one.
 */
export function wakeAfterVictims(run: SwitchRun): Promise<boolean> | undefined {
  const { switchId, target, timeouts } = run.input;
  return run.wakeReference?.then((first) =>
    wakeAndCheck(run, target!, first, { switchId, victims: run.victimInstances, wakeWindowMs: timeouts.wakeWindowMs }),
  );
}

/**
 * Wakes or starts the target; null when it is ready to serve, else why not. `woken`: its wake,
 * scheduled beside the parks.
 */
export async function bringUp(
  run: SwitchRun,
  t: SwitchTarget,
  woken: Promise<boolean> | undefined,
): Promise<BringUpFailure | null> {
  const id = t.instance.deploymentId;
  const { timeouts } = run.input;
  try {
    if (t.action === 'start') {
      await run.during(t.instance, 'starting', t.tier, () => run.timed('start', null, () => startAndRecord(run, t)));
      await run.store.recordStartFailure({ deploymentId: id, failure: null });
      return null;
    }
    // The first answer is read while the waking row is written: the wake step needs it (one
    // scheduled beside the parks has read it already).
    const woke = woken ?? run.firstAnswer(t).then((first) => wakeAndCheck(run, t, first));
    const mismatch = await run.during(t.instance, 'waking', t.tier, () => woke);
    return mismatch ? await wakeFailed(run, t, apiErrors.wakeMismatch(id)) : null;
  } catch (e) {
    const failure = failureOf(e);
    const lost = failure.kind === hostFailureTypes.lostWithAgent ? { lostWithAgent: true as const } : {};
    if (t.action === 'start') {
      const error = startError(id, failure, timeouts.startMs);
      const problem = run.problemOf(t.instance, 'start_failed', error.message);
      await run.store.recordStartFailure({ deploymentId: id, failure: error.message, problem });
      return { outcome: 'start_failed', error, ...lost };
    }
    return wakeFailed(run, t, wakeError(id, failure, timeouts.wakeWindowMs), lost);
  }
}

/**
 * The `patched()` name of a failed wake recorded as its deployment's last problem (domain/problems.ts);
 * older histories did not record it.
 */
const WAKE_FAILURE_RECORDED = 'wake-failure-recorded';

/** A wake that failed, recorded as the deployment's last problem. */
async function wakeFailed(
  run: SwitchRun,
  t: SwitchTarget,
  error: ApiError,
  lost: { lostWithAgent?: true } = {},
): Promise<BringUpFailure> {
  if (patched(WAKE_FAILURE_RECORDED)) await run.recordProblem(t.instance, 'wake_failed', error.message);
  return { outcome: 'wake_failed', error, ...lost };
}

/** Why a target whose switch was cancelled is not brought up; a wake begun beside the parks is waited for. */
export async function cancelledBeforeBringUp(
  t: SwitchTarget,
  woken: Promise<boolean> | undefined,
): Promise<BringUpFailure> {
  await woken?.catch(() => false);
  return { outcome: 'cancelled', error: apiErrors.switchCancelled(t.instance.deploymentId) };
}

/** A full start: launch, ready, and the first answer to the wake check, recorded for this generation. */
async function startAndRecord(run: SwitchRun, t: SwitchTarget): Promise<void> {
  const { startMs } = run.input.timeouts;
  const deadline = Date.now() + startMs;
  await run.host(startMs).launchEngine({
    key: t.instance,
    spec: t.spec,
    gpuIndexes: gpuIndexesOf(t),
    parkTier: t.tier,
    memory: t.memory,
  });
  await run.host(deadline - Date.now()).awaitEngineReady({ key: t.instance });
  const probe = probeFor(t.spec);
  const answer = await run.host(deadline - Date.now()).probeEngine({ key: t.instance, probe });
  await run.store.recordWakeReference({ ...t.instance, revision: t.revision, probe, answer });
}

/**
 * A wake and its check, one step on the host within the wake window. True when the answer differs
 * from the first one (`wakeQuestion`). The host wakes an engine once per switch: a scheduler that
 * began the wake as it started the switch left this step to join it. Given `after`, the host begins it once
 * the switch's victims gave their memory back, and bounds it by the wake window from then; one that
 * kept its memory (its engine still ran requests) leaves the target asleep, and the switch does not
 * bring it up (`engineNotDrained`). Cancelled, it is waited for: a wake must not outlive the switch.
 */
async function wakeAndCheck(
  run: SwitchRun,
  t: SwitchTarget,
  first: WakeReference | null,
  after?: WakeAfter,
): Promise<boolean> {
  const { switchId, timeouts } = run.input;
  const { phases } = run;
  const { reference, probe, unchecked } = wakeQuestion(t, first);
  if (unchecked)
    log.warn('no first answer for this generation; the wake is not checked', {
      switchId,
      deploymentId: t.instance.deploymentId,
    });
  const began = Date.now();
  const step = after
    ? // The victims' parks and, if one fails, its stop, each within the start bound, then the window.
      run.host(2 * timeouts.startMs + timeouts.wakeWindowMs, ActivityCancellationType.WAIT_CANCELLATION_COMPLETED)
    : run.host(timeouts.wakeWindowMs);
  const woke = await step.wakeEngine({
    switchId,
    key: t.instance,
    tier: t.tier! /* checked as the run began (SwitchRun) */,
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
