/**
 * What the engine simulator itself costs, for benchmarks that subtract it:
 *
 *  1. latency of a non-streamed 1-token chat completion: sequential, one keep-alive connection,
 *     after a warm-up; p50 / p90 / p99 over REQUESTS requests;
 *  2. throughput of 32 concurrent streams with --sim-tokens-per-s so high that pacing never waits:
 *     tokens per second over all streams, i.e. how fast the simulator can write SSE.
 *
 * Run with `npx tsx bench/simulatorCost.ts`. The client (undici) runs in this process, so its cost
 * is included: these are upper bounds on the simulator's own.
 */
import { performance } from 'node:perf_hooks';
import { Client, Pool } from 'undici';
import { startSimulator, stopSimulators } from '../test/support/simulator.js';

const WARM_UP = 300;
const REQUESTS = 2_000;
const STREAMS = 32;
const TOKENS_PER_STREAM = 4_000;
const ROUNDS = 3;

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function latency(baseUrl: string): Promise<void> {
  const client = new Client(baseUrl, { pipelining: 1 });
  const body = JSON.stringify({ model: 'bench', messages: [{ role: 'user', content: 'ping' }], max_tokens: 1 });
  const once = async () => {
    const res = await client.request({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: { 'content-type': 'application/json' },
      body,
    });
    if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
    await res.body.text();
  };
  for (let i = 0; i < WARM_UP; i++) await once();
  const samples: number[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    const start = performance.now();
    await once();
    samples.push(performance.now() - start);
  }
  await client.close();
  samples.sort((a, b) => a - b);
  const ms = (v: number) => `${(v * 1000).toFixed(0)} µs`;
  console.log(
    `1-token chat completion, sequential, keep-alive (${REQUESTS} after ${WARM_UP} warm-up): ` +
      `p50 ${ms(percentile(samples, 50))}, p90 ${ms(percentile(samples, 90))}, p99 ${ms(percentile(samples, 99))}`,
  );
}

/** Reads one stream to its end; returns how many SSE events it carried. */
async function stream(pool: Pool): Promise<number> {
  const res = await pool.request({
    method: 'POST',
    path: '/v1/chat/completions',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'bench',
      messages: [{ role: 'user', content: 'stream' }],
      max_tokens: TOKENS_PER_STREAM,
      stream: true,
    }),
  });
  let events = 0;
  for await (const chunk of res.body) {
    const text = (chunk as Buffer).toString('latin1');
    for (let at = text.indexOf('\n\n'); at !== -1; at = text.indexOf('\n\n', at + 2)) events++;
  }
  return events;
}

async function throughput(baseUrl: string): Promise<void> {
  const pool = new Pool(baseUrl, { connections: STREAMS });
  const rates: number[] = [];
  for (let round = 0; round <= ROUNDS; round++) {
    const start = performance.now();
    const events = await Promise.all(Array.from({ length: STREAMS }, () => stream(pool)));
    const seconds = (performance.now() - start) / 1000;
    // Each stream: the role chunk, one event per token, [DONE].
    for (const n of events) if (n !== TOKENS_PER_STREAM + 2) throw new Error(`a stream carried ${n} events`);
    if (round > 0) rates.push((STREAMS * TOKENS_PER_STREAM) / seconds); // round 0 warms up
  }
  await pool.close();
  rates.sort((a, b) => a - b);
  const k = (v: number) => `${(v / 1000).toFixed(0)}k`;
  console.log(
    `${STREAMS} concurrent streams × ${TOKENS_PER_STREAM} tokens, unpaced (${ROUNDS} rounds after a warm-up): ` +
      `median ${k(percentile(rates, 50))} tokens/s in total (min ${k(rates[0]!)}, max ${k(rates.at(-1)!)})`,
  );
}

try {
  const sim = await startSimulator('vllm', [
    'bench',
    '--sim-load-ms',
    '0',
    '--sim-tokens-per-s',
    '1e12',
    '--max-num-seqs',
    String(STREAMS),
  ]);
  await latency(sim.baseUrl);
  await throughput(sim.baseUrl);
} finally {
  await stopSimulators();
}
