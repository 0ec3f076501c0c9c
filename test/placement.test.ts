/** The placement rule (gateway/placement.ts, README "The server") on hosts described by hand. */
import { describe, expect, it } from 'vitest';
import type { RoutedInstance } from '../gateway/routingTable.js';
import { addHolding, fitsNoGpu, heldOn, type HostLoad, instanceIndexes, leastLoaded } from '../gateway/placement.js';
import { apiErrors } from '../domain/catalogue.js';
import { deploymentDocument } from '../settings/deploymentDocument.js';

const GiB = 2 ** 30;
const NEED = 5 * GiB;

const deployment = (fields: Record<string, unknown> = {}, instances: RoutedInstance[] = []) => ({
  id: 'd1',
  spec: deploymentDocument.parse({ name: 'd1', engine: 'vllm', model: 'sim/d1', ...fields }),
  instances,
});
/** A host's load; a single figure held or kept counts on each of its GPUs, as for instances whose GPUs are not known. */
const host = (
  hostId: string,
  heldGiB: number | number[],
  models: number,
  gpusGiB: number[] = [8],
  keptGiB: number | number[] = 0,
): HostLoad => {
  const perGpu = (v: number | number[]) => (Array.isArray(v) ? v : gpusGiB.map(() => v)).map((g) => g * GiB);
  return {
    hostId,
    gpuMemoryBytes: gpusGiB.map((g) => g * GiB),
    heldBytes: perGpu(heldGiB),
    models,
    keptBytes: perGpu(keptGiB),
  };
};
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

describe('per GPU', () => {
  const eightBy80 = Array.from({ length: 8 }, () => 80);

  it('a host of eight 80 GiB GPUs takes eight 40 GiB models without evicting, one a GPU, before an empty host with less', () => {
    const held = { held: eightBy80.map(() => 0) };
    for (let g = 0; g < 7; g++) addHolding(held, [g], 40 * GiB);
    const loads = [
      host(
        'big',
        held.held.map((b) => b / GiB),
        7,
        eightBy80,
      ),
      host('small', 0, 0, [48]),
    ];
    // The eighth fits on GPU 7; `small` has a GPU with room too, but less free in all.
    expect(leastLoaded(deployment(), 40 * GiB, loads)).toBe('big');
    // Counted against every GPU, as when the store did not say which GPU each holds, it would not fit.
    expect(leastLoaded(deployment(), 40 * GiB, [host('big', 7 * 40, 7, eightBy80), host('small', 0, 0, [48])])).toBe(
      'small',
    );
  });

  it('a model on two GPUs needs two with its half free, and never goes to a host of one GPU', () => {
    const tp2 = deployment({ extra_args: ['--tensor-parallel-size', '2'] });
    // `one` has the most free memory, and room for the whole model on its GPU; it has one GPU.
    const loads = [host('one', 0, 0, [80]), host('two', [0, 30], 1, [40, 40])];
    expect(leastLoaded(tp2, 40 * GiB, loads)).toBe('two');
    expect(leastLoaded(tp2, 40 * GiB, [host('one', 0, 0, [80])])).toBeUndefined();
    // Two GPUs of three with room: it fits there before a host where it would evict.
    expect(leastLoaded(tp2, 40 * GiB, [host('a', [30, 0, 0], 1, [40, 40, 40]), host('b', [30, 30], 2, [40, 40])])).toBe(
      'a',
    );
  });

  it('an instance on several GPUs holds its even share on each; one whose GPUs are not known counts on every GPU', () => {
    const held = { held: [0, 0, 0, 0] };
    addHolding(held, [1, 2], 10 * GiB);
    expect(held.held).toEqual([0, 5 * GiB, 5 * GiB, 0]);
    addHolding(held, [], 3 * GiB);
    expect(held.held).toEqual([3 * GiB, 8 * GiB, 8 * GiB, 3 * GiB]);
  });

  it('refuses a deployment on more GPUs than any host it may run on has, naming the largest; and its share too large for every GPU', () => {
    const gpus = (count: number, memoryGiB: number) =>
      Array.from({ length: count }, (_, index) => ({
        index,
        name: 'sim',
        memoryBytes: memoryGiB * GiB,
        memoryKind: 'discrete' as const,
      }));
    const hosts = [
      { id: 'four', gpus: gpus(4, 24) },
      { id: 'eight', gpus: gpus(8, 16) },
    ];
    const tp = (n: number, more: Record<string, unknown> = {}) => ({
      ...deployment({ extra_args: ['-tp', String(n)], ...more }),
      checkpoint: { status: 'measured' as const, weightBytes: 60 * GiB, kvBytes: 20 * GiB },
    });
    expect(fitsNoGpu(tp(16), hosts)).toEqual(apiErrors.moreGpusThanAnyHost('d1', 16, { hostId: 'eight', gpus: 8 }));
    expect(fitsNoGpu(tp(8, { hosts: ['four'] }), hosts)).toEqual(
      apiErrors.moreGpusThanAnyHost('d1', 8, { hostId: 'four', gpus: 4 }),
    );
    // 80 GiB over four GPUs is 20 GiB on each: the 24 GiB GPUs hold it; over 2 it is 40 GiB, more than any.
    expect(fitsNoGpu(tp(4), hosts)).toBeUndefined();
    expect(fitsNoGpu(tp(2), hosts)).toEqual(
      apiErrors.fitsNoGpu('d1', 40 * GiB, 2, { hostId: 'four', memoryBytes: 24 * GiB }),
    );
  });
});
