/**
 * The host scheduler's arithmetic, pure so it is unit-tested apart from Temporal: what fits on a GPU,
 * what host RAM parked copies leave, how room is made for a model (and when it must not be), which
 * waiting model goes next and how each victim gives its memory back.
 */
import { parkPlan } from '../engines/rules.js';
import { perGpuBytes } from '../engines/parallelism.js';
import { type ApiError, apiErrors, type KeptHolder } from '../domain/catalogue.js';
import type { InstanceState, MemoryKind, ParkTier } from '../domain/vocabulary.js';
import type {
  Demand,
  DeploymentView,
  HostLedger,
  InstanceRef,
  LedgerEntry,
  ParkResult,
  VictimPlan,
} from '../api/lifecycle.js';
import type { StoreActivities } from '../activities/storeActivities.js';

/** A measured checkpoint: what a deployment brings to a GPU. */
export type Checkpoint = NonNullable<DeploymentView['checkpoint']>;

/**
 * What an instance's engine keeps on its GPUs while parked: its CUDA context, graphs and what else
 * sleep does not free (none counted for a checkpoint measured before residues were).
 */
export const residueOf = (c: Checkpoint): number => c.residueBytes ?? 0;

/** GPU memory a ready instance holds: its weights, its KV cache and its residue, across all its GPUs (`heldOnEach` on each). */
export const gpuNeed = (c: Checkpoint): number => c.weightBytes + c.kvBytes + residueOf(c);

/**
 * GPU memory an instance holds parked at `tier`: its residue (as its host measured it after the park,
 * else the checkpoint's), and its weights for `kv_only`.
 */
const parkedGpuBytes = (c: Checkpoint, tier: LedgerEntry['tier'], measuredResidue?: number): number =>
  (measuredResidue ?? residueOf(c)) + (tier === 'kv_only' ? c.weightBytes : 0);

/**
 * What a park's measurement counts, all the instance's GPUs together: the most its engine holds on any
 * of them, on each (the ledger splits what an instance holds evenly). None when nothing was read.
 */
export function measuredResidue(park: ParkResult | undefined, gpuIndexes: readonly number[]): number | undefined {
  const onGpus = park?.residueOnGpus;
  if (onGpus === undefined) return undefined;
  const mine = gpuIndexes.length > 0 ? onGpus.filter((g) => gpuIndexes.includes(g.gpuIndex)) : onGpus;
  const count = gpuIndexes.length > 0 ? gpuIndexes.length : onGpus.length;
  return Math.max(0, ...mine.map((g) => g.bytes)) * count;
}

/** Host RAM an instance holds parked at `tier`: only a `host_ram` park keeps a copy of its weights. */
const parkedHostRamBytes = (c: Checkpoint, tier: LedgerEntry['tier']): number =>
  tier === 'host_ram' ? c.weightBytes : 0;

/**
 * States in which an instance holds (or has reserved) all it holds ready. One on its way out
 * (`parking`, `stopping`) keeps its memory until its engine gave it back: counting only what its
 * tier keeps would let another model be placed on memory that is not free yet.
 */
const holdsGpu: ReadonlySet<InstanceState> = new Set([
  'starting',
  'ready',
  'draining',
  'waking',
  'parking',
  'stopping',
]);

/**
 * What an instance holds in `state` at `tier`: the one rule for the scheduler's ledger and the rows
 * `list deployments`, placement and the load endpoint read. A parking instance also holds the host
 * RAM its copy is being written to; a parked one only what its tier keeps; a stopped one nothing.
 * An unmeasured checkpoint (null) holds nothing anyone can count. `measuredResidue`: what a parked
 * instance's host measured its engine still holds.
 */
export function holdings(
  c: Checkpoint | null,
  state: InstanceState,
  tier: LedgerEntry['tier'],
  measuredResidue?: number,
): { gpuBytes: number; hostRamBytes: number } {
  if (c === null) return { gpuBytes: 0, hostRamBytes: 0 };
  const hostRamBytes = state === 'parked' || state === 'parking' ? parkedHostRamBytes(c, tier) : 0;
  if (holdsGpu.has(state)) return { gpuBytes: gpuNeed(c), hostRamBytes };
  if (state === 'parked') return { gpuBytes: parkedGpuBytes(c, tier, measuredResidue), hostRamBytes };
  return { gpuBytes: 0, hostRamBytes: 0 };
}

/**
 * An instance's row in the store, for `list deployments`, placement and the load endpoint: its state,
 * what it holds and on which of the host's GPUs (none once stopped: its next start places it anew),
 * and, parked, the residue its host measured.
 */
