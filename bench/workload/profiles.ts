/**
 * Engine profiles for the simulator, from published measurements of vLLM on discrete cards: how long
 * a cold start, a park (sleep level 1), a wake from host RAM (level 1) and from disk (level 2) take,
 * and how fast the prompt is read and the answer written, for a small model, an 8B-class one, and the
 * 30B and 235B MoE models of the 8-GPU fleet (the 235B one on four cards).
 * Every figure names where it comes from; README.md ("A workload, not a switch") has the table.
 *
 * The benchmark plays them `speed` times faster (engine and trace alike) so three loads fit in
 * minutes; `simArgs` divides the times and multiplies the rates, and the report multiplies what it
 * measured back, so every figure it prints is in the real engine's seconds.
 */

const GiB = 2 ** 30;

export interface EngineProfile {
  name: string;
  /** What the figures were measured on. */
  measuredOn: string;
  weightsBytes: number;
  kvBytes: number;
  coldStartMs: number;
  /** Sleep level 1: the weights copied to host RAM, the KV cache dropped. */
  parkMs: number;
  /** Wake from level 1: the weights copied back. */
  wakeHostRamMs: number;
  /** Wake from level 2: the memory taken back and the weights reloaded from disk. */
  wakeDeepMs: number;
  prefillTokensPerS: number;
  decodeTokensPerS: number;
  /** Where each figure comes from, by field. */
  sources: Record<'coldStartMs' | 'parkMs' | 'wakeHostRamMs' | 'wakeDeepMs' | 'prefill' | 'decode' | 'memory', string>;
}

const VLLM_SLEEP_BLOG = 'vLLM blog, "Zero-Reload Model Switching with vLLM Sleep Mode" (2025-10-26, vLLM 0.11.0)';

