/**
 * The checkpoint measurement a deploy starts (`measure/<deploymentId>/<revision>`): the host reads
 * what the revision's checkpoint brings to a GPU, and the store records it. Until it is recorded a
 * start of that revision is refused (checkpoint_unmeasured); `start --wait` awaits it. A host that
 * cannot read the checkpoint fails it: the store keeps why, and a start is refused with that.
 */
import { ActivityFailure, getExternalWorkflowHandle, proxyActivities, TimeoutFailure } from '@temporalio/workflow';
import type { Checkpoint } from '../activities/checkpoint.js';
import type { HostActivities } from '../activities/hostActivities.js';
import type { StoreActivities } from '../activities/storeActivities.js';
import { SERVER_STEP_TIMEOUT_MS, signals, taskQueues, workflowIds } from './definitions.js';

/** How long a host has to pick the measurement up and finish it. */
const MEASURE_WITHIN = '10m';

export interface MeasureInput {
  deploymentId: string;
  revision: number;
  /** The host that reads the checkpoint (where the model runs, so its files are there). */
  hostId: string;
  serverTaskQueue: string;
}

export async function measureCheckpointWorkflow(input: MeasureInput): Promise<Checkpoint> {
  const store = proxyActivities<StoreActivities>({
    taskQueue: input.serverTaskQueue,
    startToCloseTimeout: SERVER_STEP_TIMEOUT_MS,
  });
  // Schedule-to-close: a host that is down never picks the task up.
  const host = proxyActivities<HostActivities>({
    taskQueue: taskQueues.host(input.hostId),
    scheduleToCloseTimeout: MEASURE_WITHIN,
    startToCloseTimeout: '2m',
  });
  const { deploymentId, revision } = input;
  const { spec } = await store.describeDeployment({ deploymentId });
  // Requests that came before the measurement wait in the host's scheduler, for a result or a
  // failure; a host whose scheduler has not started yet has none waiting.
  const ended = () =>
    getExternalWorkflowHandle(workflowIds.hostScheduler(input.hostId))
      .signal(signals.measurementEnded, { deploymentId })
      .catch(() => undefined);
  let checkpoint: Checkpoint;
  try {
    checkpoint = await host.measureCheckpoint({ spec });
  } catch (e) {
    // Kept where `status deployment` and a start show it; the workflow still fails, for the Web UI.
    await store.recordMeasureFailure({ deploymentId, revision, reason: failureReason(e, input.hostId) });
    await ended();
    throw e;
  }
  await store.recordCheckpoint({
    deploymentId,
    revision,
    checkpoint: {
      weightBytes: checkpoint.weightBytes,
      kvBytes: checkpoint.kvBytes,
      residueBytes: checkpoint.residueBytes,
      maxModelLen: checkpoint.maxModelLen,
      maxModelLenFrom: checkpoint.maxModelLenFrom,
    },
  });
  await ended();
  return checkpoint;
}

/** The host's own words (the checkpoint is not there, or has no weights), or that it never answered. */
function failureReason(e: unknown, hostId: string): string {
  const cause = e instanceof ActivityFailure ? e.cause : e;
  if (cause instanceof TimeoutFailure) return `host ${hostId} did not measure it within ${MEASURE_WITHIN}`;
  return cause instanceof Error ? cause.message : String(cause);
}
