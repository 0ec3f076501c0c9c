/** The placement rule (gateway/placement.ts, README "The server") on hosts described by hand. */
import { describe, expect, it } from 'vitest';
import type { RoutedInstance } from '../gateway/routingTable.js';
import {
  fitsNoGpu,
  heldOn,
  type HostLoad,
  hostLoad,
  instanceIndexes,
  leastLoaded,
  type Reserved,
  tooFewGpus,
} from '../gateway/placement.js';
import { apiErrors } from '../domain/catalogue.js';
import { deploymentDocument } from '../settings/deploymentDocument.js';

const GiB = 2 ** 30;
const NEED = 5 * GiB;

const deployment = (fields: Record<string, unknown> = {}, instances: RoutedInstance[] = []) => ({
  id: 'd1',
  spec: deploymentDocument.parse({ name: 'd1', engine: 'vllm', model: 'sim/d1', ...fields }),
  instances,
});
/** A row of a host: GiB held on the GPUs named (none: not known, a row from before they were recorded), kept loaded or not. */
type Row = [gib: number, gpuIndexes: number[], kept?: boolean];
/** A host with GPUs of `gpusGiB`, holding `rows`, and models sent there that hold nothing yet. */
const host = (hostId: string, gpusGiB: number[], rows: Row[] = [], reserved: Reserved[] = []): HostLoad =>
  hostLoad(
    hostId,
    gpusGiB.map((g, index) => ({ index, memoryBytes: g * GiB })),
    rows.map(([gib, gpuIndexes, kept = false]) => ({ gpuBytes: gib * GiB, gpuIndexes, kept })),
    reserved,
  );
const tp2 = deployment({ extra_args: ['--tensor-parallel-size', '2'] });
const instance = (hostId: string, observedState: RoutedInstance['observedState']): RoutedInstance => ({
  index: 0,
  hostId,
  generation: 2,
  observedState,
  parkTier: null,
  gpuIndexes: [],
  residueBytes: null,
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
    expect(
      leastLoaded(deployment(), NEED, [
        host(
          'h1',
          [8, 8],
          [
            [4, [0]],
            [4, [1]],
          ],
        ),
        host('h2', [8], [[2, [0]]]),
      ]),
    ).toBe('h2');
    expect(leastLoaded(deployment(), NEED, [host('h1', [8], [[5, [0]]]), host('h2', [8])])).toBe('h2');
  });

  it('counts memory per GPU: eight 40 GiB models fit one after another on eight 80 GiB GPUs, none evicted', () => {
    // A smaller empty host where each would fit too: it is chosen only if the big one looked full.
    const small = host('small', [48]);
    const placed: Row[] = [];
    for (let gpu = 0; gpu < 8; gpu++) {
      expect(
        leastLoaded(deployment(), 40 * GiB, [host('big', Array(8).fill(80), placed), small]),
        `model ${gpu + 1}`,
      ).toBe('big');
      placed.push([40, [gpu]]);
    }
  });

  it('places an instance on several GPUs only where that many GPUs each have its share free', () => {
    // 100 GiB over two GPUs: 50 GiB on each. h1 has more free memory, but on one GPU only.
    const h1 = host(
      'h1',
      [80, 80, 80, 80],
      [
        [50, [0]],
        [50, [1]],
        [50, [2]],
      ],
    );
    const h2 = host('h2', [80, 80], [[20, [0]]]);
    expect(leastLoaded(tp2, 100 * GiB, [h1, h2])).toBe('h2');
    // An instance on two GPUs holds half on each: 40 GiB free on both of h3's, room for another 80 GiB one.
    expect(leastLoaded(tp2, 80 * GiB, [host('h3', [80, 80], [[80, [0, 1]]]), host('h4', [30, 30, 30])])).toBe('h3');
    expect(leastLoaded(tp2, 100 * GiB, [host('h3', [80, 80], [[80, [0, 1]]]), host('h4', [60, 60])])).toBe('h4');
    // Evicting can make room only where two GPUs are not held by models kept loaded.
    const kept = host(
      'kept',
      [80, 80, 80],
      [
        [60, [0], true],
        [60, [1], true],
        [60, [2]],
      ],
    );
    const evictable = host(
      'evictable',
      [80, 80],
      [
        [60, [0]],
        [60, [1]],
      ],
    );
    expect(leastLoaded(tp2, 100 * GiB, [kept, evictable], true)).toBe('evictable');
    expect(leastLoaded(tp2, 100 * GiB, [kept], true)).toBeUndefined();
  });

  it('counts a row whose GPUs are not known on every GPU of its host, as before they were recorded', () => {
    const small = host('small', [48]);
    expect(
      leastLoaded(deployment(), 40 * GiB, [
        host(
          'big',
          [80, 80],
          [
            [40, []],
            [40, []],
          ],
        ),
        small,
      ]),
    ).toBe('small');
    expect(
      leastLoaded(deployment(), 40 * GiB, [
        host(
          'big',
          [80, 80],
          [
            [40, [0]],
            [40, [1]],
          ],
        ),
        small,
      ]),
    ).toBe('big');
    // Kept loaded and not known: no GPU of its host can be counted on for an eviction.
    expect(leastLoaded(deployment(), 40 * GiB, [host('big', [80, 80], [[50, [], true]])], true)).toBeUndefined();
  });

  it('counts a model sent to a host that holds nothing yet on the GPUs with the most room', () => {
    expect(
      host('h1', [80, 80], [[30, [0]]], [{ bytes: 60 * GiB, gpus: 1 }]).gpus.map((g) => g.heldBytes / GiB),
    ).toEqual([30, 60]);
    const spread = host('h1', [80, 80, 80], [[30, [0]]], [{ bytes: 100 * GiB, gpus: 2 }]);
    expect(spread.gpus.map((g) => g.heldBytes / GiB)).toEqual([30, 50, 50]);
    expect(spread).toMatchObject({ heldBytes: 130 * GiB, models: 2 });
  });

  it('then where evicting can make room: not where models kept loaded (explicit, warm) hold it', () => {
    const kept5 = host('h1', [8], [[5, [0], true]]);
    expect(
      leastLoaded(deployment(), NEED, [
        kept5,
        host(
          'h2',
          [8],
          [
            [3, [0]],
            [3, [0]],
          ],
        ),
      ]),
    ).toBe('h2');
    // Kept models on every host: the least loaded one refuses it.
    expect(leastLoaded(deployment(), NEED, [kept5, host('h2', [8], [[6, [0], true]])])).toBe('h1');
    // Only a host that can serve it, when one has refused it for capacity.
    expect(leastLoaded(deployment(), NEED, [kept5, host('h2', [8], [[6, [0], true]])], true)).toBeUndefined();
    expect(
      leastLoaded(
        deployment(),
        NEED,
        [
          host(
            'h2',
            [8],
            [
              [4, [0]],
              [2, [0], true],
            ],
          ),
        ],
        true,
      ),
    ).toBe('h2');
  });

  it('then by load: the most free GPU memory, then the fewest models, then the lower host ID', () => {
    expect(leastLoaded(deployment(), NEED, [host('h1', [8], [[2, [0]]]), host('h2', [8], [[1, [0]]])])).toBe('h2');
    expect(
      leastLoaded(deployment(), NEED, [
        host(
          'h1',
          [8],
          [
            [3, [0]],
            [3, [0]],
          ],
        ),
        host('h2', [8], [[6, [0]]]),
      ]),
    ).toBe('h2');
    expect(leastLoaded(deployment(), NEED, [host('h2', [8]), host('h1', [8])])).toBe('h1');
    // Fits nowhere: the least loaded host's scheduler makes room.
    expect(leastLoaded(deployment(), NEED, [host('h1', [8], [[8, [0]]]), host('h2', [8], [[5, [0]]])])).toBe('h2');
  });

  it('only on the hosts the deployment names', () => {
    expect(leastLoaded(deployment({ hosts: ['h1'] }), NEED, [host('h1', [8], [[5, [0]]]), host('h2', [8])])).toBe('h1');
    expect(leastLoaded(deployment({ hosts: ['h3'] }), NEED, [host('h1', [8])])).toBeUndefined();
  });
});

