/**
 * The catalogue's reads and writes the workflows need, as activities on the server task queue.
 * Idempotent: each writes the same row again on a retry.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { Problem } from '../domain/problems.js';
import type { Db } from '../store/db.js';
import {
  checkpointOf,
  deleteDeployment,
  findDeployment,
  recordCheckpoint,
  recordMeasureFailure,
  recordProblem,
  recordStartFailure,
  setOperatorStopped,
} from '../store/deployments.js';
import { findHost, type Host } from '../store/hosts.js';
import { type InstanceUpdate, listInstances, saveInstance } from '../store/instances.js';
import { liveServers } from '../store/servers.js';
import { type SwitchReceipt, saveSwitchReceipt } from '../store/switchReceipts.js';
import { findWakeReference, recordWakeReference } from '../store/wakeReferences.js';
import type { DeploymentView, InstanceRef, PhaseTiming, WakeReference } from '../api/lifecycle.js';
import type { ReservedMemory } from '../domain/measurement.js';

/** A switch's receipt as its workflow writes it; the last write of a finished switch carries its phases. */
export type SwitchReceiptInput = Omit<SwitchReceipt, 'startedAt' | 'finishedAt' | 'phases'> & {
  startedAtMs: number;
  finishedAtMs: number | null;
  phases?: PhaseTiming[];
};

/** A problem as a workflow reports it: the activity times it. */
export type ProblemInput = Omit<Problem, 'at'>;

export const storeFailureTypes = { notFound: 'not_found' } as const;

const isExplicit = (hostSettings: Record<string, unknown> | undefined) => hostSettings?.activation === 'explicit';

/** What `readForDemand` read. `wakeReference`: only when asked for (null when none is recorded). */
export interface DemandReading {
  deployment: DeploymentView;
  holders: DeploymentView[];
  liveServerQueues: string[];
  wakeReference?: WakeReference | null;
}

/** `host`: the host `hostId` names, read once by a caller that describes several deployments. */
async function describe(
  db: Db,
  deploymentId: string,
  hostId?: string,
  host: Promise<Host | undefined> | undefined = hostId === undefined ? undefined : findHost(db, hostId),
): Promise<DeploymentView> {
  const [d, hostRow] = await Promise.all([findDeployment(db, deploymentId), host]);
  if (!d) throw ApplicationFailure.nonRetryable(`deployment ${deploymentId} not found`, storeFailureTypes.notFound);
  const instances = await listInstances(db, { deploymentId: d.id });
  return {
    id: d.id,
    name: d.name,
    revision: d.revision,
    spec: d.spec,
    operatorStopped: d.operatorStopped,
    checkpoint: checkpointOf(d),
    measureFailure: d.measureFailure,
    explicit: d.spec.lifecycle.activation === 'explicit' || isExplicit(hostRow?.settings),
    generation: Math.max(0, ...instances.map((i) => i.generation)),
    readyElsewhere: instances.some((i) => i.hostId !== hostId && i.observedState === 'ready'),
  };
}

