/**
 * The GPUs a host offers: read from `nvidia-smi` when the machine has one, otherwise the simulated
 * devices its document declares (each backed by a ledger the engine simulators share).
 */
import { execFileSync } from 'node:child_process';
import { totalmem } from 'node:os';
import type { HostGpu } from '../store/hosts.js';
import type { HostSettings } from '../settings/hostDocument.js';

export interface DiscoveredGpus {
  gpus: HostGpu[];
  simulated: boolean;
}

const MiB = 2 ** 20;

/** `nvidia-smi`'s GPUs, or undefined when there is no `nvidia-smi` to ask. */
function nvidiaGpus(): HostGpu[] | undefined {
  let out: string;
  try {
    out = execFileSync('nvidia-smi', ['--query-gpu=index,name,memory.total', '--format=csv,noheader,nounits'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
  } catch {
    return undefined;
  }
  return out
    .trim()
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const [index, name, memoryMiB] = line.split(',').map((f) => f.trim());
      // Grace Hopper / Blackwell superchips share memory between CPU and GPU.
      const unified = /GH200|GB200|GB10/i.test(name ?? '');
      return {
        index: Number(index),
        name: name ?? 'gpu',
        memoryBytes: Number(memoryMiB) * MiB,
        memoryKind: unified ? 'unified' : 'discrete',
      };
    });
}

export function discoverGpus(settings: Pick<HostSettings, 'gpus'>): DiscoveredGpus {
  const real = nvidiaGpus();
  if (real && real.length > 0) return { gpus: real, simulated: false };
  return {
    gpus: settings.gpus.map((g, index) => ({
      index,
      name: `sim-${index}`,
      memoryBytes: g.memory,
      memoryKind: g.memory_kind,
    })),
    simulated: true,
  };
}

/** Host RAM: declared, or the machine's. */
export const hostRamBytes = (settings: Pick<HostSettings, 'host_ram'>) => settings.host_ram ?? totalmem();
