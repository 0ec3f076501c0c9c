/**
 * What each process holds on the host's GPUs now, as the devices say: `nvidia-smi`'s compute apps,
 * or the simulated devices' ledgers. A process an engine started (vLLM's engine core, SGLang's
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

/** GPU bytes by process ID, over every device. */
async function bytesByProcess(source: GpuSource): Promise<Map<number, number>> {
  const held = new Map<number, number>();
  const add = (pid: number, bytes: number) => held.set(pid, (held.get(pid) ?? 0) + bytes);
  if (source.kind === 'simulated') {
    for (const index of source.indexes)
      for (const o of (await gpuUsage(source.dir, index)).owners) add(o.pid, o.gpuBytes);
    return held;
  }
  const { stdout } = await promisify(execFile)('nvidia-smi', [
    '--query-compute-apps=pid,used_memory',
    '--format=csv,noheader,nounits',
  ]);
  for (const line of stdout.split('\n')) {
    const [pid, mib] = line.split(',').map((f) => Number(f.trim()));
    if (Number.isInteger(pid) && Number.isFinite(mib)) add(pid!, mib! * MiB);
  }
  return held;
}

/** The parent of a process, from /proc; undefined when it is gone or not readable. */
async function parentOf(pid: number): Promise<number | undefined> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  // The command name (2nd field) may hold spaces and parentheses: the fields after its last `)` are plain.
  const ppid = stat && Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  return ppid || undefined;
}

/**
 * GPU bytes held by each of `owners` (process IDs the agent started), counting their descendants;
 * what no owner started is under `null`.
 */
export async function gpuBytesByOwner<T>(
  source: GpuSource,
  owners: ReadonlyMap<number, T>,
): Promise<Map<T | null, number>> {
  const held = new Map<T | null, number>();
  for (const [pid, bytes] of await bytesByProcess(source)) {
    let owner: T | null = null;
    for (
      let at: number | undefined = pid, depth = 0;
      at !== undefined && depth <= MAX_ANCESTORS;
      at = await parentOf(at), depth++
    ) {
      const found = owners.get(at);
      if (found !== undefined) {
        owner = found;
        break;
      }
    }
    held.set(owner, (held.get(owner) ?? 0) + bytes);
  }
  return held;
}
