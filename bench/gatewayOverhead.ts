/**
 * The gateway's cost, side by side with the engine it forwards to, in one run with one load
 * generator (undici, in this process) against one simulator engine run by a real host agent behind
 * the real server (test/support/serverBench.ts):
 *
 *  (a) a non-streamed 1-token chat completion, sequential on a keep-alive connection: median through
 *      the gateway (gateway → host ingress → engine) less the median straight to the engine; target ≤ 0.5 ms;
 *  (b) 32 concurrent unpaced streams: tokens/s through the gateway over tokens/s direct; target ≥ 95%;
 *  (c) 1,000 concurrent requests for a parked model: how many wakes (switch workflows) and answers; target 1 and 1,000;
 *  (d) 4,096 requests waiting for a model that is starting: growth of this process's heap and RSS;
 *      target < 64 MiB. The load generator's own sockets are in the same process, so this is an upper bound.
 *
 * Run with `npx tsx bench/gatewayOverhead.ts` (its own Temporal dev server, the machine's Postgres).
 */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Agent, Pool, request } from 'undici';
import { startDevServer } from '../deploy/temporalDevServer.js';
import { simDeployment } from '../test/support/lifecycle.js';
import { ensurePostgres, POSTGRES_ADMIN_URL } from '../test/support/postgres.js';
import { startServerBench } from '../test/support/serverBench.js';
import { until } from '../test/support/until.js';

const WARM_UP = 300;
const REQUESTS = 2_000;
const STREAMS = 32;
const TOKENS_PER_STREAM = 2_000;
const ROUNDS = 3;
const PARKED_BURST = 1_000;
const WAITING = 4_096;
const MiB = 2 ** 20;

const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** The engine's own port, from its command line: the host agent launched it with `--port`. */
function enginePortOf(servedName: string): number {
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    const args = (() => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      } catch {
        return [];
      }
    })();
    const named = args.indexOf('--served-model-name');
    if (named >= 0 && args[named + 1] === servedName && args.includes('--port')) return Number(args[args.indexOf('--port') + 1]);
  }
  throw new Error(`no engine serves ${servedName}`);
}

