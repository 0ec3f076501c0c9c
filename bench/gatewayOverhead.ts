/**
 * The gateway's cost, side by side with the engine it forwards to, in one run with one load
 * generator. The gateway under test is `capyctl start standalone` as its own process (free ports,
 * its output straight to a file, the bench's Temporal dev server), which forwards to its simulator
 * engine directly; the load generator (undici) is this process. Three ways reach the same simulator
 * engine process: "direct" on its own port; "bare", through bench/bareProxy.ts, the least a Node.js
 * proxy does (the floor of one more hop on this machine); and "gateway". The ways take turns, so
 * drift in the machine's speed falls on all of them.
 *
 *  (a) a non-streamed 1-token chat completion, sequential on one keep-alive connection per way,
 *      the ways alternating request by request: median through the gateway less the median
 *      straight to the engine; target ≤ 0.5 ms;
 *  (b) 32 concurrent streams: tokens/s through the gateway over tokens/s direct (medians of the
 *      rounds); target ≥ 95%. Measured twice:
 *      - paced at PACED_TOKENS_PER_S per stream, an engine faster than any GPU serving 32 answers:
 *        whether the gateway keeps up with an engine, which is what the target asks;
 *      - unpaced, the simulator writing as fast as it can: then the engine, the gateway and the
 *        load generator share this machine's cores, and tokens/s measures how the CPU is split
 *        (the bare proxy shows the floor), not whether the gateway holds streams back;
 *  (c) 1,000 concurrent requests for a parked model: wakes (switch workflows for it, from Temporal)
 *      and answers; target 1 and 1,000;
 *  (e) as (a), with longer non-streamed answers (LONG_ANSWERS tokens): the gateway asks the engine
 *      for a stream of a whole answer and assembles it, so its cost grows with the answer's length;
 *      the engine writing a stream rather than one JSON is counted in it;
 *  (d) 4,096 requests waiting for a model that is starting: growth of the gateway process's RSS
 *      (/proc/<pid>/status), which counts garbage not yet collected too, and of its heap and
 *      external memory after a full collection (through its inspector, which only this part turns
 *      on); target < 64 MiB.
 *
 * Run: `npx tsx bench/gatewayOverhead.ts`. BENCH_PARTS=ab (any of a, b, c, d, e) runs only those;
 * BENCH_CPU_PROF=<dir> runs the gateway with `node --cpu-prof` and leaves its profile there.
 */
import { spawn } from 'node:child_process';
import { once, setMaxListeners } from 'node:events';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { Agent, type MessageEvent, Pool, request, WebSocket } from 'undici';
import YAML from 'yaml';
import { startDevServer } from '../standalone/temporalDevServer.js';
import { freePort } from '../processes/freePort.js';
import { simDeployment } from '../test/support/lifecycle.js';
import { startStandaloneProcess, type StandaloneProcess } from '../test/support/standalone.js';
import { until } from '../test/support/until.js';

const WARM_UP = 300;
const LATENCY_REQUESTS = 3_000;
/** (e)'s answer lengths, in tokens, and its requests per way and length. */
const LONG_ANSWERS = [16, 256];
const LONG_REQUESTS = 1_000;
const STREAMS = 32;
const TOKENS_PER_STREAM = 2_000;
const STREAM_ROUNDS = 5;
/**
 * The paced streams' rate, per stream: 32 of them make 32,000 tokens/s, several times what one GPU
 * decodes for 32 concurrent answers.
 */
const PACED_TOKENS_PER_S = 1_000;
const PARKED_BURST = 1_000;
const WAITING = 4_096;
const MiB = 2 ** 20;
const PARTS = process.env.BENCH_PARTS ?? 'abcde';
/** How long the gateway may take to stop before it is killed with its engines. */
const STOP_BOUND_MS = Number(process.env.STOP_BOUND_MS ?? 30_000);

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
    if (named >= 0 && args[named + 1] === servedName && args.includes('--port'))
      return Number(args[args.indexOf('--port') + 1]);
  }
  throw new Error(`no engine serves ${servedName}`);
}

/** A process's resident memory, in bytes. */
function rssOf(pid: number): number {
  const kib = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kib) * 1024;
}

