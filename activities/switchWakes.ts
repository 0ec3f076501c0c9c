/**
 * One engine wake per switch on this host, whichever of its two asks comes first: the scheduler's,
 * sent as it starts a switch with no victim to wait for (the engine begins waking while the switch's
 * workflow starts, a round trip through Temporal earlier), and the switch's own wake step, which
 * reports the wake in its history. The later ask joins the wake the earlier one began.
 *
 * A switch's wake is remembered once it began: an ask that comes late (the scheduler's, delayed in a
 * task queue) finds it and wakes nothing, so it can never wake a model parked again since. A wake that
 * failed is the failure of each ask that joined it; an ask after that tries again, as a retry does.
 * An ask whose own step was cancelled or timed out leaves its wake to the asks still waiting, which
 * then try themselves.
 */
import { untilAborted } from './untilAborted.js';

/** Outlives any ask that could still come: Temporal drops an ask past its wake window. */
const FORGET_AFTER_MS = 30 * 60_000;

/** `Result`: what the wake answers (the host's `WakeResult`), given as it is to every ask that joined it. */
interface Wake<Result> {
  /** The engine woken: a switch's ask on another engine (a host agent restarted since) is not this wake. */
  engine: object;
  /** The signal of the ask that began it. */
  owner: AbortSignal;
  result: Promise<Result>;
}

export class SwitchWakes<Result> {
  private readonly wakes = new Map<string, Wake<Result>>();

  /** `switchId`'s wake of `engine`: `wake` begun by this ask, or the one begun before it joined. `signal`: this ask's. */
  async once(switchId: string, engine: object, signal: AbortSignal, wake: () => Promise<Result>): Promise<Result> {
    const begun = this.wakes.get(switchId);
    if (begun?.engine === engine) {
      try {
        return await untilAborted(begun.result, signal);
      } catch (e) {
        if (signal.aborted || !begun.owner.aborted) throw e;
      }
    }
    const result = wake();
    const own: Wake<Result> = { engine, owner: signal, result };
    this.wakes.set(switchId, own);
    setTimeout(() => this.wakes.get(switchId) === own && this.wakes.delete(switchId), FORGET_AFTER_MS).unref();
    result.catch(() => this.wakes.get(switchId) === own && this.wakes.delete(switchId));
    return result;
  }
}