/** What the lifecycle reads: the deployments it serves, the hosts, the live servers, a wake reference. */
function lifecycleReads(db: Db) {
  return {
    /** A deployment as the lifecycle sees it; `hostId` folds in that host's activation policy. */
    describeDeployment: (input: { deploymentId: string; hostId?: string }) =>
      describe(db, input.deploymentId, input.hostId),

    /**
     * What serving a demand reads, in one step (each step is a round trip on the waiting requests'
     * clock): the model, the deployments of the instances holding GPU memory (`holderIds`, in that
     * order), the live servers' task queues and, for a parked instance (`wakeReferenceOf`), its first
     * answer to the wake check.
     */
    async readForDemand(input: {
      deploymentId: string;
      hostId: string;
      holderIds: string[];
      wakeReferenceOf?: { instanceIndex: number };
    }): Promise<DemandReading> {
      const { deploymentId, hostId, wakeReferenceOf } = input;
      // The host is read once for the model and every holder.
      const host = findHost(db, hostId);
      const [deployment, holders, servers, wakeReference] = await Promise.all([
        describe(db, deploymentId, hostId, host),
        Promise.all(input.holderIds.map((id) => describe(db, id, hostId, host))),
        liveServers(db),
        wakeReferenceOf && findWakeReference(db, deploymentId, wakeReferenceOf.instanceIndex),
      ]);
      return {
        deployment,
        holders,
        liveServerQueues: servers.map((server) => server.taskQueue),
        ...(wakeReferenceOf ? { wakeReference: wakeReference ?? null } : {}),
      };
    },

    async describeHost(input: { hostId: string }): Promise<Host> {
      const host = await findHost(db, input.hostId);
      if (!host) throw ApplicationFailure.nonRetryable(`host ${input.hostId} not found`, storeFailureTypes.notFound);
      return host;
    },

    /** Whether any instance row on the host says it holds something: what older scheduler histories asked. */
    async instancesHeldOn(input: { hostId: string }): Promise<boolean> {
      return (await heldOn(db, input.hostId)).length > 0;
    },

    /** The instances whose rows on the host say they hold something (are not stopped). */
    async instanceRowsHeldOn(input: { hostId: string }): Promise<InstanceRef[]> {
      return (await heldOn(db, input.hostId)).map((i) => ({
        deploymentId: i.deploymentId,
        instanceIndex: i.index,
        generation: i.generation,
      }));
    },

    async findWakeReference(input: { deploymentId: string; instanceIndex: number }) {
      return (await findWakeReference(db, input.deploymentId, input.instanceIndex)) ?? null;
    },

    /** The task queues of the servers that share the store: where the gateway's steps reach waiting requests. */
    async liveServerQueues(): Promise<string[]> {
      return (await liveServers(db)).map((server) => server.taskQueue);
    },
  };
}

const heldOn = async (db: Db, hostId: string) =>
  (await listInstances(db, { hostId })).filter((i) => i.observedState !== 'stopped');

/** What the lifecycle writes on a deployment's catalogue row: its checkpoint, failures, operator's stop, its end. */
/** `problem` as a deployment's last problem, timed as it is written. */
const recordProblemNow = (db: Db, deploymentId: string, problem: ProblemInput) =>
  recordProblem(db, deploymentId, { ...problem, at: new Date().toISOString() });

function deploymentWrites(db: Db) {
  return {
    async recordCheckpoint(input: { deploymentId: string; revision: number; checkpoint: Required<ReservedMemory> }) {
      await recordCheckpoint(db, input.deploymentId, input.revision, { ...input.checkpoint });
    },

    async recordMeasureFailure(input: { deploymentId: string; revision: number; reason: string }) {
      await recordMeasureFailure(db, input.deploymentId, input.revision, input.reason);
    },

    /** `problem`: the failed start as its last problem (absent from a history written before it was recorded). */
    async recordStartFailure(input: { deploymentId: string; failure: string | null; problem?: ProblemInput }) {
      await recordStartFailure(db, input.deploymentId, input.failure);
      if (input.problem) await recordProblemNow(db, input.deploymentId, input.problem);
    },

    /** A deployment's last problem, timed as it is written. */
    async recordProblem(input: { deploymentId: string; problem: ProblemInput }) {
      await recordProblemNow(db, input.deploymentId, input.problem);
    },

    async setOperatorStopped(input: { deploymentId: string; stopped: boolean }) {
      await setOperatorStopped(db, input.deploymentId, input.stopped);
    },

    async deleteDeployment(input: { deploymentId: string }) {
      await deleteDeployment(db, input.deploymentId);
    },
  };
}

/** What running the instances writes: an instance's row, its first answer to the wake check, a switch's receipt. */
function runningWrites(db: Db) {
  return {
    async saveInstance(input: InstanceUpdate) {
      await saveInstance(db, input);
    },

    async recordWakeReference(input: Parameters<typeof recordWakeReference>[1]) {
      await recordWakeReference(db, input);
    },

    /**
     * `phases` come with the last receipt (the server's metrics count them too); a running switch has
     * none yet. True when this write ended the receipt (`saveSwitchReceipt` in the store).
     */
    async saveSwitchReceipt(input: SwitchReceiptInput): Promise<boolean> {
      const { startedAtMs, finishedAtMs, phases = [], ...rest } = input;
      return saveSwitchReceipt(db, {
        ...rest,
        phases,
        startedAt: new Date(startedAtMs),
        finishedAt: finishedAtMs === null ? null : new Date(finishedAtMs),
      });
    },
  };
}

export function createStoreActivities(db: Db) {
  return { ...lifecycleReads(db), ...deploymentWrites(db), ...runningWrites(db) };
}

export type StoreActivities = ReturnType<typeof createStoreActivities>;