/**
 * Stops the gateway. A switch still in flight (the start (d) left) can hold its Temporal worker's
 * shutdown; past the bound the process and its engines are killed, so the bench always ends.
 */
async function stopWithin(s: StandaloneProcess): Promise<void> {
  const stopped = await Promise.race([s.stop().then(() => true), sleep(STOP_BOUND_MS).then(() => false)]);
  if (stopped) return;
  const pid = s.child.pid!;
  const engines = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
  for (const engine of engines) process.kill(Number(engine), 'SIGKILL');
  s.child.kill('SIGKILL');
  await s.exited;
  console.warn(`the gateway did not stop within ${STOP_BOUND_MS} ms; it and its engines were killed`);
}

/**
 * The gateway's JavaScript memory (heap used and external) after a full collection, through its
 * inspector: unlike RSS, it holds no garbage not yet collected.
 */
async function liveMemoryOf(inspectorPort: number): Promise<number> {
  const targets = (await (await request(`http://127.0.0.1:${inspectorPort}/json/list`)).body.json()) as Array<{
    webSocketDebuggerUrl: string;
  }>;
  const socket = new WebSocket(targets[0]!.webSocketDebuggerUrl);
  await new Promise((resolve, reject) => {
    socket.addEventListener('open', resolve, { once: true });
    socket.addEventListener('error', reject, { once: true });
  });
  let lastId = 0;
  const call = (method: string, params: object = {}) =>
    new Promise<{ result?: { value?: string } }>((resolve) => {
      const id = ++lastId;
      const onMessage = (event: MessageEvent) => {
        const message = JSON.parse(String(event.data)) as { id?: number; result: { result?: { value?: string } } };
        if (message.id !== id) return;
        socket.removeEventListener('message', onMessage);
        resolve(message.result);
      };
      socket.addEventListener('message', onMessage);
      socket.send(JSON.stringify({ id, method, params }));
    });
  try {
    await call('HeapProfiler.collectGarbage');
    const usage = await call('Runtime.evaluate', {
      expression: 'JSON.stringify(process.memoryUsage())',
      returnByValue: true,
    });
    const { heapUsed, external } = JSON.parse(usage.result!.value!) as NodeJS.MemoryUsage;
    return heapUsed + external;
  } finally {
    socket.close();
  }
}

const chatBody = (model: string, more: Record<string, unknown>) =>
  JSON.stringify({ model, messages: [{ role: 'user', content: 'ping' }], ...more });

/**
 * Latencies of a sequential non-streamed answer of `tokens`, one keep-alive connection per target,
 * the targets taking turns request by request so that drift in the machine's speed falls on all of
 * them alike.
 */
async function latencies(
  targets: Record<string, string>,
  model: string,
  tokens: number,
  requests: number,
): Promise<Record<string, number[]>> {
  const body = chatBody(model, { max_tokens: tokens });
  const pools = Object.entries(targets).map(([name, url]) => [name, new Pool(url, { connections: 1 })] as const);
  const once = async (pool: Pool) => {
    const res = await pool.request({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: { 'content-type': 'application/json' },
      body,
    });
    await res.body.text();
    if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
  };
  const samples: Record<string, number[]> = Object.fromEntries(pools.map(([name]) => [name, []]));
  for (let i = 0; i < WARM_UP; i++) for (const [, pool] of pools) await once(pool);
  for (let i = 0; i < requests; i++) {
    // Each target goes first in turn: none always follows the same one.
    for (let k = 0; k < pools.length; k++) {
      const [name, pool] = pools[(i + k) % pools.length]!;
      const start = performance.now();
      await once(pool);
      samples[name]!.push(performance.now() - start);
    }
  }
  await Promise.all(pools.map(([, pool]) => pool.close()));
  return samples;
}

