/**
 * What the benchmark serves and on what (`fleets`: six models on two 24 GiB cards, or seven with
 * mixed tensor parallelism on an 8-GPU box), and the ways to serve them side by side:
 *
 * - `capyctl`: a standalone with its defaults (models park in host RAM and wake on demand);
 * - `restart_only`: the same, every model `residency: restart_only` — the "stop one, start the
 *   other" strategy of tools that do not park;
 * - `fixed`: each GPU keeps the first models that fit on it (most popular first), started by the
 *   operator and kept by `lifecycle.activation: explicit`; the others are explicit too and never
 *   started, so their requests are refused at once (409 `deployment_inactive`) — a fixed model per
 *   GPU serves nothing else, and capyctl does not queue what nothing will ever free room for;
 * - `two_hosts`: a server and two host agents with one card each, on defaults.
 *
 * (And `variants`, below.)
 */
import type { LoadRates } from './loads.js';
import { type EngineProfile, gpuBytes, type ProfileName, profiles, simArgs } from './profiles.js';

const GiB = 2 ** 30;

export interface FleetModel {
  name: string;
  profile: ProfileName;
  /** The GPUs one instance runs on, passed to vLLM as `--tensor-parallel-size`. */
  gpus: number;
}

/** What the benchmark serves and on what: one host's cards and host RAM, and its models. */
export interface Fleet {
  name: FleetName;
  /** Most popular first: the trace's Zipf ranks follow this order. */
  models: readonly FleetModel[];
  gpuCount: number;
  gpuBytes: number;
  /** Host RAM: room for every model's parked copy, on the standalone and on each of the two hosts alike. */
  hostRamBytes: number;
  /** The host RAM of `low_host_ram`. */
  lowHostRamBytes: number;
  /** The strategies this fleet is run with (`two_hosts` and the variants are sized for two cards). */
  strategies: readonly Strategy[];
  /** Its three loads, found by sweeping capyctl's defaults on it. */
  loadRates: LoadRates;
}

export const fleetNames = ['two_cards', 'eight_gpus'] as const;
export type FleetName = (typeof fleetNames)[number];

export const strategies = ['capyctl', 'restart_only', 'fixed', 'two_hosts'] as const;
/**
 * capyctl on defaults, set up otherwise, to measure the choices the spec leaves open:
 * `preinitialized` warms up with `capyctl preinitialize` (every model launched on the first card);
 * `gpu_by_popularity` starts them in an order that launches the two least popular models on the
 * card of the third and fourth, so the two most popular have a card of their own (a parked engine
 * wakes on the card it was launched on);
 * `low_host_ram` has host RAM for one 8B model's parked copy, so the others park deep.
 */
export const variants = ['preinitialized', 'gpu_by_popularity', 'low_host_ram'] as const;
export type Strategy = (typeof strategies)[number] | (typeof variants)[number];

const single = (name: string, profile: ProfileName): FleetModel => ({ name, profile, gpus: 1 });

export const fleets: Record<FleetName, Fleet> = {
  /** Six models (three 8B-class, three small) on two discrete 24 GiB cards, which hold one of each. */
  two_cards: {
    name: 'two_cards',
    models: [
      single('m1-8b', '8b'),
      single('m2-small', 'small'),
      single('m3-8b', '8b'),
      single('m4-small', 'small'),
      single('m5-8b', '8b'),
      single('m6-small', 'small'),
    ],
    gpuCount: 2,
    gpuBytes: 24 * GiB,
    hostRamBytes: 64 * GiB,
    lowHostRamBytes: 24 * GiB,
    strategies: [...strategies, ...variants],
    loadRates: { light: 0.25, knee: 1, saturated: 8 },
  },
  /**
   * An 8-GPU box of 80 GiB cards, as users run them, with mixed tensor parallelism: two 235B MoE
   * models on four cards each (either fills half the box), 30B models on one card and on two, and
   * 8B ones that share a card. Everything at once needs about eleven cards' worth, so it switches.
   */
  eight_gpus: {
    name: 'eight_gpus',
    models: [
      { name: 'g1-235b-tp4', profile: '235b', gpus: 4 },
      single('g2-30b', '30b'),
      single('g3-8b', '8b'),
      { name: 'g4-30b-tp2', profile: '30b', gpus: 2 },
      { name: 'g5-235b-tp4', profile: '235b', gpus: 4 },
      single('g6-8b', '8b'),
      single('g7-30b', '30b'),
    ],
    gpuCount: 8,
    gpuBytes: 80 * GiB,
    hostRamBytes: 1024 * GiB,
    lowHostRamBytes: 256 * GiB,
    strategies: ['capyctl', 'restart_only', 'fixed'],
    loadRates: { light: 0.25, knee: 1, saturated: 8 },
  },
};

