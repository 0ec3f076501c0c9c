/**
 * The memory real engines need (issue 38), over real processes: a server, a host agent with one
 * simulated 24 GiB card, and simulated vLLM engines that play the real ones' refusals: a KV cache
 * that cannot hold one sequence of the length served, and a start or wake onto less free memory
 * than asked because a parked engine still holds its residue (its CUDA context and graphs).
 */
import { parse as parseYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster, type ClusterHost, gpuHeld } from './support/cluster.js';
import { simDeployment } from './support/lifecycle.js';
import { until } from './support/until.js';

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
/**
 * Models whose engines, like real ones, do not declare their residue when measured: the host's
 * `parked_residue` (2 GiB) is reserved, while asleep one keeps 512 MiB and the other 4 GiB.
 */
const UNREPORTED = {
  lean: ['--sim-weights', '8GiB', '--sim-kv', '4GiB', '--sim-residue', '512MiB', '--sim-residue-unreported'],
  heavy: ['--sim-weights', '8GiB', '--sim-kv', '4GiB', '--sim-residue', '4GiB', '--sim-residue-unreported'],
  /** 23 GiB: beside 2 GiB it does not fit, beside 512 MiB it does. */
  wide: ['--sim-weights', '20GiB', '--sim-kv', '3GiB'],
  /** 21 GiB: beside 2 GiB it fits the ledger, beside 4 GiB vLLM refuses it. */
  broad: ['--sim-weights', '18GiB', '--sim-kv', '3GiB'],
};

describe('the memory a real engine needs', () => {
  let cluster: Cluster;
  let host: ClusterHost;
  const held = async (): Promise<Record<string, number>> =>
    Object.fromEntries([...(await gpuHeld(host))].map(([label, bytes]) => [label, bytes / GiB]));
  const stateOf = async (name: string): Promise<string> => (await cluster.status(name)).state;
  const parked = async (name: string) => {
    expect((await cluster.capyctl(['park', 'deployment', name])).code).toBe(0);
    await until(`${name} to park`, async () => ((await stateOf(name)) === 'parked' ? true : undefined), 30_000);
  };
  const stopped = async (name: string) => {
    await cluster.capyctlOk(['stop', 'deployment', name]);
    await until(`${name} to stop`, async () => ((await stateOf(name)) === 'stopped' ? true : undefined), 30_000);
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
        "24.00 GiB on its GPU, more than this host's largest GPU (24.00 GiB)",
    );

    await cluster.deploy(simDeployment('declared', 'vllm', LLAMA_8B, 'max_model_len: 16384\n'));
    expect((await cluster.status('declared')).memory).toMatchObject({
      kv_bytes: 2 * GiB + 2 * 2 ** 20,
      max_model_len: 16384,
      max_model_len_from: 'declared',
    });
    // Passed to the engine: without it vLLM would size for the model's 131072 tokens and refuse to start.
    const started = await cluster.capyctl(['start', 'deployment', 'declared', '--wait']);
    expect(started.code, `${started.stdout}${started.stderr}`).toBe(0);
    await cluster.capyctlOk(['stop', 'deployment', 'declared']);
    await until('declared to stop', async () => ((await stateOf('declared')) === 'stopped' ? true : undefined), 30_000);
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

  it('after a park the ledger counts what the engine still holds, as its host measured it: less frees room, more takes it', async () => {
    // The card starts empty, whatever the tests before left on it.
    const { body } = await cluster.api('GET', '/management/v1/deployments');
    for (const d of body.deployments as Array<{ name: string; state: string }>)
      if (d.state !== 'stopped') await stopped(d.name);
    for (const [name, args] of Object.entries(UNREPORTED)) await cluster.deploy(simDeployment(name, 'vllm', args));

    await cluster.capyctlOk(['start', 'deployment', 'lean', '--wait']);
    await parked('lean');
    expect(await held()).toEqual({ 'vllm sim/lean': 0.5 });
    const lean = await cluster.capyctlOk(['status', 'deployment', 'lean']);
    expect(lean).toContain(
      '\nreserved: 8GiB weights + 4GiB KV cache + 2GiB kept parked\nkept_parked: 512MiB (measured after park)\n',
    );
    expect((await cluster.status('lean')).instances).toMatchObject([
      { state: 'parked', parked_residue_bytes: GiB / 2, parked_residue_from: 'measured' },
    ]);

    // 23 GiB fit beside the 512 MiB lean keeps, not beside the 2 GiB the setting says: it stays parked.
    const wide = await cluster.capyctl(['start', 'deployment', 'wide', '--evict', '--wait']);
    expect(wide.code, `${wide.stdout}${wide.stderr}`).toBe(0);
    expect(wide.stdout).toMatch(/^wide: ready\n/);
    expect(wide.stdout).not.toContain('victim:');
    expect(await held()).toEqual({ 'vllm sim/lean': 0.5, 'vllm sim/wide': 23 });
    expect(await stateOf('lean')).toBe('parked');
    for (const name of ['wide', 'lean']) await stopped(name);

    // heavy keeps 4 GiB, not the 2 the setting says: 21 GiB beside it would fail vLLM's free-memory check.
    await cluster.capyctlOk(['start', 'deployment', 'heavy', '--wait']);
    await parked('heavy');
    expect(await held()).toEqual({ 'vllm sim/heavy': 4 });
    expect(await cluster.capyctlOk(['status', 'deployment', 'heavy'])).toContain(
      '\nkept_parked: 4GiB (measured after park)\n',
    );
    const broad = await cluster.capyctl(['start', 'deployment', 'broad', '--evict', '--wait']);
    expect(broad.code, `${broad.stdout}${broad.stderr}`).toBe(0);
    expect(broad.stdout).toMatch(/^broad: ready\n.*\nvictim: heavy \(deployment [^)]+\) released: stopped\n$/);
    expect(await held()).toEqual({ 'vllm sim/broad': 21 });
    expect((await cluster.chat('broad')).status).toBe(200);
  }, 180_000);
});
