/**
 * vLLM's own routes (engines.md): version, metrics, and sleep mode — `/sleep`, `/wake_up`,
 * `/is_sleeping`, `/collective_rpc`, `/reset_prefix_cache` — which exist only in dev mode.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { engineContracts } from '../../engines/contracts.js';
import { atLeast } from '../../engines/engineVersions.js';
import type { Dialect } from '../dialect.js';
import type { SimEngine } from '../engine.js';
import { type Router, sendEmpty, sendJson } from '../http.js';
import type { MemoryParts } from '../memory.js';
import { sendGauges } from '../metrics.js';

const errorTypes: Record<number, string> = {
  400: 'BadRequestError',
  404: 'NotFoundError',
  500: 'InternalServerError',
  503: 'ServiceUnavailableError',
};

const contract = engineContracts.vllm;
const routes = contract.routes;

function errorBody(status: number, message: string): unknown {
  return contract.errorBody(status, errorTypes[status] ?? 'InternalServerError', message);
}

/**
 * From this release `/sleep` pauses the scheduler first and reads `mode` (vllm-project/vllm#34528):
 * `abort` (its default) aborts what is in flight, `wait` lets it finish, `keep` freezes it.
 */
const SLEEP_MODE_SINCE = '0.17.0';
const sleepModes = ['abort', 'wait', 'keep'] as const;

/** How often a `mode=wait` sleep looks whether its requests have finished. */
const WAIT_POLL_MS = 10;

/** `tags=weights` / `tags=kv_cache`, repeated; none wakes both. */
function wakeParts(tags: string[]): MemoryParts | undefined {
  if (tags.length === 0) return { weights: true, kv: true };
  if (!tags.every((t) => t === 'weights' || t === 'kv_cache')) return undefined;
  return { weights: tags.includes('weights'), kv: tags.includes('kv_cache') };
}

export function vllmDialect(engine: SimEngine, env: NodeJS.ProcessEnv): Dialect {
  const { config } = engine;
  const devMode = env.VLLM_SERVER_DEV_MODE === '1';

  const readsMode = atLeast(config.version, SLEEP_MODE_SINCE);

  /**
   * What a sleep does first with the requests in flight, by its `mode`: an abort cuts their answers
   * (which capyctl must never cause); a wait lets them finish. Older versions read no mode, and the
   * sleep runs over whatever is in flight. The simulator does not play `keep`.
   */
  async function pauseForSleep(mode: string): Promise<void> {
    if (mode === 'abort') {
      const aborted = engine.abortRequests();
      if (aborted > 0) engine.violation(`sleep (mode abort) aborted ${aborted} request(s)`);
    }
    // An aborted request leaves once its stream is closed; a waited-for one once it finished.
    while (engine.inFlight.size > 0) await sleep(WAIT_POLL_MS);
  }

  function addSleepMode(router: Router): void {
    router.on(routes.sleep.method, routes.sleep.path, async ({ res, query }) => {
      const level = query.get('level') ?? '1';
      if (level !== '1' && level !== '2')
        return sendJson(res, 400, errorBody(400, `sleep level ${level} is not 1 or 2`));
      if (readsMode) {
        const mode = query.get('mode') ?? 'abort';
        if (!sleepModes.includes(mode as (typeof sleepModes)[number]) || mode === 'keep')
          return sendJson(res, 400, errorBody(400, `sleep mode ${mode} is not one the simulator plays: abort or wait`));
        await pauseForSleep(mode);
      }
      // Level 1 copies the weights to host RAM; level 2 drops them. Both drop the KV cache.
      await engine.park({
        parts: { weights: true, kv: true },
        keepHostCopy: level === '1',
        tier: level === '1' ? 'host_ram' : 'deep',
        level: level === '1' ? 1 : 2,
        what: `sleep (level ${level})`,
      });
      sendEmpty(res, 200);
    });
    router.on(routes.wakeUp.method, routes.wakeUp.path, async ({ res, query }) => {
      const parts = wakeParts(query.getAll('tags'));
      if (!parts)
        return sendJson(
          res,
          400,
          errorBody(400, `unknown tags ${query.getAll('tags').join(', ')}: expected weights or kv_cache`),
        );
      const outcome = await engine.wake(parts);
      if (!outcome.ok) return sendJson(res, 500, errorBody(500, outcome.message));
      sendEmpty(res, 200);
    });
    router.on(routes.isSleeping.method, routes.isSleeping.path, ({ res }) =>
      sendJson(res, 200, { is_sleeping: !engine.memory.resident }),
    );
  }

  return {
    ownedBy: 'vllm',
    listensWhileLoading: false,
    roleChunkOnArrival: false,
    readyLines: ['INFO:     Application startup complete.'],
    errorBody,
    addRoutes(router) {
      router.on(routes.version.method, routes.version.path, ({ res }) =>
        sendJson(res, 200, { version: config.version }),
      );
      router.on(routes.metrics.method, routes.metrics.path, ({ res }) =>
        sendGauges(
          res,
          [
            {
              name: 'vllm:num_requests_running',
              help: 'Number of requests in model execution batches.',
              value: engine.slots.running,
            },
            {
              name: 'vllm:num_requests_waiting',
              help: 'Number of requests waiting to be processed.',
              value: engine.slots.waiting,
            },
            {
              name: 'vllm:kv_cache_usage_perc',
              help: 'KV-cache usage. 1 means 100 percent usage.',
              value: engine.kvUsage,
            },
          ],
          { engine: '0', model_name: config.servedModelName },
        ),
      );
      if (!devMode) return;
      if (config.enableSleepMode) addSleepMode(router);
      router.on(routes.collectiveRpc.method, routes.collectiveRpc.path, async ({ res, body }) => {
        const method = (body as { method?: unknown } | undefined)?.method;
        if (method !== 'reload_weights')
          return sendJson(res, 400, errorBody(400, `the simulator runs only reload_weights, not ${String(method)}`));
        const outcome = await engine.reload();
        if (!outcome.ok) return sendJson(res, 500, errorBody(500, outcome.message));
        sendJson(res, 200, { results: [null] });
      });
      router.on(routes.resetPrefixCache.method, routes.resetPrefixCache.path, ({ res }) => sendEmpty(res, 200));
    },
  };
}
