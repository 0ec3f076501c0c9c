/**
 * What the benchmark serves and on what: six models (three 8B-class, three small, most popular
 * first) on two discrete 24 GiB cards, which hold one 8B model and one small one each, and the four
 * ways to serve them side by side:
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
import { type EngineProfile, gpuBytes, type ProfileName, profiles, simArgs } from './profiles.js';

const GiB = 2 ** 30;

export interface FleetModel {
  name: string;
  profile: ProfileName;
}

/** Most popular first: the trace's Zipf ranks follow this order. */
export const FLEET: readonly FleetModel[] = [
  { name: 'm1-8b', profile: '8b' },
  { name: 'm2-small', profile: 'small' },
  { name: 'm3-8b', profile: '8b' },
  { name: 'm4-small', profile: 'small' },
  { name: 'm5-8b', profile: '8b' },
  { name: 'm6-small', profile: 'small' },
];

export const GPU_COUNT = 2;
export const GPU_BYTES = 24 * GiB;
/** Host RAM: room for every model's parked copy, on the standalone and on each of the two hosts alike. */
export const HOST_RAM_BYTES = 64 * GiB;

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

/** The host RAM of `low_host_ram`: one 8B copy and the small ones. */
export const LOW_HOST_RAM_BYTES = 24 * GiB;

export const profileOf = (model: string): EngineProfile => {
  const m = FLEET.find((f) => f.name === model);
  if (!m) throw new Error(`${model} is not a model of the benchmark's fleet (${FLEET.map((f) => f.name).join(', ')})`);
  return profiles[m.profile];
};

/** The models each GPU keeps under `fixed`: first fit, in popularity order. */
export function fixedAssignment(): string[][] {
  const gpus: string[][] = Array.from({ length: GPU_COUNT }, () => []);
  const free = Array.from({ length: GPU_COUNT }, () => GPU_BYTES);
  for (const m of FLEET) {
    const need = gpuBytes(profiles[m.profile]);
    const gpu = free.findIndex((f) => f >= need);
    if (gpu === -1) continue;
    gpus[gpu]!.push(m.name);
    free[gpu]! -= need;
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
  return {
    name: model.name,
    engine: 'vllm',
    model: `sim/${model.name}`,
    extra_args: simArgs(profiles[model.profile], pace.speed, pace.processStartMs),
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
