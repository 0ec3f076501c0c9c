/**
 * The switch's compensation: how each step that changed what serves is undone when the switch
 * cannot go on, run where a cancellation cannot interrupt it, and what the target's waiters hear.
 * A drain that did not finish: the victims serve again. A victim's engine still busy at the drain
 * bound: that victim serves again. A target not brought up: it is stopped. (A park that fails is
 * followed by its victim's stop where it fails, in release.ts: the release goes on.)
 */
import { CancellationScope, patched } from '@temporalio/workflow';
import type { SwitchResult, SwitchTarget } from '../../api/lifecycle.js';
import type { ApiError } from '../../domain/catalogue.js';
import type { BringUpFailure } from './bringUp.js';
import type { NotDrained } from './drain.js';
import { drainTimeout } from './failures.js';
import type { VictimOutcome } from './release.js';
import type { SwitchRun, VictimResult } from './run.js';

/**
 * The `patched()` name of a target lost with its host agent leaving its waiters to the next start;
 * older histories (a host agent upgraded before its server) answered them the failure.
 */
const LOST_WITH_AGENT_WAITERS_WAIT = 'lost-with-agent-waiters-wait';

/** The drain did not finish, or the switch was cancelled first: the victims serve again. */
export async function undrained(run: SwitchRun, drain: NotDrained): Promise<SwitchResult> {
  const { switchId } = run.input;
  const [, failed] = await CancellationScope.nonCancellable(() =>
    Promise.all([run.gateway.reopen({ switchId, victims: run.victimInstances }), answerWaiters(run, drain.why)]),
  );
  return { switchId, outcome: drain.outcome, victims: [], ...failed };
}

/**
 * A victim's engine still ran or queued requests at the drain bound (a request that reached it
 * another way, or one it had not yet dropped after its client hung up): it was not parked, and
 * serves again (its row says ready, which opens its dispatch); the target's waiters hear the drain
 * timed out. A victim that did park stays parked, and wakes for its next request. A wake scheduled
 * beside the parks heard that a victim kept its memory, and woke nothing: it is waited for.
 */
export async function engineNotDrained(
  run: SwitchRun,
  outcomes: VictimOutcome[],
  requestsStillRunning: number,
  woken: Promise<boolean> | undefined,
): Promise<SwitchResult> {
  const { switchId, timeouts } = run.input;
  const failed = await CancellationScope.nonCancellable(async () => {
    await Promise.all([...outcomes.map((r) => r.recorded), woken?.catch(() => false)]);
    await Promise.all(
      outcomes.filter((r) => r.requestsStillRunning > 0).map((r) => run.saveInstance(r.victim.instance, 'ready', null)),
    );
    return answerWaiters(run, drainTimeout(timeouts.drainMs, requestsStillRunning));
  });
  const victimResults = outcomes.filter((r) => r.requestsStillRunning === 0).map((r) => r.result);
  return { switchId, outcome: 'drain_timeout', victims: victimResults, ...failed };
}

/**
 * The target was not brought up (`failure`): its engine is stopped (a start or a wake that failed
 * may have left it half up), its row says so, and its waiters hear why. The victims stay released.
 */
export async function targetNotUp(
  run: SwitchRun,
  target: SwitchTarget,
  victimResults: VictimResult[],
  failure: BringUpFailure,
): Promise<SwitchResult> {
  const { switchId, timeouts } = run.input;
  await CancellationScope.nonCancellable(async () => {
    await run.host(timeouts.startMs).stopEngine({ key: target.instance });
    await run.saveInstance(target.instance, 'stopped', null);
    // The target's engine ended with a host agent that has started again since (the new one
    // answered): nothing failed that the next start would meet, so its waiters, and those that
    // came once the host was back, wait for it; their demand stands in the scheduler.
    if (!(failure.lostWithAgent && patched(LOST_WITH_AGENT_WAITERS_WAIT)))
      await run.gateway.failWaiters({ switchId, deploymentId: target.instance.deploymentId, error: failure.error });
  });
  return {
    switchId,
    outcome: failure.outcome,
    victims: victimResults,
    target: { instance: target.instance, state: 'stopped', tier: null },
    error: failure.error,
  };
}

/** The target is not brought up: its waiters hear why (`why` of the target); the error they got. */
async function answerWaiters(run: SwitchRun, why: (targetId: string) => ApiError): Promise<{ error?: ApiError }> {
  const { switchId, target } = run.input;
  if (!target) return {};
  const error = why(target.instance.deploymentId);
  await run.gateway.failWaiters({ switchId, deploymentId: target.instance.deploymentId, error });
  return { error };
}
