/**
 * The simulator process: parses an engine's command line, takes its memory on the simulated GPU
 * (or exits as out of memory, never listening), then serves the dialect's routes over HTTP until
 * SIGTERM, which gives the memory back.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { type DialectName, parseSimArgs, SimArgsError } from '../engines/simulatorArgs.js';
import type { Dialect } from './dialect.js';
import { sglangDialect } from './dialects/sglang.js';
import { tensorfoldDialect } from './dialects/tensorfold.js';
import { vllmDialect } from './dialects/vllm.js';
import { SimEngine } from './engine.js';
import { NoSimulatedGpu } from '../hostAgent/simulatedGpu.js';
import { readBody, Router, sendEmpty, sendJson } from './http.js';
import { gpuPlacementFromEnv, noCudaGpusLine } from './memory.js';
import { addOpenAiRoutes } from './openai.js';
import { addSimRoutes } from './simRoutes.js';

const dialects: Record<DialectName, (engine: SimEngine, env: NodeJS.ProcessEnv) => Dialect> = {
  vllm: vllmDialect,
  sglang: sglangDialect,
  tensorfold: tensorfoldDialect,
};

/** A Python traceback as an engine dies with at start: more frames than a log tail shows, then `last`. */
function startTraceback(last: string): string {
  const frames = Array.from(
    { length: 12 },
    (_, i) => `  File "/opt/engine/launch.py", line ${100 + i}, in step_${i}\n    step_${i + 1}()`,
  );
  return `Traceback (most recent call last):\n${frames.join('\n')}\n${last}\n`;
}

/** Exit codes of a start that fails: the command line was wrong, or the engine could not start. */
const simExitCodes = { usage: 2, failed: 1 } as const;

function buildRouter(engine: SimEngine, dialect: Dialect): Router {
  const router = new Router();
  // 503 while loading (only SGLang and TensorFold are reachable then); 200 after, parked or not.
  router.on('GET', '/health', ({ res }) => sendEmpty(res, engine.state === 'loading' ? 503 : 200), {
    whileLoading: true,
  });
  addOpenAiRoutes(router, engine, dialect);
  addSimRoutes(router, engine, dialect);
  dialect.addRoutes(router);
  return router;
}

function serve(router: Router, engine: SimEngine, dialect: Dialect): Server {
  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    // A route taken away by the missing_routes fault is one the engine does not have.
    const route = engine.faults.missing_routes.includes(path) ? 404 : router.find(req.method ?? 'GET', path);
    // FastAPI's answers, which all three engines give for routes they do not have.
    if (route === 404) return sendJson(res, 404, { detail: 'Not Found' });
    if (route === 405) return sendJson(res, 405, { detail: 'Method Not Allowed' });
    if (engine.state === 'loading' && !route.whileLoading)
      return sendJson(res, 503, dialect.errorBody(503, 'the engine is still loading'));
    const text = await readBody(req);
    let body: unknown;
    try {
      body = text === '' ? undefined : JSON.parse(text);
    } catch {
      return sendJson(res, 400, dialect.errorBody(400, 'the body is not valid JSON'));
    }
    await route.handler({ res, query: new URLSearchParams(q === -1 ? '' : url.slice(q + 1)), body });
  }
  return createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      process.stderr.write(
        `[sim] ${req.method} ${req.url}: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`,
      );
      if (res.headersSent) res.destroy();
      else sendJson(res, 500, dialect.errorBody(500, String(e)));
    });
  });
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/**
 * Runs `DIALECT [engine args…]`. Resolves with an exit code only when the start fails; once serving,
 * the process ends on SIGTERM or SIGINT (exit 0, memory given back) or by the crash fault.
 */
export async function runSimulator(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let engine: SimEngine;
  try {
    const config = parseSimArgs(argv);
    engine = new SimEngine(config, gpuPlacementFromEnv(env));
  } catch (e) {
    if (!(e instanceof SimArgsError)) throw e;
    process.stderr.write(`capyctl sim: ${e.message}\n`);
    return simExitCodes.usage;
  }
  const { config } = engine;
  if (config.exitAtStart !== undefined) {
    process.stderr.write(startTraceback(config.exitAtStart));
    return simExitCodes.failed;
  }
  const dialect = dialects[config.dialect](engine, env);
  const server = serve(buildRouter(engine, dialect), engine, dialect);

  const stop = () => {
    engine.memory.dropSync();
    process.exit(0);
  };
  process.once('SIGTERM', stop).once('SIGINT', stop);

  let start;
  try {
    start = await engine.allocate();
  } catch (e) {
    if (!(e instanceof NoSimulatedGpu)) throw e;
    process.stderr.write(`${noCudaGpusLine} (${e.message})\n`);
    return simExitCodes.failed;
  }
  if (!start.ok) {
    process.stderr.write(`${start.line}\n`);
    return simExitCodes.failed;
  }

  try {
    if (dialect.listensWhileLoading) await listen(server, config.port, config.host);
    await engine.finishLoading();
    if (!dialect.listensWhileLoading) await listen(server, config.port, config.host);
  } catch (e) {
    engine.memory.dropSync();
    process.stderr.write(
      `capyctl sim: cannot listen on ${config.host}:${config.port}: ${e instanceof Error ? e.message : String(e)}\n`,
    );
    return simExitCodes.failed;
  }
  const serving = `[sim] ${config.dialect} serving ${config.servedModelName} on http://${config.host}:${config.port}`;
  process.stdout.write(`${[...dialect.readyLines, serving].join('\n')}\n`);
  return new Promise<never>(() => {});
}
