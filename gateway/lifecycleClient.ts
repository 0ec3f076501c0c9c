/**
 * How the management API and the gateway reach the lifecycle's workflows. Commands are Updates on the
 * host scheduler, sent with Update-with-Start so a host's scheduler starts with its first command;
 * demands are signals, sent with signal-with-start for the same reason. A refused command comes back
 * as a CapyError carrying the catalogue's error.
 */
import {
  type Client,
  WithStartWorkflowOperation,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
} from '@temporalio/client';
import type { SignalDefinition, UpdateDefinition } from '@temporalio/common';
import { CapyError } from '../domain/catalogue.js';
import { signals, updates, WORKFLOW_TASK_TIMEOUT_MS, workflowIds } from '../workflows/definitions.js';
import type { Demand, SwitchResult } from '../api/lifecycle.js';
import type { QueueSettings } from '../settings/queue.js';
import type { ServerSettings } from '../settings/serverDocument.js';
import type { HostSchedulerInput, SchedulerSettings } from '../workflows/hostScheduler/input.js';
import type { hostScheduler } from '../workflows/hostScheduler/workflow.js';
import type { MeasureInput, measureCheckpointWorkflow } from '../workflows/measure.js';
import type { switchWorkflow } from '../workflows/switch.js';
import { refusedWith } from '../workflows/refusal.js';

/**
 * A host scheduler's settings, from the server's document and the host's queue settings: the
 * admission window is the one of the host where the switch happens.
 */
export function schedulerSettings(
  server: Pick<ServerSettings, 'switching' | 'lifecycle_defaults'>,
  hostQueue: Pick<QueueSettings, 'admission_window'>,
): SchedulerSettings {
  return {
    admissionWindowMs: hostQueue.admission_window,
    drainMs: server.switching.drain_timeout,
    wakeWindowMs: server.switching.wake_window,
    startMs: server.switching.start_timeout,
    readyIdleMs: server.lifecycle_defaults.ready_idle_timeout,
    parkedIdleMs: server.lifecycle_defaults.parked_idle_timeout,
  };
}

/** Which host scheduler, and what it starts with when it is not running yet. */
export type SchedulerRef = Omit<HostSchedulerInput, 'state'>;

const schedulerStart = (ref: SchedulerRef) =>
  new WithStartWorkflowOperation<typeof hostScheduler>('hostScheduler', {
    workflowId: workflowIds.hostScheduler(ref.hostId),
    taskQueue: ref.serverTaskQueue,
    workflowIdConflictPolicy: 'USE_EXISTING',
    workflowTaskTimeout: WORKFLOW_TASK_TIMEOUT_MS,
    args: [ref],
  });

export type Commands = typeof updates;
export type CommandArgs<K extends keyof Commands> = Commands[K] extends UpdateDefinition<unknown, infer A> ? A : never;
export type CommandResult<K extends keyof Commands> =
  Commands[K] extends UpdateDefinition<infer R, infer _Args> ? R : never;

/** Sends a command to the host's scheduler and returns its receipt; a refusal throws CapyError. */
export async function sendCommand<K extends keyof Commands>(
  client: Client,
  ref: SchedulerRef,
  update: K,
  ...args: CommandArgs<K>
): Promise<CommandResult<K>> {
  try {
    // TypeScript does not narrow `updates[update]` by K; the mapped types above say what it is.
    const definition = updates[update] as unknown as UpdateDefinition<CommandResult<K>, CommandArgs<K>>;
    return await client.workflow.executeUpdateWithStart(definition, {
      args,
      startWorkflowOperation: schedulerStart(ref),
    });
  } catch (e) {
    const refused = e instanceof WorkflowUpdateFailedError ? refusedWith(e) : undefined;
    throw refused ? new CapyError(refused) : e;
  }
}

/**
 * Tells the host's scheduler who waits, since when (`waiting` 0: nobody any more); returns the run
 * it told, which is a new one after the last was terminated or continued as new.
 */
