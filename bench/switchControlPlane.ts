/**
 * The control-plane time of a request-driven switch: from the switch's start to the start of its
 * waiting requests, less what the engine simulator itself spends parking the loaded model, waking
 * the other and answering the wake check. What is left is CapyCTL's: the scheduler, the child
 * workflow, Temporal's round trips, the gateway steps, the host agent's activities and the store.
 *
 * Two models that do not fit together on one simulated GPU; requests alternate between them, so
 * every request is a switch (park one in host RAM, wake the other). The admission window is set to
 * its minimum (1 ms) because it is a wait the spec asks for, not control-plane work.
 *
 * The simulator's own times are measured, not assumed: the same launch the host makes, its park,
 * wake and wake-check probe timed through the engine adapter, median of the same number of rounds.
 *
 * Then the first byte of a request for a parked model that fits beside nothing else (no victim: the
 * issue's "first byte ≤ engine wake + wake check + 60 ms"): the model is parked by an operator's park,
 * then asked, the same number of times.
 *
 * Each block prints where a request's time goes, span by span (bench/switchTimeline.ts), for the
 * switching requests and for the parked model's, and how busy the machine was meanwhile
 * (bench/cpuSteal.ts). `--before REF` runs the same benchmark from that commit first (its own
 * output, as it printed it), `--burn` repeats everything with one core kept busy by another process.
 *
 * Run with `npx tsx bench/switchControlPlane.ts [--before REF] [--burn]` (it starts its own Temporal
 * dev server and uses the machine's Postgres, as the tests do).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { adapters } from '../activities/engines/index.js';
import { outputAt } from './beforeCheckout.js';
import { watchCpu } from './cpuSteal.js';
import { startDevServer } from '../standalone/temporalDevServer.js';
import { freePort } from '../processes/freePort.js';
import { loadSettings } from '../settings/load.js';
import { createSimulatedGpu } from '../hostAgent/simulatedGpu.js';
import { findSwitchReceipt } from '../store/switchReceipts.js';
import { probeFor } from '../workflows/wakeCheck.js';
import { CAPYCTL } from '../test/support/capyctl.js';
import { simDeployment } from '../test/support/lifecycle.js';
import { ensurePostgres, POSTGRES_ADMIN_URL } from '../test/support/postgres.js';
import { type SchedulerBench, startSchedulerBench } from '../test/support/scheduler.js';
import { type Point, switchTimeline, TIMELINE } from './switchTimeline.js';

const SWITCHES = 24;
const WARM_UP = 4;
const GiB = 2 ** 30;
/** Fast enough that the 16-token wake check is not what is measured. */
const SIM_FLAGS = ['--sim-tokens-per-s', '2000'];

const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const ms = (v: number) => `${v.toFixed(1)} ms`;

/** The simulator's own park (host RAM), wake and wake-check times, launched as the host launches it. */
async function simulatorOwnTimes(dir: string, rounds: number) {
  const spec = loadSettings('deployment', { text: simDeployment('own', 'vllm', SIM_FLAGS) });
  await createSimulatedGpu(dir, 0, 6 * GiB);
  const port = await freePort();
  const vllm = adapters.vllm;
  const plan = vllm.launch({
    spec,
    command: [process.execPath, CAPYCTL, 'sim', 'vllm'],
    port,
    gpuIndexes: [0],
    parkTier: 'host_ram',
    memory: { gpuBytes: 6 * GiB, reservedBytes: 6 * GiB, othersBytes: 0 },
  });
  const [exe, ...args] = plan.argv;
  const child = spawn(exe!, args, { env: { ...process.env, ...plan.env, CAPYCTL_SIM_GPU_DIR: dir }, stdio: 'ignore' });
  const endpoint = { baseUrl: `http://127.0.0.1:${port}`, model: spec.name };
  try {
    while (!(await vllm.isReady(endpoint).catch(() => false))) await new Promise((r) => setTimeout(r, 50));
    const timed = async (f: () => Promise<unknown>) => {
      const t = performance.now();
      await f();
      return performance.now() - t;
    };
    const park: number[] = [];
    const wake: number[] = [];
    const probe: number[] = [];
    for (let i = 0; i < rounds; i++) {
      park.push(await timed(() => vllm.park(endpoint, 'host_ram', {})));
      wake.push(await timed(() => vllm.wake(endpoint, 'host_ram', {})));
      probe.push(await timed(() => vllm.probe(endpoint, probeFor(spec))));
    }
    return { park: median(park), wake: median(wake), probe: median(probe) };
  } finally {
    child.kill('SIGTERM');
  }
}

/** What one block of switches measured. */
interface Block {
  totals: number[];
  firstByte: number[];
  /** Request sent → first byte, for a parked model woken with no victim. */
  wakeFirstByte: number[];
  timelines: Timeline[];
  wakeTimelines: Timeline[];
}
type Timeline = Partial<Record<Point, number>>;

/** The last start of waiting requests: the switch that served the request just answered. */
const lastWaitersStarted = (s: SchedulerBench) => s.lc.gateway.steps.findLast((x) => x.step === 'startWaiters')!;

/** The timeline of the switch whose start of waiters is `waitersStarted`. */
function timelineOf(
  s: SchedulerBench,
  waitersStarted: ReturnType<typeof lastWaitersStarted>,
  sentAtMs: number,
  servedAtMs: number,
): Promise<Timeline> {
  return switchTimeline(s.lc.client, s.lc.hostId, {
    sentAtMs,
    switchId: waitersStarted.switchId,
    waitersStartedAtMs: waitersStarted.atMs,
    servedAtMs,
  });
}

