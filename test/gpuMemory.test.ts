/**
 * What a parked engine still holds, as a real GPU's `nvidia-smi` says it: the compute apps of the
 * engine's process and of the processes it started (vLLM's engine core and workers), summed per GPU,
 * each device named by UUID and found by its index. A fake `nvidia-smi` on PATH answers as the real
 * one does with `--format=csv,noheader,nounits`.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gpuBytesOfProcess } from '../hostAgent/gpuMemory.js';
import { until } from './support/until.js';

const MiB = 2 ** 20;

describe("a process tree's GPU memory, from nvidia-smi", () => {
  const dir = mkdtempSync(join(tmpdir(), 'capyctl-nvidia-'));
  const path = process.env.PATH;
  let engine: ChildProcess;
  let workerPid: number;

  beforeAll(async () => {
    // The engine starts a worker of its own, as vLLM's API server starts its engine core.
    engine = spawn(
      process.execPath,
      [
        '-e',
        "const c = require('node:child_process').spawn('sleep', ['60']); console.log(c.pid); setInterval(() => {}, 1e3)",
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let out = '';
    engine.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    workerPid = await until('the worker to start', async () => (out.includes('\n') ? Number(out) : undefined), 10_000);
    const apps = [
      `${engine.pid}, 300, GPU-aaaa`,
      `${workerPid}, 700, GPU-bbbb`,
      `${workerPid}, 24, GPU-aaaa`,
      // Not the engine's: another process on the machine.
      `${process.pid}, 5000, GPU-aaaa`,
    ];
    writeFileSync(
      join(dir, 'nvidia-smi'),
      '#!/bin/sh\ncase "$1" in\n' +
        // Not in index order: each card's index is read from its row, not its place.
        `  --query-gpu=index,uuid) printf '1, GPU-bbbb\\n0, GPU-aaaa\\n' ;;\n` +
        `  --query-compute-apps=*) printf '${apps.join('\\n')}\\n' ;;\n` +
        'esac\n',
    );
    chmodSync(join(dir, 'nvidia-smi'), 0o755);
    process.env.PATH = `${dir}${delimiter}${path}`;
  });

  afterAll(() => {
    process.env.PATH = path;
    if (workerPid) process.kill(workerPid);
    engine?.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  it("sums the engine's and its children's rows per GPU index, and leaves other processes out", async () => {
    const held = await gpuBytesOfProcess({ kind: 'nvidia' }, engine.pid!);
    expect(held.sort((a, b) => a.gpu - b.gpu)).toEqual([
      { gpu: 0, bytes: 324 * MiB },
      { gpu: 1, bytes: 700 * MiB },
    ]);
  });
});
