/**
 * One run as a picture (SVG, written by hand): the requests over time, one lane per model; each
 * request's first-token time as a point coloured by its model (an error or no answer as a cross at
 * the top); and the switches as bands, faint behind the points and solid in one lane per host,
 * coloured by the model they brought up. A switch storm shows as bands packed edge to edge.
 */
import type { ListedSwitchBody } from '../../api/switches.js';
import type { RequestResult } from './replay.js';

const PALETTE = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#17becf'];
const WIDTH = 960;
const LEFT = 64;
const RIGHT = 16;
const LANE = 9;
/** The first-token axis: log scale from 0.1 s to 100 s. */
const TTFT_MIN_S = 0.1;
const TTFT_MAX_S = 100;
const TTFT_HEIGHT = 260;

export interface PlotInput {
  title: string;
  models: readonly string[];
  results: readonly RequestResult[];
  switches: readonly ListedSwitchBody[];
  /** Date.now() at trace time 0, and how much faster than real the run played. */
  startedAtMs: number;
  speed: number;
  durationMs: number;
}

const escape = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const n = (v: number) => String(Math.round(v * 10) / 10);

export function plotSvg(input: PlotInput): string {
  const { models, results, switches, speed } = input;
  const colour = (model: string) => PALETTE[Math.max(0, models.indexOf(model)) % PALETTE.length]!;
  const traceMs = (iso: string) => (Date.parse(iso) - input.startedAtMs) * speed;
  const spanMs = Math.max(
    input.durationMs,
    ...switches.map((s) => traceMs(s.finished_at ?? s.started_at)),
    ...results.map((r) => r.atMs + (r.totalMs ?? 0)),
  );
  const x = (ms: number) => LEFT + (Math.max(0, ms) / spanMs) * (WIDTH - LEFT - RIGHT);
  const hosts = [...new Set(switches.map((s) => s.host_id))].sort();

  const arrivalsTop = 40;
  const errorsY = arrivalsTop + models.length * LANE + 14;
  const ttftTop = errorsY + 10;
  const y = (s: number) =>
    ttftTop +
    TTFT_HEIGHT *
      (1 - Math.log(Math.min(TTFT_MAX_S, Math.max(TTFT_MIN_S, s)) / TTFT_MIN_S) / Math.log(TTFT_MAX_S / TTFT_MIN_S));
  const switchesTop = ttftTop + TTFT_HEIGHT + 28;
  const height = switchesTop + Math.max(1, hosts.length) * 16 + 44;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="${WIDTH}" height="${height}" fill="white"/>`,
    `<text x="${LEFT}" y="18" font-size="13" font-weight="bold">${escape(input.title)}</text>`,
  ];
  // Switches, faint behind the points.
  for (const s of switches) {
    const from = x(traceMs(s.started_at));
    const to = x(traceMs(s.finished_at ?? s.started_at));
    const c = s.target ? colour(s.target.name) : '#999';
    out.push(
      `<rect x="${n(from)}" y="${ttftTop}" width="${n(Math.max(1, to - from))}" height="${TTFT_HEIGHT}" fill="${c}" opacity="0.08"/>`,
    );
  }
  // Arrivals, one lane per model.
  models.forEach((m, i) =>
    out.push(
      `<text x="${LEFT - 4}" y="${arrivalsTop + i * LANE + 7}" text-anchor="end" font-size="9">${escape(m)}</text>`,
    ),
  );
  for (const r of results) {
    const lane = Math.max(0, models.indexOf(r.model));
    out.push(
      `<rect x="${n(x(r.atMs))}" y="${arrivalsTop + lane * LANE}" width="1" height="${LANE - 2}" fill="${colour(r.model)}"/>`,
    );
  }
  // First-token axis and the SLO lines.
  out.push(`<text x="${LEFT - 4}" y="${errorsY + 3}" text-anchor="end" font-size="9">error</text>`);
  for (const t of [0.1, 1, 5, 10, 100]) {
    const dash = [1, 5, 10].includes(t) ? ' stroke-dasharray="3,3"' : '';
    out.push(`<line x1="${LEFT}" x2="${WIDTH - RIGHT}" y1="${n(y(t))}" y2="${n(y(t))}" stroke="#bbb"${dash}/>`);
    out.push(`<text x="${LEFT - 4}" y="${n(y(t) + 3)}" text-anchor="end">${t} s</text>`);
  }
  out.push(
    `<text x="14" y="${ttftTop + TTFT_HEIGHT / 2}" transform="rotate(-90 14 ${ttftTop + TTFT_HEIGHT / 2})" text-anchor="middle">first token</text>`,
  );
  for (const r of results) {
    const cx = x(r.atMs);
    if (r.status === 200 && r.code === null && r.ttftMs !== null) {
      out.push(`<circle cx="${n(cx)}" cy="${n(y(r.ttftMs / 1000))}" r="1.6" fill="${colour(r.model)}"/>`);
    } else {
      const c = r.code === 'unanswered' ? '#000' : colour(r.model);
      out.push(`<path d="M${n(cx - 2)} ${errorsY - 2}l4 4m0 -4l-4 4" stroke="${c}"/>`);
    }
  }
  // Switches, one lane per host.
  hosts.forEach((h, i) => {
    const top = switchesTop + i * 16;
    out.push(`<text x="${LEFT - 4}" y="${top + 10}" text-anchor="end" font-size="9">${escape(h.slice(0, 14))}</text>`);
    for (const s of switches.filter((s) => s.host_id === h)) {
      const from = x(traceMs(s.started_at));
      const to = x(traceMs(s.finished_at ?? s.started_at));
      const c = s.target ? colour(s.target.name) : '#999';
      out.push(
        `<rect x="${n(from)}" y="${top}" width="${n(Math.max(1, to - from))}" height="12" fill="${c}" opacity="0.85"><title>${escape(s.summary)}</title></rect>`,
      );
    }
  });
  out.push(`<text x="${LEFT - 4}" y="${switchesTop - 6}" text-anchor="end" font-size="9">switches</text>`);
  // Time axis, in the trace's (real) seconds.
  const axisY = switchesTop + Math.max(1, hosts.length) * 16 + 6;
  const stepS = [10, 20, 30, 60, 120, 300].find((s) => spanMs / 1000 / s <= 10) ?? 600;
  for (let t = 0; t * 1000 <= spanMs; t += stepS)
    out.push(`<text x="${n(x(t * 1000))}" y="${axisY + 10}" text-anchor="middle">${t} s</text>`);
  // Legend.
  models.forEach((m, i) => {
    const lx = LEFT + i * 110;
    out.push(`<rect x="${lx}" y="${axisY + 18}" width="10" height="10" fill="${colour(m)}"/>`);
    out.push(`<text x="${lx + 14}" y="${axisY + 27}">${escape(m)}</text>`);
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}
