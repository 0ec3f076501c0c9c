/**
 * Where the host scheduler puts a model and what it parks for it, on two 8 GiB cards: a big model
 * holds 5 GiB (4 GiB of weights, 1 GiB of KV cache), a small one 2 GiB. The cases run in order on
 * one host: each starts from what the one before left.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SchedulerBench, startSchedulerBench } from './support/scheduler.js';

const SMALL = ['--sim-weights', '1GiB', '--sim-kv', '1GiB'];

describe('the host scheduler chooses the cheapest room', () => {
  let s: SchedulerBench;
  const ids: Record<string, string> = {};
  const start = (name: string) => s.command('start', { deploymentId: ids[name]!, evict: true });
  const cards = async () =>
    Object.fromEntries(
      (await s.settledLedger()).entries.map((e) => [e.name, `${e.state} on ${e.gpuIndexes.join(',')}`]),
    );

  beforeAll(async () => {
    s = await startSchedulerBench({ gpuMemory: '8GiB', gpuCount: 2 });
    for (const name of ['small-a', 'small-d']) ids[name] = await s.deployMeasured(name, '', SMALL);
    for (const name of ['big-b', 'big-c', 'big-e']) ids[name] = await s.deployMeasured(name);
  });
  afterAll(() => s?.close());

  it('packs ready models on the first card with room, leaving the other whole for the next big one', async () => {
    await start('small-a');
    // Card 1 is empty, but card 0 still holds big-b beside small-a (2 + 5 of 8 GiB): spread, small-d
    // would then take part of card 1 and big-c find no card at all.
    expect(await start('big-b')).toMatchObject({ state: 'ready', victims: [] });
    expect(await start('big-c')).toMatchObject({ state: 'ready', victims: [] });
    expect(await start('small-d')).toMatchObject({ state: 'ready', victims: [] });
    expect(await cards()).toEqual({
      'small-a': 'ready on 0',
      'big-b': 'ready on 0',
      'big-c': 'ready on 1',
      'small-d': 'ready on 1',
    });
  });

  it('parks only the big model a big one needs, not the small one beside it used longer ago as well', async () => {
    // Either card frees 5 GiB by parking its big model alone; small-a, the least recently used, stays.
    const receipt = await start('big-e');
    expect(receipt.victims.map((v) => [v.deploymentId, v.gpuIndexes])).toEqual([[ids['big-b'], [0]]]);
    expect(await cards()).toMatchObject({ 'small-a': 'ready on 0', 'big-b': 'parked on 0', 'big-e': 'ready on 0' });
  });
});
