/**
 * Whose a host's scheduler is. Workflow IDs are not scoped to the installation
 * (`host-scheduler/<hostId>`: scoping them would give an existing installation's running scheduler a
 * twin on the same GPUs), so two installations on one Temporal namespace that name a host alike share
 * its ID. The first to run it keeps it; the other finds it running on a task queue none of its
 * workers poll, and refuses the host with one line that names both (catalogue:
 * `hostOfAnotherInstallation`) instead of signalling a workflow that would never answer.
 *
 * A describe is one round trip. It is made when a host registers, and before and after this
 * server's messages reach a host's scheduler until a run is found to be this installation's, which
 * is remembered: then once for each new run a signal reaches. A refused host is placed on again
 * only once it registers and is not refused.
 */
import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import type { Logger } from 'pino';
import { type ApiError, apiErrors, CapyError, type ForeignScheduler } from '../domain/catalogue.js';
import { workflowIds } from '../workflows/definitions.js';
import { mayRunOn } from './placement.js';
import type { RoutedDeployment } from './routingTable.js';

export interface SchedulerOwnershipDeps {
  client: Client;
  /** This installation's workflow task queue (`capyctl-workflows-<store id>`). */
  ownTaskQueue: string;
  temporal: { address: string; namespace: string };
  logger: Logger;
}

export class SchedulerOwnership {
  /** The run of each host's scheduler found running on this installation's queue. */
  private readonly ownRuns = new Map<string, string>();
  /** Hosts refused: their scheduler runs on another installation's queue. */
  private readonly refused = new Map<string, ForeignScheduler>();

  constructor(private readonly deps: SchedulerOwnershipDeps) {}

  /** Why the host is refused, if it is: nothing is placed on it until it registers again. */
  refusal(hostId: string): ForeignScheduler | undefined {
    return this.refused.get(hostId);
  }

  /** The answer for the requests of a deployment that only refused hosts may run, if it is one. */
  refusalFor(deployment: Pick<RoutedDeployment, 'id' | 'spec'>): ApiError | undefined {
    for (const facts of this.refused.values())
      if (mayRunOn(deployment, facts.hostId))
        return apiErrors.deploymentOnHostOfAnotherInstallation(deployment.id, facts);
    return undefined;
  }

  /**
   * Whether the host's scheduler is another installation's: the run `runId` (the one a signal
   * reached), or else the running one. A run already found to be this installation's is not asked
   * again unless `fresh` (a host registering); none running is this installation's to start.
   */
  async foreign(hostId: string, opts: { runId?: string; fresh?: boolean } = {}): Promise<ForeignScheduler | undefined> {
    const known = this.ownRuns.get(hostId);
    if (!opts.fresh && known !== undefined && (opts.runId === undefined || opts.runId === known)) return undefined;
    const found = await this.describe(hostId, opts.runId);
    if (found === undefined || found.taskQueue === this.deps.ownTaskQueue) {
      if (found) this.ownRuns.set(hostId, found.runId);
      if (opts.fresh) this.refused.delete(hostId);
      return undefined;
    }
    this.ownRuns.delete(hostId);
    const facts: ForeignScheduler = {
      hostId,
      theirTaskQueue: found.taskQueue,
      ownTaskQueue: this.deps.ownTaskQueue,
      temporalAddress: this.deps.temporal.address,
      namespace: this.deps.temporal.namespace,
    };
    if (this.refused.get(hostId)?.theirTaskQueue !== facts.theirTaskQueue)
      this.deps.logger.error(
        { hostId, theirTaskQueue: found.taskQueue },
        apiErrors.hostOfAnotherInstallation(facts).message,
      );
    this.refused.set(hostId, facts);
    return facts;
  }

  /** Throws the catalogue's refusal when the host's scheduler is another installation's. */
  async refuseIfForeign(hostId: string): Promise<void> {
    const facts = await this.foreign(hostId);
    if (facts) throw new CapyError(apiErrors.hostOfAnotherInstallation(facts));
  }

  /** Runs `send` (a signal to the host's scheduler) unless the scheduler is another installation's. */
  async ifOwn(hostId: string, send: () => Promise<void>): Promise<void> {
    if (!(await this.foreign(hostId))) await send();
  }

  /** The run's task queue; undefined when no run is (the run asked for is gone, or none runs). */
  private async describe(hostId: string, runId?: string): Promise<{ runId: string; taskQueue: string } | undefined> {
    try {
      const d = await this.deps.client.workflow.getHandle(workflowIds.hostScheduler(hostId), runId).describe();
      // A run a signal reached was running then; without one, only the running run counts.
      return runId !== undefined || d.status.name === 'RUNNING'
        ? { runId: d.runId, taskQueue: d.taskQueue }
        : undefined;
    } catch (e) {
      if (e instanceof WorkflowNotFoundError) return undefined;
      throw e;
    }
  }
}
