/**
 * The workload benchmark (README, "A workload, not a switch"). Run with `npx tsx bench/workload/main.ts`:
 *
 *   compare   (the default) the same traces against each strategy, side by side: a table per load,
 *             the targets' ratios, an SVG per run and the traces as JSONL in --out;
 *   generate  a trace from a seed, as JSONL (--out FILE);
 *   replay    a JSONL trace against a running capyctl (--inference URL; --management URL and
 *             --token to count its switches), its table row and --svg FILE;
 *   sustain   the replayer's own pace: a no-switch trace at --rate requests/s against a standalone.
 *
 * --fleet two_cards (the default: six models on two 24 GiB cards) or eight_gpus (seven models with
 * tensor parallelism 1, 2 and 4 on an 8-GPU box of 80 GiB cards) chooses what is served.
 * It starts its own Temporal dev server unless given --temporal-address, and uses the machine's
 * Postgres for the two-host server, as the tests do.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startDevServer } from '../../standalone/temporalDevServer.js';
import { ensurePostgres, POSTGRES_ADMIN_URL } from '../../test/support/postgres.js';
import { compare, comparisonReport } from './compare.js';
import { type Fleet, fleetNames, fleets, type Strategy, variants } from './fleet.js';
import { DEFAULT_SHAPE, generatorFor, type LoadName, type LoadRates, loadNames, type TraceShape } from './loads.js';
import { Management, SwitchWatch } from './management.js';
import { plotSvg } from './plot.js';
import { replay } from './replay.js';
import { summarize, table } from './report.js';
import { simulatorStartMs } from './simStart.js';
import { sustain } from './sustain.js';
import { generateTrace, modelCounts, readTrace, type Trace, writeTrace } from './trace.js';

const options = {
  fleet: { type: 'string' },
  out: { type: 'string' },
  loads: { type: 'string' },
  rates: { type: 'string' },
  strategies: { type: 'string' },
  speed: { type: 'string' },
  duration: { type: 'string' },
  seed: { type: 'string' },
  arrivals: { type: 'string' },
  'zipf-s': { type: 'string' },
  tail: { type: 'string' },
  retries: { type: 'string' },
  trace: { type: 'string' },
  rate: { type: 'string' },
  inference: { type: 'string' },
  management: { type: 'string' },
  token: { type: 'string' },
  svg: { type: 'string' },
  'temporal-address': { type: 'string' },
} as const;

class UsageError extends Error {}

function number(value: string | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new UsageError(`--${name} ${value}: expected a positive number`);
  return n;
}

function listOf<T extends string>(value: string | undefined, allowed: readonly T[], name: string): T[] {
  if (value === undefined) return [...allowed];
  const items = value.split(',').map((s) => s.trim());
  const bad = items.filter((i) => !allowed.includes(i as T));
  if (bad.length) throw new UsageError(`--${name}: ${bad.join(', ')} is not one of ${allowed.join(', ')}`);
  return items as T[];
}

/** OpenAI's SDKs retry twice by default; 0 makes every refusal final. */
function retriesOf(value: string | undefined): number {
  if (value === undefined) return 2;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new UsageError(`--retries ${value}: expected a whole number ≥ 0`);
  return n;
}

function shapeOf(v: Record<string, string | undefined>): TraceShape {
  const arrivals = v.arrivals ?? DEFAULT_SHAPE.arrivals.kind;
  if (arrivals !== 'poisson' && arrivals !== 'bursty')
    throw new UsageError(`--arrivals ${arrivals}: poisson or bursty`);
  return {
    seed: Math.round(number(v.seed, 'seed', DEFAULT_SHAPE.seed)),
    durationS: number(v.duration, 'duration', DEFAULT_SHAPE.durationS),
    zipfS: v['zipf-s'] === undefined ? DEFAULT_SHAPE.zipfS : number(v['zipf-s'], 'zipf-s', 1),
    arrivals: arrivals === 'poisson' ? { kind: 'poisson' } : DEFAULT_SHAPE.arrivals,
  };
}

const fleetOf = (v: Record<string, string | undefined>): Fleet =>
  fleets[listOf(v.fleet ?? 'two_cards', fleetNames, 'fleet')[0]!];

/** `light=0.5,knee=2`: the mean rate of each load named, the others as the fleet has them. */
function ratesOf(value: string | undefined, fleet: Fleet): LoadRates {
  const rates = { ...fleet.loadRates };
  for (const pair of value?.split(',') ?? []) {
    const [load, rate] = pair.split('=');
    rates[listOf(load, loadNames, 'rates')[0]!] = number(rate, `rates ${load}`, 0);
  }
  return rates;
}

