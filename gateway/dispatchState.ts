/**
 * A deployment's dispatch in the request queue (`requestQueue.ts`), and the only ways it changes:
 * - `open`: it serves; up to 32 requests run, the rest wait first come first served;
 * - `closed`: a victim draining before it parks; new requests are answered 503 dispatch closed;
 * - `waiting`: not servable (parked, stopped, starting, or a victim that began parking); requests
 *   wait, and their demand asks the host scheduler for the wake or start.
 * Pure: the queue moves a deployment only through `nextDispatch`, and a move the table does not
 * list is a bug in the caller, thrown at once rather than left to misroute requests.
 */

export const dispatchStates = ['open', 'closed', 'waiting'] as const;
export type DispatchState = (typeof dispatchStates)[number];

/** What moves a deployment's dispatch; each names the queue method that sends it. */
export const dispatchEvents = ['serve', 'reopen', 'close', 'withdraw', 'stop'] as const;
export type DispatchEvent = (typeof dispatchEvents)[number];

/** For each event, the states it may come from and the state it leads to. */
export const dispatchTransitions: Readonly<
  Record<DispatchEvent, { from: readonly DispatchState[]; to: DispatchState }>
> = {
  /**
   * `startWaiters`: an instance is ready (a switch's target, or one the store records ready). From
   * `open` too: a retried step, or a newer generation. From `closed`: a server that did not take a switch's
   * `withdrawVictims` in time (the switch counted it gone) and lived on to hear the model's next start.
   */
  serve: { from: ['waiting', 'open', 'closed'], to: 'open' },
  /**
   * `reopen`: a drain that did not finish, the victims serve again on the instance they had. A
   * `waiting` deployment has no instance to serve on.
   */
  reopen: { from: ['closed', 'open'], to: 'open' },
  /** `close`: the admission window ended, the victims drain. A server may never have served them. */
  close: { from: ['open', 'closed', 'waiting'], to: 'closed' },
  /**
   * `withdrawVictims`, `withdraw`: the victims began parking or stopping, or the store records the
   * instance as no longer serving; its requests wait for the next start.
   */
  withdraw: { from: ['open', 'closed', 'waiting'], to: 'waiting' },
  /** `stopTaking`: the process is stopping; every deployment closes, whatever it was doing. */
  stop: { from: ['open', 'closed', 'waiting'], to: 'closed' },
};

/** The state `event` moves a dispatch in `from` to; throws when the table does not allow it. */
export function nextDispatch(from: DispatchState, event: DispatchEvent): DispatchState {
  const transition = dispatchTransitions[event];
  if (!transition.from.includes(from))
    throw new Error(`dispatch cannot ${event} from ${from} (allowed from ${transition.from.join(', ')})`);
  return transition.to;
}