export function instanceRow(
  hostId: string,
  instance: InstanceRef,
  state: InstanceState,
  tier: ParkTier | null,
  c: Checkpoint | null,
  gpuIndexes: readonly number[] = [],
  measuredResidue?: number,
): Parameters<StoreActivities['saveInstance']>[0] {
  const { deploymentId, instanceIndex: index, generation } = instance;
  const residue = state === 'parked' ? measuredResidue : undefined;
  return {
    deploymentId,
    index,
    generation,
    hostId,
    observedState: state,
    parkTier: tier,
    ...holdings(c, state, tier, residue),
    gpuIndexes: state === 'stopped' ? [] : [...gpuIndexes],
    residueBytes: residue ?? null,
  };
}

/** What `entry` holds on each of its GPUs. */
export const heldOnEach = (entry: Pick<LedgerEntry, 'gpuBytes' | 'gpuIndexes'>): number =>
  perGpuBytes(entry.gpuBytes, entry.gpuIndexes.length);

/**
 * What bringing `c` up on `gpus` GPUs takes on each beyond what its `existing` entry holds. A parked
 * engine whose residue its host measured wakes beside it, whatever it is: the wake takes what the
 * checkpoint says the park gave back (a measured residue above the reserved one is not counted as
 * room the wake already has).
 */
export function bringUpNeedOnEach(c: Checkpoint, gpus: number, existing: LedgerEntry | undefined): number {
  if (existing?.state === 'parked' && existing.residueBytes !== undefined)
    return perGpuBytes(gpuNeed(c), gpus) - perGpuBytes(parkedGpuBytes(c, existing.tier), gpus);
  return perGpuBytes(gpuNeed(c), gpus) - (existing ? heldOnEach(existing) : 0);
}

export function gpuFree(ledger: HostLedger, gpuIndex: number): number {
  const gpu = ledger.gpus.find((g) => g.index === gpuIndex);
  const held = ledger.entries.filter((e) => e.gpuIndexes.includes(gpuIndex)).reduce((sum, e) => sum + heldOnEach(e), 0);
  return (gpu?.memoryBytes ?? 0) - held;
}

/**
 * A ledger entry written before instances could span GPUs names one `gpuIndex`: read as a list of
 * one, so a scheduler state or a switch input from before it goes on where it was.
 */
export const gpuIndexesOf = (x: { gpuIndexes?: number[]; gpuIndex?: number }): number[] =>
  x.gpuIndexes ?? [x.gpuIndex ?? 0];

export function hostRamFree(ledger: HostLedger): number {
  return ledger.hostRamBytes - ledger.entries.reduce((sum, e) => sum + e.hostRamBytes, 0);
}

/** What the scheduler knows of each deployment that holds GPU memory, to decide whether it may yield it. */
export interface Holder {
  entry: LedgerEntry;
  name: string;
  /** `lifecycle.activation: explicit`: only an operator moves it. */
  explicit: boolean;
  /** `lifecycle.warm`: stays loaded; requests may still start or wake it. */
  warm: boolean;
  /** Requests are waiting for it now: it is never parked to make room. */
  waiting: boolean;
  /** When it last served or became ready: the least recently used yields first. */
  lastUsedMs: number;
  /** What its engine keeps on its GPUs once parked, all of them together (a ready victim frees the rest); none when absent. */
  residueBytes?: number;
}

export type RoomPlan =
  | { kind: 'fits'; gpuIndexes: number[] }
  | { kind: 'evict'; gpuIndexes: number[]; victims: Holder[] }
  /** Room can be made only by parking a model with waiting requests, or `evict` was not allowed: wait for memory. */
  | { kind: 'wait' }
  /** Only models kept loaded by explicit activation or `warm` hold the memory: refused for capacity. */
  | { kind: 'refused'; holders: KeptHolder[] };

const mayYield = (h: Holder) => !h.explicit && !h.warm && !h.waiting;
const kept = (h: Holder) => h.explicit || h.warm;
/** Explicit activation says more than `warm` (it also keeps requests from starting it), so it is the one named. */
const keptHolder = (h: Holder): KeptHolder => ({ name: h.name, keptBy: h.explicit ? 'explicit' : 'warm' });

/** Every way to choose `count` of `indexes`, in order: [0,1], [0,2], … [1,2] … so every replay agrees. */
export function gpuSets(indexes: readonly number[], count: number): number[][] {
  if (count === 0) return [[]];
  return indexes.flatMap((first, i) =>
    indexes.length - i < count ? [] : gpuSets(indexes.slice(i + 1), count - 1).map((rest) => [first, ...rest]),
  );
}