async function temporalAddress(given: string | undefined): Promise<{ address: string; stop(): Promise<void> }> {
  if (given) return { address: given, stop: async () => {} };
  const dir = mkdtempSync(join(tmpdir(), 'capyctl-workload-temporal-'));
  const server = await startDevServer({ dbFile: join(dir, 'temporal.db'), logFile: join(dir, 'temporal.log') });
  return { address: server.address, stop: () => server.stop() };
}

async function runCompare(v: Record<string, string | undefined>): Promise<void> {
  const fleet = fleetOf(v);
  const loads = listOf(v.loads, loadNames, 'loads');
  const shape = shapeOf(v);
  const rates = ratesOf(v.rates, fleet);
  const traces = new Map<LoadName, Trace>(
    v.trace
      ? [[loads[0]!, readTrace(v.trace)]]
      : loads.map((l) => [l, generateTrace(generatorFor(fleet, rates[l], shape))]),
  );
  const chosen: Strategy[] = v.strategies
    ? listOf(v.strategies, fleet.strategies, 'strategies')
    : fleet.strategies.filter((s) => !variants.includes(s as never));
  const speed = number(v.speed, 'speed', 5);
  console.log(`$ npx tsx bench/workload/main.ts ${process.argv.slice(2).join(' ')}`.trimEnd());
  console.log(`engine and trace played ${speed}× faster than real; every time below is in real seconds`);
  const [temporal] = await Promise.all([temporalAddress(v['temporal-address']), ensurePostgres()]);
  const started = Date.now();
  try {
    const processStartMs = await simulatorStartMs();
    console.log(`the simulator's own process start: ${processStartMs.toFixed(0)} ms, taken off each cold start`);
    const results = await compare({
      fleet,
      traces,
      strategies: chosen,
      speed,
      tailS: number(v.tail, 'tail', 60),
      retries: retriesOf(v.retries),
      out: v.out ?? 'bench/workload/results',
      temporalAddress: temporal.address,
      postgresAdminUrl: POSTGRES_ADMIN_URL,
      processStartMs,
      log: (line) => console.log(line),
    });
    console.log(`\n${comparisonReport(results, traces)}`);
    console.log(`\nthe whole run took ${((Date.now() - started) / 1000).toFixed(0)} s`);
  } finally {
    await temporal.stop();
  }
}

function runGenerate(v: Record<string, string | undefined>): void {
  if (!v.out) throw new UsageError('generate needs --out FILE');
  const fleet = fleetOf(v);
  const trace = generateTrace(generatorFor(fleet, number(v.rate, 'rate', fleet.loadRates.knee), shapeOf(v)));
  writeTrace(v.out, trace);
  const counts = [...modelCounts(trace.requests)].map(([m, c]) => `${m} ${c}`).join(', ');
  console.log(`${v.out}: ${trace.requests.length} requests (${counts})`);
}

async function runReplay(v: Record<string, string | undefined>): Promise<void> {
  if (!v.trace || !v.inference) throw new UsageError('replay needs --trace FILE and --inference URL');
  const trace = readTrace(v.trace);
  const speed = number(v.speed, 'speed', 1);
  const management = v.management && v.token ? new Management(v.management, v.token) : undefined;
  const watch = management && new SwitchWatch(management);
  watch?.start(1_000);
  const played = await replay({
    inferenceUrl: v.inference,
    requests: trace.requests,
    speed,
    tailMs: (number(v.tail, 'tail', 60) * 1000) / speed,
    retries: retriesOf(v.retries),
  });
  const switches = (await watch?.stop(60_000)) ?? [];
  console.log(table([summarize('replay', { ...played, switches, speed })]));
  if (v.svg) {
    const models = [...modelCounts(trace.requests).keys()];
    const durationMs = trace.requests[trace.requests.length - 1]!.at_ms;
    const input = { title: v.trace, models, results: played.results, switches, startedAtMs: played.startedAtMs };
    writeFileSync(v.svg, plotSvg({ ...input, speed, durationMs }));
  }
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({ options, allowPositionals: true });
  const command = positionals[0] ?? 'compare';
  if (command === 'compare') return runCompare(values);
  if (command === 'generate') return runGenerate(values);
  if (command === 'replay') return runReplay(values);
  if (command === 'sustain') {
    const temporal = await temporalAddress(values['temporal-address']);
    try {
      return console.log(
        await sustain(temporal.address, number(values.rate, 'rate', 200), number(values.duration, 'duration', 15)),
      );
    } finally {
      await temporal.stop();
    }
  }
  throw new UsageError(`unknown command ${command}: compare, generate, replay or sustain`);
}

await main().catch((e) => {
  console.error(e instanceof UsageError ? `workload: ${e.message}` : e);
  process.exit(e instanceof UsageError ? 2 : 1);
});
