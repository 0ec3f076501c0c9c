import { describe, expect, it } from 'vitest';
import { CRASH_LOOP, crashLooping } from '../domain/problems.js';

const MINUTE = 60_000;
const now = Date.parse('2026-12-06T02:00:00Z');
const ago = (...minutes: number[]) => minutes.map((m) => new Date(now - m * MINUTE));

describe('a crash loop: the engine keeps ending unasked', () => {
  it('is three endings within ten minutes, while the model is not ready', () => {
    expect(CRASH_LOOP).toEqual({ endings: 3, withinMs: 10 * MINUTE });
    expect(crashLooping(ago(9, 5, 1), 'stopped', now)).toBe(true);
    expect(crashLooping(ago(10, 5, 1), 'starting', now)).toBe(true);
    // The last three count: an older ending beyond the window does not hide them.
    expect(crashLooping(ago(30, 5, 3, 1), 'stopped', now)).toBe(true);
  });

  it('is not two endings, nor three spread over more than ten minutes, nor a model serving again', () => {
    expect(crashLooping(ago(2, 1), 'stopped', now)).toBe(false);
    expect(crashLooping(ago(11, 5, 1), 'stopped', now)).toBe(false);
    // Quiet for ten minutes after its third: the loop is over though it has not served since.
    expect(crashLooping(ago(19, 15, 11), 'stopped', now)).toBe(false);
    expect(crashLooping(ago(3, 2, 1), 'ready', now)).toBe(false);
  });
});
