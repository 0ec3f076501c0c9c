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
    expect(await unlimited.state()).toMatchObject({ gpu_index: null, gpu_bytes: 4098 * GiB });
  });
});
