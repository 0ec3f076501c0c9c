/** The engines' Prometheus `/metrics` text, read into the load figures the host reports. */
import type { CallOptions, EngineEndpoint, EngineLoad } from '../../engines/engine.js';
import { exchange, refusal } from './http.js';

/** A sample line: `name{labels} value [timestamp]`; label values may hold spaces and braces in quotes. */
const sampleLine = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?\s+(\S+)/;

/** Every series' values by metric name; comments and malformed lines are skipped. */
export function parsePrometheus(text: string): Map<string, number[]> {
  const values = new Map<string, number[]>();
  for (const line of text.split('\n')) {
    const match = sampleLine.exec(line.trim());
    if (!match) continue;
    const value = Number(match[2]);
    if (Number.isNaN(value)) continue;
    values.set(match[1]!, [...(values.get(match[1]!) ?? []), value]);
  }
  return values;
}

/** An engine's metric names for the three load figures. */
export interface LoadMetricNames {
  running: string;
  waiting: string;
  /** The KV cache in use as a fraction 0–1; the first name present is read (names change across versions). */
  kvUsage: readonly string[];
}

const PPM = 1_000_000;

/**
 * The load in `text`, null when any figure is missing (absent figures are unknown, never zero).
 * Several series of one name (one per engine core or data-parallel rank) add up their requests; the
 * KV use is the fullest cache's, since that one refuses the next request first.
 */
export function loadFromMetrics(text: string, names: LoadMetricNames): EngineLoad | null {
  const metrics = parsePrometheus(text);
  const running = metrics.get(names.running);
  const waiting = metrics.get(names.waiting);
  const kv = names.kvUsage.map((name) => metrics.get(name)).find((values) => values !== undefined);
  if (!running || !waiting || !kv) return null;
  const sum = (values: number[]) => Math.round(values.reduce((a, b) => a + b, 0));
  const fraction = Math.min(1, Math.max(0, ...kv));
  return { running: sum(running), waiting: sum(waiting), kv_usage_ppm: Math.round(fraction * PPM) };
}

/** `GET /metrics` read as load; null when the engine serves no metrics (404: SGLang without `--enable-metrics`). */
export async function sampleMetrics(
  endpoint: EngineEndpoint,
  names: LoadMetricNames,
  options: CallOptions = {},
): Promise<EngineLoad | null> {
  const reply = await exchange(endpoint, '/metrics', options);
  if (reply.status === 404) return null;
  if (reply.status !== 200) throw refusal(endpoint, 'GET /metrics', reply);
  return loadFromMetrics(reply.body, names);
}
