/**
 * What a failed step of the switch means, by the names the host's failures carry, and the
 * catalogue's error its waiters and its receipt say for it.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  CancelledFailure,
  isCancellation,
  TimeoutFailure,
} from '@temporalio/workflow';
import { type EngineBusyDetails, type ExitFailureDetails, hostFailureTypes } from '../../api/hostFailures.js';
import { type ApiError, apiErrors } from '../../domain/catalogue.js';

/** What went wrong in a step: its kind, the words of whatever failed, and an exited engine's details. */
export interface StepFailure {
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
export function failureOf(e: unknown): StepFailure {
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

/** A park refused because the engine still had requests at the drain bound, with how many. */
export function busyOf(e: unknown): EngineBusyDetails | undefined {
  const cause = e instanceof ActivityFailure ? e.cause : undefined;
  return cause instanceof ApplicationFailure && cause.type === hostFailureTypes.engineBusy
    ? (cause.details?.[0] as EngineBusyDetails)
    : undefined;
}

/**
 * The spec's three codes keep their text for their own cases: weights that did not come back
 * (reload_failed, or no memory to take them back), and a wake that ran out its window. Anything else
 * says what happened, in the words of what failed.
 */
export function wakeError(deploymentId: string, failure: StepFailure, wakeWindowMs: number): ApiError {
  if (failure.kind === 'reload_failed' || failure.kind === 'out_of_memory')
    return apiErrors.wakeReloadFailed(deploymentId);
  if (failure.kind === 'timeout' || failure.kind === hostFailureTypes.wakeWindowOver)
    return apiErrors.wakeUncertain(deploymentId, wakeWindowMs);
  return apiErrors.wakeFailed(deploymentId, failure.message);
}

/**
 * Why a start failed: an engine that exited says how and its last lines of stderr; a step that ran out
 * of time says so; an engine of a version capyctl does not know, which version and the ones it knows.
 */
export function startError(deploymentId: string, failure: StepFailure, startMs: number): ApiError {
  if (failure.kind === 'version_unsupported') return apiErrors.engineVersionUnsupported(deploymentId, failure.message);
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

/** The drain did not finish within `drainMs`, with `requestsStillRunning` still charged. */
export const drainTimeout = (drainMs: number, requestsStillRunning: number) => (targetId: string) =>
  apiErrors.drainTimeout(targetId, drainMs, requestsStillRunning);
