/**
 * Where a revision's checkpoint measurement stands, and what a start of it gets: the one decision
 * the start route, the host scheduler and `capyctl start --wait` share (spec: an unmeasured
 * checkpoint is refused; `--wait` waits for the measurement).
 */
import { z } from 'zod';
import { type ApiError, apiErrors } from './catalogue.js';

/** What `capyctl status deployment` shows as `checkpoint`. */
export const measurementStates = z.enum(['measured', 'measuring', 'failed']);
export type MeasurementState = z.infer<typeof measurementStates>;

/** A revision as the store reads it: its measured checkpoint, or why measuring it failed. */
export interface Measured {
  checkpoint: unknown;
  measureFailure: string | null;
}

export function measurementState(r: Measured): MeasurementState {
  if (r.checkpoint !== null) return 'measured';
  return r.measureFailure !== null ? 'failed' : 'measuring';
}

/** A start waits for the measurement only while it runs: a failed one does not change by waiting. */
export const awaitsMeasurement = (state: MeasurementState): boolean => state === 'measuring';

/** Why a start of `deploymentName` is refused for its checkpoint, or null once it is measured. */
export function unmeasuredRefusal(deploymentName: string, r: Measured): ApiError | null {
  const state = measurementState(r);
  if (state === 'measured') return null;
  return apiErrors.checkpointUnmeasured(deploymentName, state === 'failed' ? r.measureFailure : null);
}

/** What a revision's measured checkpoint brings to a GPU; null while it is not measured. */
export function checkpointOf(
  r: Pick<Measured, 'checkpoint'> | undefined,
): { weightBytes: number; kvBytes: number } | null {
  const checkpoint = r?.checkpoint as { weightBytes?: number; kvBytes?: number } | null | undefined;
  return checkpoint ? { weightBytes: checkpoint.weightBytes ?? 0, kvBytes: checkpoint.kvBytes ?? 0 } : null;
}