async function switches(): Promise<Block> {
  const dir = mkdtempSync(join(tmpdir(), 'capyctl-bench-'));
  const [temporal] = await Promise.all([
    startDevServer({ dbFile: join(dir, 'temporal.db'), logFile: join(dir, 'temporal.log') }),
    ensurePostgres(),
  ]);
  const s = await startSchedulerBench({
    gpuMemory: '6GiB',
    services: { temporalAddress: temporal.address, postgresAdminUrl: POSTGRES_ADMIN_URL },
    settings: { admissionWindowMs: 1 },
  });
  try {
    const models = [await s.deployMeasured('chat-a', '', SIM_FLAGS), await s.deployMeasured('chat-b', '', SIM_FLAGS)];
    const block: Block = { totals: [], firstByte: [], wakeFirstByte: [], timelines: [], wakeTimelines: [] };
    for (let i = 0; i < WARM_UP + SWITCHES; i++) {
      const sentAtMs = Date.now();
      const answer = await s.lc.gateway.request(models[i % 2]!);
      if (answer.kind !== 'served') throw new Error(`switch ${i}: ${answer.error.message}`);
      // The first two start their models: not switches.
      if (i < WARM_UP) continue;
      const waitersStarted = lastWaitersStarted(s);
      await s.settledLedger();
      const receipt = await findSwitchReceipt(s.lc.db, waitersStarted.switchId);
      if (!receipt || receipt.victims.length !== 1)
        throw new Error(`switch ${i} did not park one model: ${JSON.stringify(receipt)}`);
      block.totals.push(waitersStarted.atMs - receipt.startedAt.getTime());
      block.firstByte.push(answer.startedAtMs - sentAtMs);
      block.timelines.push(await timelineOf(s, waitersStarted, sentAtMs, answer.startedAtMs));
    }
    const parkedAlone = models[(WARM_UP + SWITCHES - 1) % 2]!;
    for (let i = 0; i < SWITCHES; i++) {
      await s.command('park', { deploymentId: parkedAlone });
      await s.until(parkedAlone, 'parked');
      const sentAtMs = Date.now();
      const answer = await s.lc.gateway.request(parkedAlone);
      if (answer.kind !== 'served') throw new Error(`wake ${i}: ${answer.error.message}`);
      block.wakeFirstByte.push(answer.startedAtMs - sentAtMs);
      await s.settledLedger();
      block.wakeTimelines.push(await timelineOf(s, lastWaitersStarted(s), sentAtMs, answer.startedAtMs));
    }
    return block;
  } finally {
    await s.close();
    await temporal.stop();
  }
}

/** A process that keeps one core busy for as long as it runs. */
function burner() {
  return spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });
}

function report(label: string, block: Block, simulator: number, wakeAndCheck: number) {
  const control = block.totals.map((t) => t - simulator);
  console.log(`\n${label}: ${block.totals.length} switches`);
  console.log(
    `  switch start → release: median ${ms(median(block.totals))} (min ${ms(Math.min(...block.totals))}, max ${ms(Math.max(...block.totals))})`,
  );
  console.log(`  control-plane time (less the simulator's own ${ms(simulator)}): median ${ms(median(control))}`);
  console.log(`  request sent → first byte: median ${ms(median(block.firstByte))}`);
  if (block.wakeFirstByte.length)
    console.log(
      `  a parked model, no victim: request sent → first byte median ${ms(median(block.wakeFirstByte))}, ` +
        `${ms(median(block.wakeFirstByte) - wakeAndCheck)} over the simulator's own wake + check (${ms(wakeAndCheck)})`,
    );
  console.log(`  where a switching request's time goes (median of each span, from the histories and the gateway):`);
  console.log(spans(block.timelines));
  console.log(`  where a parked model's request's time goes, no victim:`);
  console.log(spans(block.wakeTimelines));
}

/**
 * The median of each span; a span runs from the point before it that the switch's histories show
 * (an engine check has no step of its own when nothing had to be waited for).
 */
function spans(timelines: readonly Timeline[]): string {
  return TIMELINE.slice(1)
    .map((point) => {
      const ds = timelines.flatMap((t) => {
        const from = TIMELINE.slice(0, TIMELINE.indexOf(point)).findLast((p) => t[p] !== undefined);
        return t[point] !== undefined && from ? [t[point]! - t[from]!] : [];
      });
      return `    ${ds.length ? ms(median(ds)).padStart(9) : '        -'}  → ${point}`;
    })
    .join('\n');
}

async function main() {
  const { before, burn } = parseArgs({ options: { before: { type: 'string' }, burn: { type: 'boolean' } } }).values;
  const dir = mkdtempSync(join(tmpdir(), 'capyctl-bench-'));
  const own = await simulatorOwnTimes(join(dir, 'own-gpu'), SWITCHES);
  const simulator = own.park + own.wake + own.probe;
  console.log(
    `simulator's own (median of ${SWITCHES}): park ${ms(own.park)}, wake ${ms(own.wake)}, wake check ${ms(own.probe)} = ${ms(simulator)}`,
  );
  console.log(`admission window 1 ms; ${SWITCHES} switches after ${WARM_UP} warm-up requests in each block`);
  for (const loaded of burn ? [false, true] : [false]) {
    const busy = loaded ? burner() : undefined;
    const load = loaded ? ' (one core kept busy by a burner)' : '';
    try {
      if (before) {
        const machine = watchCpu();
        const output = outputAt(before, 'bench/switchControlPlane.ts');
        console.log(`\nbefore (${before})${load}:\n${output.replace(/^/gm, '  ')}\n  ${machine()}`);
      }
      const machine = watchCpu();
      report(`after (this checkout)${load}`, await switches(), simulator, own.wake + own.probe);
      console.log(`  ${machine()}`);
    } finally {
      busy?.kill();
    }
  }
}

await main();