/** Each round's tokens/s of 32 concurrent unpaced streams, per target; a first round of each warms up. */
async function streamRates(targets: Record<string, string>, model: string): Promise<Record<string, number[]>> {
  const body = chatBody(model, { max_tokens: TOKENS_PER_STREAM, stream: true });
  const pools = Object.entries(targets).map(([name, url]) => [name, new Pool(url, { connections: STREAMS })] as const);
  const rounds: Record<string, number[]> = Object.fromEntries(pools.map(([name]) => [name, []]));
  for (let round = 0; round <= STREAM_ROUNDS; round++) {
    for (const [name, pool] of pools) {
      const stream = async () => {
        const res = await pool.request({
          method: 'POST',
          path: '/v1/chat/completions',
          headers: { 'content-type': 'application/json' },
          body,
        });
        for await (const _ of res.body);
        if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
      };
      const start = performance.now();
      await Promise.all(Array.from({ length: STREAMS }, stream));
      if (round > 0) rounds[name]!.push((STREAMS * TOKENS_PER_STREAM) / ((performance.now() - start) / 1000));
    }
  }
  await Promise.all(pools.map(([, pool]) => pool.close()));
  return rounds;
}

interface BareProxy {
  url: string;
  stop(): Promise<void>;
}

/** bench/bareProxy.ts in front of an engine, as its own process. */
async function startBareProxy(engine: string): Promise<BareProxy> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', fileURLToPath(new URL('./bareProxy.ts', import.meta.url)), engine],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const exited = once(child, 'exit');
  const [line] = (await Promise.race([
    once(child.stdout!.setEncoding('utf8'), 'data'),
    exited.then(() => ['exited']),
  ])) as string[];
  const port = /^listening (\d+)/.exec(line ?? '')?.[1];
  if (!port) throw new Error(`the bare proxy did not start: ${line}`);
  return {
    url: `http://127.0.0.1:${port}`,
    async stop() {
      child.kill();
      await exited;
    },
  };
}

