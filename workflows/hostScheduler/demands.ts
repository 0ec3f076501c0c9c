/**
 * Requests waiting for a model on this host (the gateway's demand reports): the demands the
 * scheduler holds, and serving them, the longest-waiting model first.
 */
import { log, patched } from '@temporalio/workflow';
import { apiErrors } from '../../domain/catalogue.js';
import { measurementState } from '../../domain/measurement.js';
import type { GatewaySteps } from '../../activities/gatewaySteps.js';
import type { Demand } from '../../api/lifecycle.js';
import { workflowIds } from '../definitions.js';
import { gatewayOn, serverGone } from '../everyGateway.js';
import { byLongestWait } from '../ledger.js';
import { refusedWith } from '../refusal.js';
import type { HostScheduler } from './scheduler.js';

/** The `patched()` name of the live servers read with the model a demand wants; older histories did not. */
const SERVERS_WITH_DEMAND = 'live-servers-with-demand';
/** The `patched()` name of a demand's reads as one local step; older histories read each apart. */
const DEMAND_READ_AS_ONE = 'demand-read-as-one';
/** The `patched()` name of wakes on GPUs apart running beside each other; older histories ran one switch at a time. */
const WAKES_APART = 'wakes-on-other-gpus-beside';

/** A demand's reads as older histories made them: the model, each holder and the live servers apart. */
async function readApart(scheduler: HostScheduler, deploymentId: string) {
  const [deployment, holders, liveServerQueues] = await Promise.all([
    scheduler.readDeployment(deploymentId),
    scheduler.gpuHolders(),
    patched(SERVERS_WITH_DEMAND) ? scheduler.store.liveServerQueues() : undefined,
  ]);
  return { deployment, holders, liveServerQueues, wakeReference: undefined };
}

/** `demands` with `demand` in place of the same server's last report for its model (none when nobody waits). */
export function withDemand(demands: readonly Demand[], demand: Demand): Demand[] {
  const others = demands.filter(
    (d) => d.deploymentId !== demand.deploymentId || d.serverTaskQueue !== demand.serverTaskQueue,
  );
  return demand.waiting > 0 ? [...others, demand] : others;
}

/**
 * `demands` without those of the server `whose` names (its requests are gone with it); without all
 * when it names none.
 */
export function withoutDemandsOf(
  demands: readonly Demand[],
  whose: { serverTaskQueue?: string } | undefined,
): Demand[] {
  return whose?.serverTaskQueue === undefined ? [] : demands.filter((d) => d.serverTaskQueue !== whose.serverTaskQueue);
}

export const hasWaiting = (demands: readonly Demand[], deploymentId: string): boolean =>
  demands.some((d) => d.deploymentId === deploymentId && d.waiting > 0);

/** `demand`'s requests answered on the server that holds them; one gone took them with it. */
function answerWaiters<K extends 'failWaiters' | 'capacityRefused'>(
  scheduler: HostScheduler,
  demand: Demand,
  step: K,
  input: Parameters<GatewaySteps[K]>[0],
) {
  const steps = demand.serverTaskQueue === undefined ? scheduler.gateway : gatewayOn(demand.serverTaskQueue);
  return (steps[step] as (i: typeof input) => Promise<unknown>)(input).catch(
    serverGone(demand.serverTaskQueue ?? scheduler.serverTaskQueue, step),
  );
}

/**
 * Serves the longest-waiting model that can go now; true when a switch ran, or began and runs on.
 * Models competing for the same GPUs go longest wait first, one switch at a time; a wake on GPUs no
 * running switch holds begins beside it (the spec's order is among models waiting for the same
 * memory), and the scheduler hears when it ends.
 */
export async function serveDemands(scheduler: HostScheduler): Promise<boolean> {
  const { state } = scheduler;
  const beside = patched(WAKES_APART);
  for (const demand of byLongestWait(state.demands)) {
    const dropDemand = () => (state.demands = state.demands.filter((d) => d !== demand));
    const entry = scheduler.entryOf(demand.deploymentId);
    // A ready model's requests wait for a free slot, not for a switch; they keep it from being a victim.
    if (entry?.state === 'ready') continue;
    // Nothing to read for a model that must wait for a running switch (bringUp would say so).
    if (scheduler.running.size > 0 && (entry?.state !== 'parked' || scheduler.running.holdsAny(entry.gpuIndexes)))
      continue;
    // The holders, the live servers and a parked model's first answer are read with the model, in
    // one step, not after it (nor in the switch): a request waits for every round trip here.
    const { deployment, holders, liveServerQueues, wakeReference } = patched(DEMAND_READ_AS_ONE)
      ? await scheduler.readForDemand(demand.deploymentId)
      : await readApart(scheduler, demand.deploymentId);
    // Requests never start or wake an explicit model or one an operator stopped: the gateway answers 409.
    if (deployment.explicit || deployment.operatorStopped) {
      dropDemand();
      continue;
    }
    // Its requests wait for the measurement, which signals `measurementEnded`; if it failed, a start
    // cannot help, and they are answered with why.
    if (!scheduler.isMeasured(deployment)) {
      if (measurementState(deployment) === 'failed') {
        const error = apiErrors.startFailed(
          deployment.id,
          `its checkpoint could not be measured: ${deployment.measureFailure}`,
        );
        await answerWaiters(scheduler, demand, 'failWaiters', {
          switchId: workflowIds.measure(deployment.id, deployment.revision),
          deploymentId: deployment.id,
          error,
        });
        dropDemand();
      }
      continue;
    }
    try {
      let begun = () => {};
      const begins = new Promise<'begun'>((resolve) => (begun = () => resolve('begun')));
      const bringing = scheduler.bringUp(deployment, holders, {
        evict: true,
        instanceIndex: demand.instanceIndex ?? 0,
        admissionWindowMs: scheduler.settings.admissionWindowMs,
        liveServerQueues,
        wakeReference,
        begun,
      });
      const brought = await (beside ? Promise.race([bringing, begins]) : bringing);
      if (brought === 'begun') {
        void bringing.then(
          () => scheduler.noteChange(),
          (e) => {
            log.warn('switch ended with a failure', { deploymentId: deployment.id, error: String(e) });
            scheduler.noteChange();
          },
        );
        return true;
      }
      if (brought.kind !== 'waits') return true;
    } catch (e) {
      // Only models kept loaded (explicit, warm) hold the memory: waiting would not free it, so the
      // requests are refused at once, unless another host can serve them. Checked on every pass,
      // so requests that were waiting when a holder became explicit or warm are refused too.
      const error = refusedWith(e);
      if (error?.code !== 'insufficient_capacity') {
        log.warn('demand not served', { deploymentId: deployment.id, error: String(e) });
        continue;
      }
      await answerWaiters(scheduler, demand, 'capacityRefused', {
        hostId: scheduler.hostId,
        deploymentId: deployment.id,
        error,
      });
      dropDemand();
    }
  }
  return false;
}
