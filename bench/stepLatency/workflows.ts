/** Workflows of the step-latency benchmark: the same 12 no-op steps, run in the ways a switch could run them. */
import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { NoopActivities } from './activities.js';

export interface StepsInput {
  steps: number;
  taskQueue: string;
}

export async function sequentialRemote({ steps, taskQueue }: StepsInput): Promise<number[]> {
  const { noop } = proxyActivities<NoopActivities>({ taskQueue, startToCloseTimeout: '10s' });
  const at: number[] = [];
  for (let i = 0; i < steps; i++) at.push(await noop());
  return at;
}

export async function parallelRemote({ steps, taskQueue }: StepsInput): Promise<number[]> {
  const { noop } = proxyActivities<NoopActivities>({ taskQueue, startToCloseTimeout: '10s' });
  return Promise.all(Array.from({ length: steps }, () => noop()));
}

export async function sequentialLocal({ steps }: StepsInput): Promise<number[]> {
  const { noop } = proxyLocalActivities<NoopActivities>({ startToCloseTimeout: '10s' });
  const at: number[] = [];
  for (let i = 0; i < steps; i++) at.push(await noop());
  return at;
}
