/**
 * The side-by-side run: the same traces, one per load, against each strategy in turn (each on its
 * own capyctl, warmed up once, the loads played one after another with a quiet gap between them),
 * then a table per load with the lower bound's row, the targets' ratios, and an SVG per run.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { watchCpu } from '../cpuSteal.js';
import { type Fleet, fleetModel, perGpuNeed, type Strategy } from './fleet.js';
import type { LoadName } from './loads.js';
import { lowerBoundTtfts } from './lowerBound.js';
import { SwitchWatch } from './management.js';
import { plotSvg } from './plot.js';
import { replay } from './replay.js';
import { lowerBoundSummary, perModelTable, type RunSummary, summarize, table, targets } from './report.js';
import { placement, startTarget, type Target } from './targets.js';
import { type Trace, writeTrace } from './trace.js';

export interface CompareOptions {
  fleet: Fleet;
  traces: ReadonlyMap<LoadName, Trace>;
  strategies: readonly Strategy[];
  speed: number;
  /** Real seconds after a trace's last arrival that its answers may still take; then they are unanswered. */
  tailS: number;
  /** Retries of a refusal, as OpenAI's SDKs make them. */
  retries: number;
  out: string;
  temporalAddress: string;
  postgresAdminUrl: string;
  /** The simulator's own process start, bench ms (simStart.ts). */
  processStartMs: number;
  /** Printed as each run ends. */
  log: (line: string) => void;
}

export interface LoadResult {
  load: LoadName;
  rows: RunSummary[];
  /** Each run's machine line (cpuSteal.ts). */
  machine: Map<string, string>;
}

/** Between two loads: nothing waits, runs or switches (bench time). */
const QUIET_TIMEOUT_MS = 120_000;
/** How often the switches are listed while a trace plays (bench time). */
const SWITCH_POLL_MS = 1_000;

async function runOne(target: Target, load: LoadName, trace: Trace, o: CompareOptions) {
  await target.management.until('the previous load to end', QUIET_TIMEOUT_MS, () => target.management.quiet());
  const watch = new SwitchWatch(target.management);
  watch.start(SWITCH_POLL_MS);
  const machine = watchCpu();
  const played = await replay({
    inferenceUrl: target.inferenceUrl,
    requests: trace.requests,
    speed: o.speed,
    tailMs: (o.tailS * 1000) / o.speed,
    retries: o.retries,
  });
  const switches = await watch.stop(QUIET_TIMEOUT_MS);
  const run = { results: played.results, switches, startedAtMs: played.startedAtMs, speed: o.speed };
  const need = (model: string) => {
    const m = fleetModel(o.fleet, model);
    return perGpuNeed(m) * m.gpus;
  };
  const summary = summarize(target.strategy, run, need);
  const durationMs = (trace.generator?.duration_s ?? 0) * 1000;
  writeFileSync(
    join(o.out, `${load}-${target.strategy}.svg`),
    plotSvg({
      title: `${target.strategy}, ${load} load: ${(100 * summary.within[1]!).toFixed(1)}% of requests with a first token within 5 s`,
      models: o.fleet.models.map((m) => m.name),
      results: played.results,
      switches,
      startedAtMs: played.startedAtMs,
      speed: o.speed,
      durationMs,
    }),
  );
  // Every request and switch of the run, for a closer look than the table's.
  writeFileSync(
    join(o.out, `${load}-${target.strategy}.json`),
    JSON.stringify({ startedAtMs: played.startedAtMs, speed: o.speed, results: played.results, switches }),
  );
  return { summary, machine: machine() };
}

export async function compare(o: CompareOptions): Promise<LoadResult[]> {
  mkdirSync(o.out, { recursive: true });
  const results = new Map<LoadName, LoadResult>();
  for (const [load, trace] of o.traces) {
    writeTrace(join(o.out, `trace-${load}.jsonl`), trace);
    results.set(load, { load, rows: [], machine: new Map() });
  }
  for (const strategy of o.strategies) {
    const started = Date.now();
    const dir = mkdtempSync(join(tmpdir(), `capyctl-workload-${strategy}-`));
    const target = await startTarget(strategy, { ...o, dir });
    o.log(`${strategy}: started and warmed up in ${((Date.now() - started) / 1000).toFixed(1)} s (bench time)`);
    o.log(`  ${await placement(target.management)}`);
    try {
      for (const [load, trace] of o.traces) {
        const { summary, machine } = await runOne(target, load, trace, o);
        results.get(load)!.rows.push(summary);
        results.get(load)!.machine.set(strategy, machine);
        o.log(`${strategy}, ${load}: ${table([summary]).split('\n')[2]}`);
      }
    } finally {
      await target.close();
    }
  }
  for (const [load, trace] of o.traces)
    results.get(load)!.rows.push(
      lowerBoundSummary(
        trace.requests.map((r) => r.model),
        lowerBoundTtfts(o.fleet, trace.requests),
      ),
    );
  return [...results.values()];
}

/** The report of a comparison: per load, the table, the targets, and how busy the machine was. */
export function comparisonReport(results: readonly LoadResult[], traces: ReadonlyMap<LoadName, Trace>): string {
  return results
    .map((r) => {
      const trace = traces.get(r.load)!;
      const g = trace.generator;
      const heading = g
        ? `${r.load}: ${trace.requests.length} requests in ${g.duration_s} s (${g.rate_per_s} per second on average, ${g.arrivals.kind})`
        : `${r.load}: ${trace.requests.length} requests`;
      const machine = [...r.machine].map(([strategy, line]) => `- ${strategy}: ${line}`);
      const anatomy = r.rows.filter((s) => s.anatomy).map((s) => `- ${s.label}: ${s.anatomy}`);
      return [
        `### ${heading}`,
        '',
        table(r.rows),
        '',
        ...targets(r.rows).map((t) => `- ${t}`),
        ...machine,
        '',
        perModelTable(r.rows),
        '',
        'The switches that brought a model up:',
        '',
        ...anatomy,
      ].join('\n');
    })
    .join('\n\n');
}
