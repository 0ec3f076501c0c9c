/**
 * The benchmark's traffic: the fleet's models asked with Zipf popularity (s = 1.1), bursty
 * on/off arrivals, prompts and answers of lognormal length, most requests streamed — at three mean
 * rates, found by sweeping capyctl's defaults (README, "A workload, not a switch"): light, the
 * knee (where its share within 5 s starts to fall), and past saturation.
 */
import type { Fleet } from './fleet.js';
import type { Arrivals, GeneratorOptions } from './trace.js';

export const loadNames = ['light', 'knee', 'saturated'] as const;
export type LoadName = (typeof loadNames)[number];

/** Mean requests per second at each load, in real time: each fleet has its own (fleet.ts, `loadRates`). */
export type LoadRates = Record<LoadName, number>;

export interface TraceShape {
  seed: number;
  durationS: number;
  zipfS: number;
  arrivals: Arrivals;
}

export const DEFAULT_SHAPE: TraceShape = {
  seed: 34,
  durationS: 120,
  zipfS: 1.1,
  arrivals: { kind: 'bursty', on_mean_s: 10, off_mean_s: 10 },
};

/** What the trace generator is given for one rate: the fleet's models, most popular first. */
export function generatorFor(fleet: Fleet, rate: number, shape: TraceShape): GeneratorOptions {
  return {
    seed: shape.seed,
    duration_s: shape.durationS,
    rate_per_s: rate,
    models: fleet.models.map((m) => m.name),
    zipf_s: shape.zipfS,
    arrivals: shape.arrivals,
    // Chat-like prompts (median 512 tokens) and answers (median 128), with long tails.
    prompt_tokens: { median: 512, sigma: 0.9, min: 16, max: 8_192 },
    output_tokens: { median: 128, sigma: 0.7, min: 8, max: 1_024 },
    // Interactive apps stream; the batch-like ones do not.
    stream_share: fleet.models.map((_, i) => [0.9, 0.6, 0.9, 0.3, 0.8, 0.5][i % 6]!),
  };
}