async function latencyMedianMs(baseUrl: string, model: string): Promise<number> {
  const pool = new Pool(baseUrl, { connections: 1 });
  const body = JSON.stringify({ model, messages: [{ role: 'user', content: 'ping' }], max_tokens: 1 });
  const once = async () => {
    const res = await pool.request({ method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json' }, body });
    await res.body.text();
    if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
  };
  for (let i = 0; i < WARM_UP; i++) await once();
  const samples: number[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    const start = performance.now();
    await once();
    samples.push(performance.now() - start);
  }
  await pool.close();
  return median(samples);
}

async function tokensPerS(baseUrl: string, model: string): Promise<number> {
  const pool = new Pool(baseUrl, { connections: STREAMS });
  const body = JSON.stringify({ model, messages: [{ role: 'user', content: 'stream' }], max_tokens: TOKENS_PER_STREAM, stream: true });
  const stream = async () => {
    const res = await pool.request({ method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json' }, body });
    for await (const _ of res.body);
  };
  const rates: number[] = [];
  for (let round = 0; round <= ROUNDS; round++) {
    const start = performance.now();
    await Promise.all(Array.from({ length: STREAMS }, stream));
    if (round > 0) rates.push((STREAMS * TOKENS_PER_STREAM) / ((performance.now() - start) / 1000)); // round 0 warms up
  }
  await pool.close();
  return median(rates);
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'capyctl-bench-'));
  const [temporal] = await Promise.all([startDevServer({ dbFile: join(dir, 'temporal.db'), logFile: join(dir, 'temporal.log') }), ensurePostgres()]);
  const bench = await startServerBench({
    services: { temporalAddress: temporal.address, postgresAdminUrl: POSTGRES_ADMIN_URL },
    hostYaml: 'resource_policy: { queue: { admission_window: 1ms, max_pending_per_deployment: 4096, max_pending_total: 8192, max_buffered_bytes_total: 1GiB } }',
  });
  const many = new Agent({ connections: null, pipelining: 0 });
  try {
    const unpaced = ['--sim-load-ms', '0', '--sim-tokens-per-s', '1e12'];
    const hot = await bench.deploy('bench-hot', simDeployment('bench-hot', 'vllm', unpaced));
    const other = await bench.deploy('bench-other', simDeployment('bench-other', 'vllm', unpaced));
    const slow = await bench.deploy('bench-slow', simDeployment('bench-slow', 'vllm', ['--sim-load-ms', '30000']));
    if ((await bench.chat(hot)).status !== 200) throw new Error('bench-hot did not serve');
    const direct = `http://127.0.0.1:${enginePortOf(hot.name)}`;
    const gateway = bench.server.inferenceUrl;

    // (a) and (b): the same engine, the same generator, one after the other.
    const latDirect = await latencyMedianMs(direct, hot.name);
    const latGateway = await latencyMedianMs(gateway, hot.name);
    const tpsDirect = await tokensPerS(direct, hot.name);
    const tpsGateway = await tokensPerS(gateway, hot.name);

    // (c): park bench-hot by serving the other model, then a burst for it.
    if ((await bench.chat(other)).status !== 200) throw new Error('bench-other did not serve');
    if (bench.stateOf(hot) !== 'parked') throw new Error(`bench-hot is ${bench.stateOf(hot)}, not parked`);
    const since = new Date();
    const body = JSON.stringify({ model: hot.name, messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 });
    const burst = await Promise.all(
      Array.from({ length: PARKED_BURST }, async () => {
        const res = await request(`${gateway}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body, dispatcher: many });
        await res.body.text();
        return res.statusCode;
      }),
    );
    const answered = burst.filter((s) => s === 200).length;
    await new Promise((r) => setTimeout(r, 1_500)); // visibility catches up
    let wakes = 0;
    for await (const _ of bench.server.client.workflow.list({ query: `CapyTarget = '${hot.name}' AND StartTime > '${since.toISOString()}'` })) wakes++;

    // (d): 4,096 waiting for a 30 s start; memory before and while they wait.
    global.gc?.();
    const before = process.memoryUsage();
    const slowBody = JSON.stringify({ model: slow.name, messages: [{ role: 'user', content: 'x'.repeat(200) }], max_tokens: 1 });
    const clients = new AbortController();
    const waiting = Array.from({ length: WAITING }, () =>
      request(`${gateway}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: slowBody, dispatcher: many, signal: clients.signal }).catch(() => undefined),
    );
    await until('4,096 requests to wait', () => (bench.server.queue.deployment(slow.id).waiting === WAITING ? true : undefined), 60_000);
    global.gc?.();
    const during = process.memoryUsage();
    clients.abort();
    await Promise.all(waiting);

    const ms = (v: number) => `${v.toFixed(3)} ms`;
    const mib = (v: number) => `${(v / MiB).toFixed(1)} MiB`;
    console.table([
      { measure: '(a) 1-token answer, median', direct: ms(latDirect), gateway: ms(latGateway), result: `+${ms(latGateway - latDirect)}`, target: '≤ +0.5 ms' },
      { measure: `(b) ${STREAMS} streams, tokens/s (median of ${ROUNDS})`, direct: tpsDirect.toFixed(0), gateway: tpsGateway.toFixed(0), result: `${((100 * tpsGateway) / tpsDirect).toFixed(1)}%`, target: '≥ 95%' },
      { measure: `(c) ${PARKED_BURST} requests for a parked model`, direct: '', gateway: `${answered} answered 200`, result: `${wakes} wake(s)`, target: '1 wake, 1000 answered' },
      { measure: `(d) ${WAITING} waiting: heap growth`, direct: mib(before.heapUsed), gateway: mib(during.heapUsed), result: mib(during.heapUsed - before.heapUsed), target: '< 64 MiB' },
      { measure: `(d) ${WAITING} waiting: RSS growth`, direct: mib(before.rss), gateway: mib(during.rss), result: mib(during.rss - before.rss), target: '< 64 MiB' },
    ]);
  } finally {
    await many.close();
    await bench.close();
    await temporal.stop();
  }
}

await main();