describe('a deployment no host could hold', () => {
  const registered = (id: string, gpusGiB: number[]) => ({
    id,
    gpus: gpusGiB.map((g, index) => ({
      index,
      name: `sim-${index}`,
      memoryBytes: g * GiB,
      memoryKind: 'discrete' as const,
    })),
  });
  const hosts = [registered('host-a', [80]), registered('host-b', [80, 80]), registered('host-c', [24, 24, 24, 24])];
  const measured = (fields: Record<string, unknown>, weightGiB: number) => ({
    ...deployment(fields),
    checkpoint: { weightBytes: weightGiB * GiB, kvBytes: 0 },
  });

  it('is refused for more GPUs than any host it may run on has, measured or not, naming the largest', () => {
    const tp4 = {
      ...deployment({ extra_args: ['--tensor-parallel-size', '4'], hosts: ['host-a', 'host-b'] }),
      checkpoint: null,
    };
    expect(fitsNoGpu(tp4, hosts)).toEqual(apiErrors.needsMoreGpus('d1', 4, { hostId: 'host-b', gpus: 2 }));
    expect(fitsNoGpu(tp4, hosts)?.message).toBe(
      'deployment d1 needs 4 GPUs; the largest host it may run on, host-b, has 2',
    );
    expect(fitsNoGpu({ ...tp4, spec: { ...tp4.spec, hosts: undefined } }, hosts)).toBeUndefined();
    // No host registered that it may run on: nothing to say yet.
    expect(tooFewGpus('chat', 8, [])).toBeUndefined();
  });

  it('is refused for more memory on each of its GPUs than any host has on as many', () => {
    // 120 GiB over four GPUs: 30 GiB each, more than host-c's 24; host-b has 80 GiB cards but only two.
    const tp4 = measured({ extra_args: ['--tensor-parallel-size', '4'] }, 120);
    expect(fitsNoGpu(tp4, hosts)?.message).toBe(
      'deployment d1 needs 30 GiB of GPU memory on each of 4 GPUs, more than any host it may run on has on 4 of its ' +
        'GPUs (24 GiB each on host-c)',
    );
    expect(fitsNoGpu(measured({ extra_args: ['--tensor-parallel-size', '4'] }, 96), hosts)).toBeUndefined();
    // 150 GiB on two GPUs is 75 GiB on each: host-b holds it, though no one GPU holds it all.
    expect(fitsNoGpu(measured({ extra_args: ['--tensor-parallel-size', '2'] }, 150), hosts)).toBeUndefined();
    expect(fitsNoGpu(measured({}, 150), hosts)).toEqual(
      apiErrors.fitsNoGpu('d1', 150 * GiB, { hostId: 'host-a', memoryBytes: 80 * GiB }),
    );
  });
});
