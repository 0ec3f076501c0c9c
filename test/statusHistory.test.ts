import { describe, expect, it } from 'vitest';
import { HISTORY_SAMPLE_MS, HISTORY_SPAN_MS, StatusHistory } from '../gateway/statusHistory.js';

describe("the status page's last hour", () => {
  it('keeps the waiting requests as sampled, and only the last hour of them', () => {
    let waiting = 3;
    const history = new StatusHistory(
      () => waiting,
      async () => [],
    );
    const t = Date.parse('2026-12-06T02:00:00Z');
    history.sample(t);
    waiting = 5;
    history.sample(t + HISTORY_SAMPLE_MS);
    expect(history.waiting(t + HISTORY_SAMPLE_MS)).toEqual([
      { atMs: t, waiting: 3 },
      { atMs: t + HISTORY_SAMPLE_MS, waiting: 5 },
    ]);
    expect(history.waiting(t + HISTORY_SPAN_MS + HISTORY_SAMPLE_MS)).toEqual([
      { atMs: t + HISTORY_SAMPLE_MS, waiting: 5 },
    ]);
  });
});
