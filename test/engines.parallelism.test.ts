/** How many GPUs an instance runs on, read from its engine arguments as each engine's parser reads them. */
import { describe, expect, it } from 'vitest';
import { gpusPerInstance } from '../engines/parallelism.js';
import { findOption } from '../engines/launchOptions.js';

const gpus = (engine: 'vllm' | 'sglang' | 'tensorfold', extra_args: string[]) =>
  gpusPerInstance({ engine, extra_args });

describe('GPUs per instance', () => {
  it('vLLM: tensor × pipeline × data parallel, in every spelling of its parser', () => {
    expect(gpus('vllm', [])).toBe(1);
    expect(gpus('vllm', ['--tensor-parallel-size', '4'])).toBe(4);
    expect(gpus('vllm', ['-tp', '2', '-pp', '2'])).toBe(4);
    expect(gpus('vllm', ['-tp=2', '--pipeline_parallel_size=3'])).toBe(6);
    expect(gpus('vllm', ['-tp', '2', '--data-parallel-size', '2'])).toBe(4);
    // argparse keeps the last value of one destination, whichever spelling set it.
    expect(gpus('vllm', ['--tensor-parallel-size', '8', '-tp', '2'])).toBe(2);
  });

  it('SGLang: its -size spellings and argparse abbreviations; DP attention shares the tensor-parallel GPUs', () => {
    expect(gpus('sglang', ['--tp', '2'])).toBe(2);
    expect(gpus('sglang', ['--tp-size', '2', '--dp-size', '2'])).toBe(4);
    expect(gpus('sglang', ['--tensor-parallel-size', '4', '--dp', '4', '--enable-dp-attention'])).toBe(4);
    expect(gpus('sglang', ['--pp-size', '2'])).toBe(2);
  });

  it('TensorFold runs on one GPU whatever it is given', () => {
    expect(gpus('tensorfold', ['--tensor-parallel-size', '4'])).toBe(1);
  });

  it('a single-dash option takes its value, and a negative number is a value, not an option', () => {
    expect(findOption(['-tp', '4'], '-tp')).toBe('4');
    expect(findOption(['--seed', '-1'], '--seed')).toBe('-1');
    expect(findOption(['-tp', '--enforce-eager'], '-tp')).toBe('');
  });
});
