/**
 * The replayer's own pace: a trace that never switches (one small model, already loaded, short
 * prompts and answers) at `rate` requests per second against a standalone, in real time. The
 * replayer keeps up when it sends every request on time: its lateness stays in milliseconds and the
 * rate it sent at is the trace's.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { watchCpu } from '../cpuSteal.js';
import { deploymentDocument, fleets } from './fleet.js';
import { replay } from './replay.js';
import { loadAverage, percentile, summarize, table } from './report.js';
import { startStandalone } from './targets.js';
import { generateTrace } from './trace.js';

export async function sustain(temporalAddress: string, rate: number, durationS: number): Promise<string> {
  const fleet = fleets.two_cards;
  const model = fleet.models.find((m) => m.profile === 'small')!;
  const dir = mkdtempSync(join(tmpdir(), 'capyctl-workload-sustain-'));
  const pace = { speed: 1, processStartMs: 0 };
  const target = await startStandalone('capyctl', { fleet, temporalAddress, postgresAdminUrl: '', dir, ...pace });
  try {
    await target.management.deploy(deploymentDocument(model, 'capyctl', pace));
    await target.management.command(model.name, 'start', 120_000);
    await target.management.until(
      `${model.name} to be ready`,
      120_000,
      async () => (await target.management.state(model.name)) === 'ready',
    );
    const trace = generateTrace({
      seed: 1,
      duration_s: durationS,
      rate_per_s: rate,
      models: [model.name],
      zipf_s: 0,
      arrivals: { kind: 'poisson' },
      prompt_tokens: { median: 16, sigma: 0, min: 16, max: 16 },
      output_tokens: { median: 8, sigma: 0, min: 8, max: 8 },
      stream_share: [0.5],
    });
    const machine = watchCpu();
    const played = await replay({
      inferenceUrl: target.inferenceUrl,
      requests: trace.requests,
      speed: 1,
      tailMs: 30_000,
      retries: 0,
    });
    const late = played.results.map((r) => r.lateMs).sort((a, b) => a - b);
    // When each was sent: its due time and how late it went (real time: speed 1).
    const sent = played.results.map((r) => r.atMs + r.lateMs);
    const sentOver = (sent[sent.length - 1]! - sent[0]!) / 1000;
    return [
      `no-switch trace: ${trace.requests.length} requests for ${model.name} in ${durationS} s (${rate} per second, Poisson)`,
      `sent at ${((sent.length - 1) / sentOver).toFixed(1)} per second; lateness of the sends p50 ${percentile(late, 50).toFixed(2)} ms, p99 ${percentile(late, 99).toFixed(2)} ms, max ${late[late.length - 1]!.toFixed(2)} ms`,
      table([summarize('capyctl, no switch', { ...played, switches: [], speed: 1 })]),
      `${machine()}; load average ${loadAverage()}`,
    ].join('\n');
  } finally {
    await target.close();
  }
}