export const profiles = {
  small: {
    name: 'small (Qwen3-0.6B class)',
    measuredOn: 'RTX A4000 16 GB (A100 where said)',
    weightsBytes: 1.25 * GiB,
    kvBytes: 1.5 * GiB,
    coldStartMs: 23_500,
    parkMs: 130,
    wakeHostRamMs: 100,
    wakeDeepMs: 850,
    prefillTokensPerS: 9_500,
    decodeTokensPerS: 196,
    sources: {
      coldStartMs: `${VLLM_SLEEP_BLOG}, A4000 timeline data: Qwen3-0.6B load 21.0 s + warm-up 2.5 s`,
      parkMs: `${VLLM_SLEEP_BLOG}, A4000 timeline data: Qwen3-0.6B sleep 0.13 s`,
      wakeHostRamMs: `${VLLM_SLEEP_BLOG}, A4000 timeline data: Qwen3-0.6B wake 0.10–0.11 s`,
      wakeDeepMs: `${VLLM_SLEEP_BLOG}, "Level 2 … 0.85s avg" for Qwen3-0.6B (A100)`,
      prefill:
        'ai.wmx.dev/benchmarks: Qwen2.5-0.5B on an L4, vLLM 0.23, 256-token prompts, TTFT p50 27.0 ms at concurrency 1 (≈ 9,500 tokens/s)',
      decode: 'ai.wmx.dev/benchmarks: the same run, ITL p50 5.1 ms (≈ 196 tokens/s per stream)',
      memory: 'Qwen3-0.6B in bf16: 1.2 GB of weights; a 1.5 GiB KV cache (our choice)',
    },
  },
  '8b': {
    name: '8B class (Qwen3-8B / Llama-3.1-8B)',
    measuredOn: 'A100 (L40S, H20, RTX 4090 where said)',
    weightsBytes: 16 * GiB,
    kvBytes: 4 * GiB,
    coldStartMs: 48_000,
    parkMs: 340,
    wakeHostRamMs: 2_190,
    wakeDeepMs: 6_530,
    prefillTokensPerS: 4_668,
    decodeTokensPerS: 75,
    sources: {
      coldStartMs:
        'Tensorfuse, "Reducing GPU Cold Start Time when using vLLM" (2025-09-01): Llama-3.1-8B on an L40S with its caches warm, weight loading 18 s + Dynamo 10 s + graph compilation 13 s + graph capture 7 s',
      parkMs:
        'vllm-project/vllm#58066: Qwen3-8B on an H20, a level-1 sleep with its pinned host buffers ready, 0.343 s (the first sleep, which allocates them, 6.19 s)',
      wakeHostRamMs:
        'vllm-project/vllm#48337 (comment of 2026-07-15): Qwen3-8B on an A100, level-1 wake 2.19 s (LoRA on)',
      wakeDeepMs: 'vllm-project/vllm#48337, the same comment: level-2 wake 6.53 s',
      prefill:
        'dmatora/LLM-inference-speed-benchmarks#10: Llama 3 8B (Q6) on an RTX 4090, prompt evaluation 4,668 tokens/s',
      decode:
        'johnmusgrave.com, "vLLM throughput-latency sweep on NVIDIA A100": Llama-3.1-8B, A100 40 GB, vLLM 0.23, about 75 tokens/s at concurrency 1',
      memory: 'Qwen3-8B in bf16: 16.4 GB of weights; a 4 GiB KV cache (our choice)',
    },
  },
  '30b': {
    name: '30B MoE class (Qwen3-Coder-30B-A3B)',
    measuredOn: 'A100 80 GB, one card',
    weightsBytes: 57 * GiB,
    kvBytes: 8 * GiB,
    coldStartMs: 50_050,
    parkMs: 2_780,
    wakeHostRamMs: 2_870,
    wakeDeepMs: 18_330,
    prefillTokensPerS: 4_668,
    decodeTokensPerS: 110,
    sources: {
      coldStartMs: `${VLLM_SLEEP_BLOG}, plotly-sleep-mode.js: Qwen3-Coder-30B-A3B (TP=1) load 47.63 s + warm-up 2.42 s`,
      parkMs: `${VLLM_SLEEP_BLOG}, plotly-sleep-mode.js: the same model's level-1 sleeps, 2.78 s`,
      wakeHostRamMs: `${VLLM_SLEEP_BLOG}, plotly-switching-comparison.js: level-1 wakes 2.85–2.89 s`,
      wakeDeepMs:
        "not published for this model: the level-1 wake plus a reload from disk at the 8B profile's pace (6.53 − 2.19 s for 16 GiB), scaled to 57 GiB (2.87 + 15.46 s)",
      prefill:
        "not published for this model: the 8B profile's rate (3B parameters are active, so it is no faster than that)",
      decode: `${VLLM_SLEEP_BLOG}, plotly-sleep-mode.js: prompts of at most 100 output tokens answered in 0.54–1.0 s after a wake (≈ 110 tokens/s)`,
      memory: 'Qwen3-Coder-30B-A3B in bf16: 30.5 B parameters, 57 GiB of weights; an 8 GiB KV cache (our choice)',
    },
  },
  '235b': {
    name: '235B MoE class (Qwen3-235B-A22B, FP8)',
    measuredOn: 'A100 80 GB ×4 (tensor parallelism 4)',
    weightsBytes: 219 * GiB,
    kvBytes: 40 * GiB,
    coldStartMs: 99_990,
    parkMs: 5_890,
    wakeHostRamMs: 5_410,
    wakeDeepMs: 20_330,
    prefillTokensPerS: 4_668,
    decodeTokensPerS: 75,
    sources: {
      coldStartMs: `${VLLM_SLEEP_BLOG}, plotly-sleep-mode.js: Qwen3-235B-A22B-Instruct-2507-FP8 (TP=4) load 97.61 s + warm-up 2.38 s`,
      parkMs: `${VLLM_SLEEP_BLOG}, plotly-sleep-mode.js: the same model's level-1 sleeps, 5.78–6.01 s`,
      wakeHostRamMs: `${VLLM_SLEEP_BLOG}, plotly-switching-comparison.js: level-1 wakes 5.27–5.66 s`,
      wakeDeepMs:
        "not published for this model: the level-1 wake plus a reload from disk at the 8B profile's pace per card (55 GiB a card, the four read at once: 5.41 + 14.92 s)",
      prefill: "not published for this model: the 8B profile's rate (22B parameters are active, split over four cards)",
      decode: `${VLLM_SLEEP_BLOG}, plotly-sleep-mode.js: prompts of at most 100 output tokens answered in 0.92–1.8 s after a wake (≈ 75 tokens/s at the slower end)`,
      memory:
        'Qwen3-235B-A22B in FP8: 235 B parameters, 219 GiB of weights, 55 GiB on each of four cards; a 40 GiB KV cache (our choice)',
    },
  },
} as const satisfies Record<string, EngineProfile>;
export type ProfileName = keyof typeof profiles;

/** What the model holds on its GPU when loaded. */
export const gpuBytes = (p: EngineProfile) => p.weightsBytes + p.kvBytes;

/**
 * The simulator flags that play `p` at `speed` times its real pace. `processStartMs` (bench ms) is
 * what the simulator's own process takes to start, which the profile's cold start already counts.
 */
export function simArgs(p: EngineProfile, speed: number, processStartMs: number): string[] {
  const ms = (v: number) => String(Math.max(1, Math.round(v / speed)));
  return [
    '--sim-weights',
    String(p.weightsBytes),
    '--sim-kv',
    String(p.kvBytes),
    '--sim-load-ms',
    ms(p.coldStartMs - processStartMs * speed),
    '--sim-park-ms',
    ms(p.parkMs),
    '--sim-wake-ms',
    ms(p.wakeHostRamMs),
    // A deep wake is the level-1 wake's allocation, then the reload.
    '--sim-reload-ms',
    ms(p.wakeDeepMs - p.wakeHostRamMs),
    '--sim-prefill-tokens-per-s',
    String(p.prefillTokensPerS * speed),
    '--sim-tokens-per-s',
    String(p.decodeTokensPerS * speed),
  ];
}

/** The real time (ms) a request's prompt takes to read: what its first token waits for at least. */
export const prefillMs = (p: EngineProfile, promptTokens: number) => (1000 * promptTokens) / p.prefillTokensPerS;

/** The real time (ms) `tokens` output tokens take after the first. */
export const decodeMs = (p: EngineProfile, tokens: number) => (1000 * Math.max(0, tokens - 1)) / p.decodeTokensPerS;
