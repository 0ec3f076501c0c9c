import { describe, expect, it } from 'vitest';
import { EngineExits } from '../server/engineExits.js';

const row = (hostId: string, generation: number, observedState: 'ready' | 'parked' | 'stopped') => ({
  index: 0,
  hostId,
  generation,
  observedState,
  parkTier: null,
  gpuIndexes: [],
  residueBytes: null,
});

describe('the engines that are over, after the server restarts', () => {
  it('are the generations the store lists stopped, on their host: a switch still finishing cannot bring them back', () => {
    const exits = EngineExits.fromRecorded([
      { id: 'chat', instances: [row('gpu-a', 3, 'stopped')] },
      { id: 'code', instances: [row('gpu-a', 5, 'ready')] },
      { id: 'docs', instances: [row('gpu-b', 2, 'parked')] },
    ]);
    expect(exits.isGone('gpu-a', 'chat', 3)).toBe(true);
    expect(exits.isGone('gpu-a', 'chat', 2)).toBe(true);
    // A new start takes a newer generation: it serves.
    expect(exits.isGone('gpu-a', 'chat', 4)).toBe(false);
    // The same deployment on another host is another engine.
    expect(exits.isGone('gpu-b', 'chat', 3)).toBe(false);
    expect(exits.isGone('gpu-a', 'code', 5)).toBe(false);
    expect(exits.isGone('gpu-b', 'docs', 2)).toBe(false);
  });

  it('keep the newest exit as engines exit after the start', () => {
    const exits = EngineExits.fromRecorded([{ id: 'chat', instances: [row('gpu-a', 3, 'stopped')] }]);
    exits.record('gpu-a', { deploymentId: 'chat', instanceIndex: 0, generation: 6 });
    exits.record('gpu-a', { deploymentId: 'chat', instanceIndex: 0, generation: 4 });
    expect(exits.isGone('gpu-a', 'chat', 6)).toBe(true);
    expect(exits.isGone('gpu-a', 'chat', 7)).toBe(false);
  });
});
