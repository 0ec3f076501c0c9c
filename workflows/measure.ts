/**
 * The checkpoint measurement a deploy starts (`measure/<deploymentId>/<revision>`): the host reads
 * what the revision's checkpoint brings to a GPU, and the store records it. Until it is recorded a
 * start of that revision is refused (checkpoint_unmeasured); `start --wait` awaits this workflow.
 */
import { getExternalWorkflowHandle, proxyActivities } from '@temporalio/workflow';
import type { Checkpoint } from '../activities/checkpoint.js';
import type { HostActivities } from '../activities/hostActivities.js';
import type { StoreActivities } from '../activities/storeActivities.js';
import { signals, taskQueues, workflowIds } from './definitions.js';

export interface MeasureInput {
  deploymentId: string;
  revision: number;
  /** The host that reads the checkpoint (where the model runs, so its files are there). */
  hostId: string;
  serverTaskQueue: string;
}

export async function measureCheckpointWorkflow(input: MeasureInput): Promise<Checkpoint> {
  const store = proxyActivities<StoreActivities>({ taskQueue: input.serverTaskQueue, startToCloseTimeout: '30s' });
  // Schedule-to-close: a host that is down never picks the task up.
  const host = proxyActivities<HostActivities>({ taskQueue: taskQueues.host(input.hostId), scheduleToCloseTimeout: '10m', startToCloseTimeout: '2m' });
  const { spec } = await store.describeDeployment({ deploymentId: input.deploymentId });
  const checkpoint = await host.measureCheckpoint({ spec });
  await store.recordCheckpoint({ deploymentId: input.deploymentId, revision: input.revision, checkpoint: { weightBytes: checkpoint.weightBytes, kvBytes: checkpoint.kvBytes } });
  // Requests that came before the measurement wait in the host's scheduler; a host whose scheduler
  // has not started yet has none waiting.
  await getExternalWorkflowHandle(workflowIds.hostScheduler(input.hostId))
    .signal(signals.checkpointMeasured, { deploymentId: input.deploymentId })
    .catch(() => undefined);
  return checkpoint;
}
