/**
 * Where the host scheduler puts a model and what it parks for it, on two 8 GiB cards: a big model
 * holds 5 GiB (4 GiB of weights, 1 GiB of KV cache), a small one 2 GiB. The cases run in order on
 * one host: each starts from what the one before left.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SchedulerBench, startSchedulerBench } from './support/scheduler.js';

const GiB = 2 ** 30;
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

  it('starts a model on the card fewer engines share when both have room', async () => {
    await start('small-a');
    // Card 0 has room too (8 − 2 GiB), but small-a is there: big-b takes the empty card.
    expect(await start('big-b')).toMatchObject({ state: 'ready', victims: [] });
    await start('big-c');
    await start('small-d');
    expect(await cards()).toEqual({
      'small-a': 'ready on 0',
      'big-b': 'ready on 1',
      'big-c': 'ready on 0',
      'small-d': 'ready on 1',
    });
    expect((await s.ledger()).gpus.map((g) => g.memoryBytes)).toEqual([8 * GiB, 8 * GiB]);
  });

  it('parks only the big model a big one needs, not the small one beside it used longer ago as well', async () => {
    // Either card frees 5 GiB by parking its big model alone; small-a, the least recently used, stays.
    const receipt = await start('big-e');
    expect(receipt.victims.map((v) => [v.deploymentId, v.gpuIndexes])).toEqual([[ids['big-c'], [0]]]);
    expect(await cards()).toMatchObject({ 'small-a': 'ready on 0', 'big-c': 'parked on 0', 'big-e': 'ready on 0' });
  });
});

describe('the host scheduler with models kept loaded', () => {
  let s: SchedulerBench;
  const ids: Record<string, string> = {};
  const explicit = 'lifecycle:\n  activation: explicit';

  beforeAll(async () => {
    s = await startSchedulerBench({ gpuMemory: '8GiB', gpuCount: 2 });
    for (const name of ['small-x', 'small-z']) ids[name] = await s.deployMeasured(name, explicit, SMALL);
    for (const name of ['big-y', 'big-w']) ids[name] = await s.deployMeasured(name, explicit);
  });
  afterAll(() => s?.close());

  it('packs them, as they never yield: four that fit two cards all start, the last big one on a whole card', async () => {
    // Spread (big-y away from small-x), small-z would take part of card 1 and big-w find no card at all.
    for (const name of ['small-x', 'big-y', 'small-z', 'big-w'])
      expect(await s.command('start', { deploymentId: ids[name]!, evict: true }), name).toMatchObject({
        state: 'ready',
        victims: [],
      });
    expect(
      Object.fromEntries((await s.settledLedger()).entries.map((e) => [e.name, `${e.state} on ${e.gpuIndexes}`])),
    ).toEqual({
      'small-x': 'ready on 0',
      'big-y': 'ready on 0',
      'small-z': 'ready on 1',
      'big-w': 'ready on 1',
    });
  });
});
