/**
 * Where a revision's checkpoint measurement stands, and what a start of it gets: the one decision
 * the start route, the host scheduler and `capyctl start --wait` share (spec: an unmeasured
 * checkpoint is refused; `--wait` waits for the measurement).
 */
import { z } from 'zod';
import { type ApiError, apiErrors } from './catalogue.js';
import type { MaxModelLenSource } from './vocabulary.js';

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

/**
 * What a measured checkpoint brings to a GPU, as the store keeps it and the ledger counts it. The
 * fields after the KV budget are absent from what was measured (and from workflow histories written)
 * before they were counted: no residue, and the engine chose its length.
 */
export interface ReservedMemory {
  weightBytes: number;
  /** The KV budget beside the weights. */
  kvBytes: number;
  /** What its engine keeps on its GPUs while parked (all of them together), held running too. */
  residueBytes?: number;
  /** The longest sequence its engine is launched for; null when the engine chooses. */
  maxModelLen?: number | null;
  maxModelLenFrom?: MaxModelLenSource;
}

/**
 * What a revision's measured checkpoint brings to a GPU; null while it is not measured. A checkpoint
 * measured before residues and lengths were counted holds none and lets the engine choose.
 */
export function checkpointOf(r: Pick<Measured, 'checkpoint'> | undefined): Required<ReservedMemory> | null {
  const c = r?.checkpoint as Partial<ReservedMemory> | null | undefined;
  if (!c) return null;
  return {
    weightBytes: c.weightBytes ?? 0,
    kvBytes: c.kvBytes ?? 0,
    residueBytes: c.residueBytes ?? 0,
    maxModelLen: c.maxModelLen ?? null,
    maxModelLenFrom: c.maxModelLenFrom ?? 'engine_default',
  };
}
