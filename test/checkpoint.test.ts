import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { measureCheckpoint, reservedCheckpoint } from '../activities/checkpoint.js';
import { deploymentDocument } from '../settings/deploymentDocument.js';

const dir = mkdtempSync(join(tmpdir(), 'capyctl-ckpt-'));
const file = (path: string, bytes: number) => {
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, Buffer.alloc(bytes));
};

describe('measuring a checkpoint', () => {
  const hfHome = process.env.HF_HOME;
  afterEach(() => {
    if (hfHome === undefined) delete process.env.HF_HOME;
    else process.env.HF_HOME = hfHome;
  });

  it('adds up the weight files of a local folder, ignoring the rest', () => {
    const model = join(dir, 'local-model');
    file(join(model, 'model-00001-of-00002.safetensors'), 3_000);
    file(join(model, 'model-00002-of-00002.safetensors'), 2_000);
    file(join(model, 'config.json'), 500);
    expect(measureCheckpoint(model, ['vllm', 'serve'])).toEqual({
      weightBytes: 5_000,
      kvBytes: 1_250,
      source: 'files',
    });
  });

  it('finds a Hugging Face ID in the cache, following its symlinks to the blobs', () => {
    process.env.HF_HOME = join(dir, 'hf');
    const repo = join(dir, 'hf', 'hub', 'models--Qwen--Qwen3-4B');
    file(join(repo, 'blobs', 'abc'), 7_000);
    mkdirSync(join(repo, 'snapshots', 'rev1'), { recursive: true });
    symlinkSync(join(repo, 'blobs', 'abc'), join(repo, 'snapshots', 'rev1', 'model.safetensors'));
    expect(measureCheckpoint('Qwen/Qwen3-4B', [])).toEqual({ weightBytes: 7_000, kvBytes: 1_750, source: 'files' });
  });

  it('takes the simulator defaults when a simulated checkpoint declares nothing', () => {
    expect(measureCheckpoint('sim/chat-b', ['node', 'capyctl', 'sim', 'sglang'])).toEqual({
      weightBytes: 8 * 2 ** 30,
      kvBytes: 2 * 2 ** 30,
      source: 'simulator',
      residuePerGpu: 0,
    });
  });

  it('takes what a simulated checkpoint declares', () => {
    expect(
      measureCheckpoint('sim/chat-a', ['capyctl', 'sim', 'vllm', '--sim-weights=8GiB', '--sim-kv', '1GiB']),
    ).toEqual({
      weightBytes: 8 * 2 ** 30,
      kvBytes: 2 ** 30,
      source: 'simulator',
      residuePerGpu: 0,
    });
  });

  it('says so when the checkpoint is not on the host', () => {
    process.env.HF_HOME = join(dir, 'empty-hf');
    expect(() => measureCheckpoint('org/missing', [])).toThrow(
      'checkpoint org/missing is not on this host: neither a folder nor in the Hugging Face cache',
    );
  });

  it("reserves what a deployment's own memory bound leaves after its weights, and refuses a bound with no room", () => {
    const GiB = 2 ** 30;
    const spec = (extra: string[]) =>
      deploymentDocument.parse({
        name: 'm',
        engine: 'vllm',
        model: 'sim/m',
        extra_args: ['--sim-weights', '6GiB', ...extra],
      });
    const sim = ['capyctl', 'sim', 'vllm'];
    expect(reservedCheckpoint(spec([]), sim, 24 * GiB)).toMatchObject({ weightBytes: 6 * GiB, kvBytes: 2 * GiB });
    expect(reservedCheckpoint(spec(['--gpu-memory-utilization', '0.5']), sim, 24 * GiB)).toMatchObject({
      weightBytes: 6 * GiB,
      kvBytes: 6 * GiB,
    });
    expect(() => reservedCheckpoint(spec(['--gpu-memory-utilization=0.2']), sim, 24 * GiB)).toThrow(
      "its extra_args set --gpu-memory-utilization 0.2, which gives the engine 4.80 GiB of this host's largest GPU (24.00 GiB): " +
        'no room for a KV cache beside its 6.00 GiB of weights',
    );
    // The host's command may set it too: the engine then runs at that share, and the ledger counts it.
    expect(reservedCheckpoint(spec([]), [...sim, '--gpu-memory-utilization', '0.5'], 24 * GiB)).toMatchObject({
      weightBytes: 6 * GiB,
      kvBytes: 6 * GiB,
    });
    expect(() => reservedCheckpoint(spec([]), [...sim, '--gpu-memory-utilization', '0.2'], 24 * GiB)).toThrow(
      "the host's command sets --gpu-memory-utilization 0.2",
    );
    // The deployment's own figure comes after the host's on the engine's line, and wins.
    expect(
      reservedCheckpoint(
        spec(['--gpu-memory-utilization', '0.5']),
        [...sim, '--gpu-memory-utilization', '0.2'],
        24 * GiB,
      ),
    ).toMatchObject({ kvBytes: 6 * GiB });
  });

  it("reads the model's KV figures from its config.json as vLLM does, and sizes the length its budget holds", () => {
    const model = join(dir, 'llama-8b');
    file(join(model, 'model.safetensors'), 16 * 2 ** 20);
    writeFileSync(
      join(model, 'config.json'),
      JSON.stringify({
        num_hidden_layers: 32,
        num_attention_heads: 32,
        num_key_value_heads: 8,
        hidden_size: 4096,
        torch_dtype: 'bfloat16',
        max_position_embeddings: 131072,
      }),
    );
    expect(measureCheckpoint(model, [])).toMatchObject({
      modelKv: { bytesPerToken: 128 * 1024, maxModelLen: 131072 },
    });
    const spec = (more: object) => deploymentDocument.parse({ name: 'm', engine: 'vllm', model, ...more });
    // A quarter of 16 MiB of weights is 4 MiB: one 2 MiB page spare, one page of 16 tokens left.
    expect(reservedCheckpoint(spec({}), ['vllm', 'serve'], 24 * 2 ** 30, 2 * 2 ** 30)).toEqual({
      weightBytes: 16 * 2 ** 20,
      kvBytes: 4 * 2 ** 20,
      residueBytes: 2 * 2 ** 30,
      maxModelLen: 16,
      maxModelLenFrom: 'kv_budget',
      source: 'files',
    });
    // Declared: the budget grows to hold it; above the model's own it is refused, as vLLM refuses it.
    expect(reservedCheckpoint(spec({ max_model_len: 1024 }), [], 24 * 2 ** 30)).toMatchObject({
      kvBytes: (64 + 1) * 2 * 2 ** 20,
      maxModelLen: 1024,
      maxModelLenFrom: 'declared',
    });
    expect(() => reservedCheckpoint(spec({ max_model_len: 262144 }), [], 24 * 2 ** 30)).toThrow(
      "max_model_len 262144 is more than the model's own maximum (131072)",
    );
    expect(() =>
      reservedCheckpoint(spec({ max_model_len: 1024, extra_args: ['--max-model-len', '2048'] }), [], 24 * 2 ** 30),
    ).toThrow('max_model_len 1024 and --max-model-len 2048 are both set: set one');
  });

  it('counts no residue for an engine that cannot park, and a residue per GPU for one that parks on several', () => {
    const spec = (engine: string, extra: string[]) =>
      deploymentDocument.parse({ name: 'm', engine, model: 'sim/m', extra_args: ['--sim-residue', '1GiB', ...extra] });
    expect(reservedCheckpoint(spec('tensorfold', []), ['capyctl', 'sim', 'tensorfold'], 24 * 2 ** 30)).toMatchObject({
      residueBytes: 0,
      maxModelLen: null,
      maxModelLenFrom: 'engine_default',
    });
    expect(reservedCheckpoint(spec('vllm', ['-tp', '2']), ['capyctl', 'sim', 'vllm'], 24 * 2 ** 30)).toMatchObject({
      residueBytes: 2 * 2 ** 30,
    });
  });
});