export async function reportDemand(client: Client, ref: SchedulerRef, demand: Demand): Promise<string> {
  const handle = await client.workflow.signalWithStart<typeof hostScheduler, [Demand]>('hostScheduler', {
    workflowId: workflowIds.hostScheduler(ref.hostId),
    taskQueue: ref.serverTaskQueue,
    workflowTaskTimeout: WORKFLOW_TASK_TIMEOUT_MS,
    args: [ref],
    signal: signals.demand,
    signalArgs: [demand],
  });
  return handle.signaledRunId;
}

/**
 * Starts the host's scheduler unless one runs (with nothing to tell it yet) and returns the run that
 * does. A host registering takes its scheduler at once: the installation that starts it is the one
 * whose workers poll its queue, and another installation's server finds it running on a queue of
 * not its own (gateway/schedulerOwnership.ts) before its host agent polls the host's.
 */
export async function ensureScheduler(client: Client, ref: SchedulerRef): Promise<string> {
  const handle = await client.workflow.start<typeof hostScheduler>('hostScheduler', {
    workflowId: workflowIds.hostScheduler(ref.hostId),
    taskQueue: ref.serverTaskQueue,
    workflowTaskTimeout: WORKFLOW_TASK_TIMEOUT_MS,
    workflowIdConflictPolicy: 'USE_EXISTING',
    args: [ref],
  });
  return handle.firstExecutionRunId;
}

/** Signals the host's scheduler if it runs: one not running yet has nothing to be told. */
async function signalIfRunning<Args extends unknown[]>(
  client: Client,
  hostId: string,
  signal: SignalDefinition<Args>,
  ...args: Args
): Promise<void> {
  try {
    await client.workflow.getHandle(workflowIds.hostScheduler(hostId)).signal(signal, ...args);
  } catch (e) {
    if (!(e instanceof WorkflowNotFoundError)) throw e;
  }
}

/**
 * Gives a running scheduler the settings as they are now; one not running yet starts with them.
 * A scheduler outlives the server that started it, and keeps its settings until told.
 */
export async function configureScheduler(client: Client, ref: SchedulerRef): Promise<void> {
  await signalIfRunning(client, ref.hostId, signals.configure, ref.settings);
}

/**
 * Tells a running scheduler that the demands the server on `serverTaskQueue` reported are void: it
 * started again (sent before it takes requests, so no report of this run comes before it), or
 * another server found it gone.
 */
export async function withdrawDemandsOf(client: Client, hostId: string, serverTaskQueue: string): Promise<void> {
  await signalIfRunning(client, hostId, signals.gatewayRestarted, { serverTaskQueue });
}

/**
 * Starts the measurement of a revision's checkpoint, once per revision (a second deploy of the same
 * revision finds the first); `start --wait` awaits the returned handle's result.
 */
export async function startMeasurement(client: Client, input: MeasureInput) {
  return client.workflow.start<typeof measureCheckpointWorkflow>('measureCheckpointWorkflow', {
    workflowId: workflowIds.measure(input.deploymentId, input.revision),
    taskQueue: input.serverTaskQueue,
    workflowTaskTimeout: WORKFLOW_TASK_TIMEOUT_MS,
    args: [input],
    workflowIdConflictPolicy: 'USE_EXISTING',
  });
}

/** `start --wait`: waits for the revision's measurement to be recorded (the start then waits for ready). */
export async function awaitMeasurement(client: Client, deploymentId: string, revision: number): Promise<void> {
  await client.workflow.getHandle(workflowIds.measure(deploymentId, revision)).result();
}

/**
 * How a switch ended, or null while it runs; undefined when there is no such switch. A start's
 * receipt answers as its switch begins: `start --wait` follows it here.
 */
export async function switchResult(client: Client, switchId: string): Promise<SwitchResult | null | undefined> {
  const handle = client.workflow.getHandle<typeof switchWorkflow>(workflowIds.switch(switchId));
  try {
    const { status } = await handle.describe();
    return status.name === 'RUNNING' ? null : await handle.result();
  } catch (e) {
    if (e instanceof WorkflowNotFoundError) return undefined;
    throw e;
  }
}
