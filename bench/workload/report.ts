/**
 * What a run comes to, as a user choosing a strategy reads it: how many requests were answered,
 * the errors by code, the first token's p50/p95/p99, the share of all requests whose first token came
 * within 1, 5 and 10 s, the switches and the GPU time they spent parking, waking and starting —
 * one row per strategy, and the lower bound's row for the same trace.
 */
import { readFileSync } from 'node:fs';
import type { ListedSwitchBody } from '../../api/switches.js';
import type { RequestResult } from './replay.js';

export const SLOS_S = [1, 5, 10] as const;

export interface RunSummary {
  label: string;
  requests: number;
  /** Replied to at all, by any status. */
  answered: number;
  /** `status code` → count, for every final reply but a 200 answered to its end, and the unanswered. */
  errors: Map<string, number>;
  serverErrors: number;
  /** The refusals that a retry then got past (or not), as `status code` → count. */
  retried: Map<string, number>;
  /** Of the requests answered 200, in s. */
  ttft: { p50: number; p95: number; p99: number } | null;
  /** Share of all requests answered 200 with their first token within each SLO. */
  within: number[];
  switches: number | null;
  /** GPU-seconds (real) in the switches' park and stop steps, wake and wake-check steps, start steps. */
  gpuSeconds: { parking: number; waking: number; starting: number } | null;
  /** The 1-minute load average as the run ended. */
  load: string;
  /** How late the replayer sent (bench ms), p99. */
  lateP99Ms: number | null;
  /** Per model: its requests, and the share of them within 5 s. */
  perModel: Map<string, { requests: number; within5: number }>;
  /** The switches' steps, medians in real s, and what they released (null for the lower bound). */
  anatomy: string | null;
}

/** Nearest rank. */
export function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

const shareWithin = (ttftsMs: readonly (number | null)[], total: number) =>
  SLOS_S.map((s) => ttftsMs.filter((t) => t !== null && t <= s * 1000).length / total);

function perModelShares(models: readonly string[], ttftsMs: readonly (number | null)[]) {
  const per = new Map<string, { requests: number; within5: number }>();
  models.forEach((m, i) => {
    const p = per.get(m) ?? { requests: 0, within5: 0 };
    p.requests++;
    if (ttftsMs[i] !== null && ttftsMs[i]! <= 5_000) p.within5++;
    per.set(m, p);
  });
  for (const p of per.values()) p.within5 /= p.requests;
  return per;
}

/**
 * The median of each step of the switches that brought a model up, in real s, and how many woke or
 * started a model by releasing a larger one (more than it needed: which idle model to park);
 * `needOf` is a model's GPU bytes.
 */
export function switchAnatomy(run: SwitchedRun, needOf: (model: string) => number) {
  const { switches, speed } = run;
  const up = switches.filter(broughtUp);
  if (up.length === 0) return 'no switches';
  const steps = new Map<string, number[]>();
  for (const p of up.flatMap((s) => s.phases)) steps.set(p.phase, [...(steps.get(p.phase) ?? []), p.ms]);
  const median = (xs: number[]) =>
    (percentile(
      [...xs].sort((a, b) => a - b),
      50,
    ) *
      speed) /
    1000;
  const parts = [...steps].map(([phase, ms]) => `${phase} ${median(ms).toFixed(2)} s (×${ms.length})`);
  const overReach = up.filter((s) => s.victims.some((v) => needOf(v.name) > needOf(s.target!.name))).length;
  const deep = up.flatMap((s) => s.phases).filter((p) => p.phase === 'wake' && p.park_tier === 'deep').length;
  const waits = waitsBeforeSwitch(run).sort((a, b) => a - b);
  const waited = waits.length
    ? `its oldest request had waited ${(percentile(waits, 50) / 1000).toFixed(2)} s (p90 ${(percentile(waits, 90) / 1000).toFixed(2)} s) when it began`
    : 'none waited';
  return `${up.length} switches, median step: ${parts.join(', ')}; ${waited}; ${overReach} brought a model up by releasing a larger one; ${deep} deep wakes`;
}

/** A run's requests and switches, with what places the switches on the trace's clock. */
export interface SwitchedRun {
  results: readonly RequestResult[];
  switches: readonly ListedSwitchBody[];
  /** Date.now() at trace time 0. */
  startedAtMs: number;
  speed: number;
}

/**
 * For each switch that brought a model up, how long (trace ms) the oldest request it served had
 * waited when it began: the queue in front of the switch (one transition at a time per host, longest
 * wait first), before its window, drain, park and wake.
 */
function waitsBeforeSwitch(run: SwitchedRun): number[] {
  return run.switches.filter(broughtUp).flatMap((s) => {
    const began = (Date.parse(s.started_at) - run.startedAtMs) * run.speed;
    const served = run.results.filter(
      (r) => r.model === s.target!.name && r.atMs <= began && r.atMs + (r.ttftMs ?? r.totalMs ?? Infinity) >= began,
    );
    return served.length ? [began - Math.min(...served.map((r) => r.atMs))] : [];
  });
}

const quantiles = (ttftsMs: (number | null)[]) => {
  const sorted = ttftsMs.filter((t): t is number => t !== null).sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  return { p50: percentile(sorted, 50) / 1000, p95: percentile(sorted, 95) / 1000, p99: percentile(sorted, 99) / 1000 };
};

/** A switch that brought a model up (a release alone, by a timer or an operator, is not counted). */
const broughtUp = (s: ListedSwitchBody) => s.target !== null;

export function gpuSecondsOf(switches: readonly ListedSwitchBody[], speed: number) {
  const sum = (phases: string[]) =>
    (switches.flatMap((s) => s.phases).reduce((t, p) => t + (phases.includes(p.phase) ? p.ms : 0), 0) * speed) / 1000;
  return { parking: sum(['park', 'stop']), waking: sum(['wake', 'check']), starting: sum(['start']) };
}

