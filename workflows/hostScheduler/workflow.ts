/**
 * The host scheduler: one long-lived workflow per host (`host-scheduler/<hostId>`), the only thing
 * that changes what that host's GPUs hold. It keeps the host's ledger, takes demands from the gateway
 * (signals) and commands from the management API (updates answered with the receipt), and runs one
 * transition at a time, each a child switch workflow, except that wakes on GPUs apart run beside each
 * other (demands.ts). It continues as new between transitions before its history grows large,
 * carrying its ledger and the demands it still holds as plain objects.
 *
 * This function wires Temporal's messages to the scheduler (scheduler.ts), which owns the state.
 *
 * A cancel (the Web UI's "Request Cancellation") is refused: the scheduler alone knows which requests
 * wait and what each idle timer has counted, and a new run learns only what the GPUs hold, from the
 * host agent (adoption.ts). Its switches run to their end; a switch is cancelled on its own.
 */
import { CancellationScope, log, setHandler } from '@temporalio/workflow';
import { queries, signals, updates } from '../definitions.js';
import type { HostSchedulerInput } from './input.js';
import { HostScheduler } from './scheduler.js';

export async function hostScheduler(input: HostSchedulerInput): Promise<never> {
  const scheduler = new HostScheduler(input);
  // Every handler is set before the first await, so no signal or update is dropped.
  setHandler(signals.demand, (demand) => scheduler.reportDemand(demand));
  setHandler(signals.gatewayRestarted, (whose) => scheduler.withdrawDemands(whose));
  setHandler(signals.engineExited, (instance) => scheduler.engineExited(instance));
  setHandler(signals.measurementEnded, () => scheduler.noteChange());
  setHandler(signals.configure, (sent) => scheduler.configure(sent));
  setHandler(updates.start, ({ deploymentId, evict, instanceIndex = 0 }) =>
    scheduler.firstReceipt({ kind: 'start', deploymentId, evict, instanceIndex }),
  );
  setHandler(updates.stop, ({ deploymentId }) => scheduler.firstReceipt({ kind: 'stop', deploymentId }));
  setHandler(updates.park, ({ deploymentId }) => scheduler.firstReceipt({ kind: 'park', deploymentId }));
  setHandler(updates.preinitialize, ({ deploymentId }) =>
    scheduler.firstReceipt({ kind: 'preinitialize', deploymentId }),
  );
  setHandler(updates.delete, ({ deploymentId }) => scheduler.firstReceipt({ kind: 'delete', deploymentId }));
  setHandler(updates.drainHost, () => scheduler.submit({ kind: 'drainHost' }));
  setHandler(queries.ledger, () => scheduler.ledgerNow());
  CancellationScope.current().cancelRequested.catch(() =>
    log.warn('the host scheduler refuses to be cancelled: it alone knows which requests wait', {
      hostId: input.hostId,
    }),
  );
  return CancellationScope.nonCancellable(() => scheduler.run());
}
