/**
 * A run that starts without a ledger learns what the host's GPUs hold from its host agent: the
 * host's first run, or one started after the run before was terminated (the Web UI's Terminate),
 * whose ledger went with it while its engines ran on. Engines end with their agent, so what the
 * agent lists is all the GPUs hold. A ready or parked engine enters the ledger as it is, holding
 * what its checkpoint says (while a new revision is measured, what was reserved at its launch, all
 * counted as weights: never less than it holds), and its row says so. One caught half-way (the
 * switch moving it ended with the run that started it), or of a deployment deleted meanwhile, is
 * stopped, as a failed transition's undo stops it, and its row says so. A row that says an instance
 * holds something the agent does not run (its switch ended before its engine was launched) is set
 * stopped: left `starting`, its requests would wait for a start no one runs. The agent is asked only
 * when the store's rows say something may run there, and one that does not take the question within
 * a heartbeat timeout runs nothing (its rows are left to the host's liveness).
 */
import { ActivityFailure, log, patched, proxyActivities } from '@temporalio/workflow';
import type { HostActivities, RunningEngine } from '../../activities/hostActivities.js';
import { HEARTBEAT_TIMEOUT_MS } from '../../api/heartbeat.js';
import type { DeploymentView, InstanceRef } from '../../api/lifecycle.js';
import { taskQueues } from '../definitions.js';
import { holdings, instanceRow } from '../ledger.js';
import type { HostScheduler } from './scheduler.js';

/** The `patched()` name of the ledger read from the host agent; older histories started empty. */
const LEDGER_FROM_HOST = 'ledger-from-host';
/** The `patched()` name of the rows set as the agent's engines say; older histories left them. */
const ROWS_FROM_HOST = 'rows-from-host';

/** Adds what the host's engines hold to the scheduler's new, empty ledger. */
export async function adoptEngines(scheduler: HostScheduler): Promise<void> {
  if (!patched(LEDGER_FROM_HOST)) return;
  const { hostId, store, settings } = scheduler;
  // Older histories asked only whether a row held something, and left the rows as they were.
  const rows = patched(ROWS_FROM_HOST) ? await store.instanceRowsHeldOn({ hostId }) : null;
  if (rows ? rows.length === 0 : !(await store.instancesHeldOn({ hostId }))) return;
  const host = proxyActivities<Pick<HostActivities, 'listEngines' | 'stopEngine'>>({
    taskQueue: taskQueues.host(hostId),
    scheduleToStartTimeout: HEARTBEAT_TIMEOUT_MS,
    startToCloseTimeout: Math.max(HEARTBEAT_TIMEOUT_MS, settings.startMs),
    retry: { maximumAttempts: 1 },
  });
  const engines = await host.listEngines().catch(asNothing(hostId, 'listEngines', null));
  if (engines === null) return;
  const deployments = await Promise.all(
    engines.map((e) =>
      scheduler.readDeployment(e.instance.deploymentId).catch(asNothing(hostId, 'describeDeployment', null)),
    ),
  );
  await Promise.all(
    engines.map(async (engine, i) => {
      const deployment = deployments[i]!;
      const state = engine.stage === 'ready' || engine.stage === 'parked' ? engine.stage : null;
      if (state && deployment) return adopt(scheduler, engine, state, deployment, rows !== null);
      await host.stopEngine({ key: engine.instance }).catch(asNothing(hostId, 'stopEngine', undefined));
      await store.saveInstance(instanceRow(hostId, engine.instance, 'stopped', null, null));
    }),
  );
  if (!rows) return;
  const running = new Set(engines.map((e) => slotOf(e.instance)));
  await Promise.all(
    rows
      .filter((row) => !running.has(slotOf(row)))
      .map((row) => store.saveInstance(instanceRow(hostId, row, 'stopped', null, null))),
  );
}

const slotOf = (i: InstanceRef) => `${i.deploymentId}/${i.instanceIndex}`;

async function adopt(
  scheduler: HostScheduler,
  engine: RunningEngine,
  state: 'ready' | 'parked',
  deployment: DeploymentView,
  writeRow: boolean,
) {
  const checkpoint = deployment.checkpoint ?? {
    weightBytes: engine.reservedBytes * engine.gpuIndexes.length,
    kvBytes: 0,
  };
  const entry = scheduler.addEntry(deployment, engine.instance, engine.gpuIndexes);
  scheduler.setEntry(entry, state, engine.tier, holdings(checkpoint, state, engine.tier));
  log.info('the host scheduler adopted an engine its host runs', { hostId: scheduler.hostId, ...engine });
  if (writeRow)
    await scheduler.store.saveInstance(
      instanceRow(scheduler.hostId, engine.instance, state, engine.tier, checkpoint, engine.gpuIndexes),
    );
}

/** A step the agent or the store could not take: what it would have found is taken to be nothing. */
const asNothing =
  <T>(hostId: string, step: string, nothing: T) =>
  (e: unknown): T => {
    if (!(e instanceof ActivityFailure)) throw e;
    log.warn('the host scheduler found nothing for a step of its ledger from the host', {
      hostId,
      step,
      error: String(e),
    });
    return nothing;
  };
