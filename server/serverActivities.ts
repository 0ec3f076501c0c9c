/**
 * Every activity that runs in the server's process, as its worker registers them: the store's rows
 * and the gateway's steps, and what each changes in the gateway's memory. A row that says where an
 * instance stands also tells the routing table, and opens or withdraws its dispatch; starting the
 * waiters tells the table where the target runs before they go there. The server and the lifecycle's
 * tests wire this one factory, so the tests run the path production runs.
 */
import { createStoreActivities, type SwitchReceiptInput } from '../activities/storeActivities.js';
import type { GatewaySteps, WindowThenRelease } from '../activities/gatewaySteps.js';
import { createGatewayActivities } from '../gateway/gatewayActivities.js';
import type { RequestQueue } from '../gateway/requestQueue.js';
import type { InstanceUpdate, RoutingTable } from '../gateway/routingTable.js';
import type { Db } from '../store/db.js';
import type { EngineExits } from './engineExits.js';

export interface ServerActivityDeps {
  db: Db;
  /** This server's own task queue, named in the answer of each instant gateway step it takes. */
  serverTaskQueue?: string;
  queue: RequestQueue;
  table: RoutingTable;
  exits: EngineExits;
  /**
   * Sends the requests a host refused for capacity to another host that can serve them; false when
   * none can (they are then answered). Absent: one host, no elsewhere.
   */
  sendElsewhere?: (hostId: string, deploymentId: string) => Promise<boolean>;
  /** A switch's last receipt was written: its outcome, when it began and ended, and the time of each step. */
  switchEnded?: (receipt: SwitchReceiptInput) => void;
  /** A deployment's checkpoint was recorded: what its requests need is known now. */
  measured?: (deploymentId: string) => void;
}

/**
 * An instance the store records ready serves, though no switch started its waiters in this process:
 * after a restart (the queue holds no instance yet, and the schedulers only start the waiters of a
 * model they bring up), and when a switch records its target ready after it started the waiters in the process
 * before this one (a restart in between; otherwise they would wait out their deadline). Each instance
 * on its own: one whose dispatch waits serves, though another instance of its model already does.
 */
export function serveRecorded(
  queue: RequestQueue,
  {
    deploymentId,
    index,
    generation,
    observedState,
  }: Pick<InstanceUpdate, 'deploymentId' | 'index' | 'generation' | 'observedState'>,
): void {
  if (observedState === 'ready' && queue.instanceDispatchOf(deploymentId, index) === 'waiting')
    queue.startWaiters({ deploymentId, instanceIndex: index, generation });
}

/**
 * What a row of the store says of an instance, told to this process's gateway: the routing table
 * takes it, and its dispatch opens (ready) or is withdrawn (anything else).
 */
export function learnInstance(queue: RequestQueue, table: RoutingTable, row: InstanceUpdate): void {
  const { deploymentId, index, hostId, generation, observedState, parkTier, gpuIndexes, residueBytes } = row;
  table.setInstance({
    deploymentId,
    index,
    hostId,
    generation,
    observedState,
    parkTier,
    gpuIndexes: gpuIndexes ?? [],
    residueBytes: residueBytes ?? null,
  });
  if (observedState === 'ready') serveRecorded(queue, row);
  else queue.withdraw({ deploymentId, instanceIndex: index, generation });
}

export function createServerActivities({
  db,
  serverTaskQueue,
  queue,
  table,
  exits,
  sendElsewhere,
  switchEnded,
  measured,
}: ServerActivityDeps) {
  const store = createStoreActivities(db);
  const gateway: GatewaySteps = createGatewayActivities({ queue, serverTaskQueue });
  const saveInstance = async (update: Parameters<typeof store.saveInstance>[0]) => {
    const gone =
      update.observedState !== 'stopped' && exits.isGone(update.hostId, update.deploymentId, update.generation);
    const row = gone
      ? { ...update, observedState: 'stopped' as const, parkTier: null, gpuBytes: 0, hostRamBytes: 0 }
      : update;
    await store.saveInstance(row);
    learnInstance(queue, table, row);
  };
  const windowThenRelease: WindowThenRelease = {
    async closeAdmissionThenRelease({ rows, ...window }) {
      const outcome = await gateway.closeAdmission(window);
      const released = outcome.drained && outcome.cutBeforeOutput.length === 0;
      if (released) {
        await gateway.withdrawVictims(window);
        await Promise.all(rows.map(saveInstance));
      }
      return { ...outcome, released };
    },
  };
  return {
    ...store,
    ...gateway,
    async startWaiters(input: Parameters<GatewaySteps['startWaiters']>[0]) {
      const { deploymentId, instanceIndex: index, generation } = input.instance;
      // Its engine is gone: the waiters stay, and ask the scheduler for a fresh start.
      if (exits.isGone(input.hostId, deploymentId, generation)) return { started: 0, ranOn: serverTaskQueue };
      table.setInstance({
        deploymentId,
        index,
        hostId: input.hostId,
        generation,
        observedState: 'ready',
        parkTier: null,
      });
      return gateway.startWaiters(input);
    },
    async capacityRefused(input: Parameters<GatewaySteps['capacityRefused']>[0]) {
      if (sendElsewhere && (await sendElsewhere(input.hostId, input.deploymentId))) return { failed: 0 };
      return gateway.capacityRefused(input);
    },
    saveInstance,
    ...windowThenRelease,
    async recordCheckpoint(input: Parameters<typeof store.recordCheckpoint>[0]) {
      await store.recordCheckpoint(input);
      measured?.(input.deploymentId);
    },
    async setOperatorStopped(input: Parameters<typeof store.setOperatorStopped>[0]) {
      await store.setOperatorStopped(input);
      table.setOperatorStopped(input.deploymentId, input.stopped);
    },
    async saveSwitchReceipt(input: SwitchReceiptInput) {
      // Counted once: a step run again after the receipt ended finds it ended.
      const ended = await store.saveSwitchReceipt(input);
      if (ended) switchEnded?.(input);
      return ended;
    },
    async deleteDeployment(input: Parameters<typeof store.deleteDeployment>[0]) {
      await store.deleteDeployment(input);
      table.removeDeployment(input.deploymentId);
    },
  };
}
