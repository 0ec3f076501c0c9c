/**
 * `GET /management/v1/status/history`: the status page's last hour (gateway/statusHistory.ts) and the
 * switches that ended in it, from their receipts.
 */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { type StatusHistoryReply, statusHistoryReply } from '../../api/statusHistory.js';
import type { SwitchReceipts } from '../ports.js';
import { POLLED_LOG_LEVEL } from '../polledLogLevel.js';
import { HISTORY_SAMPLE_MS, HISTORY_SPAN_MS, type StatusHistory } from '../statusHistory.js';

/** The receipts read for the hour: more switches than this in an hour show the latest this many. */
const HOUR_OF_SWITCHES = 500;

export function statusHistoryRoutes(deps: { history: StatusHistory; switchReceipts: SwitchReceipts }) {
  return async (app: FastifyInstance) => {
    app
      .withTypeProvider<ZodTypeProvider>()
      .get(
        '/management/v1/status/history',
        { logLevel: POLLED_LOG_LEVEL, schema: { response: { 200: statusHistoryReply } } },
        async (): Promise<StatusHistoryReply> => {
          const now = Date.now();
          const receipts = await deps.switchReceipts.latest(HOUR_OF_SWITCHES, new Date(now - HISTORY_SPAN_MS));
          const switches = receipts
            .filter((r) => r.finishedAt !== null)
            .map((r) => ({
              switch_id: r.switchId,
              started_at: r.startedAt.toISOString(),
              ms: r.finishedAt!.getTime() - r.startedAt.getTime(),
              outcome: r.outcome,
            }))
            .reverse();
          return {
            sample_every_ms: HISTORY_SAMPLE_MS,
            waiting: deps.history.waiting(now).map((s) => ({ at: new Date(s.atMs).toISOString(), waiting: s.waiting })),
            errors_by_code: await deps.history.errorsByCode(),
            switches,
          };
        },
      );
  };
}
