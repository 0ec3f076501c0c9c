/**
 * The victims' release: each drained victim is parked at its tier or stopped, all at once, and a
 * park that fails is followed by a stop, so no victim is left half-parked.
 */
import { ActivityFailure, CancellationScope, isCancellation, log, patched } from '@temporalio/workflow';
import { releasedLine } from '../../engines/rules.js';
import type { SwitchVictim, VictimPlan } from '../../api/lifecycle.js';
import { releasedLines } from '../../domain/catalogue.js';
import type { InstanceState, ParkTier } from '../../domain/vocabulary.js';
import type { Drained } from './drain.js';
import { busyOf, failureOf } from './failures.js';
import { measuredResidue } from '../ledger.js';
import type { SwitchRun, VictimResult } from './run.js';

/**
 * The `patched()` name of a failed park recorded as its deployment's last problem (domain/problems.ts);
 * older histories only logged it.
 */
const PARK_FAILURE_RECORDED = 'park-failure-recorded';

export interface VictimOutcome {
  victim: SwitchVictim;
  result: VictimResult;
  parkFailed: boolean;
  /** Requests its engine still had at the drain bound: not parked, it serves again. */
  requestsStillRunning: number;
  /** Its final row, being written. */
  recorded: Promise<void>;
}

/**
 * Every victim parked or stopped. Once the victims drained, their release runs to its end, cancelled
 * or not: a park cut midway would leave its victim to be stopped.
 */
export function releaseVictims(run: SwitchRun, drained: Drained): Promise<VictimOutcome[]> {
  return CancellationScope.nonCancellable(() =>
    Promise.all(run.input.victims.map((v) => parkOrStopVictim(run, v, drained))),
  );
}

/**
 * Parks or stops one victim. A park that fails is followed by a stop: never left half-parked. A
 * park waits for the engine to finish its requests until the drain bound's end (`deadline`); one
 * still busy then is left serving (`requestsStillRunning`). Its final row is being written (`recorded`).
 * A wake beside the parks waits on the host for its word (`WakeAfter`): the park or stop names the switch.
 * `released`: the window's step wrote its row already; a victim `cut` before any output is stopped.
 */
async function parkOrStopVictim(
  run: SwitchRun,
  v: SwitchVictim,
  { cut, deadline, released }: Drained,
): Promise<VictimOutcome> {
  const { switchId, timeouts } = run.input;
  const plan: VictimPlan = cut.has(v.instance.deploymentId) ? { kind: 'stop', reason: 'cut_before_output' } : v.plan;
  const asPlanned = <T>(state: InstanceState, tier: ParkTier | null, step: () => Promise<T>) =>
    released ? step() : run.during(v.instance, state, tier, step);
  const forWake = run.wakeBesideParks ? { switchId } : {};
  /** Why its park failed, in the words of what failed; undefined while it has not. */
  let parkFailure: string | undefined;
  /**
   * Where the victim ended, with its receipt line; unless said, none of its requests still run and
   * its final row is written.
   */
  const outcome = (
    line: string,
    state: InstanceState,
    tier: ParkTier | null,
    {
      requestsStillRunning = 0,
      recorded = Promise.resolve(),
      residueBytes,
    }: Partial<Pick<VictimOutcome, 'requestsStillRunning' | 'recorded'> & { residueBytes: number }> = {},
  ): VictimOutcome => ({
    victim: v,
    result: {
      deploymentId: v.instance.deploymentId,
      instanceIndex: v.instance.instanceIndex,
      released: line,
      state,
      tier,
      gpuIndexes: v.gpuIndexes ?? [],
      ...(residueBytes !== undefined ? { residueBytes } : {}),
    },
    parkFailed: parkFailure !== undefined,
    requestsStillRunning,
    recorded,
  });
  if (plan.kind === 'park') {
    try {
      const parked = await run.timed('park', plan.tier, () =>
        asPlanned('parking', plan.tier, () =>
          run.host(timeouts.startMs).parkEngine({
            key: v.instance,
            tier: plan.tier,
            idleWithinMs: Math.max(0, deadline - Date.now()),
            ...forWake,
          }),
        ),
      );
      // A host from before measured nothing (its park returned nothing): the checkpoint's residue stands.
      const residueBytes = measuredResidue(parked ?? undefined, v.gpuIndexes ?? []);
      return outcome(releasedLine(plan), 'parked', plan.tier, {
        recorded: run.saveInstance(v.instance, 'parked', plan.tier, residueBytes),
        ...(residueBytes !== undefined ? { residueBytes } : {}),
      });
    } catch (e) {
      const busy = busyOf(e);
      if (busy) return outcome(releasedLine(plan), 'ready', null, { requestsStillRunning: busy.requestsStillRunning });
      if (!(e instanceof ActivityFailure) && !isCancellation(e)) throw e;
      log.warn('park failed; stopping the victim', {
        switchId,
        deploymentId: v.instance.deploymentId,
        error: String(e),
      });
      parkFailure = failureOf(e).message;
    }
  }
  await CancellationScope.nonCancellable(() =>
    run.timed('stop', null, async () => {
      const stop = () => run.host(timeouts.startMs).stopEngine({ key: v.instance, ...forWake });
      await (parkFailure !== undefined
        ? run.during(v.instance, 'stopping', null, stop)
        : asPlanned('stopping', null, stop));
      await run.saveInstance(v.instance, 'stopped', null);
    }),
  );
  if (parkFailure === undefined) return outcome(stopLine(plan), 'stopped', null);
  if (patched(PARK_FAILURE_RECORDED))
    await CancellationScope.nonCancellable(() => run.recordProblem(v.instance, 'park_failed', parkFailure));
  return outcome(releasedLines.stoppedParkFailed(parkFailure), 'stopped', null);
}

/** The receipt line of a victim that stopped: only "no room" is said (spec). */
const stopLine = (plan: VictimPlan) =>
  plan.kind === 'stop' && plan.reason === 'no_room' ? releasedLines.stoppedNoRoom : releasedLines.stopped;
