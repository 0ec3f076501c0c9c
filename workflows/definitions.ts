/**
 * Names shared by every Temporal client and worker: task queues, workflow IDs and the search
 * attributes the Web UI filters switches by. Pure: workflow code imports it too.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { CommandReceipt, Demand, HostLedger, InstanceRef } from '../api/lifecycle.js';
import type { SchedulerSettings } from './hostScheduler/input.js';

export const taskQueues = {
  /**
   * The lifecycle's workflows and the store's steps: every server on one store polls it (the store
   * names it, store/servers.ts), so a server that dies leaves its schedulers and switches to the others.
   */
  workflows: (storeId: string) => `capyctl-workflows-${storeId}`,
  /**
   * A server's gateway steps. Each server has its own (its requests wait and run in its memory);
   * the switch reaches every one the store lists (workflows/everyGateway.ts). Named by the store
   * too: servers of two installations on one namespace may have one ID (`main`, the default), and
   * one's window and drain must not be answered by the other's gateway.
   */
  server: (storeId: string, serverId: string) => `capyctl-server-${storeId}-${serverId}`,
  /** A host agent's engine activities. */
  host: (hostId: string) => `host-${hostId}`,
} as const;

export const workflowIds = {
  hostScheduler: (hostId: string) => `host-scheduler/${hostId}`,
  switch: (switchId: string) => `switch/${switchId}`,
  measure: (deploymentId: string, revision: number) => `measure/${deploymentId}/${revision}`,
} as const;

/**
 * The start-to-close bound of a step on the server's task queue (a store row, a look at the
 * gateway). Not only a guard against slow steps: a task handed to a server that was stopping as it
 * came is lost, and comes back only when this runs out, so it bounds how long a restart can hold a
 * switch or a scheduler up. The steps are single rows; a retry is harmless (they are idempotent).
 */
export const SERVER_STEP_TIMEOUT_MS = 5_000;

/**
 * How soon Temporal gives up on a server that died holding a workflow's task (a server stopped
 * cleanly hands its tasks back; a killed one cannot): a task it held is given to another worker
 * after the task timeout (Temporal's default is 10 s), and a workflow it kept cached, whose next
 * tasks go to its own queue, after the sticky timeout (also 10 s). With these, the first request
 * after a crash waits about as long as after a clean restart (bench/recoveryAfterKill.ts). A task
 * that runs long does not hit it: local steps heartbeat the task, and replays are short (the
 * scheduler continues as new, a switch has a few dozen events).
 */
export const WORKFLOW_TASK_TIMEOUT_MS = 3_000;
export const STICKY_QUEUE_TIMEOUT_MS = 1_000;

/**
 * The steps that run in the server's own process and never wait (a store row, a change of the
 * gateway's dispatch) are local activities: they run inside the workflow task, with no round trip
 * through Temporal's task queues, and are recorded as markers. A local activity's retries are the
 * worker's; past `localRetryThreshold` it waits on a Temporal timer instead, like any backoff.
 */
export const serverStepOptions = {
  startToCloseTimeout: SERVER_STEP_TIMEOUT_MS,
  localRetryThreshold: SERVER_STEP_TIMEOUT_MS,
  retry: { initialInterval: '50ms', backoffCoefficient: 2, maximumInterval: '2s' },
} as const;

/** On every switch, so a person can list "every switch that parked chat-a" in the Web UI. */
export const searchAttributes = {
  target: defineSearchAttributeKey('CapyTarget', SearchAttributeType.KEYWORD),
  victims: defineSearchAttributeKey('CapyVictims', SearchAttributeType.KEYWORD_LIST),
  host: defineSearchAttributeKey('CapyHost', SearchAttributeType.KEYWORD),
  outcome: defineSearchAttributeKey('CapyOutcome', SearchAttributeType.KEYWORD),
} as const;

export const signals = {
  /** From the gateway: who waits, since when. */
  demand: defineSignal<[Demand]>('demand'),
  /**
   * From the server when it starts: the requests its previous run held are gone with that run, and
   * so is every demand it reported (a run killed outright never reports them withdrawn). From a
   * server that found another gone: that one's. `serverTaskQueue` names whose; absent: every demand.
   */
  gatewayRestarted: defineSignal<[{ serverTaskQueue?: string }?]>('gatewayRestarted'),
  /** From the server, when a host reports an engine it did not stop. */
  engineExited: defineSignal<[InstanceRef]>('engineExited'),
  /**
   * From a checkpoint's measurement, once its result or its failure is recorded: requests waiting
   * for that model can be served, or are answered with the failure.
   */
  measurementEnded: defineSignal<[{ deploymentId: string }]>('measurementEnded'),
  /**
   * From the server when it starts, and when the host registers: the settings as they are now. A
   * scheduler keeps the settings it started with until told (it outlives server restarts).
   */
  configure: defineSignal<[SchedulerSettings]>('configure'),
} as const;

export const updates = {
  /** `instanceIndex`: the instance a start on this host takes (`Demand.instanceIndex`); absent, 0. */
  start: defineUpdate<CommandReceipt, [{ deploymentId: string; evict: boolean; instanceIndex?: number }]>('start'),
  stop: defineUpdate<CommandReceipt, [{ deploymentId: string }]>('stop'),
  park: defineUpdate<CommandReceipt, [{ deploymentId: string }]>('park'),
  preinitialize: defineUpdate<CommandReceipt, [{ deploymentId: string }]>('preinitialize'),
  delete: defineUpdate<CommandReceipt, [{ deploymentId: string }]>('delete'),
  drainHost: defineUpdate<CommandReceipt[], []>('drainHost'),
} as const;

export const queries = {
  ledger: defineQuery<HostLedger>('ledger'),
} as const;
