/**
 * The workload benchmark's short form (bench/workload/, README "A workload, not a switch"): one
 * minute of traffic, read from a JSONL trace as one recorded elsewhere would be, replayed open-loop
 * against a standalone with the benchmark's six models, as `npx tsx bench/workload/main.ts` runs it.
 * What its user reads: every request answered, none 5xx, the table with its columns and the lower
 * bound's row, the two switches the trace asks for, and the run's plot.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';

const REPO = join(import.meta.dirname, '..');

/**
 * One minute: the four models the cards hold to begin with (m1-8b, m2-small, m3-8b, m4-small), and
 * a burst for m5-8b while m1-8b, which shares its card, has been idle for seconds: m5-8b wakes in
 * its place, and m1-8b's next request wakes it back once m5-8b is idle. No request meets a model
 * finishing its work before it parks, so none is answered 503.
 */
function trace(): string {
  const at = (s: number, model: string, stream: boolean) =>
    JSON.stringify({ at_ms: s * 1000, model, prompt_tokens: 256, output_tokens: 64, stream });
  const requests: [number, string][] = [
    ...[1, 4, 7, 10, 13, 16, 19, 45, 48, 51, 54, 57].map((s): [number, string] => [s, 'm1-8b']),
    ...[2, 12, 22, 32, 42, 52].map((s): [number, string] => [s, 'm2-small']),
    ...[3, 15, 27, 39, 51.5].map((s): [number, string] => [s, 'm3-8b']),
    ...[5, 17, 29, 41, 53].map((s): [number, string] => [s, 'm4-small']),
    ...[26, 27.5, 29.5].map((s): [number, string] => [s, 'm5-8b']),
  ];
  return (
    requests
      .sort((a, b) => a[0] - b[0])
      .map(([s, model], i) => at(s, model, i % 2 === 0))
      .join('\n') + '\n'
  );
}

function bench(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'bench/workload/main.ts', ...args],
      { cwd: REPO, maxBuffer: 16 * 2 ** 20 },
      (error, stdout, stderr) =>
        resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
    );
  });
}

/** The cells of the table row whose first cell is `label`. */
const rowOf = (stdout: string, label: string) =>
  stdout
    .split('\n')
    .find((l) => l.startsWith(`| ${label} |`))
    ?.split('|')
    .slice(1, -1)
    .map((c) => c.trim());

describe('the workload benchmark, short form', () => {
  it('replays a minute of a recorded trace open-loop and prints its table: every request answered, none 5xx', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'capyctl-workload-test-'));
    const file = join(dir, 'trace.jsonl');
    writeFileSync(file, trace());
    const requests = trace().trim().split('\n').length;
    const run = await bench([
      'compare',
      '--strategies',
      'capyctl',
      '--loads',
      'light',
      '--trace',
      file,
      '--speed',
      '8',
      '--out',
      dir,
      '--temporal-address',
      inject('temporalAddress'),
    ]);
    expect(run.stderr, run.stdout).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(
      '| strategy | requests | answered | errors by code | retried | TTFT p50 (s) | p95 | p99 | ≤ 1 s | ≤ 5 s | ≤ 10 s | switches | GPU-s parking | waking | starting | load avg |',
    );
    const capyctl = rowOf(run.stdout, 'capyctl');
    expect(capyctl, run.stdout).toBeDefined();
    const [, sent, answered, errors, retried, , , , , , , switches] = capyctl!;
    expect({ sent, answered, errors, retried }).toEqual({
      sent: String(requests),
      answered: String(requests),
      errors: 'none',
      retried: 'none',
    });
    // m5-8b woke in m1-8b's place, and m1-8b back.
    expect(Number(switches)).toBeGreaterThanOrEqual(2);
    expect(rowOf(run.stdout, 'lower bound')?.slice(1, 4)).toEqual([String(requests), String(requests), 'none']);
    expect(run.stdout).toContain('- capyctl: 0 unanswered (target 0), 0 answered 5xx (target 0)');
    const svg = readFileSync(join(dir, 'light-capyctl.svg'), 'utf8');
    expect(svg).toMatch(/^<svg /);
    // A point per answered request, coloured by its model.
    expect(svg.match(/<circle /g)).toHaveLength(requests);
  }, 150_000);
});
