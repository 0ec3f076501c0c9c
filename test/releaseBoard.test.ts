/**
 * The host's record of what a switch's victims did with their memory, which a wake scheduled beside
 * their parks waits for (activities/releaseBoard.ts).
 */
import { describe, expect, it } from 'vitest';
import { ReleaseBoard } from '../activities/releaseBoard.js';

const victim = (deploymentId: string, generation = 1) => ({ deploymentId, instanceIndex: 0, generation });
const never = new AbortController().signal;

describe('the release board', () => {
  it('answers released once every victim released, whether the wake asked before or after', async () => {
    const board = new ReleaseBoard();
    board.say('s1', victim('a'), 'released');
    const heard = board.heard('s1', [victim('a'), victim('b')], never);
    let settled = false;
    void heard.then(() => (settled = true));
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    board.say('s1', victim('b'), 'released');
    expect(await heard).toBe('released');
  });

  it('answers kept as soon as one victim keeps its memory, without waiting for the others', async () => {
    const board = new ReleaseBoard();
    const heard = board.heard('s1', [victim('a'), victim('b')], never);
    board.say('s1', victim('b'), 'kept');
    expect(await heard).toBe('kept');
  });

  it("keeps each switch's words apart, and each generation's", async () => {
    const board = new ReleaseBoard();
    board.say('earlier', victim('a'), 'released');
    board.say('s1', victim('a', 2), 'released');
    const heard = board.heard('s1', [victim('a')], never);
    board.say('s1', victim('a'), 'kept');
    expect(await heard).toBe('kept');
  });

  it('keeps the first word a victim says: a retried park says the same again', async () => {
    const board = new ReleaseBoard();
    board.say('s1', victim('a'), 'kept');
    board.say('s1', victim('a'), 'released');
    expect(await board.heard('s1', [victim('a')], never)).toBe('kept');
  });

  it('stops waiting when its activity is cancelled', async () => {
    const board = new ReleaseBoard();
    const cancel = new AbortController();
    const heard = board.heard('s1', [victim('a')], cancel.signal);
    cancel.abort(new Error('cancelled'));
    await expect(heard).rejects.toThrow('cancelled');
  });
});
