/** A command's receipt as `capyctl` prints it: the state, the switch to open, and what it released. */
import type { ReceiptBody } from '../api/deployments.js';

/** `outcome`: what the first line says happened, when the state alone does not (a delete). */
export function receiptText(r: ReceiptBody, outcome: string = r.state): string {
  const lines = [`${r.name}: ${outcome}`];
  if (r.switch_id) lines.push(`switch_id: ${r.switch_id} (workflow switch/${r.switch_id} in the Temporal Web UI)`);
  for (const v of r.victims)
    lines.push(
      `victim: ${v.name} (deployment ${v.deployment_id}, instance ${v.instance_index}, ${gpusText(v.gpu_indexes)}) ${v.released}`,
    );
  return `${lines.join('\n')}\n`;
}

/** The GPUs a victim gave back: `GPU 0`, `GPUs 0,1,2,3`. */
const gpusText = (gpuIndexes: readonly number[]): string =>
  `${gpuIndexes.length === 1 ? 'GPU' : 'GPUs'} ${gpuIndexes.join(',')}`;
