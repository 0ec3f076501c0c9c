/**
 * Engines gone without being asked: one exited, its host agent started again or stops, its host
 * stopped reporting, or another server of the store heard of it. Nothing is routed to it any more,
 * the catalogue lists it stopped, and its next request asks for a fresh start.
 */
import type { Client } from '@temporalio/client';
import type { Instance } from '../api/catalogue.js';
import type { InstanceUpdate } from '../store/instances.js';
import type { InstanceRef } from '../api/lifecycle.js';
import type { InstanceState } from '../domain/vocabulary.js';
import type { RequestQueue } from '../gateway/requestQueue.js';
import type { RoutingTable } from '../gateway/routingTable.js';
import type { SchedulerOwnership } from '../gateway/schedulerOwnership.js';
import { signals, workflowIds } from '../workflows/definitions.js';
import { instanceRow } from '../workflows/ledger.js';
import type { EngineExits } from './engineExits.js';
import { learnInstance } from './serverActivities.js';

export interface EngineLossDeps {
  exits: EngineExits;
  queue: RequestQueue;
  table: RoutingTable;
  /** The server's activity that writes an instance's row and tells this process's gateway. */
  saveInstance: (row: InstanceUpdate) => Promise<void>;
  ownership: SchedulerOwnership;
  client: Client;
}

/** By default the ready and parked are gone: a switch in flight settles its own instances. */
const readyOrParked = (state: InstanceState) => state === 'ready' || state === 'parked';

export class EngineLoss {
  constructor(private readonly deps: EngineLossDeps) {}

  /** One engine gone: its host's scheduler hears of it too. */
  async gone(hostId: string, instance: InstanceRef): Promise<void> {
    const { exits, queue, saveInstance, ownership, client } = this.deps;
    exits.record(hostId, instance);
    // At once, before the row is written (which withdraws it too).
    queue.withdraw(instance);
    await saveInstance(instanceRow(hostId, instance, 'stopped', null, null));
    await ownership.ifOwn(hostId, () =>
      client.workflow.getHandle(workflowIds.hostScheduler(hostId)).signal(signals.engineExited, instance),
    );
  }

  /**
   * The engines the catalogue lists on the host in the states `gone` picks are gone: its agent
   * started again, stops, or stopped reporting. Requests already running there finish; new ones
   * wait for a start on a host that serves.
   */
  async goneOn(hostId: string, gone: (state: InstanceState) => boolean = readyOrParked): Promise<void> {
    for (const d of this.deps.table.list()) {
      for (const i of d.instances) {
        if (i.hostId === hostId && gone(i.observedState)) {
          await this.gone(hostId, { deploymentId: d.id, instanceIndex: i.index, generation: i.generation });
        }
      }
    }
  }

  /**
   * An instance the store lists stopped: that generation is over for good (every start takes a newer
   * one), so nothing is routed to it here either, though this server did not hear of it (its engine
   * exited, or its host was found down, as another server of the store heard it).
   */
  learnStopped(stopped: Instance): void {
    const { deploymentId, index: instanceIndex, hostId, generation } = stopped;
    this.deps.exits.record(hostId, { deploymentId, instanceIndex, generation });
    learnInstance(this.deps.queue, this.deps.table, stopped);
  }
}