/**
 * What a victim still holds on each of its GPUs once released: a parked one is stopped and keeps
 * nothing, a ready one parks and keeps its engine's residue.
 */
export const keptOnEach = (h: Holder): number =>
  h.entry.state === 'parked' ? 0 : perGpuBytes(h.residueBytes ?? 0, h.entry.gpuIndexes.length);

/** What a victim frees on each of its GPUs: all it holds but what it keeps. */
const freesOnEach = (h: Holder): number => heldOnEach(h.entry) - keptOnEach(h);

/** The GPUs of `free` (what each holds free now) still short of `need` once `victims` are released. */
function shortWith(free: ReadonlyMap<number, number>, victims: readonly Holder[], need: number): number[] {
  const after = new Map(free);
  for (const h of victims)
    for (const g of h.entry.gpuIndexes) if (after.has(g)) after.set(g, after.get(g)! + freesOnEach(h));
  return [...after].filter(([, bytes]) => bytes < need).map(([g]) => g);
}

const roomWith = (free: ReadonlyMap<number, number>, victims: readonly Holder[], need: number): boolean =>
  shortWith(free, victims, need).length === 0;

/**
 * How a scheduler chooses where a model goes and what yields to it: `cheapest` (planRoom), or as
 * schedulers begun before it chose, which their histories replay: `cheapest_by_sharing` broke a tie
 * between sets of GPUs by the engines sharing them, not by when their victims were last used;
 * `first_fit_lru` took the first set that fits, else the fewest victims, each set's parked ones
 * first, then least recently used, until it fits.
 */
export type RoomPolicy = 'cheapest' | 'cheapest_by_sharing' | 'first_fit_lru';

/** Parked holders first: stopping one frees what its engine still holds and no model that serves. */
const parkedFirst = (a: Holder, b: Holder) => Number(b.entry.state === 'parked') - Number(a.entry.state === 'parked');
/** The cheaper of two models to release: parked first, then the fewer GPU bytes (a smaller wake back), then the least recently used. */
const cheaperFirst = (a: Holder, b: Holder) =>
  parkedFirst(a, b) || a.entry.gpuBytes - b.entry.gpuBytes || a.lastUsedMs - b.lastUsedMs;
const leastRecentlyUsedFirst = (a: Holder, b: Holder) => parkedFirst(a, b) || a.lastUsedMs - b.lastUsedMs;

/**
 * The models to release so that `need` fits on every GPU of `free`, among `candidates` (models that
 * may yield): the cheapest one that makes room alone; else the cheapest first until it fits, then
 * without any that turned out not to be needed (the dearest dropped first). Undefined when even all
 * of them do not make room.
 */
function cheapestVictims(
  free: ReadonlyMap<number, number>,
  candidates: readonly Holder[],
  need: number,
  policy: RoomPolicy,
): Holder[] | undefined {
  const legacy = policy === 'first_fit_lru';
  const byCost = [...candidates].sort(legacy ? leastRecentlyUsedFirst : cheaperFirst);
  const alone = legacy ? undefined : byCost.find((h) => roomWith(free, [h], need));
  if (alone) return [alone];
  const victims: Holder[] = [];
  for (const h of byCost) {
    const short = shortWith(free, victims, need);
    if (short.length === 0) break;
    if (h.entry.gpuIndexes.some((g) => short.includes(g))) victims.push(h);
  }
  if (!roomWith(free, victims, need)) return undefined;
  if (legacy) return victims;
  for (const h of [...victims].reverse()) {
    const without = victims.filter((v) => v !== h);
    if (roomWith(free, without, need)) victims.splice(victims.indexOf(h), 1);
  }
  return victims;
}

/**
 * What room one set of GPUs can give: it fits, or the cheapest victims that free it (parked ones
 * first, whose engines are stopped to free what they still hold; a victim on several GPUs frees
 * each), or what stands in the way: models with waiting requests (a wait) or models kept loaded
 * (named in a refusal). `parkedMayStop` false: only ready models yield.
 */
