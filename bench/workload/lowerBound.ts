/**
 * The lower bound a trace is compared against: each request pays its own prefill (and, when it does
 * not stream, its whole answer, since its first token arrives with its last) plus at most one wake
 * of its model — one when its model is not on a GPU as it arrives. What is on the GPUs is an ideal
 * cache: a miss evicts the least recently used models of the GPU that needs the fewest evictions,
 * instantly; no admission window, drain, park, queue or control plane, and nothing waits for
 * another model's switch.
 */
import { GPU_BYTES, GPU_COUNT, profileOf } from './fleet.js';
import { decodeMs, gpuBytes, prefillMs } from './profiles.js';
import type { TraceRequest } from './trace.js';

interface Resident {
  model: string;
  bytes: number;
  lastUsedMs: number;
}

/** The GPU to put `bytes` on and the models to evict there: fewest evictions, then the lower index. */
function placeOn(gpus: Resident[][], bytes: number): { gpu: number; evict: Resident[] } {
  let best: { gpu: number; evict: Resident[] } | undefined;
  gpus.forEach((held, gpu) => {
    let free = GPU_BYTES - held.reduce((s, r) => s + r.bytes, 0);
    const evict: Resident[] = [];
    for (const r of [...held].sort((a, b) => a.lastUsedMs - b.lastUsedMs)) {
      if (free >= bytes) break;
      evict.push(r);
      free += r.bytes;
    }
    if (free >= bytes && (!best || evict.length < best.evict.length)) best = { gpu, evict };
  });
  if (!best) throw new Error(`a model of ${bytes} bytes fits on no GPU of ${GPU_BYTES} bytes`);
  return best;
}

/** Each request's lowest first-token time, in real ms, in trace order. */
export function lowerBoundTtfts(requests: readonly TraceRequest[]): number[] {
  const gpus: Resident[][] = Array.from({ length: GPU_COUNT }, () => []);
  return requests.map((r) => {
    const p = profileOf(r.model);
    const own = prefillMs(p, r.prompt_tokens) + (r.stream ? 0 : decodeMs(p, r.output_tokens));
    const hit = gpus.flat().find((x) => x.model === r.model);
    if (hit) {
      hit.lastUsedMs = r.at_ms;
      return own;
    }
    const { gpu, evict } = placeOn(gpus, gpuBytes(p));
    gpus[gpu] = gpus[gpu]!.filter((x) => !evict.includes(x));
    gpus[gpu]!.push({ model: r.model, bytes: gpuBytes(p), lastUsedMs: r.at_ms });
    return own + p.wakeHostRamMs;
  });
}
