/**
 * The lower bound a trace is compared against: each request pays its own prefill (and, when it does
 * not stream, its whole answer, since its first token arrives with its last) plus at most one wake
 * of its model — one when its model is not on a GPU as it arrives. What is on the GPUs is an ideal
 * cache: a miss evicts the least recently used models of the GPUs that need the fewest evictions
 * (a model on several GPUs leaves all of them), instantly; no admission window, drain, park, queue
 * or control plane, and nothing waits for another model's switch.
 */
import { cheapestGpus, type Fleet, fleetModel, perGpuNeed } from './fleet.js';
import { decodeMs, prefillMs, profiles } from './profiles.js';
import type { TraceRequest } from './trace.js';

interface Resident {
  model: string;
  /** What it holds on each of its GPUs. */
  bytes: number;
  gpus: number[];
  lastUsedMs: number;
}

/** Each request's lowest first-token time, in real ms, in trace order. */
export function lowerBoundTtfts(fleet: Fleet, requests: readonly TraceRequest[]): number[] {
  let residents: Resident[] = [];
  const on = (gpu: number) => residents.filter((x) => x.gpus.includes(gpu));
  return requests.map((r) => {
    const m = fleetModel(fleet, r.model);
    const p = profiles[m.profile];
    const own = prefillMs(p, r.prompt_tokens) + (r.stream ? 0 : decodeMs(p, r.output_tokens));
    const hit = residents.find((x) => x.model === r.model);
    if (hit) {
      hit.lastUsedMs = r.at_ms;
      return own;
    }
    const gpus = Array.from({ length: fleet.gpuCount }, (_, gpu) => on(gpu));
    const evictable = gpus.map((held) => [...held].sort((a, b) => a.lastUsedMs - b.lastUsedMs));
    const used = gpus.map((held) => held.reduce((s, x) => s + x.bytes, 0));
    const place = cheapestGpus(fleet, m, evictable, used);
    if (!place) throw new Error(`${m.name} fits on no ${m.gpus} GPUs of ${fleet.gpuBytes} bytes`);
    const need = perGpuNeed(m);
    // Evict, per chosen GPU, the least recently used until the model fits there.
    for (const gpu of place.gpus) {
      for (const x of [...on(gpu)].sort((a, b) => a.lastUsedMs - b.lastUsedMs)) {
        if (fleet.gpuBytes - on(gpu).reduce((s, y) => s + y.bytes, 0) >= need) break;
        residents = residents.filter((y) => y !== x);
      }
    }
    residents.push({ model: m.name, bytes: need, gpus: place.gpus, lastUsedMs: r.at_ms });
    return own + p.wakeHostRamMs;
  });
}
