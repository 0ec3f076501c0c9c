/**
 * A workload as a trace: every request's arrival time, model, prompt and answer length and whether
 * it streams. Made from a seed (Zipf-skewed popularity, Poisson or bursty on/off arrivals, lognormal
 * lengths, a streaming share per model), written as JSONL so a run repeats exactly, and read back
 * from JSONL, so a trace recorded elsewhere replays the same way.
 *
 * A JSONL trace is one request per line — `{"at_ms": 1250.5, "model": "m1-8b", "prompt_tokens":
 * 512, "output_tokens": 128, "stream": true}`, `at_ms` from the trace's start, in order — and may
 * begin with one `{"generator": {…}}` line saying how it was made.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { z } from 'zod';
import { Random, zipfCumulative } from './random.js';

export const traceRequest = z.strictObject({
  at_ms: z.number().finite().min(0),
  model: z.string().min(1),
  prompt_tokens: z.number().int().min(1).max(32_768),
  output_tokens: z.number().int().min(1).max(8_192),
  stream: z.boolean(),
});
export type TraceRequest = z.infer<typeof traceRequest>;

/** A length distribution: lognormal around `median`, clipped to [min, max]. */
export const lengthDistribution = z.strictObject({
  median: z.number().positive(),
  sigma: z.number().min(0),
  min: z.number().int().min(1),
  max: z.number().int().min(1),
});
export type LengthDistribution = z.infer<typeof lengthDistribution>;

export const arrivals = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('poisson') }),
  /**
   * On/off: arrivals come only during "on" periods (exponential, mean `on_mean_s`), at the rate that
   * keeps the mean `rate_per_s`, separated by silent "off" periods (mean `off_mean_s`).
   */
  z.strictObject({ kind: z.literal('bursty'), on_mean_s: z.number().positive(), off_mean_s: z.number().positive() }),
]);
export type Arrivals = z.infer<typeof arrivals>;

export const generatorOptions = z.strictObject({
  seed: z.number().int(),
  duration_s: z.number().positive(),
  /** Mean requests per second over the whole trace. */
  rate_per_s: z.number().positive(),
  /** Most popular first: rank k is asked ∝ 1/k^zipf_s. */
  models: z.array(z.string().min(1)).min(1),
  zipf_s: z.number().min(0),
  arrivals,
  prompt_tokens: lengthDistribution,
  output_tokens: lengthDistribution,
  /** Per model (same order as `models`): the share of its requests that stream. */
  stream_share: z.array(z.number().min(0).max(1)),
});
export type GeneratorOptions = z.infer<typeof generatorOptions>;

export interface Trace {
  /** How it was made, when it says. */
  generator?: GeneratorOptions;
  requests: TraceRequest[];
}

export class TraceError extends Error {
  override name = 'TraceError';
}

/** Arrival times in ms, in order, from `rand`. */
function arrivalTimes(o: GeneratorOptions, rand: Random): number[] {
  const end = o.duration_s * 1000;
  const times: number[] = [];
  if (o.arrivals.kind === 'poisson') {
    for (let t = rand.exponential(1000 / o.rate_per_s); t < end; t += rand.exponential(1000 / o.rate_per_s))
      times.push(t);
    return times;
  }
  const { on_mean_s, off_mean_s } = o.arrivals;
  const onRate = (o.rate_per_s * (on_mean_s + off_mean_s)) / on_mean_s;
  // Starts in a random phase of the cycle, so a short trace is not always a burst first.
  let on = rand.next() < on_mean_s / (on_mean_s + off_mean_s);
  for (let t = 0; t < end; on = !on) {
    const periodEnd = t + rand.exponential(1000 * (on ? on_mean_s : off_mean_s));
    if (on)
      for (
        let a = t + rand.exponential(1000 / onRate);
        a < Math.min(periodEnd, end);
        a += rand.exponential(1000 / onRate)
      )
        times.push(a);
    t = periodEnd;
  }
  return times;
}

const length = (d: LengthDistribution, rand: Random) =>
  Math.min(d.max, Math.max(d.min, Math.round(rand.lognormal(d.median, d.sigma))));

export function generateTrace(options: GeneratorOptions): Trace {
  const o = generatorOptions.parse(options);
  if (o.stream_share.length !== o.models.length)
    throw new TraceError(`stream_share has ${o.stream_share.length} shares for ${o.models.length} models`);
  const rand = new Random(o.seed);
  const popularity = zipfCumulative(o.models.length, o.zipf_s);
  const requests = arrivalTimes(o, rand).map((at): TraceRequest => {
    const rank = rand.pick(popularity);
    return {
      at_ms: Math.round(at * 10) / 10,
      model: o.models[rank]!,
      prompt_tokens: length(o.prompt_tokens, rand),
      output_tokens: length(o.output_tokens, rand),
      stream: rand.next() < o.stream_share[rank]!,
    };
  });
  return { generator: o, requests };
}

export function traceJsonl(trace: Trace): string {
  const lines = trace.requests.map((r) => JSON.stringify(r));
  if (trace.generator) lines.unshift(JSON.stringify({ generator: trace.generator }));
  return lines.join('\n') + '\n';
}

export function writeTrace(path: string, trace: Trace): void {
  writeFileSync(path, traceJsonl(trace));
}

/** Parses a JSONL trace; a bad line is refused with its number and what is wrong with it. */
export function parseTrace(text: string, origin: string): Trace {
  const trace: Trace = { requests: [] };
  const lines = text.split('\n');
  lines.forEach((line, i) => {
    if (line.trim() === '') return;
    const where = `${origin}:${i + 1}`;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (e) {
      throw new TraceError(`${where}: not JSON (${(e as Error).message})`);
    }
    if (i === 0 && typeof value === 'object' && value !== null && 'generator' in value) {
      const parsed = z.strictObject({ generator: generatorOptions }).safeParse(value);
      if (!parsed.success) throw new TraceError(`${where}: the generator line: ${issues(parsed.error)}`);
      trace.generator = parsed.data.generator;
      return;
    }
    const parsed = traceRequest.safeParse(value);
    if (!parsed.success) throw new TraceError(`${where}: ${issues(parsed.error)}`);
    const before = trace.requests[trace.requests.length - 1];
    if (before && parsed.data.at_ms < before.at_ms)
      throw new TraceError(`${where}: at_ms ${parsed.data.at_ms} is before the line above's ${before.at_ms}`);
    trace.requests.push(parsed.data);
  });
  if (trace.requests.length === 0) throw new TraceError(`${origin}: no requests`);
  return trace;
}

function issues(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.length ? i.path.join('.') : 'the line'}: ${i.message}`).join('; ');
}

export function readTrace(path: string): Trace {
  return parseTrace(readFileSync(path, 'utf8'), path);
}

/** Requests per model, most asked first. */
export function modelCounts(requests: readonly TraceRequest[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const r of requests) counts.set(r.model, (counts.get(r.model) ?? 0) + 1);
  return new Map([...counts].sort((a, b) => b[1] - a[1]));
}
