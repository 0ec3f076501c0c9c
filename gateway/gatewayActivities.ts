/**
 * The switch's gateway steps (`GatewaySteps`) over the request queue, as activities on the server's
 * task queue: they run in the server process because the queue lives there. The waiting steps poll
 * the queue and heartbeat; a cancelled switch stops their wait.
 */
import { ApplicationFailure } from '@temporalio/common';
import { gatewayFailureTypes } from '../api/gatewayFailures.js';
import { whileHeartbeating } from '../activities/heartbeat.js';
import type { DrainOutcome, GatewaySteps, RanOn } from '../activities/gatewaySteps.js';
import type { InstanceKey } from '../api/lifecycle.js';
import type { RequestQueue } from './requestQueue.js';

export interface GatewayActivityDeps {
  queue: RequestQueue;
  /** How often a waiting step looks at the queue again. */
  pollMs?: number;
  /** This server's own task queue, which each instant step's answer names (`RanOn`). */
  serverTaskQueue?: string;
}

const POLL_MS = 20;

/** A victim as a message names it: `deploymentId/index`. */
const named = (v: InstanceKey) => `${v.deploymentId}/${v.instanceIndex}`;

/**
 * The victim instances. A step a switch scheduled before the steps named instances (a server
 * upgraded while it ran) names deployments, each with the one instance a deployment had then.
 */
const instancesOf = (victims: ReadonlyArray<InstanceKey | string>): InstanceKey[] =>
  victims.map((v) => (typeof v === 'string' ? { deploymentId: v, instanceIndex: 0 } : v));

/** Waits until `done()` or `untilMs`, looking every `pollMs`; a cancellation rejects with its reason. */
async function waitUntil(done: () => boolean, untilMs: number, pollMs: number, signal: AbortSignal): Promise<void> {
  while (!done() && Date.now() < untilMs) {
    signal.throwIfAborted();
    await new Promise((resolve) => setTimeout(resolve, Math.min(pollMs, Math.max(0, untilMs - Date.now()))));
  }
}

/** Where the victims' drain stands now. */
function drainOutcome(queue: RequestQueue, victims: readonly InstanceKey[]): DrainOutcome {
  const requestsStillRunning = queue.runningOn(victims);
  return { drained: requestsStillRunning === 0, requestsStillRunning, cutBeforeOutput: queue.cutBeforeOutput(victims) };
}

export function createGatewayActivities({
  queue,
  pollMs = POLL_MS,
  serverTaskQueue,
}: GatewayActivityDeps): GatewaySteps {
  const ranOn: RanOn = { ranOn: serverTaskQueue };
  return {
    async closeAdmission({ victims: given, startedAtMs, windowMs, onlyOn }) {
      const victims = instancesOf(given);
      if (onlyOn !== undefined && onlyOn !== serverTaskQueue) {
        throw ApplicationFailure.nonRetryable(
          `the admission window of ${victims.map(named).join(', ')} is ${onlyOn}'s to close, not ${serverTaskQueue}'s`,
          gatewayFailureTypes.notThisServer,
        );
      }
      if (windowMs !== null) {
        // The window counts from the switch's start; traffic does not extend it, but a victim idle
        // for one window length yields at once.
        const allIdle = () => victims.every((v) => queue.idleFor(v.deploymentId, windowMs));
        await whileHeartbeating((signal) => waitUntil(allIdle, startedAtMs + windowMs, pollMs, signal));
      }
      queue.close(victims);
      return drainOutcome(queue, victims);
    },

    async awaitDrain({ victims: given, timeoutMs }) {
      const victims = instancesOf(given);
      const drained = () => queue.runningOn(victims) === 0;
      await whileHeartbeating((signal) => waitUntil(drained, Date.now() + timeoutMs, pollMs, signal));
      return drainOutcome(queue, victims);
    },

    async withdrawVictims({ victims }) {
      queue.withdrawVictims(instancesOf(victims));
      return ranOn;
    },

    async reopen({ victims }) {
      queue.reopen(instancesOf(victims));
      return ranOn;
    },

    async startWaiters({ instance }) {
      return { started: queue.startWaiters(instance), ...ranOn };
    },

    async failWaiters({ deploymentId, error }) {
      return { failed: queue.failWaiters(deploymentId, error), ...ranOn };
    },

    // One queue knows no other host: the waiters are answered.
    async capacityRefused({ deploymentId, error }) {
      return { failed: queue.failWaiters(deploymentId, error) };
    },

    async snapshot() {
      return queue.snapshot();
    },
  };
}
