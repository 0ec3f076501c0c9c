/** Server-sent events and token pacing: how an answer leaves the engine over time. */
import { once } from 'node:events';
import type { ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { setImmediate as yieldToOthers, setTimeout as sleep } from 'node:timers/promises';

/** Tokens written in one go at most, so one fast stream cannot starve the others. */
const MAX_BATCH = 64;

/**
 * Produces `count` tokens at `tokensPerS`, the first at once: calls `emit(from, to)` with every run of
 * tokens that is due. At a rate faster than the event loop, runs of up to MAX_BATCH tokens go out
 * together. Rejects with the signal's reason when it aborts.
 */
export async function paceTokens(
  count: number,
  tokensPerS: number,
  signal: AbortSignal,
  emit: (from: number, to: number) => void | Promise<void>,
): Promise<void> {
  const interval = 1000 / tokensPerS;
  const start = performance.now();
  let done = 0;
  while (done < count) {
    signal.throwIfAborted();
    const elapsed = performance.now() - start;
    const due = Math.min(count, Math.floor(elapsed / interval) + 1, done + MAX_BATCH);
    if (due > done) {
      await emit(done, due);
      if (due - done === MAX_BATCH) await yieldToOthers(undefined, { signal });
      done = due;
    } else {
      await sleep(done * interval - elapsed, undefined, { signal });
    }
  }
}

/** One `text/event-stream` reply: `data: {json}` events, then `data: [DONE]`. */
export class EventStream {
  private opened = false;

  constructor(
    private readonly res: ServerResponse,
    private readonly signal: AbortSignal,
  ) {}

  get isOpen(): boolean {
    return this.opened;
  }

  /** The status and headers, once; they leave with the first events. */
  private open(): void {
    if (this.opened) return;
    this.opened = true;
    this.res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  }

  /** Writes frames in one write; waits while the client reads slower than the engine writes. */
  async write(frames: string): Promise<void> {
    this.open();
    if (!this.res.write(frames)) await once(this.res, 'drain', { signal: this.signal });
  }

  /** The last frames and `[DONE]`. */
  end(frames: string): void {
    this.open();
    this.res.end(`${frames}data: [DONE]\n\n`);
  }
}

/** One event as it goes on the wire. */
export function frame(event: unknown): string {
  return `data: ${JSON.stringify(event)}\n\n`;
}
