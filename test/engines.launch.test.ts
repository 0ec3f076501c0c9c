import { describe, expect, it } from 'vitest';
import type { LaunchContext } from '../engines/engine.js';
import { adapters } from '../activities/engines/index.js';
import { deploymentDocument } from '../settings/deploymentDocument.js';
import { gpusPerInstance, parallelLayout } from '../engines/parallelism.js';

const GiB = 2 ** 30;
/** A 24 GiB card: this model reserved 6 GiB of it, and the others on it hold 9 GiB. */
const MEMORY = { gpuBytes: 24 * GiB, reservedBytes: 6 * GiB, othersBytes: 9 * GiB };

const context = (fields: Record<string, unknown>, more: Partial<LaunchContext> = {}): LaunchContext => {
  const spec = deploymentDocument.parse({ name: 'my-model', model: 'Qwen3-4B', ...fields });
  return { spec, command: ['engine'], port: 8100, gpuIndexes: [1], parkTier: 'host_ram', memory: MEMORY, ...more };
};

describe('vLLM launch', () => {
  it('enables sleep mode with dev mode when it may park, and passes the default 32', () => {
    expect(adapters.vllm.launch(context({ engine: 'vllm' }, { command: ['vllm', 'serve'] }))).toEqual({
      argv: [
        'vllm',
        'serve',
        'Qwen3-4B',
        '--served-model-name',
        'my-model',
        '--port',
        '8100',
        '--host',
        '127.0.0.1',
        '--max-num-seqs',
        '32',
        '--gpu-memory-utilization',
        '0.25',
        '--enable-sleep-mode',
      ],
      env: { CUDA_VISIBLE_DEVICES: '1', VLLM_SERVER_DEV_MODE: '1' },
    });
  });

  it('leaves sleep mode off when it never parks, passes the declared count, and puts extra_args last', () => {
    const ctx = context(
      { engine: 'vllm', max_concurrent_requests: 12, extra_args: ['--dtype', 'half'] },
      { parkTier: null },
    );
    expect(adapters.vllm.launch(ctx)).toEqual({
      argv: [
        'engine',
        'Qwen3-4B',
        '--served-model-name',
        'my-model',
        '--port',
        '8100',
        '--host',
        '127.0.0.1',
        '--max-num-seqs',
        '12',
        '--gpu-memory-utilization',
        '0.25',
        '--dtype',
        'half',
      ],
      env: { CUDA_VISIBLE_DEVICES: '1' },
    });
  });

  it('passes no count when extra_args or the host command set it', () => {
    const byExtra = adapters.vllm.launch(context({ engine: 'vllm', extra_args: ['--max-num-seqs', '4'] }));
    expect(byExtra.argv.filter((a) => a === '--max-num-seqs')).toHaveLength(1);
    const byHost = adapters.vllm.launch(
      context({ engine: 'vllm', max_concurrent_requests: 12 }, { command: ['vllm', 'serve', '--max-num-seqs=64'] }),
    );
    expect(byHost.argv).not.toContain('12');
  });

  it('passes the share of the card the ledger reserved, unless extra_args or the host command set one', () => {
    const third = adapters.vllm.launch(
      context({ engine: 'vllm' }, { memory: { gpuBytes: 24 * GiB, reservedBytes: 8 * GiB, othersBytes: 0 } }),
    );
    expect(third.argv).toContain('0.3333333333333333');
    const byExtra = adapters.vllm.launch(context({ engine: 'vllm', extra_args: ['--gpu-memory-utilization=0.5'] }));
    expect(byExtra.argv.filter((a) => a.startsWith('--gpu-memory-utilization'))).toEqual([
      '--gpu-memory-utilization=0.5',
    ]);
    const byHost = adapters.sglang.launch(
      context({ engine: 'sglang' }, { command: ['sglang', '--mem-fraction-static', '0.4'] }),
    );
    expect(byHost.argv.filter((a) => a === '--mem-fraction-static')).toHaveLength(1);
  });
});

