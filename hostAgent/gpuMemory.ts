/**
 * What each process holds on each of the host's GPUs now, as the devices say: `nvidia-smi`'s compute
 * apps, or the simulated devices' ledgers. A process an engine started (vLLM's engine core, SGLang's
 * workers) counts as that engine's.
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { gpuUsage } from './simulatedGpu.js';

const MiB = 2 ** 20;
/** How far up its parents a GPU process is followed to the engine that started it. */
const MAX_ANCESTORS = 8;

/** Where the devices' usage is read: `nvidia-smi`, or the simulated devices' folder and their indexes. */
export type GpuSource = { kind: 'nvidia' } | { kind: 'simulated'; dir: string; indexes: readonly number[] };

/** What one process holds on one device. */
interface DeviceUse {
  pid: number;
  gpu: number;
  bytes: number;
}

/** What each process holds on each device. */
async function usesByProcess(source: GpuSource): Promise<DeviceUse[]> {
  if (source.kind === 'simulated') {
    const uses: DeviceUse[] = [];
    for (const gpu of source.indexes)
      for (const o of (await gpuUsage(source.dir, gpu)).owners) uses.push({ pid: o.pid, gpu, bytes: o.gpuBytes });
    return uses;
  }
  const query = async (fields: string) =>
    (await promisify(execFile)('nvidia-smi', [fields, '--format=csv,noheader,nounits'])).stdout
      .split('\n')
      .map((line) => line.split(',').map((f) => f.trim()));
  // A compute app names its device by UUID; the host's GPUs are listed by index.
  const [devices, apps] = await Promise.all([
    query('--query-gpu=index,uuid'),
    query('--query-compute-apps=pid,used_memory,gpu_uuid'),
  ]);
  const indexOf = new Map(devices.map(([index, uuid]) => [uuid, Number(index)]));
  return apps.flatMap(([pid, mib, uuid]) => {
    const use = { pid: Number(pid), gpu: indexOf.get(uuid) ?? NaN, bytes: Number(mib) * MiB };
    return Number.isInteger(use.pid) && Number.isInteger(use.gpu) && Number.isFinite(use.bytes) ? [use] : [];
  });
}

/** The parent of a process, from /proc; undefined when it is gone or not readable. */
async function parentOf(pid: number): Promise<number | undefined> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  // The command name (2nd field) may hold spaces and parentheses: the fields after its last `)` are plain.
  const ppid = stat && Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  return ppid || undefined;
}

/**
 * GPU bytes held on each device by each of `owners` (process IDs the agent started), counting their
 * descendants; what no owner started is under `null`.
 */
export async function gpuBytesByOwner<T>(
  source: GpuSource,
  owners: ReadonlyMap<number, T>,
): Promise<Array<{ owner: T | null; gpu: number; bytes: number }>> {
  const ownerOf = new Map<number, T | null>();
  const held: Array<{ owner: T | null; gpu: number; bytes: number }> = [];
  for (const { pid, gpu, bytes } of await usesByProcess(source)) {
    if (!ownerOf.has(pid)) ownerOf.set(pid, await ancestorIn(pid, owners));
    const owner = ownerOf.get(pid)!;
    const same = held.find((h) => h.owner === owner && h.gpu === gpu);
    if (same) same.bytes += bytes;
    else held.push({ owner, gpu, bytes });
  }
  return held;
}

/** GPU bytes held on each device by the process `pid` and its descendants (a parked engine's residue). */
export async function gpuBytesOfProcess(
  source: GpuSource,
  pid: number,
): Promise<Array<{ gpu: number; bytes: number }>> {
  return (await gpuBytesByOwner(source, new Map([[pid, pid]])))
    .filter((h) => h.owner === pid)
    .map(({ gpu, bytes }) => ({ gpu, bytes }));
}

/** The first of `owners` among the process and its parents; null when none is. */
async function ancestorIn<T>(pid: number, owners: ReadonlyMap<number, T>): Promise<T | null> {
  for (
    let at: number | undefined = pid, depth = 0;
    at !== undefined && depth <= MAX_ANCESTORS;
    at = await parentOf(at), depth++
  ) {
    const found = owners.get(at);
    if (found !== undefined) return found;
  }
  return null;
}
