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
    });
  });

  it('takes what a simulated checkpoint declares', () => {
    expect(
      measureCheckpoint('sim/chat-a', ['capyctl', 'sim', 'vllm', '--sim-weights=8GiB', '--sim-kv', '1GiB']),
    ).toEqual({
      weightBytes: 8 * 2 ** 30,
      kvBytes: 2 ** 30,
      source: 'simulator',
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
});
