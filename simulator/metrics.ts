/** Prometheus text exposition, as the engines' Python clients print it (`0.0`, sorted labels). */
import type { ServerResponse } from 'node:http';
import { sendText } from './http.js';

export interface Gauge {
  name: string;
  help: string;
  value: number;
}

/** Python prints floats with a decimal point: 3 → "3.0". */
function pythonFloat(value: number): string {
  return Number.isInteger(value) ? value.toFixed(1) : String(value);
}

function renderLabels(labels: Record<string, string>): string {
  const pairs = Object.keys(labels)
    .sort()
    .map((key) => `${key}="${labels[key]!.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`);
  return pairs.length === 0 ? '' : `{${pairs.join(',')}}`;
}

export function sendGauges(res: ServerResponse, gauges: readonly Gauge[], labels: Record<string, string>): void {
  const rendered = renderLabels(labels);
  const lines = gauges.flatMap((g) => [
    `# HELP ${g.name} ${g.help}`,
    `# TYPE ${g.name} gauge`,
    `${g.name}${rendered} ${pythonFloat(g.value)}`,
  ]);
  sendText(res, 200, `${lines.join('\n')}\n`, 'text/plain; version=0.0.4; charset=utf-8');
}
