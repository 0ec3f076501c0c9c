/**
 * A seeded source of random numbers and the draws a trace needs (exponential gaps, lognormal
 * lengths, Zipf ranks): the same seed gives the same trace on every machine and Node version,
 * which Math.random does not.
 */

/** splitmix32: small, fast, and good enough for arrival times and lengths. */
export class Random {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform in [0, 1). */
  next(): number {
    this.state = (this.state + 0x9e3779b9) >>> 0;
    let z = this.state;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return ((z ^ (z >>> 16)) >>> 0) / 2 ** 32;
  }

  /** Exponential with the given mean (the gap between two Poisson arrivals). */
  exponential(mean: number): number {
    return -mean * Math.log(1 - this.next());
  }

  /** Standard normal (Box–Muller). */
  normal(): number {
    const u = 1 - this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * this.next());
  }

  /** Lognormal: `median` · e^(σ·N(0,1)). */
  lognormal(median: number, sigma: number): number {
    return median * Math.exp(sigma * this.normal());
  }

  /** An index drawn with probability proportional to `weights[i]`. */
  pick(cumulative: readonly number[]): number {
    const x = this.next() * cumulative[cumulative.length - 1]!;
    const i = cumulative.findIndex((c) => x < c);
    return i === -1 ? cumulative.length - 1 : i;
  }
}

/** The cumulative Zipf weights of `n` ranks: rank k (from 1) is drawn ∝ 1/k^s. */
export function zipfCumulative(n: number, s: number): number[] {
  let sum = 0;
  return Array.from({ length: n }, (_, i) => (sum += 1 / (i + 1) ** s));
}
