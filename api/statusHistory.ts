/** What `GET /management/v1/status/history` sends the status page: the last hour, and the errors by code. */
import { z } from 'zod';
import { switchOutcomes } from '../domain/vocabulary.js';

export const statusHistoryReply = z.object({
  /** How often the waiting requests are sampled. */
  sample_every_ms: z.number().int(),
  /** Requests waiting in CapyCTL in total, over the last hour (since the server started, if later), oldest first. */
  waiting: z.array(z.object({ at: z.iso.datetime(), waiting: z.number().int() })),
  /** Requests answered with an error since the server started, by code (an engine's own by its status). */
  errors_by_code: z.array(z.object({ code: z.string(), count: z.number().int() })),
  /** The switches that ended in the last hour, oldest first, with how long each took. */
  switches: z.array(
    z.object({ switch_id: z.string(), started_at: z.iso.datetime(), ms: z.number().int(), outcome: switchOutcomes }),
  ),
});
export type StatusHistoryReply = z.infer<typeof statusHistoryReply>;