function roomOn(
  ledger: HostLedger,
  gpuIndexes: number[],
  need: number,
  holders: Holder[],
  parkedMayStop: boolean,
  policy: RoomPolicy,
): { victims: Holder[] } | { blockedByWaiting: boolean; kept: Holder[] } {
  const free = new Map(gpuIndexes.map((g) => [g, gpuFree(ledger, g)]));
  if (roomWith(free, [], need)) return { victims: [] };
  const yielding = (h: Holder) => h.entry.state === 'ready' || (parkedMayStop && h.entry.state === 'parked');
  const onSet = holders.filter(
    (h) => yielding(h) && h.entry.gpuBytes > 0 && h.entry.gpuIndexes.some((g) => free.has(g)),
  );
  const victims = cheapestVictims(free, onSet.filter(mayYield), need, policy);
  if (victims) return { victims };
  // Would the memory come free if the models with waiting requests yielded too? Then it is a wait.
  const blockedByWaiting = roomWith(
    free,
    onSet.filter((h) => mayYield(h) || (h.waiting && !kept(h))),
    need,
  );
  return { blockedByWaiting, kept: onSet.filter(kept) };
}

/** States in which an instance has no engine on its GPUs: nothing of it will wake there. */
const noEngine: ReadonlySet<InstanceState> = new Set(['stopped', 'failed']);

/**
 * Engines on any GPU of `gpuIndexes`, ready, parked or on their way, but those in `fixed`: each
 * parked one will want its card back, since an engine wakes on the GPUs it was launched on.
 */
const crowding = (ledger: HostLedger, gpuIndexes: readonly number[], fixed: ReadonlySet<string>): number =>
  ledger.entries.filter(
    (e) => !noEngine.has(e.state) && !fixed.has(e.deploymentId) && e.gpuIndexes.some((g) => gpuIndexes.includes(g)),
  ).length;

/** GPU bytes `victims` give back. */
const releasedBytes = (victims: readonly Holder[]): number => victims.reduce((sum, h) => sum + h.entry.gpuBytes, 0);

/**
 * How to find `need` bytes on each of `count` GPUs, chosen among `gpuIndexes` (a parked instance
 * wakes where it is: its own GPUs). Among the sets that fit, the one fewest engines (ready or
 * parked) already share, so that fewer wait to wake there, counting none kept loaded (explicit or
 * warm): those never yield, so models pack around them, leaving whole cards to larger ones (spread,
 * four explicit models that fit two cards left the last 8B one no card); else the set that needs the
 * fewest victims, then the fewest GPU bytes released, then whose victims were used least recently,
 * then the least shared. Ties: the first in index order.
 * Victims are ready instances that may yield, and parked ones holding memory when `parkedMayStop`;
 * `evict` false never parks. `policy` (default `cheapest`) is the older rule only for a scheduler
 * that began under it.
 */
export function planRoom(input: {
  ledger: HostLedger;
  gpuIndexes: number[];
  count: number;
  need: number;
  holders: Holder[];
  evict: boolean;
  /** Parked instances holding memory (their residue) may be stopped to free it (false in histories from before). */
  parkedMayStop?: boolean;
  policy?: RoomPolicy;
}): RoomPlan {
  const { ledger, need, holders, evict, policy = 'cheapest' } = input;
  const fixed = new Set(holders.filter(kept).map((h) => h.entry.deploymentId));
  // The oldest rule counts no sharing: the first set that fits, else the fewest victims.
  const shared = (gpuIndexes: number[]) => (policy === 'first_fit_lru' ? 0 : crowding(ledger, gpuIndexes, fixed));
  let fits: { gpuIndexes: number[]; crowding: number } | undefined;
  let best: { gpuIndexes: number[]; victims: Holder[]; crowding: number } | undefined;
  let blockedByWaiting = false;
  const keptHolders = new Map<string, KeptHolder>();
  for (const gpuIndexes of gpuSets(input.gpuIndexes, input.count)) {
    const room = roomOn(ledger, gpuIndexes, need, holders, input.parkedMayStop ?? false, policy);
    if ('victims' in room) {
      const option = { gpuIndexes, victims: room.victims, crowding: shared(gpuIndexes) };
      if (room.victims.length === 0) {
        if (!fits || option.crowding < fits.crowding) fits = option;
      } else if (!best || dearer(best, option, policy)) best = option;
      continue;
    }
    if (room.blockedByWaiting) blockedByWaiting = true;
    else for (const h of room.kept) keptHolders.set(h.name, keptHolder(h));
  }
  if (fits) return { kind: 'fits', gpuIndexes: fits.gpuIndexes };
  if (best) return evict ? { kind: 'evict', gpuIndexes: best.gpuIndexes, victims: best.victims } : { kind: 'wait' };
  if (blockedByWaiting || keptHolders.size === 0) return { kind: 'wait' };
  return { kind: 'refused', holders: [...keptHolders.values()].sort((a, b) => (a.name < b.name ? -1 : 1)) };
}

/** When the most recently used of `victims` was last used: the sooner one of them is asked for again, the dearer. */
const lastUsedOf = (victims: readonly Holder[]): number => Math.max(...victims.map((h) => h.lastUsedMs));

