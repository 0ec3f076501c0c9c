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

/** A device that has no room for what one rank tries to take on it. */
export interface NoRoom {
  index: number;
  triedBytes: number;
  capacityBytes: number;
  freeBytes: number;
}

/** All or nothing: what each device took, the sizing's own refusal, or the device that had no room. */
export type Allocation = { ok: true; bytes: number[] } | { ok: false; refusal: string } | { ok: false; noRoom: NoRoom };

/** A device's room as an engine's rank sees it at start. */
export interface Room {
  index: number;
  capacityBytes: number;
  freeBytes: number;
}

/** How much each rank takes given the rooms its devices have, or the line the engine dies with. */
export type Sizing = (rooms: readonly Room[]) => { bytes: number[] } | { refusal: string };

/**
 * One process's holding on the devices its ranks run on, in their order. Every change is written to
 * its owner file on each device; an increase is checked, under every device's lock at once, against
 * what the live owners hold, so the ranks of one engine take their memory together or not at all.
 */
export class GpuHolding {
  private readonly pid = process.pid;
  private readonly gpuBytes: number[];
  private readonly hostRamBytes: number[];

  constructor(
    readonly dir: string,
    readonly indexes: readonly number[],
    private readonly label: string,
  ) {
    this.gpuBytes = indexes.map(() => 0);
    this.hostRamBytes = indexes.map(() => 0);
  }

  /**
   * Takes `want[i]` more on device i, or nothing when one has no room. A sizing decides the bytes from
   * the rooms under the same locks, as an engine sizes its KV cache from what its ranks find free.
   */
  async allocate(want: readonly number[] | Sizing): Promise<Allocation> {
    // Outside the locks, whose folders do not exist on a device never created.
    const capacities = await Promise.all(this.indexes.map((index) => readCapacity(this.dir, index)));
    return withLocks(this.dir, this.indexes, async () => {
      const rooms: Room[] = [];
      for (const [i, index] of this.indexes.entries()) {
        const used = await this.othersHold(index);
        rooms.push({
          index,
          capacityBytes: capacities[i]!,
          freeBytes: Math.max(0, capacities[i]! - used - this.gpuBytes[i]!),
        });
      }
      const sized = typeof want === 'function' ? want(rooms) : { bytes: [...want] };
      if ('refusal' in sized) return { ok: false, refusal: sized.refusal };
      const short = rooms.findIndex((room, i) => sized.bytes[i]! > room.freeBytes);
      if (short >= 0) return { ok: false, noRoom: { ...rooms[short]!, triedBytes: sized.bytes[short]! } };
      sized.bytes.forEach((bytes, i) => (this.gpuBytes[i]! += bytes));
      await this.write();
      return { ok: true, bytes: sized.bytes };
    });
  }

  /** Gives back `bytes[i]` on device i; needs no lock, since only a decrease and only this process's files. */
  async release(bytes: readonly number[]): Promise<void> {
    bytes.forEach((b, i) => (this.gpuBytes[i] = Math.max(0, this.gpuBytes[i]! - b)));
    await this.write();
  }

  /** Records the host-RAM copy this process holds for each device's rank (weights parked in host RAM). */
  async setHostRam(bytes: readonly number[]): Promise<void> {
    bytes.forEach((b, i) => (this.hostRamBytes[i] = b));
    await this.write();
  }

  /** On a clean exit: synchronous, so it completes before the process does. */
  dropSync(): void {
    for (const index of this.indexes) {
      try {
        unlinkSync(ownerFile(this.dir, index, this.pid));
      } catch {
        // never written, or already gone
      }
    }
  }

  /** What the other live owners hold on `index`; the files of dead ones are deleted. Under the device's lock. */
  private async othersHold(index: number): Promise<number> {
    let used = 0;
    for (const owner of await readOwners(this.dir, index)) {
      if (owner.pid === this.pid) continue;
      if (isAlive(owner.pid)) used += owner.gpuBytes;
      else await unlink(ownerFile(this.dir, index, owner.pid)).catch(() => {});
    }
    return used;
  }

  private async write(): Promise<void> {
    await Promise.all(
      this.indexes.map((index, i) => {
        const owner: GpuOwner = {
          pid: this.pid,
          gpuBytes: this.gpuBytes[i]!,
          hostRamBytes: this.hostRamBytes[i]!,
          label: this.label,
        };
        return writeAtomically(ownerFile(this.dir, index, this.pid), JSON.stringify(owner));
      }),
    );
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

/** Every device's lock, taken in index order: two engines sharing devices never wait on each other in a circle. */
function withLocks<T>(dir: string, indexes: readonly number[], critical: () => Promise<T>): Promise<T> {
  return [...new Set(indexes)]
    .sort((a, b) => b - a)
    .reduce<() => Promise<T>>((inner, index) => () => withLock(dir, index, inner), critical)();
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
