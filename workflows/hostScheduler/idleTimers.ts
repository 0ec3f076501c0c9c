/**
 * The idle timers (`lifecycle_defaults.ready_idle_timeout`, `parked_idle_timeout`): a ready model
 * nobody used parks or stops, a parked one stops. When each runs out is pure; running them is the
 * scheduler's.
 */
import { log } from '@temporalio/workflow';
import type { Demand, LedgerEntry } from '../../api/lifecycle.js';
import { gatewayOn, serverGone } from '../everyGateway.js';
import { hasWaiting } from './demands.js';
import type { SchedulerSettings, SchedulerState } from './input.js';
import type { HostScheduler, MeasuredView } from './scheduler.js';

export interface IdleDeadline {
  entry: LedgerEntry;
  atMs: number;
}

/**
 * When each idle timer runs out, for the entries it applies to: ready and parked ones with no
 * waiting requests (the explicit and warm are skipped when it fires). A ready one counts from when it
 * became ready or was last used, whichever is later.
 */
export function idleDeadlines(input: {
  entries: readonly LedgerEntry[];
  settings: Pick<SchedulerSettings, 'readyIdleMs' | 'parkedIdleMs'>;
  state: Pick<SchedulerState, 'lastUsedMs' | 'sinceMs'>;
  demands: readonly Demand[];
}): IdleDeadline[] {
  const { settings, state } = input;
  return input.entries.flatMap((entry) => {
    const idleMs =
      entry.state === 'ready' ? settings.readyIdleMs : entry.state === 'parked' ? settings.parkedIdleMs : null;
    if (idleMs === null || hasWaiting(input.demands, entry.deploymentId)) return [];
    const since = Math.max(
      state.sinceMs[entry.deploymentId] ?? 0,
      entry.state === 'ready' ? (state.lastUsedMs[entry.deploymentId] ?? 0) : 0,
    );
    return [{ entry, atMs: since + idleMs }];
  });
}

/** One timer of one instance in one state: a timer set aside is looked at again once its instance changes state. */
export const timerKey = (e: LedgerEntry): string => `${e.deploymentId}/${e.instance.generation}/${e.state}`;

/** How long until the first of `deadlines` runs out (at least 1 ms); undefined when there is none. */
export function msUntilFirst(deadlines: readonly IdleDeadline[], nowMs: number): number | undefined {
  const at = deadlines.map((d) => d.atMs);
  return at.length > 0 ? Math.max(1, Math.min(...at) - nowMs) : undefined;
}

export class IdleTimers {
  /**
   * Timers that fired on an instance an operator's policy keeps, or whose release failed: set aside
   * until it changes state.
   */
  private readonly setAside = new Set<string>();

  constructor(private readonly scheduler: HostScheduler) {}

  private deadlines(): IdleDeadline[] {
    const { ledger, settings, state } = this.scheduler;
    return idleDeadlines({ entries: ledger.entries, settings, state, demands: state.demands });
  }

  /** How long the scheduler may wait before a timer runs out; undefined when none runs. */
  msToNext(): number | undefined {
    return msUntilFirst(
      this.deadlines().filter((d) => !this.setAside.has(timerKey(d.entry))),
      Date.now(),
    );
  }

  /** Releases the first instance whose timer ran out; true when one was released (or its release failed). */
  async runDue(): Promise<boolean> {
    const { scheduler } = this;
    const { state, settings } = scheduler;
    const due = this.deadlines().filter((d) => d.atMs <= Date.now() && !this.setAside.has(timerKey(d.entry)));
    if (due.length === 0) return false;
    const lastRequestMs = due.some((d) => d.entry.state === 'ready') ? await lastRequestEverywhere(scheduler) : {};
    for (const { entry } of due) {
      const deployment = (await scheduler.readDeployment(entry.deploymentId)) as MeasuredView;
      if (deployment.explicit || deployment.spec.lifecycle.warm) {
        this.setAside.add(timerKey(entry));
        continue;
      }
      if (entry.state === 'ready') {
        // Requests count as use: the timer starts again from the last one the gateway saw.
        const seen = lastRequestMs[entry.deploymentId] ?? 0;
        if (seen > (state.lastUsedMs[entry.deploymentId] ?? 0)) {
          state.lastUsedMs[entry.deploymentId] = seen;
          if (seen + settings.readyIdleMs! > Date.now()) continue;
        }
      }
      try {
        // A parked model's timer stops it; a ready one's releases it as a switch would.
        await scheduler.takeAway(
          deployment,
          entry.state === 'parked' ? { kind: 'stop', reason: 'idle' } : scheduler.howToRelease(deployment, false),
        );
      } catch (e) {
        // A timer whose release failed is not retried until the instance changes state: the
        // scheduler must outlive it, and a failing release must not run again at once, forever.
        log.warn('idle release failed', { deploymentId: deployment.id, error: String(e) });
        this.setAside.add(timerKey(entry));
      }
      return true;
    }
    return false;
  }
}

/** When each deployment last saw a request, on any server that shares the store. */
async function lastRequestEverywhere(scheduler: HostScheduler): Promise<Record<string, number>> {
  const queues = await scheduler.store.liveServerQueues();
  const seen =
    queues.length === 0
      ? [await scheduler.gateway.snapshot()]
      : await Promise.all(queues.map((q) => gatewayOn(q).snapshot().catch(serverGone(q, 'snapshot'))));
  const latest: Record<string, number> = {};
  for (const { lastActivityMs } of seen.filter((x) => x !== null)) {
    for (const [id, ms] of Object.entries(lastActivityMs)) latest[id] = Math.max(latest[id] ?? 0, ms);
  }
  return latest;
}
