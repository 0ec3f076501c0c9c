/**
 * The server's Temporal workers: the workflows, with the store's rows and this gateway's instant
 * steps as their local activities, on the queue every server of the store polls; and this
 * gateway's steps on its own queue, where a switch run by any server reaches its requests
 * (workflows/everyGateway.ts).
 */
import { Worker } from '@temporalio/worker';
import type { Logger } from 'pino';
import { STICKY_QUEUE_TIMEOUT_MS } from '../workflows/definitions.js';
import type { createServerActivities } from './serverActivities.js';
import type { TemporalConnections } from './temporal.js';
import { workflowBundle } from './workflowBundle.js';

export interface WorkersDeps {
  temporal: TemporalConnections;
  activities: ReturnType<typeof createServerActivities>;
  /** The switch's drain bound: how long a stopping worker lets its tasks finish. */
  drainMs: number;
  workflowTaskQueue: string;
  serverTaskQueue: string;
  logger: Logger;
}

export class Workers {
  private workers: Worker[] = [];
  private running: Promise<unknown> = Promise.resolve();

  constructor(private readonly deps: WorkersDeps) {}

  async start(): Promise<void> {
    const { temporal, activities, drainMs, workflowTaskQueue, serverTaskQueue, logger } = this.deps;
    const workerOptions = {
      connection: await temporal.workerConnection(logger),
      namespace: temporal.namespace,
      activities,
      shutdownGraceTime: drainMs,
      // A stop always ends: a task still held at twice the drain bound is left to the next start,
      // which finishes or compensates its switch.
      shutdownForceTime: 2 * drainMs,
    };
    this.workers = [
      await Worker.create({
        ...workerOptions,
        taskQueue: workflowTaskQueue,
        workflowBundle: await workflowBundle(),
        stickyQueueScheduleToStartTimeout: STICKY_QUEUE_TIMEOUT_MS,
      }),
      await Worker.create({ ...workerOptions, taskQueue: serverTaskQueue }),
    ];
    this.running = Promise.all(this.workers.map((w) => w.run()));
  }

  async stop(): Promise<void> {
    for (const w of this.workers) w.shutdown();
    await this.running.catch((e: unknown) =>
      this.deps.logger.warn({ err: e }, 'the worker stopped with tasks unfinished; the next start takes them up'),
    );
  }
}
