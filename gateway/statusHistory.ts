/**
 * What the status page draws of the last hour, kept in the server's memory (a restart starts it
 * afresh): the requests waiting in CapyCTL in total, sampled every 10 s, and the requests answered
 * with an error, counted by the catalogue's code since the server started. The switches' durations
 * come from their receipts in the store.
 */
import type { RequestMetrics } from './requestMetrics.js';

export const HISTORY_SAMPLE_MS = 10_000;
export const HISTORY_SPAN_MS = 60 * 60_000;
/** One hour of samples. */
const SAMPLES = HISTORY_SPAN_MS / HISTORY_SAMPLE_MS;

export interface WaitingSample {
  atMs: number;
  waiting: number;
}

export class StatusHistory {
  private readonly samples: WaitingSample[] = [];
  private readonly errors = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly waitingTotal: () => number) {}

  /** Samples now and every `HISTORY_SAMPLE_MS` until `stop`. */
  start(): void {
    this.sample(Date.now());
    this.timer = setInterval(() => this.sample(Date.now()), HISTORY_SAMPLE_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  sample(atMs: number): void {
    this.samples.push({ atMs, waiting: this.waitingTotal() });
    if (this.samples.length > SAMPLES) this.samples.shift();
  }

  /** The samples of the last hour before `nowMs`, oldest first. */
  waiting(nowMs: number): WaitingSample[] {
    return this.samples.filter((s) => nowMs - s.atMs <= HISTORY_SPAN_MS);
  }

  /** Requests answered with an error, by code, the most frequent first. */
  errorsByCode(): Array<{ code: string; count: number }> {
    return [...this.errors].map(([code, count]) => ({ code, count })).sort((a, b) => b.count - a.count);
  }

  /** `metrics` as it was, with each error answer counted here too. */
  alongside(metrics: RequestMetrics): RequestMetrics {
    return {
      answered: (deployment, status, end) => {
        // An engine's own error passed on whole has no code of capyctl's: it is counted by its status.
        const key = end !== 'none' && end !== 'cut' ? end : end === 'none' && status >= 400 ? `engine ${status}` : null;
        if (key !== null) this.errors.set(key, (this.errors.get(key) ?? 0) + 1);
        metrics.answered(deployment, status, end);
      },
      waited: (deployment, seconds) => metrics.waited(deployment, seconds),
      firstOutput: (deployment, seconds) => metrics.firstOutput(deployment, seconds),
    };
  }
}
