import { describe, expect, it } from 'vitest';
import { capyctl } from './support/capyctl.js';

describe('capyctl engine list', () => {
  it('prints every engine in a table laid out like the spec’s, then the options whose product is its GPUs per instance, then how its memory is sized', async () => {
    const result = await capyctl(['engine', 'list']);
    expect(result).toEqual({
      code: 0,
      stderr: '',
      stdout:
        'NAME         DEEP PARK   HOST RAM PARK   DEFAULT MAX RUNNING   MAX RUNNING OPTION       MEMORY BOUND OPTION\n' +
        'vllm         enabled     enabled         32                    --max-num-seqs           --gpu-memory-utilization\n' +
        'sglang       enabled     enabled         chosen by engine      --max-running-requests   --mem-fraction-static\n' +
        'tensorfold   disabled    disabled        8                     --max-running            none\n' +
        '\n' +
        'NAME         GPUS PER INSTANCE\n' +
        'vllm         --tensor-parallel-size/-tp × --pipeline-parallel-size/-pp × --data-parallel-size/-dp\n' +
        'sglang       --tp-size/--tensor-parallel-size/--tp × --pp-size/--pipeline-parallel-size × ' +
        '--dp-size/--data-parallel-size/--dp (1 with --enable-dp-attention)\n' +
        'tensorfold   1\n' +
        '\n' +
        'NAME         MAX MODEL LEN OPTION   KV TOO SMALL FOR IT   PARKED RESIDUE\n' +
        'vllm         --max-model-len        refuses to start      2GiB a GPU\n' +
        'sglang       --context-length       clamps requests       2GiB a GPU\n' +
        'tensorfold   none                   -                     none\n',
    });
  });

  it('gives the same with --json', async () => {
    const result = await capyctl(['engine', 'list', '--json']);
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual([
      {
        name: 'vllm',
        deep_park: 'enabled',
        host_ram_park: 'enabled',
        default_max_running: 32,
        max_running_option: '--max-num-seqs',
        memory_bound_option: '--gpu-memory-utilization',
        parallelism: [
          { options: ['--tensor-parallel-size', '-tp'], splits: 'model', not_with: [] },
          { options: ['--pipeline-parallel-size', '-pp'], splits: 'model', not_with: [] },
          { options: ['--data-parallel-size', '-dp'], splits: 'requests', not_with: [] },
        ],
        max_model_len_option: '--max-model-len',
        kv_too_small: 'refuses_at_start',
        parked_residue_default: 2 * 2 ** 30,
      },
      {
        name: 'sglang',
        deep_park: 'enabled',
        host_ram_park: 'enabled',
        default_max_running: null,
        max_running_option: '--max-running-requests',
        memory_bound_option: '--mem-fraction-static',
        parallelism: [
          { options: ['--tp-size', '--tensor-parallel-size', '--tp'], splits: 'model', not_with: [] },
          { options: ['--pp-size', '--pipeline-parallel-size'], splits: 'model', not_with: [] },
          {
            options: ['--dp-size', '--data-parallel-size', '--dp'],
            splits: 'requests',
            not_with: ['--enable-dp-attention'],
          },
        ],
        max_model_len_option: '--context-length',
        kv_too_small: 'clamps',
        parked_residue_default: 2 * 2 ** 30,
      },
      {
        name: 'tensorfold',
        deep_park: 'disabled',
        host_ram_park: 'disabled',
        default_max_running: 8,
        max_running_option: '--max-running',
        memory_bound_option: null,
        parallelism: [],
        max_model_len_option: null,
        kv_too_small: null,
        parked_residue_default: null,
      },
    ]);
  });

  it('refuses an unknown option with exit code 2', async () => {
    const result = await capyctl(['engine', 'list', '--colour']);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
  });
});
