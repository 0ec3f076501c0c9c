/** The simulated GPU: shared by simulator processes, refuses over-commit, freed by a crash or SIGTERM. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSimulatedGpu, gpuUsage } from '../hostAgent/simulatedGpu.js';
import { post, startSimulator, stopSimulators, VLLM_DEV_MODE } from './support/simulator.js';

const GiB = 2 ** 30;
const FAST = ['--sim-load-ms', '50', '--sim-park-ms', '20', '--sim-wake-ms', '20'];

const root = mkdtempSync(join(tmpdir(), 'capyctl-sim-gpu-'));
let dir: string;
let case_ = 0;

beforeEach(async () => {
  dir = join(root, String(case_++));
  await createSimulatedGpu(dir, 0, 10 * GiB);
  await createSimulatedGpu(dir, 1, 10 * GiB);
});
afterEach(stopSimulators);
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A vLLM bounded, as capyctl launches it, to its weights and KV cache on the 10 GiB card. */
const model = (name: string, weights: number, kv = 2) => [
  name,
  '--enable-sleep-mode',
  '--sim-weights',
  `${weights}GiB`,
  '--sim-kv',
  `${kv}GiB`,
  '--gpu-memory-utilization',
  String((weights + kv) / 10),
  ...FAST,
];

describe('simulated GPU', () => {
  it('refuses over-commit: the second engine exits 1 with PyTorch’s out-of-memory line and never listens', async () => {
    const first = await startSimulator('vllm', model('a', 6), { gpu: { dir, index: 0 } });
    const usage = await gpuUsage(dir, 0);
    expect(usage).toMatchObject({ capacityBytes: 10 * GiB, usedBytes: 8 * GiB });
    expect(usage.owners).toEqual([{ pid: first.child.pid, gpuBytes: 8 * GiB, hostRamBytes: 0, label: 'vllm a' }]);

    // SGLang loads its weights before it sizes its KV cache: they alone do not fit.
    const second = await startSimulator('sglang', ['--model-path', 'b', '--sim-weights', '6GiB', ...FAST], {
      gpu: { dir, index: 0 },
      waitReady: false,
    });
    expect((await second.exited).code).toBe(1);
    expect(second.stderr()).toMatch(
      /^torch\.OutOfMemoryError: CUDA out of memory\. Tried to allocate 6\.00 GiB\. GPU 0 has a total capacity of 10\.00 GiB of which 2\.00 GiB is free\.$/m,
    );
    expect(second.stdout()).toBe('');

    // Another device is another ledger.
    await startSimulator(
      'sglang',
      ['--model-path', 'b', '--sim-weights', '6GiB', '--mem-fraction-static', '0.8', ...FAST],
      { gpu: { dir, index: 1 } },
    );
    expect((await gpuUsage(dir, 1)).usedBytes).toBe(8 * GiB);
    expect((await gpuUsage(dir, 0)).usedBytes).toBe(8 * GiB);
  });

  it('an engine launched without a bound takes its real default share of the card, so a second one does not start', async () => {
    const unbounded = ['--sim-weights', '4GiB', '--sim-kv', '1GiB', ...FAST];
    await startSimulator('vllm', ['a', ...unbounded], { gpu: { dir, index: 0 } });
    // vLLM's 0.9 of the whole card, whatever its KV cache was declared as.
    expect((await gpuUsage(dir, 0)).usedBytes).toBe(Math.floor(0.9 * 10 * GiB));
    const second = await startSimulator('vllm', ['b', ...unbounded], { gpu: { dir, index: 0 }, waitReady: false });
    expect((await second.exited).code).toBe(1);
    expect(second.stderr()).toContain(
      'ValueError: Free memory on device (1.00/10.00 GiB) on startup is less than desired GPU memory utilization (0.9, 9.00 GiB).',
    );
    // SGLang fills the card to its 0.88: a second one cannot even load its weights beside it.
    await startSimulator('sglang', ['--model-path', 'c', ...unbounded], { gpu: { dir, index: 1 } });
    expect((await gpuUsage(dir, 1)).usedBytes).toBe(Math.floor(0.88 * 10 * GiB));
    const tight = await startSimulator('sglang', ['--model-path', 'd', ...unbounded], {
      gpu: { dir, index: 1 },
      waitReady: false,
    });
    expect((await tight.exited).code).toBe(1);
    expect(tight.stderr()).toMatch(/^torch\.OutOfMemoryError: CUDA out of memory\. Tried to allocate 4\.00 GiB\./m);
  });

  it('a parked engine frees its GPU memory; its wake with no room answers 500 and it stays parked', async () => {
    const a = await startSimulator('vllm', model('a', 6), { gpu: { dir, index: 0 }, env: VLLM_DEV_MODE });
    expect((await post(`${a.baseUrl}/sleep?level=1`)).status).toBe(200);
    expect(await gpuUsage(dir, 0)).toMatchObject({
      usedBytes: 0,
      owners: [{ pid: a.child.pid, gpuBytes: 0, hostRamBytes: 6 * GiB }],
    });

    const b = await startSimulator('vllm', model('b', 6), { gpu: { dir, index: 0 }, env: VLLM_DEV_MODE });
    const wake = await post(`${a.baseUrl}/wake_up`);
    expect(wake.status).toBe(500);
    expect(await wake.json()).toEqual({
      error: {
        message:
          'CUDA out of memory. Tried to allocate 8.00 GiB. GPU 0 has a total capacity of 10.00 GiB of which 2.00 GiB is free.',
        type: 'InternalServerError',
        param: null,
        code: 500,
      },
    });
    expect(await (await fetch(`${a.baseUrl}/is_sleeping`)).json()).toEqual({ is_sleeping: true });
    expect(await a.state()).toMatchObject({ state: 'parked', gpu_bytes: 0, host_ram_bytes: 6 * GiB });

    // B stops cleanly on SIGTERM: its memory is back and A wakes.
    expect(await b.stop()).toEqual({ code: 0, signal: null });
    expect((await gpuUsage(dir, 0)).owners.map((o) => o.pid)).toEqual([a.child.pid]);
    expect((await post(`${a.baseUrl}/wake_up`)).status).toBe(200);
    expect((await gpuUsage(dir, 0)).usedBytes).toBe(8 * GiB);
  });

  it('a sleeping engine keeps its residue until it exits: a start that did not count it dies with vLLM’s free-memory line', async () => {
    // 6 GiB of weights, 2 of KV cache and 1 GiB of residue within its 9 GiB share.
    const a = await startSimulator('vllm', [...model('a', 6, 3), '--sim-residue', '1GiB'], {
      gpu: { dir, index: 0 },
      env: VLLM_DEV_MODE,
    });
    expect(await a.state()).toMatchObject({ gpu_bytes: 9 * GiB });
    expect((await post(`${a.baseUrl}/sleep?level=2`)).status).toBe(200);
    expect(await a.state()).toMatchObject({ state: 'parked', gpu_bytes: 1 * GiB });
    expect((await gpuUsage(dir, 0)).usedBytes).toBe(1 * GiB);

    const b = await startSimulator('vllm', model('b', 8), { gpu: { dir, index: 0 }, waitReady: false });
    expect((await b.exited).code).toBe(1);
    expect(b.stderr()).toContain(
      'ValueError: Free memory on device (9.00/10.00 GiB) on startup is less than desired GPU memory utilization (1, 10.00 GiB).',
    );
    // Asked for what it leaves, SGLang counts it among what others hold: its KV cache is the smaller.
    await startSimulator(
      'sglang',
      ['--model-path', 'c', '--sim-weights', '6GiB', '--mem-fraction-static', '1', ...FAST],
      {
        gpu: { dir, index: 0 },
      },
    );
    expect((await gpuUsage(dir, 0)).usedBytes).toBe(10 * GiB);
    // Its exit gives the residue back.
    await a.stop();
    expect((await gpuUsage(dir, 0)).usedBytes).toBe(9 * GiB);
  });

  it('vLLM refuses a KV cache that cannot hold one sequence of its max model length, in its own words; SGLang serves', async () => {
    const kv = ['--sim-kv-per-token', '128KiB', '--sim-max-model-len', '131072'];
    const long = await startSimulator('vllm', [...model('long', 6, 4), ...kv], {
      gpu: { dir, index: 0 },
      waitReady: false,
    });
    expect((await long.exited).code).toBe(1);
    expect(long.stderr()).toMatch(
      /^ValueError: To serve at least one request with the models's max seq len \(131072\), \(16\.00 GiB KV cache is needed, which is larger than the available KV cache memory \(4\.00 GiB\)\. Based on the available memory, the estimated maximum model length is 32768\. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine\.$/m,
    );
    // Told the length its budget holds, it starts and says so.
    const fits = await startSimulator('vllm', [...model('fits', 6, 4), ...kv, '--max-model-len', '32768'], {
      gpu: { dir, index: 0 },
    });
    const models = (await (await fetch(`${fits.baseUrl}/v1/models`)).json()) as { data: { max_model_len: number }[] };
    expect(models.data[0]!.max_model_len).toBe(32768);
    const sglang = await startSimulator(
      'sglang',
      [
        '--model-path',
        's',
        '--sim-weights',
        '4GiB',
        '--sim-kv-per-token',
        '128KiB',
        '--context-length',
        '65536',
        ...FAST,
      ],
      { gpu: { dir, index: 1 } },
    );
    expect(sglang.stdout()).toContain('context_len=65536');
  });

  it('a crashed engine frees its memory, as a dead process frees a real GPU', async () => {
    const a = await startSimulator('tensorfold', ['--model', 'a', '--sim-weights', '7GiB', ...FAST], {
      gpu: { dir, index: 0 },
    });
    const crash = post(`${a.baseUrl}/sim/faults`, { crash: true });
    await expect(crash).rejects.toThrow();
    expect((await a.exited).code).not.toBe(0);
    expect((await gpuUsage(dir, 0)).usedBytes).toBe(0);
    const b = await startSimulator('tensorfold', ['--model', 'b', '--sim-weights', '7GiB', ...FAST], {
      gpu: { dir, index: 0 },
    });
    expect((await gpuUsage(dir, 0)).owners.map((o) => o.pid)).toEqual([b.child.pid]);

    // SIGKILL too: nothing runs in the dying process, yet the memory comes back.
    b.child.kill('SIGKILL');
    await b.exited;
    await startSimulator('tensorfold', ['--model', 'c', '--sim-weights', '7GiB', ...FAST], { gpu: { dir, index: 0 } });
  });

  it('fails to start on a device that was never created, and enforces nothing without CAPYCTL_SIM_GPU_DIR', async () => {
    const missing = await startSimulator('vllm', model('a', 1), { gpu: { dir, index: 7 }, waitReady: false });
    expect((await missing.exited).code).toBe(1);
    expect(missing.stderr()).toContain('RuntimeError: No CUDA GPUs are available');

    // Unbounded too: with no device there is nothing to take a share of.
    const unlimited = await startSimulator('vllm', ['huge', '--sim-weights', '4096GiB', '--sim-kv', '2GiB', ...FAST]);
    expect(await unlimited.state()).toMatchObject({ gpu_indexes: [], gpu_bytes: 4098 * GiB });
  });

  describe('an engine on several GPUs runs one rank on each, its bound a share of every device', () => {
    /** A 6 GiB model with a 2 GiB KV cache over two 10 GiB cards: 4 GiB on each, as capyctl bounds it. */
    const tp2 = ['tp', '--tensor-parallel-size', '2', '--sim-weights', '6GiB', '--sim-kv', '2GiB', ...FAST];

    it('holds its share on both devices and serves', async () => {
      const sim = await startSimulator('vllm', [...tp2, '--gpu-memory-utilization', '0.4'], {
        gpu: { dir, indexes: [0, 1] },
      });
      for (const index of [0, 1])
        expect((await gpuUsage(dir, index)).owners).toEqual([
          { pid: sim.child.pid, gpuBytes: Math.floor(0.4 * 10 * GiB), hostRamBytes: 0, label: 'vllm tp' },
        ]);
      expect(await sim.state()).toMatchObject({ state: 'ready', gpu_indexes: [0, 1] });
      const answer = await post(`${sim.baseUrl}/v1/completions`, { model: 'tp', prompt: 'Once', max_tokens: 2 });
      expect(answer.status).toBe(200);
    });

    it('dies with vLLM’s own line when fewer devices are visible than its ranks, holding nothing', async () => {
      const sim = await startSimulator('vllm', [...tp2, '--gpu-memory-utilization', '0.4'], {
        gpu: { dir, index: 0 },
        waitReady: false,
      });
      expect((await sim.exited).code).toBe(1);
      expect(sim.stderr()).toMatch(
        /^ValueError: World size \(2\) is larger than the number of available GPUs \(1\) in this node\. If this is intentional and you are using:$/m,
      );
      expect(sim.stdout()).toBe('');
      expect((await gpuUsage(dir, 0)).usedBytes).toBe(0);

      // Data parallelism needs its groups' devices too: SGLang's tp 2 × dp 2 on three.
      await createSimulatedGpu(dir, 2, 10 * GiB);
      const sglang = await startSimulator(
        'sglang',
        ['--model-path', 'dp', '--tp', '2', '--dp-size', '2', '--sim-weights', '2GiB', ...FAST],
        { gpu: { dir, indexes: [0, 1, 2] }, waitReady: false },
      );
      expect((await sglang.exited).code).toBe(1);
      expect(sglang.stderr()).toContain(
        'torch.AcceleratorError: CUDA error: invalid device ordinal\nGPU device may be out of range, do you have enough GPUs?\n',
      );
    });

    it('dies with the engine’s no-room line when its bound does not fit one of the devices, taking none', async () => {
      await startSimulator('vllm', model('other', 6), { gpu: { dir, index: 1 } });
      const sim = await startSimulator('vllm', [...tp2, '--gpu-memory-utilization', '0.4'], {
        gpu: { dir, indexes: [0, 1] },
        waitReady: false,
      });
      expect((await sim.exited).code).toBe(1);
      expect(sim.stderr()).toContain(
        'ValueError: Free memory on device (2.00/10.00 GiB) on startup is less than desired GPU memory utilization (0.4, 4.00 GiB).',
      );
      expect((await gpuUsage(dir, 0)).usedBytes).toBe(0);
    });

    it('SGLang sizes one KV cache for all its ranks, from the fullest of their devices', async () => {
      await startSimulator('vllm', model('other', 1, 1), { gpu: { dir, index: 1 } });
      const sim = await startSimulator(
        'sglang',
        ['--model-path', 'tp', '--tp', '2', '--sim-weights', '6GiB', '--mem-fraction-static', '0.6', ...FAST],
        { gpu: { dir, indexes: [0, 1] } },
      );
      // Filling device 1 to 0.6 leaves 1 GiB of KV cache after its 3 GiB of weights, and device 0 takes the same.
      for (const index of [0, 1])
        expect((await gpuUsage(dir, index)).owners.find((o) => o.pid === sim.child.pid)?.gpuBytes).toBe(4 * GiB);
    });

    it('a park frees every device and a wake takes every device back', async () => {
      const sim = await startSimulator('vllm', [...tp2, '--enable-sleep-mode', '--gpu-memory-utilization', '0.4'], {
        gpu: { dir, indexes: [0, 1] },
        env: VLLM_DEV_MODE,
      });
      expect((await post(`${sim.baseUrl}/sleep?level=1`)).status).toBe(200);
      for (const index of [0, 1])
        expect(await gpuUsage(dir, index)).toMatchObject({
          usedBytes: 0,
          owners: [{ pid: sim.child.pid, gpuBytes: 0, hostRamBytes: 3 * GiB }],
        });
      expect(await sim.state()).toMatchObject({ state: 'parked', gpu_bytes: 0, host_ram_bytes: 6 * GiB });
      expect((await post(`${sim.baseUrl}/wake_up`)).status).toBe(200);
      for (const index of [0, 1]) expect((await gpuUsage(dir, index)).usedBytes).toBe(Math.floor(0.4 * 10 * GiB));
    });
  });
});
