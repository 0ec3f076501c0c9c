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

  it('parks only the big model a big one needs, the one used least recently, not the small one beside it as well', async () => {
    // Either card frees 5 GiB by parking its big model alone; small-a, the least recently used, stays.
    // Neither big model has served a request: big-b, ready before big-c, is the one used longer ago,
    // though its card is the second and as shared.
    const receipt = await start('big-e');
    expect(receipt.victims.map((v) => [v.deploymentId, v.gpuIndexes])).toEqual([[ids['big-b'], [1]]]);
    expect(await cards()).toMatchObject({ 'small-a': 'ready on 0', 'big-b': 'parked on 1', 'big-e': 'ready on 1' });
  });
});

describe('the host scheduler keeps the model asked for last', () => {
  let s: SchedulerBench;
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    s = await startSchedulerBench({ gpuMemory: '8GiB', gpuCount: 2 });
    for (const name of ['big-1', 'big-2', 'big-3']) ids[name] = await s.deployMeasured(name);
  });
  afterAll(() => s?.close());

  it('starts a model a request asks for on the card of the model whose last request is older, not the one that became ready first', async () => {
    for (const name of ['big-1', 'big-2']) await s.command('start', { deploymentId: ids[name]!, evict: true });
    // big-1 became ready first, then served a request: it is the one used last.
    expect(await s.lc.gateway.request(ids['big-1']!)).toMatchObject({ kind: 'served' });
    expect(await s.lc.gateway.request(ids['big-3']!)).toMatchObject({ kind: 'served' });
    expect(
      Object.fromEntries((await s.settledLedger()).entries.map((e) => [e.name, `${e.state} on ${e.gpuIndexes}`])),
    ).toEqual({ 'big-1': 'ready on 0', 'big-2': 'parked on 1', 'big-3': 'ready on 1' });
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
