/**
 * The engine's batch: up to `limit` requests run at once, the rest wait inside the engine in
 * arrival order (they are the engine's "waiting" figure). A closed gate (SGLang's pause) lets none
 * start.
 */
export class Slots {
  running = 0;
  private readonly queue: Array<() => void> = [];
  private gateOpen = true;

  constructor(readonly limit: number) {}

  get waiting(): number {
    return this.queue.length;
  }

  /** Resolves with the slot's release once the request may run; rejects when `signal` aborts first. */
  acquire(signal: AbortSignal): Promise<() => void> {
    if (this.canStart() && this.queue.length === 0) return Promise.resolve(this.take());
    return new Promise((resolve, reject) => {
      const start = () => {
        signal.removeEventListener('abort', giveUp);
        resolve(this.take());
      };
      const giveUp = () => {
        const at = this.queue.indexOf(start);
        if (at !== -1) this.queue.splice(at, 1);
        reject(signal.reason);
      };
      if (signal.aborted) return giveUp();
      signal.addEventListener('abort', giveUp, { once: true });
      this.queue.push(start);
    });
  }

  setGate(open: boolean): void {
    this.gateOpen = open;
    this.pump();
  }

  private canStart(): boolean {
    return this.gateOpen && this.running < this.limit;
  }

  private take(): () => void {
    this.running++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.running--;
      this.pump();
    };
  }

  private pump(): void {
    while (this.canStart() && this.queue.length > 0) this.queue.shift()!();
  }
}