/**
 * True when making room as `a` does costs more than as `b`: more victims, then more bytes, then
 * victims used more recently (a model just asked for is likely to be asked for again, and each ask
 * would take its GPU back), then more engines sharing.
 */
function dearer(
  a: { victims: Holder[]; crowding: number },
  b: { victims: Holder[]; crowding: number },
  policy: RoomPolicy,
): boolean {
  const legacy = policy === 'first_fit_lru';
  const bytes = legacy ? 0 : releasedBytes(a.victims) - releasedBytes(b.victims);
  const recency = policy === 'cheapest' ? lastUsedOf(a.victims) - lastUsedOf(b.victims) : 0;
  const order = a.victims.length - b.victims.length || bytes || recency || a.crowding - b.crowding;
  return order > 0;
}

/**
 * The order models go in: the deployments with waiting requests, the one whose oldest request has
 * waited longest first (ties: the lower deployment ID, so every replay agrees).
 */
export function byLongestWait(demands: readonly Demand[]): Demand[] {
  return demands
    .filter((d) => d.waiting > 0)
    .sort((a, b) => a.oldestSinceMs - b.oldestSinceMs || (a.deploymentId < b.deploymentId ? -1 : 1));
}

/** An instance to release and its deployment as the store describes it. */
export interface VictimFacts {
  entry: LedgerEntry;
  deployment: DeploymentView & { checkpoint: Checkpoint };
}

/** How a model gives back its memory, or why it may not: the error the operator's command gets. */
export type VictimPlanOrRefusal = VictimPlan | { kind: 'refused'; error: ApiError };

/**
 * How instances released together give back their memory: the one decision of every path that
 * takes a model away (a switch's victims, an operator's park or preinitialize, an idle timer), made
 * as they are released. Each parks at the tier parkPlan gives for the host RAM left once the ones
 * before it took their copies (a copy that does not fit parks deep; only an engine whose tier was
 * fixed at launch, or `host_backed`, stops for want of room), or stops.
 *
 * - A model its engine cannot wake correctly is refused to an operator (capability_missing); a
 *   switch or a timer stops it.
 * - An explicit model is never stopped for want of room to park: refused (parked_capacity).
 *
 * `hostRamFreeBytes` in the answer: what they leave free, for the tier the switch's target launches for.
 */
export function planVictims(input: {
  victims: VictimFacts[];
  memoryKind: (gpuIndexes: number[]) => MemoryKind;
  hostRamFreeBytes: number;
  /** An operator's command: it hears a refusal instead of a stop. */
  operator: boolean;
}): { plans: VictimPlanOrRefusal[]; hostRamFreeBytes: number } {
  let ramFree = input.hostRamFreeBytes;
  const plans = input.victims.map(({ entry, deployment }): VictimPlanOrRefusal => {
    // Parked already: stopping its engine frees what it still holds.
    if (entry.state === 'parked') return { kind: 'stop', reason: 'parked_residue' };
    const plan = parkPlan({
      spec: deployment.spec,
      memoryKind: input.memoryKind(entry.gpuIndexes),
      weightsBytes: deployment.checkpoint.weightBytes,
      hostRamFreeBytes: ramFree,
      launchedTier: entry.tier,
    });
    if (plan.kind === 'refused') return input.operator ? plan : { kind: 'stop', reason: 'engine_cannot_park' };
    if (plan.kind === 'stop' && plan.reason === 'no_room' && deployment.explicit)
      return { kind: 'refused', error: apiErrors.parkedCapacity(deployment.id) };
    if (plan.kind === 'park') ramFree -= parkedHostRamBytes(deployment.checkpoint, plan.tier);
    return plan;
  });
  return { plans, hostRamFreeBytes: ramFree };
}

/**
 * The tier a new engine is launched for: the one it would park at with `hostRamFreeBytes` (what the
 * switch that starts it leaves, its victims' copies counted: an engine whose tier is fixed at launch
 * must not count on room they take); null when it cannot park.
 */
export function launchTier(input: {
  deployment: DeploymentView & { checkpoint: Checkpoint };
  memoryKind: MemoryKind;
  hostRamFreeBytes: number;
}): ParkTier | null {
  const { deployment, memoryKind, hostRamFreeBytes } = input;
  const plan = parkPlan({
    spec: deployment.spec,
    memoryKind,
    weightsBytes: deployment.checkpoint.weightBytes,
    hostRamFreeBytes,
  });
  return plan.kind === 'park' ? plan.tier : null;
}
