/**
 * Wakes on different cards of one host run beside each other: two 6 GiB cards, each holding one
 * model (4 GiB of weights, 1 GiB of KV cache) ready and one parked, whose wake takes 1.5 s.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Answer } from './support/queueGateway.js';
import { type SchedulerBench, startSchedulerBench } from './support/scheduler.js';

const WAKE_MS = 1_500;
const started = (a: Answer) => (a.kind === 'served' ? a.startedAtMs : Number.NaN);

describe('the host scheduler with a parked model on each card', () => {
  let s: SchedulerBench;
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    s = await startSchedulerBench({ gpuMemory: '6GiB', gpuCount: 2 });
    for (const name of ['slow-a', 'slow-b'])
      ids[name] = await s.deployMeasured(name, '', ['--sim-wake-ms', `${WAKE_MS}`]);
    for (const name of ['fast-c', 'fast-d']) ids[name] = await s.deployMeasured(name);
    for (const name of ['slow-a', 'slow-b', 'fast-c', 'fast-d'])
      await s.command('start', { deploymentId: ids[name]!, evict: true });
    const ledger = await s.settledLedger();
    expect(ledger.entries.map((e) => `${e.name} ${e.state} on ${e.gpuIndexes.join(',')}`)).toEqual([
      'slow-a parked on 0',
      'slow-b parked on 1',
      'fast-c ready on 0',
      'fast-d ready on 1',
    ]);
  });
  afterAll(() => s?.close());

  it('wakes both at once: the second does not wait for the first, which holds none of its memory', async () => {
    const [a, b] = await Promise.all([s.lc.gateway.request(ids['slow-a']!), s.lc.gateway.request(ids['slow-b']!)]);
    expect([a, b].map((x) => x.kind === 'served' && x.deploymentId)).toEqual([ids['slow-a'], ids['slow-b']]);
    // One after the other, the second would begin a whole wake (1.5 s) after the first.
    expect(Math.abs(started(a) - started(b))).toBeLessThan(WAKE_MS / 2);
    const ledger = await s.settledLedger();
    expect(ledger.entries.map((e) => `${e.name} ${e.state}`)).toEqual([
      'slow-a ready',
      'slow-b ready',
      'fast-c parked',
      'fast-d parked',
    ]);
  });

  it('still runs one switch at a time for models that need the same card, the longest-waiting first', async () => {
    const c = s.lc.gateway.request(ids['fast-c']!);
    // After slow-a's admission window (100 ms here) closed: its request waits instead of being served.
    await new Promise((r) => setTimeout(r, 300));
    const a = s.lc.gateway.request(ids['slow-a']!);
    const [servedC, servedA] = await Promise.all([c, a]);
    // fast-c's wake parked slow-a; slow-a's request waited for that switch to end, then woke it back.
    expect(started(servedA) - started(servedC)).toBeGreaterThan(WAKE_MS);
  });
});
