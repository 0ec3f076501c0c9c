/** `resource_policy.queue`: how requests wait on a host (spec, "Settings"). */
import { z } from 'zod';
import { bytes, count, durationMs } from './fields.js';
import { formatDuration } from './units.js';

const SECOND = 1_000;
const MiB = 2 ** 20;

export const REQUEST_DEADLINE_DEFAULT_MS = { server: 600 * SECOND, standalone: 1_800 * SECOND } as const;

export const queueSettings = (requestDeadlineDefaultMs: number) =>
  z
    .strictObject({
      admission_window: durationMs(1, 30 * SECOND).default(2 * SECOND),
      request_deadline: durationMs(1 * SECOND, 3_600 * SECOND).default(requestDeadlineDefaultMs),
      stream_idle_timeout: durationMs(1 * SECOND, 3_600 * SECOND).default(120 * SECOND),
      max_pending_per_deployment: count(0, 4_096).default(64),
      max_pending_total: count(0, 1_048_576).default(256),
      max_buffered_bytes_total: bytes(1_024, 16 * 1_024 * MiB).default(64 * MiB),
    })
    .superRefine((queue, ctx) => {
      if (queue.admission_window > queue.request_deadline) {
        ctx.addIssue({
          code: 'custom',
          path: ['admission_window'],
          message:
            `${formatDuration(queue.admission_window)} is above ` +
            `the request deadline (${formatDuration(queue.request_deadline)})`,
        });
      }
    });

export type QueueSettings = z.output<ReturnType<typeof queueSettings>>;

/** The limits that, with several hosts, are the tightest any host sets. */
export type SharedQueueLimits = Pick<
  QueueSettings,
  'request_deadline' | 'max_pending_per_deployment' | 'max_pending_total' | 'max_buffered_bytes_total'
>;

/**
 * The waiting limits and request deadline that apply on a server: the tightest of its hosts, so
 * one host at `max_pending_per_deployment: 0` makes it 0 for the server. With no host registered
 * yet, `fallback` (the host defaults) applies.
 */
export function tightestOfHosts(hosts: readonly SharedQueueLimits[], fallback: SharedQueueLimits): SharedQueueLimits {
  const from = hosts.length > 0 ? hosts : [fallback];
  const min = (key: keyof SharedQueueLimits) => Math.min(...from.map((h) => h[key]));
  return {
    request_deadline: min('request_deadline'),
    max_pending_per_deployment: min('max_pending_per_deployment'),
    max_pending_total: min('max_pending_total'),
    max_buffered_bytes_total: min('max_buffered_bytes_total'),
  };
}
