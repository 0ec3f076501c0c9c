/**
 * The simulator's own routes, for tests and people, not for adapters: `GET /sim/state` shows what
 * the engine holds and the misuse it saw; `POST /sim/faults` makes it fail on purpose.
 */
import { z } from 'zod';
import type { Dialect } from './dialect.js';
import type { SimEngine } from './engine.js';
import { type Router, sendJson } from './http.js';

const faultRequest = z.strictObject({
  wrong_answer_after_wake: z.boolean().optional(),
  reload_fails: z.boolean().optional(),
  wake_hangs: z.boolean().optional(),
  requests_never_finish: z.boolean().optional(),
  streams_go_silent: z.boolean().optional(),
  missing_routes: z.array(z.string().startsWith('/')).optional(),
  ignores_temperature: z.boolean().optional(),
  crash: z.boolean().optional(),
});

/** Exit code of the crash fault: any non-zero one, as a dying engine's. */
const CRASH_EXIT_CODE = 1;

export function addSimRoutes(router: Router, engine: SimEngine, dialect: Dialect): void {
  router.on('GET', '/sim/state', ({ res }) => sendJson(res, 200, engine.snapshot()), { whileLoading: true });
  router.on(
    'POST',
    '/sim/faults',
    ({ res, body }) => {
      const parsed = faultRequest.safeParse(body ?? {});
      if (!parsed.success) return sendJson(res, 400, dialect.errorBody(400, z.prettifyError(parsed.error)));
      const { crash, ...faults } = parsed.data;
      if (crash) {
        process.stderr.write('[sim] simulated crash\n');
        // At once, without answering or giving the GPU back: the ledger frees it when it sees the pid gone.
        process.exit(CRASH_EXIT_CODE);
      }
      Object.assign(engine.faults, faults);
      sendJson(res, 200, { faults: engine.faults });
    },
    { whileLoading: true },
  );
}