export function loadAverage(): string {
  try {
    return readFileSync('/proc/loadavg', 'utf8').split(' ')[0]!;
  } catch {
    return '-';
  }
}

export function summarize(label: string, run: SwitchedRun, needOf: (model: string) => number = () => 0): RunSummary {
  const { results, switches, speed } = run;
  const errors = new Map<string, number>();
  for (const r of results) {
    if (r.status === 200 && r.code === null) continue;
    const key = r.status === 0 ? r.code! : `${r.status} ${r.code ?? ''}`.trim();
    errors.set(key, (errors.get(key) ?? 0) + 1);
  }
  const retried = new Map<string, number>();
  for (const code of results.flatMap((r) => r.retried)) retried.set(code, (retried.get(code) ?? 0) + 1);
  const ok = results.map((r) => (r.status === 200 && r.code === null ? r.ttftMs : null));
  const late = results.map((r) => r.lateMs).sort((a, b) => a - b);
  return {
    label,
    requests: results.length,
    answered: results.filter((r) => r.status !== 0).length,
    errors,
    serverErrors: results.filter((r) => r.status >= 500).length,
    retried,
    ttft: quantiles(ok),
    within: shareWithin(ok, results.length),
    switches: switches.filter(broughtUp).length,
    gpuSeconds: gpuSecondsOf(switches, speed),
    load: loadAverage(),
    lateP99Ms: late.length ? percentile(late, 99) : null,
    perModel: perModelShares(
      results.map((r) => r.model),
      ok,
    ),
    anatomy: switchAnatomy(run, needOf),
  };
}

/** The lower bound's row: every request answered at its bound. */
export function lowerBoundSummary(models: readonly string[], boundsMs: readonly number[]): RunSummary {
  return {
    label: 'lower bound',
    requests: boundsMs.length,
    answered: boundsMs.length,
    errors: new Map(),
    serverErrors: 0,
    retried: new Map(),
    ttft: quantiles([...boundsMs]),
    within: shareWithin(boundsMs, boundsMs.length),
    switches: null,
    gpuSeconds: null,
    load: '',
    lateP99Ms: null,
    perModel: perModelShares(models, boundsMs),
    anatomy: null,
  };
}

const seconds = (v: number) => (v < 10 ? v.toFixed(2) : v.toFixed(1));
const pct = (v: number) => `${(100 * v).toFixed(1)}%`;

export const TABLE_COLUMNS = [
  'strategy',
  'requests',
  'answered',
  'errors by code',
  'retried',
  'TTFT p50 (s)',
  'p95',
  'p99',
  '≤ 1 s',
  '≤ 5 s',
  '≤ 10 s',
  'switches',
  'GPU-s parking',
  'waking',
  'starting',
  'load avg',
] as const;

const counts = (m: ReadonlyMap<string, number>) => [...m].map(([code, n]) => `${code} ×${n}`).join(', ') || 'none';

function row(s: RunSummary): string[] {
  return [
    s.label,
    String(s.requests),
    String(s.answered),
    counts(s.errors),
    s.label === 'lower bound' ? '' : counts(s.retried),
    s.ttft ? seconds(s.ttft.p50) : '-',
    s.ttft ? seconds(s.ttft.p95) : '-',
    s.ttft ? seconds(s.ttft.p99) : '-',
    ...s.within.map(pct),
    s.switches === null ? '' : String(s.switches),
    s.gpuSeconds ? s.gpuSeconds.parking.toFixed(1) : '',
    s.gpuSeconds ? s.gpuSeconds.waking.toFixed(1) : '',
    s.gpuSeconds ? s.gpuSeconds.starting.toFixed(1) : '',
    s.load,
  ];
}

/** A Markdown table, one row per summary. */
export function table(summaries: readonly RunSummary[]): string {
  const lines = [TABLE_COLUMNS, TABLE_COLUMNS.map(() => '---'), ...summaries.map(row)];
  return lines.map((cells) => `| ${cells.join(' | ')} |`).join('\n');
}

/** Per model, each strategy's share of its requests with a first token within 5 s. */
export function perModelTable(summaries: readonly RunSummary[]): string {
  const models = [...(summaries[0]?.perModel.keys() ?? [])].sort();
  const header = ['share within 5 s', ...models.map((m) => `${m} (${summaries[0]!.perModel.get(m)!.requests})`)];
  const lines = [header, header.map(() => '---')];
  for (const s of summaries) lines.push([s.label, ...models.map((m) => pct(s.perModel.get(m)?.within5 ?? 0))]);
  return lines.map((cells) => `| ${cells.join(' | ')} |`).join('\n');
}

/** The targets at one load, as ratios of the shares within 5 s. */
export function targets(summaries: readonly RunSummary[]): string[] {
  const by = (label: string) => summaries.find((s) => s.label === label);
  const capy = by('capyctl');
  const lines: string[] = [];
  if (!capy) return lines;
  const five = (s: RunSummary) => s.within[SLOS_S.indexOf(5)]!;
  const restart = by('restart_only');
  if (restart)
    lines.push(
      `capyctl's share within 5 s over restart_only's: ${five(restart) === 0 ? '∞' : (five(capy) / five(restart)).toFixed(2)}× (target ≥ 2×)`,
    );
  const bound = by('lower bound');
  if (bound)
    lines.push(
      `capyctl's share within 5 s over the lower bound's: ${(five(capy) / five(bound)).toFixed(3)} (target ≥ 0.85)`,
    );
  lines.push(
    `capyctl: ${capy.requests - capy.answered} unanswered (target 0), ${capy.serverErrors} answered 5xx (target 0)`,
  );
  return lines;
}
