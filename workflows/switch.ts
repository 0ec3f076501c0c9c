/**
 * The switch: one child workflow `switch/<switch_id>` per transition on a host (spec, "How requests
 * wait and models switch"). It lets the victims serve out their admission window, drains them, parks
 * or stops each, wakes or starts the target, checks a woken target's answer, and starts the
 * requests waiting for it. Each step that changes what serves has its undo, run where a cancellation
 * cannot interrupt it. A release only (no target) is the same path without the target.
 *
 * This function drives the phases in that order; the run's state is `SwitchRun` (switch/run.ts),
 * each phase a file beside it: the window and the drain (drain.ts), the victims' release
 * (release.ts), the target's bring-up (bringUp.ts), what failures mean (failures.ts), and the
 * compensation (compensation.ts).
 */
import { CancellationScope } from '@temporalio/workflow';
import type { SwitchInput, SwitchResult } from '../api/lifecycle.js';
import { bringUp, cancelledBeforeBringUp, wakeAfterVictims } from './switch/bringUp.js';
import { engineNotDrained, targetNotUp, undrained } from './switch/compensation.js';
import { admitAndDrain } from './switch/drain.js';
import { releaseVictims, type VictimOutcome } from './switch/release.js';
import { SwitchRun } from './switch/run.js';

export async function switchWorkflow(input: SwitchInput): Promise<SwitchResult> {
  const run = new SwitchRun(input);
  const result = await runPhases(run);
  await run.finish(result);
  return result;
}

/**
 * Window → drain → park or stop → wake or start → check → release, each failure ending in its
 * compensation. What is begun together here is scheduled in one workflow task, as recorded
 * histories have it (test/replay.test.ts): a step moved across an `await` would not replay.
 */
async function runPhases(run: SwitchRun): Promise<SwitchResult> {
  const { switchId, hostId, target, victims } = run.input;
  let parked: Promise<VictimOutcome[]> = Promise.resolve([]);
  let victimsWithdrawn: Promise<unknown> = Promise.resolve();
  if (victims.length === 0 || run.releaseWithWindow) run.open();
  if (victims.length > 0) {
    const drain = await admitAndDrain(run);
    if (!drain.drained) return undrained(run, drain);
    run.open();
    // Begun in the same workflow task as the parks, which Temporal schedules only once the task
    // completes, so after this local step: the victims' new requests here wait before any park
    // starts (another server's are answered "dispatch closed" until its own step reaches it). The
    // window's step did it already when it `released` them.
    if (!drain.released) victimsWithdrawn = run.gateway.withdrawVictims({ switchId, victims: run.victimInstances });
    parked = releaseVictims(run, drain);
  }
  const woken = wakeAfterVictims(run);
  const [outcomes] = await Promise.all([parked, victimsWithdrawn]);
  const requestsStillRunning = outcomes.reduce((sum, r) => sum + r.requestsStillRunning, 0);
  if (requestsStillRunning > 0) return engineNotDrained(run, outcomes, requestsStillRunning, woken);
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
    : bringUp(run, target, woken);
  // The victims' rows are written while the target comes up: nothing waits for them.
  const [failure] = await Promise.all([bringingUp, ...outcomes.map((r) => r.recorded)]);
  if (failure) return targetNotUp(run, target, victimResults, failure);
  await run.timed('release', null, async () => {
    await run.gateway.startWaiters({ switchId, hostId, instance: target.instance });
    await run.saveInstance(target.instance, 'ready', null);
  });
  return {
    switchId,
    outcome: parkFailed ? 'park_failed' : 'released',
    victims: victimResults,
    target: { instance: target.instance, state: 'ready', tier: null },
  };
}
