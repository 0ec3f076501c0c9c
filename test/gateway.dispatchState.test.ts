/** The dispatch's transition table: every move it allows, and the one it refuses. */
import { describe, expect, it } from 'vitest';
import {
  type DispatchEvent,
  dispatchEvents,
  type DispatchState,
  dispatchStates,
  nextDispatch,
} from '../gateway/dispatchState.js';

/** Every state and event, and where it leads; null: refused. Written out, not read from the table. */
const expected: Record<DispatchState, Record<DispatchEvent, DispatchState | null>> = {
  open: { serve: 'open', reopen: 'open', close: 'closed', withdraw: 'waiting', stop: 'closed' },
  closed: { serve: 'open', reopen: 'open', close: 'closed', withdraw: 'waiting', stop: 'closed' },
  waiting: { serve: 'open', reopen: null, close: 'closed', withdraw: 'waiting', stop: 'closed' },
};

const moves = dispatchStates.flatMap((from) =>
  dispatchEvents.map((event) => [from, event, expected[from][event]] as const),
);

describe('the dispatch state', () => {
  it.each(moves.filter(([, , to]) => to !== null))('%s, then %s: %s', (from, event, to) => {
    expect(nextDispatch(from, event)).toBe(to);
  });

  it('refuses to reopen a deployment that waits: it has no instance to serve on', () => {
    expect(() => nextDispatch('waiting', 'reopen')).toThrow(
      'dispatch cannot reopen from waiting (allowed from closed, open)',
    );
  });

  it('refuses exactly the moves written out above', () => {
    const refused = moves.filter(([from, event]) => {
      try {
        nextDispatch(from, event);
        return false;
      } catch {
        return true;
      }
    });
    expect(refused.map(([from, event]) => `${from} ${event}`)).toEqual(['waiting reopen']);
  });
});
