import { describe, expect, it } from 'vitest';
import { loadFromMetrics, parsePrometheus } from '../activities/engines/metrics.js';
import { decide } from '../activities/engines/probe.js';

const vllmNames = {
  running: 'vllm:num_requests_running',
  waiting: 'vllm:num_requests_waiting',
  kvUsage: ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'],
};

describe('Prometheus metrics', () => {
  it('reads samples with labels, skipping comments, and quoted braces in label values', () => {
    const text = [
      '# HELP vllm:num_requests_running Number of requests in model execution batches.',
      '# TYPE vllm:num_requests_running gauge',
      'vllm:num_requests_running{engine="0",model_name="M"} 3.0',
      'vllm:num_requests_running{engine="1",model_name="a {weird} \\"name\\""} 2.0 1791460000000',
      'plain_metric 7',
      'garbage line',
    ].join('\n');
    const metrics = parsePrometheus(text);
    expect(metrics.get('vllm:num_requests_running')).toEqual([3, 2]);
    expect(metrics.get('plain_metric')).toEqual([7]);
    expect(metrics.size).toBe(2);
  });

  it('turns vLLM series into running, waiting and KV use in parts per million', () => {
    const text =
      'vllm:num_requests_running{engine="0"} 3.0\nvllm:num_requests_waiting{engine="0"} 1.0\nvllm:kv_cache_usage_perc{engine="0"} 0.121\n';
    expect(loadFromMetrics(text, vllmNames)).toEqual({ running: 3, waiting: 1, kv_usage_ppm: 121_000 });
  });

  it('reads the older KV name, adds requests across engine cores and takes the fullest cache', () => {
    const text = [
      'vllm:num_requests_running{engine="0"} 3.0',
      'vllm:num_requests_running{engine="1"} 2.0',
      'vllm:num_requests_waiting{engine="0"} 0.0',
      'vllm:num_requests_waiting{engine="1"} 4.0',
      'vllm:gpu_cache_usage_perc{engine="0"} 0.25',
      'vllm:gpu_cache_usage_perc{engine="1"} 0.5',
    ].join('\n');
    expect(loadFromMetrics(text, vllmNames)).toEqual({ running: 5, waiting: 4, kv_usage_ppm: 500_000 });
  });

  it('is null when a figure is missing: unknown, never zero', () => {
    expect(loadFromMetrics('vllm:num_requests_running 1\nvllm:num_requests_waiting 0\n', vllmNames)).toBeNull();
    expect(loadFromMetrics('', vllmNames)).toBeNull();
  });
});

describe('decision probe', () => {
  const lp = (token: string, p: number) => ({ token, logprob: Math.log(p) });

  it('adds up the spellings of each option and picks the likeliest', () => {
    const answer = decide(['yes', 'no'], [lp('no', 0.6), lp(' no', 0.1), lp('yes', 0.25), lp('maybe', 0.05)], 'no');
    expect(answer.kind).toBe('decision');
    if (answer.kind !== 'decision') return;
    expect(answer.option).toBe('no');
    expect(answer.probabilities.no).toBeCloseTo(0.7, 10);
    expect(answer.probabilities.yes).toBeCloseTo(0.25, 10);
  });

  it('gives an option outside the top alternatives probability 0, and answers what was said when no option was', () => {
    expect(decide(['a', 'b'], [lp('z', 0.9)], 'z')).toEqual({
      kind: 'decision',
      option: 'z',
      probabilities: { a: 0, b: 0 },
    });
  });
});
