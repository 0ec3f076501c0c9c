/**
 * What the status page draws of the last hour, kept in the server's memory (a restart starts it
 * afresh): the requests waiting in CapyCTL in total, sampled every 10 s, and the requests answered
 * with an error by code since the server started, read from the counter /metrics serves (one count of
 * each answer, kept by the metrics). The switches' durations come from their receipts in the store.
 */

export const HISTORY_SAMPLE_MS = 10_000;
export const HISTORY_SPAN_MS = 60 * 60_000;
/** One hour of samples. */
const SAMPLES = HISTORY_SPAN_MS / HISTORY_SAMPLE_MS;

export interface WaitingSample {
  atMs: number;
  waiting: number;
}

/** Requests answered with an error, by code, the most frequent first. */
export type ErrorCounts = Array<{ code: string; count: number }>;

export class StatusHistory {
  private readonly samples: WaitingSample[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly waitingTotal: () => number,
    /** Requests answered with an error since the server started, by code. */
    readonly errorsByCode: () => Promise<ErrorCounts>,
  ) {}

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
}
