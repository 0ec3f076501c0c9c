/**
 * TensorFold: an engine that cannot park. Only the OpenAI routes, health and metrics; a stream's
 * assistant-role chunk goes out on arrival, before the prompt is even looked at.
 */
import { STATUS_CODES } from 'node:http';
import type { Dialect } from '../dialect.js';
import type { SimEngine } from '../engine.js';
import { sendGauges } from '../metrics.js';

export function tensorfoldDialect(engine: SimEngine): Dialect {
  return {
    ownedBy: 'tensorfold',
    listensWhileLoading: true,
    roleChunkOnArrival: true,
    readyLines: ['tensorfold: serving'],
    errorBody: (status, message) => ({
      error: { message, type: STATUS_CODES[status] ?? 'Internal Server Error', param: null, code: status },
    }),
    addRoutes(router) {
      router.on('GET', '/metrics', ({ res }) =>
        sendGauges(
          res,
          [
            { name: 'tensorfold:requests_running', help: 'Requests being generated.', value: engine.slots.running },
            { name: 'tensorfold:requests_waiting', help: 'Requests waiting for a slot.', value: engine.slots.waiting },
            {
              name: 'tensorfold:kv_cache_usage_ratio',
              help: 'Share of the KV cache in use, 0 to 1.',
              value: engine.kvUsage,
            },
          ],
          { model_name: engine.config.servedModelName },
        ),
      );
    },
  };
}
