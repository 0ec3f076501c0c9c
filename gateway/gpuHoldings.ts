/**
 * What each GPU of a host holds, from the store's rows: the one rule placement, the hosts' listing
 * (`capyctl list hosts`, the status page) and `/metrics` count memory by. An instance on N GPUs holds
 * an even share of its bytes on each (`perGpuBytes`, as the host's ledger splits it). One whose GPUs
 * the store does not record (a row written before it recorded them) may be on any of its host's GPUs,
 * so it counts whole on every one: never less than a GPU may hold.
 */
import type { Instance } from '../api/catalogue.js';
import { perGpuBytes } from '../engines/parallelism.js';

export type HeldRow = Pick<Instance, 'gpuIndexes' | 'gpuBytes'>;

/** What `row` counts on GPU `gpuIndex` of its host. */
export function heldOnGpu(row: HeldRow, gpuIndex: number): number {
  if (row.gpuIndexes.length === 0) return row.gpuBytes;
  return row.gpuIndexes.includes(gpuIndex) ? perGpuBytes(row.gpuBytes, row.gpuIndexes.length) : 0;
}

/** What `rows`, all of one host, hold on each of its GPUs `gpuIndexes`, in that order. */
export const heldPerGpu = (gpuIndexes: readonly number[], rows: readonly HeldRow[]): number[] =>
  gpuIndexes.map((g) => rows.reduce((sum, r) => sum + heldOnGpu(r, g), 0));
