/**
 * A simulated GPU shared by every simulator process on the same device, through files:
 *
 *   <dir>/gpu<index>/device.json         {"capacity_bytes": N}
 *   <dir>/gpu<index>/owners/<pid>.json   what one process holds (GPU bytes, and its host-RAM copy)
 *   <dir>/gpu<index>/lock/               a mkdir lock around check-then-allocate
 *
 * An owner whose process is gone does not count, so a crashed engine frees its GPU memory the way
 * a real one does; the next allocation deletes its file.
 *
 * Product code, not the simulator's: a host document may declare simulated GPUs (the standalone's
 * does), and the host agent makes them and reports what they hold; the simulator's engine
 * processes allocate on them.
 */
import { mkdir, readdir, readFile, rename, rmdir, stat, unlink, writeFile } from 'node:fs/promises';
import { unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export interface GpuOwner {
  pid: number;
  gpuBytes: number;
  hostRamBytes: number;
  /** Which engine holds it, for people reading the ledger. */
  label: string;
}

export interface GpuUsage {
  capacityBytes: number;
  usedBytes: number;
  /** Live owners only. */
  owners: GpuOwner[];
}

export class NoSimulatedGpu extends Error {
  override name = 'NoSimulatedGpu';
}

const deviceDir = (dir: string, index: number) => join(dir, `gpu${index}`);
const ownersDir = (dir: string, index: number) => join(deviceDir(dir, index), 'owners');
const ownerFile = (dir: string, index: number, pid: number) => join(ownersDir(dir, index), `${pid}.json`);
const lockDir = (dir: string, index: number) => join(deviceDir(dir, index), 'lock');

/** A lock older than this was left by a process killed inside the few microseconds it holds it. */
const STALE_LOCK_MS = 2_000;

/** Creates (or resizes) device `index` under `dir`. */
export async function createSimulatedGpu(dir: string, index: number, capacityBytes: number): Promise<void> {
  await mkdir(ownersDir(dir, index), { recursive: true });
  await writeAtomically(join(deviceDir(dir, index), 'device.json'), JSON.stringify({ capacity_bytes: capacityBytes }));
}

/** What the device holds now, like `nvidia-smi`: live owners only. */
export async function gpuUsage(dir: string, index: number): Promise<GpuUsage> {
  const capacityBytes = await readCapacity(dir, index);
  const owners = (await readOwners(dir, index)).filter((o) => isAlive(o.pid));
  return { capacityBytes, usedBytes: owners.reduce((sum, o) => sum + o.gpuBytes, 0), owners };
}

export type Allocation = { ok: true } | { ok: false; capacityBytes: number; freeBytes: number };

/** The device's room as an engine sees it at start. */
export interface Room {
  capacityBytes: number;
  freeBytes: number;
}

/** How much an engine takes given the room it finds, or the line it dies with. */
export type Sizing = (room: Room) => { bytes: number } | { refusal: string };

/**
 * One process's holding on one device. Every change is written to its owner file; an increase is
 * checked under the lock against what the live owners hold.
 */
export class GpuHolding {
  private readonly pid = process.pid;
  private gpuBytes = 0;
  private hostRamBytes = 0;

  constructor(
    readonly dir: string,
    readonly index: number,
    private readonly label: string,
  ) {}

  /**
   * Takes `bytes` more, or refuses when the device has no room for them. A sizing decides the bytes
   * from the room under the same lock, as an engine sizes its KV cache from what it finds free.
   */
  async allocate(want: number | Sizing): Promise<Allocation & { bytes?: number; refusal?: string }> {
    // Outside the lock, whose folder does not exist on a device never created.
    const capacityBytes = await readCapacity(this.dir, this.index);
    return withLock(this.dir, this.index, async () => {
      const owners = await readOwners(this.dir, this.index);
      let used = 0;
      for (const owner of owners) {
        if (owner.pid === this.pid) continue;
        if (isAlive(owner.pid)) used += owner.gpuBytes;
        else await unlink(ownerFile(this.dir, this.index, owner.pid)).catch(() => {});
      }
      const freeBytes = Math.max(0, capacityBytes - used - this.gpuBytes);
      const sized = typeof want === 'number' ? { bytes: want } : want({ capacityBytes, freeBytes });
      if ('refusal' in sized) return { ok: false, capacityBytes, freeBytes, refusal: sized.refusal };
      if (sized.bytes > freeBytes) return { ok: false, capacityBytes, freeBytes };
      this.gpuBytes += sized.bytes;
      await this.write();
      return { ok: true, bytes: sized.bytes };
    });
  }

  /** Gives back `bytes`; needs no lock, since only a decrease and only this process's file. */
  async release(bytes: number): Promise<void> {
    this.gpuBytes = Math.max(0, this.gpuBytes - bytes);
    await this.write();
  }

  /** Records the host-RAM copy this process holds (weights parked in host RAM). */
  async setHostRam(bytes: number): Promise<void> {
    this.hostRamBytes = bytes;
    await this.write();
  }

  /** On a clean exit: synchronous, so it completes before the process does. */
  dropSync(): void {
    try {
      unlinkSync(ownerFile(this.dir, this.index, this.pid));
    } catch {
      // never written, or already gone
    }
  }

  private async write(): Promise<void> {
    const owner: GpuOwner = {
      pid: this.pid,
      gpuBytes: this.gpuBytes,
      hostRamBytes: this.hostRamBytes,
      label: this.label,
    };
    await writeAtomically(ownerFile(this.dir, this.index, this.pid), JSON.stringify(owner));
  }
}

async function readCapacity(dir: string, index: number): Promise<number> {
  let raw: string;
  try {
    raw = await readFile(join(deviceDir(dir, index), 'device.json'), 'utf8');
  } catch {
    throw new NoSimulatedGpu(`no simulated GPU ${index} under ${dir}`);
  }
  return (JSON.parse(raw) as { capacity_bytes: number }).capacity_bytes;
}

async function readOwners(dir: string, index: number): Promise<GpuOwner[]> {
  const names = await readdir(ownersDir(dir, index)).catch(() => [] as string[]);
  const owners: GpuOwner[] = [];
  for (const name of names) {
    if (!name.endsWith('.json')) continue; // a temporary file being renamed into place
    const raw = await readFile(join(ownersDir(dir, index), name), 'utf8').catch(() => undefined);
    if (raw !== undefined) owners.push(JSON.parse(raw) as GpuOwner);
  }
  return owners;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: it exists but belongs to someone else.
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

let temporaries = 0;

/** Readers never see half a file. */
async function writeAtomically(path: string, content: string): Promise<void> {
  const temporary = `${path}.${process.pid}.${++temporaries}.tmp`;
  await writeFile(temporary, content);
  await rename(temporary, path);
}

async function withLock<T>(dir: string, index: number, critical: () => Promise<T>): Promise<T> {
  const lock = lockDir(dir, index);
  for (;;) {
    try {
      await mkdir(lock);
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      const age = await stat(lock).then(
        (s) => Date.now() - s.mtimeMs,
        () => 0,
      );
      if (age > STALE_LOCK_MS) await rmdir(lock).catch(() => {});
      else await sleep(2);
    }
  }
  try {
    return await critical();
  } finally {
    await rmdir(lock);
  }
}
