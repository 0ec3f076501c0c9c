/** A `/metrics` scrape as Prometheus reads it: parsed by a Prometheus text-format parser, not by hand. */
import { createRequire } from 'node:module';
import { request } from 'undici';

interface Sample {
  value?: string;
  labels?: Record<string, string>;
}

interface Family {
  name: string;
  type: 'COUNTER' | 'GAUGE' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED';
  metrics: Sample[];
}

// The package ships CommonJS without types: its one function, typed here.
const parsePrometheusTextFormat = createRequire(import.meta.url)('parse-prometheus-text-format') as (
  text: string,
) => Family[];

export interface Scrape {
  status: number;
  /** Each family's declared type. */
  types: Map<string, Family['type']>;
  /** Every series by its name, a histogram's `_bucket`, `_sum` and `_count` each under its own. */
  series: Map<string, Sample[]>;
}

/**
 * The parser folds a histogram's series into one, dropping their labels: its series are read again
 * with the histograms declared untyped, which keeps each `_count` line with its labels.
 */
const HISTOGRAM_TYPE = /^# TYPE (\S+) histogram$/gm;

function seriesOf(text: string): Map<string, Sample[]> {
  const series = new Map<string, Sample[]>();
  for (const f of parsePrometheusTextFormat(text.replace(HISTOGRAM_TYPE, '# TYPE $1 untyped'))) {
    series.set(f.name, [...(series.get(f.name) ?? []), ...f.metrics]);
  }
  return series;
}

/** `GET <url>` with the token (none when null); parsed when it answered 200. */
export async function scrape(url: string, token: string | null): Promise<Scrape> {
  const reply = await request(url, { headers: token === null ? {} : { authorization: `Bearer ${token}` } });
  const text = await reply.body.text();
  if (reply.statusCode !== 200) return { status: reply.statusCode, types: new Map(), series: new Map() };
  return {
    status: 200,
    types: new Map(parsePrometheusTextFormat(text).map((f) => [f.name, f.type])),
    series: seriesOf(text),
  };
}

/** The samples of a series whose labels include `labels` (an absent label reads empty, as Prometheus reads it). */
export function samplesOf(s: Scrape, name: string, labels: Record<string, string> = {}): Sample[] {
  return (s.series.get(name) ?? []).filter((m) =>
    Object.entries(labels).every(([k, v]) => (m.labels?.[k] ?? '') === v),
  );
}

/** The value of the one sample of a counter or gauge with `labels`, a histogram's count; undefined when none. */
export function valueOf(s: Scrape, name: string, labels: Record<string, string> = {}): number | undefined {
  const series = s.types.get(name) === 'HISTOGRAM' ? `${name}_count` : name;
  const [sample, more] = samplesOf(s, series, labels);
  if (more) throw new Error(`${series}${JSON.stringify(labels)} names several series`);
  return sample?.value === undefined ? undefined : Number(sample.value);
}