interface LoadFigures {
  deployments: Array<{ router: { waiting: number }; instances: Array<{ observed_state: string }> }>;
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'capyctl-bench-'));
  const temporal = await startDevServer({ dbFile: join(dir, 'temporal.db'), logFile: join(dir, 'temporal.log') });
  const profileDir = process.env.BENCH_CPU_PROF;
  // For (d): the gateway's live memory is read through its inspector.
  const inspectorPort = await freePort();
  let standalone: StandaloneProcess | undefined;
  const bareProxies: BareProxy[] = [];
  const many = new Agent({ connections: null, pipelining: 0 });
  const client = new Client({ connection: await Connection.connect({ address: temporal.address }) });
  try {
    standalone = await startStandaloneProcess({
      temporalAddress: temporal.address,
      dir,
      outputToFile: true,
      // The inspector only when (d) reads memory through it: the other parts measure the gateway as users run it.
      nodeArgs: [
        ...(PARTS.includes('d') ? [`--inspect=127.0.0.1:${inspectorPort}`] : []),
        ...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []),
      ],
      sets: [
        'examples=false',
        // (d) leaves a start in progress: the bench's stop should not wait out the default graces.
        'server.switching.drain_timeout=2s',
        'host.shutdown_grace=2s',
        'host.resource_policy.queue.admission_window=1ms',
        `host.resource_policy.queue.max_pending_per_deployment=${WAITING}`,
        `host.resource_policy.queue.max_pending_total=${2 * WAITING}`,
        'host.resource_policy.queue.max_buffered_bytes_total=1GiB',
      ],
    });
    const { inferenceUrl: gateway, managementUrl, adminToken } = standalone;
    const admin = { authorization: `Bearer ${adminToken}` };
    const deploy = async (name: string, extra: string[]) => {
      const res = await request(`${managementUrl}/management/v1/deployments`, {
        method: 'POST',
        headers: { ...admin, 'content-type': 'application/json' },
        body: JSON.stringify(YAML.parse(simDeployment(name, 'vllm', extra))),
      });
      if (res.statusCode >= 300) throw new Error(`deploying ${name}: ${res.statusCode} ${await res.body.text()}`);
      return ((await res.body.json()) as { deployment: { deployment_id: string } }).deployment.deployment_id;
    };
    const load = async (id: string) => {
      const res = await request(`${managementUrl}/management/v1/metrics/load?deployment=${id}`, { headers: admin });
      if (res.statusCode !== 200) throw new Error(`load of ${id}: ${res.statusCode} ${await res.body.text()}`);
      return ((await res.body.json()) as LoadFigures).deployments[0]!;
    };
    const serve = async (model: string) => {
      const res = await request(`${gateway}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: chatBody(model, { max_tokens: 1 }),
        dispatcher: many,
      });
      await res.body.text();
      return res.statusCode;
    };

    const unpaced = ['--sim-load-ms', '0', '--sim-tokens-per-s', '1e12'];
    const hot = await deploy('bench-hot', unpaced);
    await deploy('bench-paced', ['--sim-load-ms', '0', '--sim-tokens-per-s', String(PACED_TOKENS_PER_S)]);
    await deploy('bench-other', unpaced);
    const slow = await deploy('bench-slow', ['--sim-load-ms', '30000']);
    /** The three ways to a model's engine, once it serves: straight, through the bare proxy, through the gateway. */
    const waysTo = async (model: string) => {
      // The first request waits for the checkpoint's measurement and the start (or a switch).
      await until(`${model} to serve`, async () => ((await serve(model)) === 200 ? true : undefined), 120_000);
      const direct = `http://127.0.0.1:${enginePortOf(model)}`;
      const bare = await startBareProxy(direct);
      bareProxies.push(bare);
      return { direct, bare: bare.url, gateway };
    };
    const rows: Array<Record<string, string>> = [];
    // Each figure shows as it is measured too, so a later failure does not lose it.
    const show = (row: Record<string, string>) => {
      rows.push(row);
      console.log(Object.values(row).join(' | '));
    };
    const ms = (v: number) => `${v.toFixed(3)} ms`;
    const rate = (v: number) => v.toFixed(0);
    const percentOf = (v: number, of: number) => `${((100 * v) / of).toFixed(1)}%`;
    const spread = (xs: number[], fmt: (v: number) => string) => `${fmt(Math.min(...xs))} … ${fmt(Math.max(...xs))}`;

    if (PARTS.includes('a') || PARTS.includes('b') || PARTS.includes('e')) {
      const targets = await waysTo('bench-hot');
      if (PARTS.includes('a')) {
        const lat = await latencies(targets, 'bench-hot', 1, LATENCY_REQUESTS);
        const [d, b, g] = [median(lat.direct!), median(lat.bare!), median(lat.gateway!)];
        const p90 = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length * 0.9)]!;
        show({
          measure: `(a) 1-token answer, median of ${LATENCY_REQUESTS}`,
          direct: ms(d),
          bare: ms(b),
          gateway: ms(g),
          result: `+${ms(g - d)} (bare proxy +${ms(b - d)})`,
          target: '≤ +0.5 ms',
        });
        show({
          measure: '(a) 90th percentile',
          direct: ms(p90(lat.direct!)),
          bare: ms(p90(lat.bare!)),
          gateway: ms(p90(lat.gateway!)),
          result: '',
          target: '',
        });
      }
      if (PARTS.includes('e')) {
        for (const tokens of LONG_ANSWERS) {
          const lat = await latencies(targets, 'bench-hot', tokens, LONG_REQUESTS);
          const [d, b, g] = [median(lat.direct!), median(lat.bare!), median(lat.gateway!)];
          show({
            measure: `(e) ${tokens}-token answer, median of ${LONG_REQUESTS}`,
            direct: ms(d),
            bare: ms(b),
            gateway: ms(g),
            result: `+${ms(g - d)} (bare proxy +${ms(b - d)})`,
            target: '',
          });
        }
      }
      if (PARTS.includes('b')) {
        const tps = await streamRates(targets, 'bench-hot');
        const [d, b, g] = [median(tps.direct!), median(tps.bare!), median(tps.gateway!)];
        show({
          measure: `(b) ${STREAMS} unpaced streams (CPU-bound), tokens/s, median of ${STREAM_ROUNDS}`,
          direct: rate(d),
          bare: rate(b),
          gateway: rate(g),
          result: `${percentOf(g, d)} (bare proxy ${percentOf(b, d)})`,
          target: '',
        });
        show({
          measure: '(b) unpaced rounds, lowest … highest',
          direct: spread(tps.direct!, rate),
          bare: spread(tps.bare!, rate),
          gateway: spread(tps.gateway!, rate),
          result: '',
          target: '',
        });
      }
    }
    if (PARTS.includes('b')) {
      // Serving bench-paced parks bench-hot: the card holds one of them.
      const tps = await streamRates(await waysTo('bench-paced'), 'bench-paced');
      const [d, b, g] = [median(tps.direct!), median(tps.bare!), median(tps.gateway!)];
      const measure = `(b) ${STREAMS} streams at ${PACED_TOKENS_PER_S} tokens/s each, tokens/s, median of ${STREAM_ROUNDS}`;
      show({
        measure,
        direct: rate(d),
        bare: rate(b),
        gateway: rate(g),
        result: `${percentOf(g, d)} (bare proxy ${percentOf(b, d)})`,
        target: '≥ 95%',
      });
      show({
        measure: '(b) paced rounds, lowest … highest',
        direct: spread(tps.direct!, rate),
        bare: spread(tps.bare!, rate),
        gateway: spread(tps.gateway!, rate),
        result: '',
        target: '',
      });
    }
    if (PARTS.includes('c')) {
      // bench-hot serves, then bench-other serving parks it (the card holds one of them); then a burst for bench-hot.
      await until('bench-hot to serve', async () => ((await serve('bench-hot')) === 200 ? true : undefined), 120_000);
      if ((await serve('bench-other')) !== 200) throw new Error('bench-other did not serve');
      const state = (await load(hot)).instances[0]?.observed_state;
      if (state !== 'parked') throw new Error(`bench-hot is ${state}, not parked`);
      const since = new Date();
      const burst = await Promise.all(Array.from({ length: PARKED_BURST }, () => serve('bench-hot')));
      const answered = burst.filter((s) => s === 200).length;
      // Visibility lags the workflows' start a little.
      await sleep(1_500);
      let wakes = 0;
      for await (const _ of client.workflow.list({
        query: `CapyTarget = 'bench-hot' AND StartTime > '${since.toISOString()}'`,
      }))
        wakes++;
      show({
        measure: `(c) ${PARKED_BURST} requests for a parked model`,
        direct: '',
        bare: '',
        gateway: `${answered} answered 200`,
        result: `${wakes} wake(s)`,
        target: `1 wake, ${PARKED_BURST} answered`,
      });
    }
    if (PARTS.includes('d')) {
      const pid = standalone.child.pid!;
      await sleep(1_000);
      const before = { rss: rssOf(pid), live: await liveMemoryOf(inspectorPort) };
      const clients = new AbortController();
      // Every waiting request listens to it.
      setMaxListeners(WAITING, clients.signal);
      const body = chatBody('bench-slow', { max_tokens: 1, messages: [{ role: 'user', content: 'x'.repeat(200) }] });
      const waiting = Array.from({ length: WAITING }, () =>
        request(`${gateway}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
          dispatcher: many,
          signal: clients.signal,
        }).catch(() => undefined),
      );
      await until(
        `${WAITING} requests to wait`,
        async () => ((await load(slow)).router.waiting === WAITING ? true : undefined),
        60_000,
      );
      const during = { rss: rssOf(pid), live: await liveMemoryOf(inspectorPort) };
      clients.abort();
      await Promise.all(waiting);
      const mib = (v: number) => `${(v / MiB).toFixed(1)} MiB`;
      for (const [figure, what] of [
        ['rss', 'RSS'],
        ['live', 'heap + external after GC'],
      ] as const) {
        const grew = `${mib(before[figure])} → ${mib(during[figure])}`;
        const growth = during[figure] - before[figure];
        show({
          measure: `(d) ${WAITING} waiting: gateway ${what}`,
          direct: '',
          bare: '',
          gateway: grew,
          result: `${growth < 0 ? '' : '+'}${mib(growth)}`,
          target: '< +64 MiB',
        });
      }
    }
    console.table(rows);
  } finally {
    await many.close();
    await client.connection.close();
    for (const bare of bareProxies) await bare.stop();
    if (standalone) await stopWithin(standalone);
    await temporal.stop();
  }
}

await main();
