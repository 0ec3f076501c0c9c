/**
 * The switch's first two phases: the victims serve out their admission window, then the gateway's
 * drain waits for the requests running on them. What follows a drain that did not finish is the
 * compensation's (`undrained`).
 */
import { isCancellation, log } from '@temporalio/workflow';
import { type ApiError, apiErrors } from '../../domain/catalogue.js';
import { drainTimeout } from './failures.js';
import type { SwitchRun } from './run.js';

/**
 * The victims drained: those whose requests were cut before any output (they are stopped, not
 * parked), the end of the drain bound, and whether the window's step began their release already.
 */
export interface Drained {
  drained: true;
  cut: Set<string>;
  deadline: number;
  released: boolean;
}

/** The drain did not finish, or the switch was cancelled first: why the target's waiters are answered. */
export interface NotDrained {
  drained: false;
  outcome: 'drain_timeout' | 'cancelled';
  why: (targetId: string) => ApiError;
}

/**
 * The admission window, then the gateway's drain: its count of running requests on the victims
 * reaches zero (no step of its own when none ran as the window closed). The engines' own count is
 * the park's to wait for, until `deadline`, the end of the same drain bound. A switch cancelled
 * before its victims drained (the Web UI's cancel) ends as one whose drain did not finish: the
 * victims serve again, and its waiters hear it was cancelled.
 */
export async function admitAndDrain(run: SwitchRun): Promise<Drained | NotDrained> {
  const { input, victimInstances } = run;
  const { switchId, timeouts } = input;
  // Each victim's row as its release begins, for the window's step to write: parking, or stopping.
  const releaseRows = run.releaseWithWindow
    ? input.victims.map(({ instance, plan }) =>
        plan.kind === 'park' ? run.rowOf(instance, 'parking', plan.tier) : run.rowOf(instance, 'stopping', null),
      )
    : undefined;
  try {
    const closed = await run.timed('window', null, () =>
      run.gateway.closeAdmission(
        { switchId, victims: victimInstances, startedAtMs: input.startedAtMs, windowMs: input.admissionWindowMs },
        releaseRows,
      ),
    );
    return await run.timed('drain', null, async () => {
      const deadline = Date.now() + timeouts.drainMs;
      const drain = closed.drained
        ? closed
        : await run.gateway.awaitDrain({ switchId, victims: victimInstances, timeoutMs: timeouts.drainMs });
      if (!drain.drained)
        return {
          drained: false as const,
          outcome: 'drain_timeout' as const,
          why: drainTimeout(timeouts.drainMs, drain.requestsStillRunning),
        };
      return { drained: true as const, cut: new Set(drain.cutBeforeOutput), deadline, released: closed.released };
    });
  } catch (e) {
    if (!isCancellation(e)) throw e;
    log.warn('switch cancelled before its victims drained; they serve again', { switchId });
    return { drained: false, outcome: 'cancelled', why: apiErrors.switchCancelled };
  }
}
