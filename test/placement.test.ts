/** The placement rule (gateway/placement.ts, README "The server") on hosts described by hand. */
import { describe, expect, it } from 'vitest';
import type { RoutedInstance } from '../gateway/routingTable.js';
import { heldOn, type HostLoad, instanceIndexes, leastLoaded } from '../gateway/placement.js';
import { deploymentDocument } from '../settings/deploymentDocument.js';

const GiB = 2 ** 30;
const NEED = 5 * GiB;

const deployment = (fields: Record<string, unknown> = {}, instances: RoutedInstance[] = []) => ({
  id: 'd1',
  spec: deploymentDocument.parse({ name: 'd1', engine: 'vllm', model: 'sim/d1', ...fields }),
  instances,
});
const host = (hostId: string, heldGiB: number, models: number, gpusGiB: number[] = [8], keptGiB = 0): HostLoad => ({
  hostId,
  gpuMemoryBytes: gpusGiB.map((g) => g * GiB),
  heldBytes: heldGiB * GiB,
  models,
  keptBytes: keptGiB * GiB,
});
const instance = (hostId: string, observedState: RoutedInstance['observedState']): RoutedInstance => ({
  index: 0,
  hostId,
  generation: 2,
  observedState,
  parkTier: null,
});

describe('the host a model goes to', () => {
  it('stays where an instance of it is held, parked too, but not where it stopped or on a host not offered', () => {
    expect(heldOn(deployment({}, [instance('h2', 'parked')]), ['h1', 'h2'])).toEqual(['h2']);
    expect(heldOn(deployment({}, [instance('h2', 'starting')]), ['h1', 'h2'])).toEqual(['h2']);
    expect(heldOn(deployment({}, [instance('h2', 'stopped')]), ['h1', 'h2'])).toEqual([]);
    expect(heldOn(deployment({}, [instance('h2', 'ready')]), ['h1'])).toEqual([]);
  });

  it('keeps each instance of a deployment of several where it is held, a stopped one nowhere', () => {
    const three = deployment({ instances: 3 }, [
      instance('h1', 'parked'),
      { ...instance('h2', 'stopped'), index: 1 },
      { ...instance('h3', 'ready'), index: 2 },
    ]);
    expect(heldOn(three, ['h1', 'h2', 'h3'])).toEqual(['h1', 'h3']);
  });

  it('gives each host its instance: a held one keeps its index, a new host the lowest no host holds', () => {
    const three = deployment({ instances: 3 }, [
      { ...instance('h1', 'ready'), index: 1 },
      { ...instance('h2', 'stopped'), index: 0 },
      { ...instance('h4', 'parked'), index: 2 },
    ]);
    // h4 holds index 2 though it is not offered now: no new host takes it.
    expect([...instanceIndexes(three, ['h1', 'h2', 'h3'])]).toEqual([
      ['h1', 1],
      ['h2', 0],
      ['h3', 3],
    ]);
    expect([...instanceIndexes(deployment(), ['h5'])]).toEqual([['h5', 0]]);
  });

  it('goes where it fits without evicting before anything else', () => {
    // h1 has more free memory in all, but no card with room for it.
    expect(leastLoaded(deployment(), NEED, [host('h1', 8, 2, [8, 8]), host('h2', 2, 1)])).toBe('h2');
    expect(leastLoaded(deployment(), NEED, [host('h1', 5, 1), host('h2', 0, 0)])).toBe('h2');
  });

  it('then where evicting can make room: not where models kept loaded (explicit, warm) hold it', () => {
    expect(leastLoaded(deployment(), NEED, [host('h1', 5, 1, [8], 5), host('h2', 6, 2)])).toBe('h2');
    // Kept models on every host: the least loaded one refuses it.
    expect(leastLoaded(deployment(), NEED, [host('h1', 5, 1, [8], 5), host('h2', 6, 1, [8], 6)])).toBe('h1');
    // Only a host that can serve it, when one has refused it for capacity.
    expect(leastLoaded(deployment(), NEED, [host('h1', 5, 1, [8], 5), host('h2', 6, 1, [8], 6)], true)).toBeUndefined();
    expect(leastLoaded(deployment(), NEED, [host('h2', 6, 1, [8], 2)], true)).toBe('h2');
  });

  it('then by load: the most free GPU memory, then the fewest models, then the lower host ID', () => {
    expect(leastLoaded(deployment(), NEED, [host('h1', 2, 1), host('h2', 1, 1)])).toBe('h2');
    expect(leastLoaded(deployment(), NEED, [host('h1', 6, 2), host('h2', 6, 1)])).toBe('h2');
    expect(leastLoaded(deployment(), NEED, [host('h2', 0, 0), host('h1', 0, 0)])).toBe('h1');
    // Fits nowhere: the least loaded host's scheduler makes room.
    expect(leastLoaded(deployment(), NEED, [host('h1', 8, 1), host('h2', 5, 1)])).toBe('h2');
  });

  it('only on the hosts the deployment names', () => {
    expect(leastLoaded(deployment({ hosts: ['h1'] }), NEED, [host('h1', 5, 1), host('h2', 0, 0)])).toBe('h1');
    expect(leastLoaded(deployment({ hosts: ['h3'] }), NEED, [host('h1', 0, 0)])).toBeUndefined();
  });
});
