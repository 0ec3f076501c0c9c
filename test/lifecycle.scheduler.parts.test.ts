/** The host scheduler's pure parts, apart from Temporal: its settings, its command queue, its demands and its idle timers. */
import { describe, expect, it } from 'vitest';
import type { CommandReceipt, Demand, LedgerEntry } from '../api/lifecycle.js';
import { hasWaiting, withDemand, withoutDemandsOf } from '../workflows/hostScheduler/demands.js';
import { idleDeadlines, msUntilFirst, timerKey } from '../workflows/hostScheduler/idleTimers.js';
import { sameSettings } from '../workflows/hostScheduler/input.js';
import { testSchedulerSettings } from './support/scheduler.js';
import { Job } from '../workflows/hostScheduler/jobs.js';

const settings = testSchedulerSettings;

describe('the settings a server sends', () => {
  it('keep the run going when they are the ones it has', () => {
    expect(sameSettings({ ...settings }, settings)).toBe(true);
  });
  it('start a new run when any one differs, or is there on one side only', () => {
    expect(sameSettings({ ...settings, readyIdleMs: 60_000 }, settings)).toBe(false);
    expect(sameSettings({ ...settings, maxHistoryEvents: 500 }, settings)).toBe(false);
    expect(sameSettings(settings, { ...settings, maxHistoryEvents: 500 })).toBe(false);
  });
});

describe('a queued command', () => {
  const receipt: CommandReceipt = { deploymentId: 'chat-a', switchId: 's-1', victims: [], state: 'parking' };

  it('answers its caller with the first answer: a later failure of its switch does not change it', async () => {
    const job = new Job({ kind: 'park', deploymentId: 'chat-a' });
    job.answer([receipt]);
    job.fail(new Error('the switch failed'));
    job.answer([{ ...receipt, state: 'parked' }]);
    await expect(job.receipts).resolves.toEqual([receipt]);
  });

  it('fails its caller when it fails before answering', async () => {
    const job = new Job({ kind: 'start', deploymentId: 'chat-a', evict: false, instanceIndex: 0 });
    job.fail(new Error('memory held'));
    job.answer([receipt]);
    await expect(job.receipts).rejects.toThrow('memory held');
  });
});

describe('the demands the scheduler holds', () => {
  const demand = (deploymentId: string, waiting: number, serverTaskQueue?: string): Demand => ({
    deploymentId,
    waiting,
    oldestSinceMs: 1_000,
    ...(serverTaskQueue ? { serverTaskQueue } : {}),
  });

  it('keep each server’s latest report for a model, beside the other servers’ reports', () => {
    const held = [demand('chat-a', 2, 'server-1'), demand('chat-a', 1, 'server-2'), demand('chat-b', 1, 'server-1')];
    expect(withDemand(held, demand('chat-a', 5, 'server-1'))).toEqual([
      demand('chat-a', 1, 'server-2'),
      demand('chat-b', 1, 'server-1'),
      demand('chat-a', 5, 'server-1'),
    ]);
  });

  it('drop a server’s report for a model once nobody waits there', () => {
    const held = [demand('chat-a', 2, 'server-1'), demand('chat-a', 1, 'server-2')];
    const after = withDemand(held, demand('chat-a', 0, 'server-1'));
    expect(after).toEqual([demand('chat-a', 1, 'server-2')]);
    expect(hasWaiting(after, 'chat-a')).toBe(true);
    expect(hasWaiting(withDemand(after, demand('chat-a', 0, 'server-2')), 'chat-a')).toBe(false);
  });

  it('lose a restarted server’s reports, or every report when the restart names no server', () => {
    const held = [demand('chat-a', 2, 'server-1'), demand('chat-b', 1, 'server-2'), demand('chat-c', 1)];
    expect(withoutDemandsOf(held, { serverTaskQueue: 'server-1' })).toEqual([
      demand('chat-b', 1, 'server-2'),
      demand('chat-c', 1),
    ]);
    expect(withoutDemandsOf(held, {})).toEqual([]);
    expect(withoutDemandsOf(held, undefined)).toEqual([]);
  });
});

describe('the idle timers', () => {
  const entry = (deploymentId: string, state: LedgerEntry['state'], generation = 1): LedgerEntry => ({
    deploymentId,
    name: deploymentId,
    instance: { deploymentId, instanceIndex: 0, generation },
    state,
    tier: 'host_ram',
    gpuIndexes: [0],
    gpuBytes: 0,
    hostRamBytes: 0,
  });
  const timers = { readyIdleMs: 60_000, parkedIdleMs: 600_000 };
  const state = {
    sinceMs: { 'chat-a': 1_000, 'chat-b': 5_000, 'chat-c': 2_000 },
    lastUsedMs: { 'chat-a': 30_000, 'chat-b': 9_000 },
  };

  it('run out a ready model’s timer from its last use, and a parked one’s from when it parked', () => {
    const entries = [entry('chat-a', 'ready'), entry('chat-b', 'parked'), entry('chat-c', 'starting')];
    expect(
      idleDeadlines({ entries, settings: timers, state, demands: [] }).map((d) => [d.entry.deploymentId, d.atMs]),
    ).toEqual([
      ['chat-a', 90_000],
      ['chat-b', 605_000],
    ]);
  });

  it('run for no model with waiting requests, and not at all when off', () => {
    const entries = [entry('chat-a', 'ready'), entry('chat-b', 'parked')];
    const waiting: Demand[] = [{ deploymentId: 'chat-a', waiting: 1, oldestSinceMs: 40_000 }];
    expect(
      idleDeadlines({ entries, settings: timers, state, demands: waiting }).map((d) => d.entry.deploymentId),
    ).toEqual(['chat-b']);
    expect(idleDeadlines({ entries, settings: { readyIdleMs: null, parkedIdleMs: null }, state, demands: [] })).toEqual(
      [],
    );
  });

  it('tell the scheduler how long it may wait: until the first runs out, at least a millisecond, or for ever', () => {
    const deadlines = [
      { entry: entry('chat-a', 'ready'), atMs: 90_000 },
      { entry: entry('chat-b', 'parked'), atMs: 70_000 },
    ];
    expect(msUntilFirst(deadlines, 50_000)).toBe(20_000);
    expect(msUntilFirst(deadlines, 80_000)).toBe(1);
    expect(msUntilFirst([], 50_000)).toBeUndefined();
  });

  it('set aside a timer for one instance in one state only', () => {
    expect(timerKey(entry('chat-a', 'ready'))).not.toBe(timerKey(entry('chat-a', 'parked')));
    expect(timerKey(entry('chat-a', 'ready'))).not.toBe(timerKey(entry('chat-a', 'ready', 2)));
    expect(timerKey(entry('chat-a', 'ready'))).toBe(timerKey(entry('chat-a', 'ready')));
  });
});