describe('SGLang launch', () => {
  it('saves memory, backs weights up to host RAM and turns metrics on when it parks in host RAM', () => {
    expect(adapters.sglang.launch(context({ engine: 'sglang', max_concurrent_requests: 16 }))).toEqual({
      argv: [
        'engine',
        '--model-path',
        'Qwen3-4B',
        '--served-model-name',
        'my-model',
        '--port',
        '8100',
        '--host',
        '127.0.0.1',
        '--max-running-requests',
        '16',
        // SGLang fills the card up to its share, counting the others: (9 + 6) / 24.
        '--mem-fraction-static',
        '0.625',
        '--enable-metrics',
        '--enable-memory-saver',
        '--enable-weights-cpu-backup',
      ],
      env: { CUDA_VISIBLE_DEVICES: '1' },
    });
  });

  it('keeps no backup when it parks deep or keeps its weights, saves no memory when it never parks, and passes no count of its own', () => {
    const options = (parkTier: LaunchContext['parkTier']) =>
      adapters.sglang.launch(context({ engine: 'sglang' }, { parkTier })).argv.slice(11);
    expect(options('deep')).toEqual(['--enable-metrics', '--enable-memory-saver']);
    expect(options('kv_only')).toEqual(['--enable-metrics', '--enable-memory-saver']);
    expect(options(null)).toEqual(['--enable-metrics']);
  });
});

describe('TensorFold launch', () => {
  it('passes its model, where to listen and the default 8', () => {
    expect(adapters.tensorfold.launch(context({ engine: 'tensorfold' }, { parkTier: null }))).toEqual({
      argv: [
        'engine',
        '--model',
        'Qwen3-4B',
        '--served-model-name',
        'my-model',
        '--port',
        '8100',
        '--host',
        '127.0.0.1',
        '--max-running',
        '8',
      ],
      env: { CUDA_VISIBLE_DEVICES: '1' },
    });
  });
});

describe('adapter facts', () => {
  it('say which engines park and at which tiers', () => {
    expect(Object.values(adapters).map((a) => [a.name, a.canPark, a.parkTiers, a.defaultMaxRunning])).toEqual([
      ['vllm', true, ['host_ram', 'deep'], 32],
      ['sglang', true, ['host_ram', 'deep', 'kv_only'], undefined],
      ['tensorfold', false, [], 8],
    ]);
  });
});

describe('the GPUs an instance runs on', () => {
  const gpus = (engine: string, extra_args: string[]) =>
    gpusPerInstance(deploymentDocument.parse({ name: 'm', model: 'M', engine, extra_args }));

  it("multiply vLLM's tensor, pipeline and data parallelism, in any of their spellings", () => {
    expect(gpus('vllm', [])).toBe(1);
    expect(gpus('vllm', ['-tp', '4'])).toBe(4);
    expect(gpus('vllm', ['--tensor-parallel-size=2', '-pp', '2'])).toBe(4);
    expect(gpus('vllm', ['-tp', '2', '--data-parallel-size', '2'])).toBe(4);
    expect(gpus('vllm', ['--tensor-parallel-size', '8', '-tp', '2'])).toBe(2);
  });

  it("multiply SGLang's, its data parallelism only without data-parallel attention, which runs inside the tp ranks", () => {
    expect(gpus('sglang', ['--tp', '4'])).toBe(4);
    expect(gpus('sglang', ['--tensor-parallel-size', '2', '--pp-size', '2'])).toBe(4);
    expect(gpus('sglang', ['--tp-size', '2', '--dp', '2'])).toBe(4);
    expect(gpus('sglang', ['--tp-size', '4', '--dp-size', '4', '--enable-dp-attention'])).toBe(4);
    // vLLM's short spellings are not SGLang's.
    expect(gpus('sglang', ['-tp', '4'])).toBe(1);
  });

  it('are one for TensorFold, whatever its arguments say', () => {
    expect(gpus('tensorfold', ['--tensor-parallel-size', '4'])).toBe(1);
  });

  it('hold the weights in tp × pp parts; each data-parallel group holds all of them', () => {
    expect(parallelLayout('vllm', ['-tp', '2', '-pp', '2', '-dp', '2'])).toEqual({
      ranks: 8,
      modelShards: 4,
      batchRanks: 1,
    });
    expect(parallelLayout('sglang', ['--tp', '4', '--dp', '4', '--enable-dp-attention'])).toEqual({
      ranks: 4,
      modelShards: 4,
      batchRanks: 4,
    });
  });
});