export function fleetModel(fleet: Fleet, model: string): FleetModel {
  const m = fleet.models.find((f) => f.name === model);
  if (!m)
    throw new Error(
      `${model} is not a model of the ${fleet.name} fleet (${fleet.models.map((f) => f.name).join(', ')})`,
    );
  return m;
}

export const profileOf = (fleet: Fleet, model: string): EngineProfile => profiles[fleetModel(fleet, model).profile];

/** What one instance of `model` holds on each of its GPUs. */
export const perGpuNeed = (m: FleetModel): number => Math.ceil(gpuBytes(profiles[m.profile]) / m.gpus);

/**
 * The GPUs to put `m` on, given what each holds (`used`) and what could be evicted from it
 * (`evictable`, in the order it would go): the `m.gpus` cards needing the fewest evictions, ties to
 * the cards whose evictions were used least recently, then to the lower indexes; undefined when no
 * such set exists. Shared by `fixed` and the lower bound.
 */
export function cheapestGpus(
  fleet: Fleet,
  m: FleetModel,
  evictable: ReadonlyArray<ReadonlyArray<{ bytes: number; lastUsedMs: number }>>,
  used: readonly number[],
): { gpus: number[] } | undefined {
  const need = perGpuNeed(m);
  const costs = used.map((u, gpu) => {
    let free = fleet.gpuBytes - u;
    let evictions = 0;
    let lastUsedMs = -Infinity;
    for (const r of evictable[gpu] ?? []) {
      if (free >= need) break;
      free += r.bytes;
      evictions++;
      lastUsedMs = Math.max(lastUsedMs, r.lastUsedMs);
    }
    return free >= need ? { gpu, evictions, lastUsedMs } : undefined;
  });
  const usable = costs
    .filter((c) => c !== undefined)
    .sort((a, b) => a.evictions - b.evictions || a.lastUsedMs - b.lastUsedMs || a.gpu - b.gpu);
  if (usable.length < m.gpus) return undefined;
  return {
    gpus: usable
      .slice(0, m.gpus)
      .map((c) => c.gpu)
      .sort((a, b) => a - b),
  };
}

/** The models each GPU keeps under `fixed`: first fit, in popularity order. */
export function fixedAssignment(fleet: Fleet): string[][] {
  const gpus: string[][] = Array.from({ length: fleet.gpuCount }, () => []);
  const used = Array.from({ length: fleet.gpuCount }, () => 0);
  for (const m of fleet.models) {
    const place = cheapestGpus(fleet, m, [], used);
    if (!place) continue;
    for (const gpu of place.gpus) {
      gpus[gpu]!.push(m.name);
      used[gpu]! += perGpuNeed(m);
    }
  }
  return gpus;
}

/** How the engines are played: `speed` times faster than real, their process start (bench ms) measured. */
export interface EnginePace {
  speed: number;
  processStartMs: number;
}

/** The deployment document of `model` under `strategy`. */
export function deploymentDocument(model: FleetModel, strategy: Strategy, pace: EnginePace): Record<string, unknown> {
  const parallel = model.gpus > 1 ? ['--tensor-parallel-size', String(model.gpus)] : [];
  return {
    name: model.name,
    engine: 'vllm',
    model: `sim/${model.name}`,
    extra_args: [...simArgs(profiles[model.profile], pace.speed, pace.processStartMs), ...parallel],
    ...(strategy === 'restart_only' ? { residency: 'restart_only' } : {}),
    ...(strategy === 'fixed' ? { lifecycle: { activation: 'explicit' } } : {}),
  };
}

/**
 * capyctl's own waits, scaled with the engine so that they are its defaults in real time: the
 * admission window (2 s) and the drain bound (30 s). The request deadline is left at its default
 * (minutes at any speed; the replayer stops waiting sooner).
 */
export const scaledSettings = (speed: number) => ({
  admissionWindow: `${Math.round(2_000 / speed)}ms`,
  drainTimeout: `${Math.max(1, Math.round(30 / speed))}s`,
});
