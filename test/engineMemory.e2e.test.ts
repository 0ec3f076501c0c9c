/**
 * The memory real engines need (issue 38), over real processes: a server, a host agent with one
 * simulated 24 GiB card, and simulated vLLM engines that play the real ones' refusals: a KV cache
 * that cannot hold one sequence of the length served, and a start or wake onto less free memory
 * than asked because a parked engine still holds its residue (its CUDA context and graphs).
 */
import { parse as parseYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster, type ClusterHost } from './support/cluster.js';
import { simDeployment } from './support/lifecycle.js';
import { until } from './support/until.js';
import { gpuUsage } from '../hostAgent/simulatedGpu.js';
import { join } from 'node:path';

const GiB = 2 ** 30;
/** Llama-3.1-8B's figures: 32 layers × 8 KV heads × 128 × 2 (bf16) × K and V = 128 KiB a token, 131072 tokens. */
const LLAMA_8B = ['--sim-weights', '16GiB', '--sim-kv-per-token', '128KiB', '--sim-max-model-len', '131072'];
/** Models whose sleeping engines keep 2 and 4 GiB (within what they hold running), one that keeps nothing, a large one. */
const MODELS = {
  a: ['--sim-weights', '8GiB', '--sim-kv', '4GiB', '--sim-residue', '2GiB'],
  b: ['--sim-weights', '8GiB', '--sim-kv', '6GiB', '--sim-residue', '4GiB'],
  c: ['--sim-weights', '8GiB', '--sim-kv', '2GiB'],
  big: ['--sim-weights', '20GiB', '--sim-kv', '3GiB'],
};

describe('the memory a real engine needs', () => {
  let cluster: Cluster;
  let host: ClusterHost;
  const held = async (): Promise<Record<string, number>> =>
    Object.fromEntries(
      (await gpuUsage(join(host.dataDir, 'sim-gpus'), 0)).owners
        .filter((o) => o.gpuBytes > 0)
        .map((o) => [o.label, o.gpuBytes / GiB]),
    );
  const stateOf = async (name: string): Promise<string> => (await cluster.status(name)).state;
  const parked = async (name: string) => {
    expect((await cluster.capyctl(['park', 'deployment', name])).code).toBe(0);
    await until(`${name} to park`, async () => ((await stateOf(name)) === 'parked' ? true : undefined), 30_000);
  };

  beforeAll(async () => {
    cluster = await Cluster.start({ hosts: [{ gpuMemory: '24GiB' }] });
    [host] = cluster.hosts as [ClusterHost];
  }, 240_000);

  afterAll(async () => {
    await cluster?.close();
  });

  it('an 8B model with a 128K context and a quarter-of-weights KV budget starts, told the length its budget holds, and status says so', async () => {
    await cluster.deploy(simDeployment('long', 'vllm', [...LLAMA_8B, '--sim-kv', '4GiB']));
    const started = await cluster.capyctl(['start', 'deployment', 'long', '--wait']);
    expect(started.code, `${started.stdout}${started.stderr}`).toBe(0);
    expect(started.stdout).toMatch(/^long: ready\n/);

    // 4 GiB, one 2 MiB page (16 tokens × 128 KiB) spare: 2047 pages.
    const status = await cluster.capyctlOk(['status', 'deployment', 'long']);
    expect(status).toContain('\nreserved: 16GiB weights + 4GiB KV cache + 0B kept parked\n');
    expect(status).toContain('\nmax_model_len: 32752 (what its KV budget holds)\n');
    expect((await cluster.status('long')).memory).toEqual({
      weight_bytes: 16 * GiB,
      kv_bytes: 4 * GiB,
      parked_residue_bytes: 0,
      max_model_len: 32752,
      max_model_len_from: 'kv_budget',
    });
    await cluster.capyctlOk(['stop', 'deployment', 'long']);
    await until('long to stop', async () => ((await stateOf('long')) === 'stopped' ? true : undefined), 30_000);
  }, 120_000);

  it('a declared max_model_len whose KV cache and weights fit no GPU is refused when measured, naming it; one that fits is passed', async () => {
    const tooLong = parseYaml(simDeployment('too-long', 'vllm', LLAMA_8B, 'max_model_len: 65536\n'));
    expect((await cluster.api('POST', '/management/v1/deployments', tooLong)).status).toBeLessThan(300);
    const failure = await until(
      'the measurement to fail',
      async () => {
        const d = await cluster.status('too-long');
        return d.checkpoint === 'failed' ? (d.checkpoint_failure as string) : undefined;
      },
      60_000,
    );
    expect(failure).toBe(
      'max_model_len 65536 needs 8.00 GiB of KV cache; with 16.00 GiB of weights and 0.00 GiB of residue that is ' +
        "24.00 GiB on each of its GPU, more than this host's largest GPU (24.00 GiB)",
    );

    await cluster.deploy(simDeployment('declared', 'vllm', LLAMA_8B, 'max_model_len: 16384\n'));
    expect((await cluster.status('declared')).memory).toMatchObject({
      kv_bytes: 2 * GiB + 2 * 2 ** 20,
      max_model_len: 16384,
      max_model_len_from: 'declared',
    });
  }, 120_000);

  it("a parked engine's residue is counted: a wake that would not fit beside another's stops it first, and a start stops the parked engine", async () => {
    for (const [name, args] of Object.entries(MODELS)) await cluster.deploy(simDeployment(name, 'vllm', args));
    await cluster.capyctlOk(['start', 'deployment', 'a', '--evict', '--wait']);
    await parked('a');
    await cluster.capyctlOk(['start', 'deployment', 'b', '--evict', '--wait']);
    await parked('b');
    await cluster.capyctlOk(['start', 'deployment', 'c', '--evict', '--wait']);
    expect(await held()).toEqual({ 'vllm sim/a': 2, 'vllm sim/b': 4, 'vllm sim/c': 10 });
    expect((await cluster.status('b')).memory).toMatchObject({ kv_bytes: 6 * GiB, parked_residue_bytes: 4 * GiB });

    // Waking a takes 12 GiB more; 8 are free beside what b keeps parked: b is stopped first.
    const woken = await cluster.capyctl(['start', 'deployment', 'a', '--evict', '--wait']);
    expect(woken.code, `${woken.stdout}${woken.stderr}`).toBe(0);
    expect(woken.stdout).toMatch(/^a: ready\n.*\nvictim: b \(deployment [^)]+\) released: stopped\n$/);
    expect(await held()).toEqual({ 'vllm sim/a': 14, 'vllm sim/c': 10 });

    // 23 GiB need the 2 GiB a keeps parked too: it is stopped and c parked, and big starts.
    await parked('a');
    const big = await cluster.capyctl(['start', 'deployment', 'big', '--evict', '--wait']);
    expect(big.code, `${big.stdout}${big.stderr}`).toBe(0);
    expect(big.stdout).toMatch(/^big: ready\n/);
    expect(big.stdout).toMatch(/\nvictim: a \(deployment [^)]+\) released: stopped\n/);
    expect(big.stdout).toMatch(/\nvictim: c \(deployment [^)]+\) released: parked \([^)]+\)\n/);
    expect(await held()).toEqual({ 'vllm sim/big': 23 });
    expect((await cluster.chat('big')).status).toBe(200);
  }, 180_000);
});
