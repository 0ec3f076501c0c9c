/**
 * The host's one wake per switch (activities/switchWakes.ts): the scheduler's early ask and the
 * switch's own wake step share one engine wake, whichever comes first.
 */
import { describe, expect, it } from 'vitest';
import type { WakeResult } from '../activities/hostActivities.js';
import { SwitchWakes } from '../activities/switchWakes.js';

const never = new AbortController().signal;
const woken: WakeResult = { answer: { kind: 'prompt', text: 'one, two' }, checkMs: 3, wakeMs: 40 };

/** A wake that counts its calls and settles when told. */
function engineWake() {
  const calls: Array<{ resolve: (r: WakeResult) => void; reject: (e: Error) => void }> = [];
  const wake = () => new Promise<WakeResult>((resolve, reject) => calls.push({ resolve, reject }));
  return { calls, wake };
}

describe('one wake per switch', () => {
  it('wakes the engine once when the switch asks while the early wake runs, and both get its answer', async () => {
    const wakes = new SwitchWakes();
    const engine = {};
    const e = engineWake();
    const early = wakes.once('s1', engine, never, e.wake);
    const own = wakes.once('s1', engine, never, e.wake);
    e.calls[0]!.resolve(woken);
    expect(await early).toEqual(woken);
    expect(await own).toEqual(woken);
    expect(e.calls).toHaveLength(1);
  });

  it('wakes nothing for an ask that comes after its switch woke the engine: a late early wake', async () => {
    const wakes = new SwitchWakes();
    const engine = {};
    const e = engineWake();
    const own = wakes.once('s1', engine, never, e.wake);
    e.calls[0]!.resolve(woken);
    await own;
    expect(await wakes.once('s1', engine, never, e.wake)).toEqual(woken);
    expect(e.calls).toHaveLength(1);
  });

  it("keeps each switch's wake apart, and each engine's", async () => {
    const wakes = new SwitchWakes();
    const [engine, restarted] = [{}, {}];
    const e = engineWake();
    void wakes.once('s1', engine, never, e.wake);
    void wakes.once('s2', engine, never, e.wake);
    void wakes.once('s1', restarted, never, e.wake);
    expect(e.calls).toHaveLength(3);
  });

  it('gives a failed wake to every ask that joined it; an ask after that wakes again, as a retry does', async () => {
    const wakes = new SwitchWakes();
    const engine = {};
    const e = engineWake();
    const early = wakes.once('s1', engine, never, e.wake);
    const own = wakes.once('s1', engine, never, e.wake);
    e.calls[0]!.reject(new Error('reload failed'));
    await expect(early).rejects.toThrow('reload failed');
    await expect(own).rejects.toThrow('reload failed');
    const retry = wakes.once('s1', engine, never, e.wake);
    expect(e.calls).toHaveLength(2);
    e.calls[1]!.resolve(woken);
    expect(await retry).toEqual(woken);
  });

  it('wakes itself when the ask that began the wake was cancelled; a cancelled ask stops waiting at once', async () => {
    const wakes = new SwitchWakes();
    const engine = {};
    const e = engineWake();
    const earlyAsk = new AbortController();
    const early = wakes.once('s1', engine, earlyAsk.signal, e.wake);
    const ownAsk = new AbortController();
    const own = wakes.once('s1', engine, ownAsk.signal, e.wake);
    earlyAsk.abort(new Error('early wake timed out'));
    e.calls[0]!.reject(new Error('aborted'));
    await expect(early).rejects.toThrow('aborted');
    await new Promise((r) => setImmediate(r));
    expect(e.calls).toHaveLength(2);
    e.calls[1]!.resolve(woken);
    expect(await own).toEqual(woken);

    const third = new AbortController();
    const joined = wakes.once('s2', engine, never, e.wake);
    const waiting = wakes.once('s2', engine, third.signal, e.wake);
    third.abort(new Error('the switch was cancelled'));
    await expect(waiting).rejects.toThrow('the switch was cancelled');
    e.calls[2]!.resolve(woken);
    expect(await joined).toEqual(woken);
  });
});
