import { describe, expect, it } from 'vitest';
import { cannotParkReasons } from '../engines/rules.js';
import { apiErrors } from '../domain/catalogue.js';
import { schedulerSettings } from '../gateway/lifecycleClient.js';
import { deploymentDocument } from '../settings/deploymentDocument.js';
import { loadSettings } from '../settings/load.js';
import type { DeploymentView, HostLedger, LedgerEntry } from '../api/lifecycle.js';
import {
  bringUpNeedOnEach,
  byLongestWait,
  gpuFree,
  gpuNeed,
  type Holder,
  holdings,
  hostRamFree,
  launchTier,
  measuredResidue,
  planRoom,
  planVictims,
  type RoomPlan,
  type RoomPolicy,
  type VictimFacts,
} from '../workflows/ledger.js';

const GiB = 2 ** 30;
const checkpoint = { weightBytes: 4 * GiB, kvBytes: 1 * GiB };

const entry = (deploymentId: string, fields: Partial<LedgerEntry> = {}): LedgerEntry => ({
  deploymentId,
  name: deploymentId,
  instance: { deploymentId, instanceIndex: 0, generation: 1 },
  state: 'ready',
  tier: 'host_ram',
  gpuIndexes: [0],
  gpuBytes: gpuNeed(checkpoint),
  hostRamBytes: 0,
  ...fields,
});

/** One 12 GiB discrete card and 16 GiB of host RAM, unless a case says otherwise. */
const ledger = (entries: LedgerEntry[], more: Partial<HostLedger> = {}): HostLedger => ({
  hostId: 'gpu-box',
  gpus: [{ index: 0, memoryBytes: 12 * GiB, memoryKind: 'discrete' }],
  hostRamBytes: 16 * GiB,
  entries,
  runningSwitchId: null,
  ...more,
});

const holder = (e: LedgerEntry, fields: Partial<Holder> = {}): Holder => ({
  entry: e,
  name: e.name,
  explicit: false,
  warm: false,
  waiting: false,
  lastUsedMs: 0,
  ...fields,
});

describe('what a host holds', () => {
  it('needs weights and KV cache on one GPU', () => {
    expect(gpuNeed(checkpoint)).toBe(5 * GiB);
    expect(gpuFree(ledger([entry('a'), entry('b', { gpuIndexes: [1] })]), 0)).toBe(7 * GiB);
  });

  it('counts a parked copy in host RAM only at the host_ram tier, and kv_only weights on the GPU', () => {
    expect(holdings(checkpoint, 'ready', 'host_ram')).toEqual({ gpuBytes: 5 * GiB, hostRamBytes: 0 });
    expect(holdings(checkpoint, 'parked', 'host_ram')).toEqual({ gpuBytes: 0, hostRamBytes: 4 * GiB });
    expect(holdings(checkpoint, 'parked', 'deep')).toEqual({ gpuBytes: 0, hostRamBytes: 0 });
    expect(holdings(checkpoint, 'parked', 'kv_only')).toEqual({ gpuBytes: 4 * GiB, hostRamBytes: 0 });
    expect(holdings(checkpoint, 'stopped', null)).toEqual({ gpuBytes: 0, hostRamBytes: 0 });
    expect(hostRamFree(ledger([entry('a', { state: 'parked', gpuBytes: 0, hostRamBytes: 4 * GiB })]))).toBe(12 * GiB);
  });

  it('counts what a parked engine keeps (its residue) on the GPU, and the residue within what it holds running', () => {
    const keeps = { ...checkpoint, residueBytes: 2 * GiB };
    expect(gpuNeed(keeps)).toBe(7 * GiB);
    expect(holdings(keeps, 'parked', 'host_ram')).toEqual({ gpuBytes: 2 * GiB, hostRamBytes: 4 * GiB });
    expect(holdings(keeps, 'parked', 'deep')).toEqual({ gpuBytes: 2 * GiB, hostRamBytes: 0 });
    expect(holdings(keeps, 'parked', 'kv_only')).toEqual({ gpuBytes: 6 * GiB, hostRamBytes: 0 });
    expect(holdings(keeps, 'stopped', null)).toEqual({ gpuBytes: 0, hostRamBytes: 0 });
  });

  it("counts a parked engine at the residue its host measured after the park, its GPUs' most on each, instead of the checkpoint's", () => {
    const keeps = { ...checkpoint, residueBytes: 2 * GiB };
    expect(holdings(keeps, 'parked', 'deep', GiB / 2)).toEqual({ gpuBytes: GiB / 2, hostRamBytes: 0 });
    expect(holdings(keeps, 'parked', 'kv_only', 3 * GiB)).toEqual({ gpuBytes: 7 * GiB, hostRamBytes: 0 });
    // Running again, it holds its reservation: the measurement was of its park.
    expect(holdings(keeps, 'ready', 'deep', GiB / 2)).toEqual({ gpuBytes: 7 * GiB, hostRamBytes: 0 });
    const park = {
      residueOnGpus: [
        { gpuIndex: 2, bytes: GiB },
        { gpuIndex: 3, bytes: 3 * GiB },
      ],
    };
    expect(measuredResidue(park, [2, 3])).toBe(6 * GiB);
    expect(measuredResidue({}, [2, 3])).toBeUndefined();
    expect(measuredResidue(undefined, [0])).toBeUndefined();
  });

  it("wakes a parked engine whose residue was measured beside what it keeps, counting only what the checkpoint's park gave back", () => {
    const keeps = { ...checkpoint, residueBytes: 2 * GiB };
    const measured = (bytes: number) =>
      entry('a', { state: 'parked', tier: 'deep', gpuBytes: bytes, residueBytes: bytes });
    // 4 GiB kept, not the 2 reserved: the wake still takes weights and KV cache, 5 GiB, not 7 - 4.
    expect(bringUpNeedOnEach(keeps, 1, measured(4 * GiB))).toBe(5 * GiB);
    expect(bringUpNeedOnEach(keeps, 1, measured(GiB))).toBe(5 * GiB);
    expect(bringUpNeedOnEach(keeps, 1, entry('a', { state: 'parked', tier: 'deep', gpuBytes: 2 * GiB }))).toBe(5 * GiB);
    expect(bringUpNeedOnEach(keeps, 1, undefined)).toBe(7 * GiB);
  });

  it('keeps counting all the GPU memory of a model on its way out until its park or stop finished', () => {
    for (const state of ['starting', 'waking', 'draining', 'stopping'] as const) {
      expect(holdings(checkpoint, state, 'host_ram')).toEqual({ gpuBytes: 5 * GiB, hostRamBytes: 0 });
    }
    // Parking: still on the GPU, and the host RAM its copy is written to is already taken.
    expect(holdings(checkpoint, 'parking', 'host_ram')).toEqual({ gpuBytes: 5 * GiB, hostRamBytes: 4 * GiB });
    expect(holdings(checkpoint, 'parking', 'deep')).toEqual({ gpuBytes: 5 * GiB, hostRamBytes: 0 });
    expect(holdings(checkpoint, 'failed', null)).toEqual({ gpuBytes: 0, hostRamBytes: 0 });
    expect(holdings(null, 'ready', null)).toEqual({ gpuBytes: 0, hostRamBytes: 0 });
  });
});

describe('room for a model', () => {
  const full = ledger([entry('a'), entry('b')], {
    gpus: [{ index: 0, memoryBytes: 10 * GiB, memoryKind: 'discrete' }],
  });
  const plan = (holders: Holder[], evict = true, l = full) =>
    planRoom({ ledger: l, gpuIndexes: [0], count: 1, need: 5 * GiB, holders, evict });

  it('fits without touching anything when the GPU has room', () => {
    expect(
      planRoom({ ledger: ledger([entry('a')]), gpuIndexes: [0], count: 1, need: 5 * GiB, holders: [], evict: false }),
    ).toEqual({ kind: 'fits', gpuIndexes: [0] });
  });

  it('evicts the least recently used idle model, and only as many as it needs', () => {
    const [a, b] = full.entries as [LedgerEntry, LedgerEntry];
    const room = plan([holder(a, { lastUsedMs: 200 }), holder(b, { lastUsedMs: 100 })]);
    expect(room).toMatchObject({ kind: 'evict', gpuIndexes: [0] });
    expect(room.kind === 'evict' && room.victims.map((v) => v.name)).toEqual(['b']);
  });

  it('never chooses a model with waiting requests: it takes the other, or waits', () => {
    const [a, b] = full.entries as [LedgerEntry, LedgerEntry];
    const room = plan([holder(a, { lastUsedMs: 200 }), holder(b, { lastUsedMs: 100, waiting: true })]);
    expect(room.kind === 'evict' && room.victims.map((v) => v.name)).toEqual(['a']);
    expect(plan([holder(a, { waiting: true }), holder(b, { waiting: true })])).toEqual({ kind: 'wait' });
  });

  it('waits for memory instead of parking anything when evict is not allowed', () => {
    const [a, b] = full.entries as [LedgerEntry, LedgerEntry];
    expect(plan([holder(a), holder(b)], false)).toEqual({ kind: 'wait' });
  });

  it('is refused for capacity when only explicit or warm models hold the memory', () => {
    const [a, b] = full.entries as [LedgerEntry, LedgerEntry];
    expect(plan([holder(a, { explicit: true, warm: true }), holder(b, { warm: true })])).toEqual({
      kind: 'refused',
      holders: [
        { name: 'a', keptBy: 'explicit' },
        { name: 'b', keptBy: 'warm' },
      ],
    });
    expect(plan([holder(a, { explicit: true }), holder(b)], false)).toMatchObject({ kind: 'wait' });
  });

  it('never evicts a parked instance or one on another GPU', () => {
    const l = ledger(
      [entry('a', { gpuIndexes: [1] }), entry('b', { state: 'parked', gpuBytes: 4 * GiB, tier: 'kv_only' })],
      {
        gpus: [
          { index: 0, memoryBytes: 6 * GiB, memoryKind: 'discrete' },
          { index: 1, memoryBytes: 6 * GiB, memoryKind: 'discrete' },
        ],
      },
    );
    expect(
      plan(
        l.entries.map((e) => holder(e)),
        true,
        l,
      ),
    ).toEqual({ kind: 'wait' });
  });
});

describe('room beside parked engines that keep a residue', () => {
  const residue = 2 * GiB;
  // 10 GiB: a ready 5 GiB model (2 GiB of it kept once parked) and a parked one keeping 2 GiB; 3 GiB free.
  const l = ledger([entry('ready'), entry('parked', { state: 'parked', gpuBytes: residue, tier: 'deep' })], {
    gpus: [{ index: 0, memoryBytes: 10 * GiB, memoryKind: 'discrete' }],
  });
  const holders = l.entries.map((e) =>
    holder(e, { residueBytes: residue, lastUsedMs: e.state === 'parked' ? 500 : 0 }),
  );
  const victims = (need: number, parkedMayStop = true) => {
    const room = planRoom({ ledger: l, gpuIndexes: [0], count: 1, need, holders, evict: true, parkedMayStop });
    return room.kind === 'evict' ? room.victims.map((v) => v.name) : room.kind;
  };

  it('stops a parked engine first, however recently used, when what it keeps is enough', () => {
    expect(victims(5 * GiB)).toEqual(['parked']);
  });

  it('counts a ready victim as freeing all but the residue it keeps parked', () => {
    // 3 free + 2 from the parked one + 3 from the ready one (5 held, 2 kept) = 8 GiB.
    expect(victims(8 * GiB)).toEqual(['parked', 'ready']);
    expect(victims(9 * GiB)).toBe('wait');
  });

  it('leaves a parked engine alone in a history from before parked engines were stopped for room', () => {
    expect(victims(5 * GiB, false)).toEqual(['ready']);
  });

  it('plans a stop for a parked victim, whatever its engine could park at', () => {
    const facts = {
      entry: l.entries[1]!,
      deployment: {
        id: 'parked',
        name: 'parked',
        revision: 1,
        spec: deploymentDocument.parse({ name: 'parked', engine: 'vllm', model: 'm' }),
        operatorStopped: false,
        measureFailure: null,
        explicit: false,
        generation: 1,
        readyElsewhere: false,
        checkpoint: { ...checkpoint, residueBytes: residue },
      },
    } satisfies VictimFacts;
    expect(
      planVictims({ victims: [facts], memoryKind: () => 'discrete', hostRamFreeBytes: 16 * GiB, operator: false })
        .plans,
    ).toEqual([{ kind: 'stop', reason: 'parked_residue' }]);
  });
});

describe('room on several GPUs', () => {
  const gpus = (count: number, memoryBytes: number) =>
    Array.from({ length: count }, (_, index) => ({ index, memoryBytes, memoryKind: 'discrete' as const }));
  const eight = (entries: LedgerEntry[]) => ledger(entries, { gpus: gpus(8, 80 * GiB) });
  const fortyGib = (id: string, gpu: number) => entry(id, { gpuIndexes: [gpu], gpuBytes: 40 * GiB });

  it('counts an instance on several GPUs as its even share on each of them', () => {
    const wide = entry('wide', { gpuIndexes: [2, 5], gpuBytes: 60 * GiB });
    const l = eight([wide]);
    expect([0, 2, 5].map((g) => gpuFree(l, g))).toEqual([80 * GiB, 50 * GiB, 50 * GiB]);
  });

  it('holds eight 40 GiB models on eight 80 GiB GPUs with no park: each takes the next free GPU', () => {
    const placed: LedgerEntry[] = [];
    for (let i = 0; i < 8; i++) {
      const room = planRoom({
        ledger: eight(placed),
        gpuIndexes: [0, 1, 2, 3, 4, 5, 6, 7],
        count: 1,
        need: 60 * GiB,
        holders: placed.map((e) => holder(e)),
        evict: true,
      });
      expect(room).toEqual({ kind: 'fits', gpuIndexes: [i] });
      placed.push(entry(`m${i}`, { gpuIndexes: [i], gpuBytes: 60 * GiB }));
    }
  });

  it('parks the four single-GPU models a four-GPU model needs, not four times its bytes on one GPU', () => {
    const singles = [0, 1, 2, 3].map((g) => fortyGib(`s${g}`, g));
    const room = planRoom({
      ledger: ledger(singles, { gpus: gpus(4, 48 * GiB) }),
      gpuIndexes: [0, 1, 2, 3],
      count: 4,
      need: 30 * GiB,
      holders: singles.map((e, i) => holder(e, { lastUsedMs: i })),
      evict: true,
    });
    expect(room.kind === 'evict' && [room.gpuIndexes, room.victims.map((v) => v.name)]).toEqual([
      [0, 1, 2, 3],
      ['s0', 's1', 's2', 's3'],
    ]);
  });

  it("parks one model on two GPUs rather than two on one each, and the GPUs it frees are the target's", () => {
    const wide = entry('wide', { gpuIndexes: [0, 1], gpuBytes: 80 * GiB });
    const singles = [fortyGib('s2', 2), fortyGib('s3', 3)];
    const room = planRoom({
      ledger: ledger([wide, ...singles], { gpus: gpus(4, 48 * GiB) }),
      gpuIndexes: [0, 1, 2, 3],
      count: 2,
      need: 30 * GiB,
      // The single-GPU ones were used longer ago: by age alone they would go first.
      holders: [holder(wide, { lastUsedMs: 500 }), ...singles.map((e) => holder(e, { lastUsedMs: 1 }))],
      evict: true,
    });
    expect(room.kind === 'evict' && [room.gpuIndexes, room.victims.map((v) => v.name)]).toEqual([[0, 1], ['wide']]);
  });

  it('waits, not refuses, when a model with waiting requests holds one of the GPUs it needs', () => {
    const singles = [fortyGib('s0', 0), fortyGib('s1', 1)];
    const room = planRoom({
      ledger: ledger(singles, { gpus: gpus(2, 48 * GiB) }),
      gpuIndexes: [0, 1],
      count: 2,
      need: 30 * GiB,
      holders: [holder(singles[0]!), holder(singles[1]!, { waiting: true })],
      evict: true,
    });
    expect(room).toEqual({ kind: 'wait' });
  });
});

describe('the cheapest room: which card a model goes to and which models yield to it', () => {
  // The workload benchmark's cards: 24 GiB, each holding one 8B model (20 GiB) and one small one (2.75 GiB).
  const cards = [0, 1].map((index) => ({ index, memoryBytes: 24 * GiB, memoryKind: 'discrete' as const }));
  const eightB = (id: string, gpu: number, fields: Partial<LedgerEntry> = {}) =>
    entry(id, { gpuIndexes: [gpu], gpuBytes: 20 * GiB, ...fields });
  const small = (id: string, gpu: number, fields: Partial<LedgerEntry> = {}) =>
    entry(id, { gpuIndexes: [gpu], gpuBytes: 2.75 * GiB, ...fields });
  const parked = { state: 'parked' as const, gpuBytes: 0 };
  const room = (
    entries: LedgerEntry[],
    need: number,
    gpuIndexes = [0, 1],
    lastUsed: Record<string, number> = {},
    policy?: RoomPolicy,
  ) =>
    planRoom({
      ledger: ledger(entries, { gpus: cards }),
      gpuIndexes,
      count: 1,
      need,
      holders: entries.filter((e) => e.gpuBytes > 0).map((e) => holder(e, { lastUsedMs: lastUsed[e.name] ?? 0 })),
      evict: true,
      policy,
    });
  const chosen = (plan: RoomPlan) =>
    plan.kind === 'evict' ? { gpuIndexes: plan.gpuIndexes, victims: plan.victims.map((v) => v.name) } : plan;

  it('wakes a small model by parking the small model beside it, not the 8B one used longer ago', () => {
    const plan = room([eightB('m1-8b', 0), small('m2-small', 0)], 2.75 * GiB, [0], { 'm1-8b': 1, 'm2-small': 2 });
    expect(chosen(plan)).toEqual({ gpuIndexes: [0], victims: ['m2-small'] });
  });

  it('parks only the 8B model an 8B wake needs, not the small one used longer ago as well', () => {
    const plan = room([eightB('m1-8b', 0), small('m2-small', 0)], 20 * GiB, [0], { 'm1-8b': 2, 'm2-small': 1 });
    expect(chosen(plan)).toEqual({ gpuIndexes: [0], victims: ['m1-8b'] });
  });

  it('drops a victim that the ones after it made unnecessary', () => {
    // No one alone frees 10 GiB; the cheapest first take all three, and 3 + 7 GiB were enough.
    const l = [3, 4, 7].map((gib, i) => entry(`v${i}`, { gpuBytes: gib * GiB }));
    const plan = planRoom({
      ledger: ledger(l, { gpus: [{ index: 0, memoryBytes: 14 * GiB, memoryKind: 'discrete' }] }),
      gpuIndexes: [0],
      count: 1,
      need: 10 * GiB,
      holders: l.map((e) => holder(e)),
      evict: true,
    });
    expect(chosen(plan)).toEqual({ gpuIndexes: [0], victims: ['v0', 'v2'] });
  });

  it('launches a model on the card fewer engines share, parked ones counted, when both have room', () => {
    expect(room([small('m6-small', 0)], 20 * GiB)).toEqual({ kind: 'fits', gpuIndexes: [1] });
    // A parked engine wakes on its own card: the new model goes where none waits to come back.
    expect(room([eightB('m5-8b', 0, parked)], 2.75 * GiB)).toEqual({ kind: 'fits', gpuIndexes: [1] });
    // Its bytes are read from the ledger, not assumed zero: a parked engine holding 23 GiB leaves no room.
    expect(room([eightB('m5-8b', 0, { ...parked, gpuBytes: 23 * GiB }), eightB('m3-8b', 1)], 2.75 * GiB)).toEqual({
      kind: 'fits',
      gpuIndexes: [1],
    });
  });

  it('packs a model beside models kept loaded (explicit or warm), which never yield, leaving whole cards to larger ones', () => {
    const kept = (e: LedgerEntry) => holder(e, { explicit: true });
    const plan = (entries: LedgerEntry[], need: number) =>
      planRoom({
        ledger: ledger(entries, { gpus: cards }),
        gpuIndexes: [0, 1],
        count: 1,
        need,
        holders: entries.map(kept),
        evict: true,
      });
    // The `fixed` set-up, least popular first: m3-8b beside m4-small, so that m1-8b finds card 1 whole.
    expect(plan([small('m4-small', 0)], 20 * GiB)).toEqual({ kind: 'fits', gpuIndexes: [0] });
    // A warm model is kept loaded the same way.
    const warm = small('m4-small', 0);
    expect(
      planRoom({
        ledger: ledger([warm], { gpus: cards }),
        gpuIndexes: [0, 1],
        count: 1,
        need: 20 * GiB,
        holders: [holder(warm, { warm: true })],
        evict: true,
      }),
    ).toEqual({ kind: 'fits', gpuIndexes: [0] });
    expect(plan([small('m4-small', 0), eightB('m3-8b', 0), small('m2-small', 1)], 20 * GiB)).toEqual({
      kind: 'fits',
      gpuIndexes: [1],
    });
  });

  it('makes room on the card whose victims free the fewest bytes, then on the one fewer engines share', () => {
    // m3-8b needs 20 GiB: parking the small model on card 1 gives it, as parking m5-8b on card 0 would.
    const warm = [eightB('m5-8b', 0), small('m6-small', 1), small('m4-small', 1)];
    expect(chosen(room(warm, 20 * GiB))).toEqual({ gpuIndexes: [1], victims: ['m6-small'] });
    // m1-8b: one 8B model on either card; card 0 also has a parked engine waiting to come back.
    const later = [small('m6-small', 0, parked), eightB('m3-8b', 0), eightB('m5-8b', 1)];
    expect(chosen(room(later, 20 * GiB))).toEqual({ gpuIndexes: [1], victims: ['m5-8b'] });
  });

  it('makes room, between two cards that cost the same, on the one whose victim was asked for least recently, however shared', () => {
    // restart_only's m5-8b: one 8B model on either card. m1-8b served a request a moment ago; m3-8b
    // a minute ago. Card 0 is the less shared (m6-small parked on card 1), yet m1-8b stays.
    const loaded = [eightB('m1-8b', 0), small('m2-small', 0), eightB('m3-8b', 1), small('m4-small', 1)];
    const withParked = [...loaded, small('m6-small', 1, parked)];
    const used = { 'm1-8b': 60_000, 'm2-small': 30_000, 'm3-8b': 1_000, 'm4-small': 50_000 };
    expect(chosen(room(withParked, 20 * GiB, [0, 1], used))).toEqual({ gpuIndexes: [1], victims: ['m3-8b'] });
    expect(chosen(room(loaded, 20 * GiB, [0, 1], { ...used, 'm1-8b': 500, 'm3-8b': 60_000 }))).toEqual({
      gpuIndexes: [0],
      victims: ['m1-8b'],
    });
    // Schedulers begun before it broke the tie by sharing, then by index: they park m1-8b.
    expect(chosen(room(withParked, 20 * GiB, [0, 1], used, 'cheapest_by_sharing'))).toEqual({
      gpuIndexes: [0],
      victims: ['m1-8b'],
    });
  });

  it('chooses as schedulers begun before it did when told to: the first card that fits, the least recently used first', () => {
    const legacy = (entries: LedgerEntry[], need: number, lastUsed: Record<string, number>) =>
      planRoom({
        ledger: ledger(entries, { gpus: cards }),
        gpuIndexes: [0, 1],
        count: 1,
        need,
        holders: entries.map((e) => holder(e, { lastUsedMs: lastUsed[e.name] ?? 0 })),
        evict: true,
        policy: 'first_fit_lru',
      });
    expect(legacy([small('m6-small', 0)], 20 * GiB, {})).toEqual({ kind: 'fits', gpuIndexes: [0] });
    const full = [eightB('m1-8b', 0), small('m2-small', 0), eightB('m3-8b', 1), small('m4-small', 1)];
    expect(chosen(legacy(full, 20 * GiB, { 'm1-8b': 4, 'm2-small': 1, 'm3-8b': 3, 'm4-small': 2 }))).toEqual({
      gpuIndexes: [0],
      victims: ['m2-small', 'm1-8b'],
    });
  });
});

describe('who goes next', () => {
  it('takes the model whose requests have waited longest, among three', () => {
    const order = byLongestWait([
      { deploymentId: 'b', waiting: 5, oldestSinceMs: 300 },
      { deploymentId: 'c', waiting: 1, oldestSinceMs: 100 },
      { deploymentId: 'x', waiting: 0, oldestSinceMs: 0 },
      { deploymentId: 'a', waiting: 2, oldestSinceMs: 200 },
    ]);
    expect(order.map((d) => d.deploymentId)).toEqual(['c', 'a', 'b']);
  });
});

describe('how released models give back their memory: one decision for a switch, an operator and a timer', () => {
  const view = (
    name: string,
    fields: Record<string, unknown> = {},
    explicit = false,
  ): DeploymentView & { checkpoint: typeof checkpoint } => ({
    id: name,
    name,
    revision: 1,
    spec: deploymentDocument.parse({ name, engine: 'vllm', model: `sim/${name}`, ...fields }),
    operatorStopped: false,
    checkpoint,
    measureFailure: null,
    explicit,
    generation: 1,
    readyElsewhere: false,
  });
  const plans = (victims: VictimFacts[], hostRamFreeBytes: number, operator = false) =>
    planVictims({ victims, memoryKind: () => 'discrete', hostRamFreeBytes, operator });

  it('parks in host RAM while copies fit, then deep, counting each victim before the next, and says what they leave', () => {
    expect(
      plans(
        [
          { entry: entry('a'), deployment: view('a') },
          { entry: entry('b'), deployment: view('b') },
        ],
        6 * GiB,
      ),
    ).toEqual({
      plans: [
        { kind: 'park', tier: 'host_ram' },
        { kind: 'park', tier: 'deep' },
      ],
      hostRamFreeBytes: 2 * GiB,
    });
  });

  it('stops a host_backed victim with no room, a restart_only one, and one its engine cannot wake', () => {
    const victims = [
      { entry: entry('a'), deployment: view('a', { residency: 'host_backed' }) },
      { entry: entry('b'), deployment: view('b', { residency: 'restart_only' }) },
      { entry: entry('c'), deployment: view('c', { model: 'openai/gpt-oss-20b' }) },
    ];
    expect(plans(victims, 0).plans).toEqual([
      { kind: 'stop', reason: 'no_room' },
      { kind: 'stop', reason: 'restart_only' },
      { kind: 'stop', reason: 'engine_cannot_park' },
    ]);
  });

  it("refuses an operator's park its engine cannot wake, and any park of an explicit model with no room", () => {
    const gptOss = { entry: entry('c'), deployment: view('c', { model: 'openai/gpt-oss-20b' }) };
    expect(plans([gptOss], 0, true).plans).toEqual([
      { kind: 'refused', error: apiErrors.capabilityMissingDeepPark('c', cannotParkReasons.gptOss) },
    ]);
    const pinned = { entry: entry('x'), deployment: view('x', { residency: 'host_backed' }, true) };
    expect(plans([pinned], 0, true).plans).toEqual([{ kind: 'refused', error: apiErrors.parkedCapacity('x') }]);
    expect(plans([pinned], 0).plans).toEqual([{ kind: 'refused', error: apiErrors.parkedCapacity('x') }]);
  });

  it('launches SGLang for the tier left once the victims took their copies, so that it parks deep instead of stopping', () => {
    // 7 GiB of host RAM; ja's 5 GiB copy leaves 2, and ib's 3 GiB do not fit.
    const sglang = (name: string, weightBytes: number) => ({
      ...view(name, { engine: 'sglang' }),
      checkpoint: { weightBytes, kvBytes: GiB / 2 },
    });
    const ja = { entry: entry('ja'), deployment: sglang('ja', 5 * GiB) };
    const left = plans([ja], 7 * GiB);
    expect(left).toEqual({ plans: [{ kind: 'park', tier: 'host_ram' }], hostRamFreeBytes: 2 * GiB });
    const ib = sglang('ib', 3 * GiB);
    const tier = launchTier({ deployment: ib, memoryKind: 'discrete', hostRamFreeBytes: left.hostRamFreeBytes });
    expect(tier).toBe('deep');
    // Released later by any path with the same host RAM free, it parks deep.
    for (const operator of [false, true])
      expect(plans([{ entry: entry('ib', { tier }), deployment: ib }], 2 * GiB, operator).plans).toEqual([
        { kind: 'park', tier: 'deep' },
      ]);
    // Launched for host RAM, as it was before the victims were counted, it had no room at all.
    expect(plans([{ entry: entry('ib', { tier: 'host_ram' }), deployment: ib }], 2 * GiB).plans).toEqual([
      { kind: 'stop', reason: 'no_room' },
    ]);
  });
});

describe('the scheduler settings', () => {
  it('come from the server document and the host where the switch happens', () => {
    const server = loadSettings('server', {
      env: {},
      text: 'lifecycle_defaults: { ready_idle_timeout: 5m }\nswitching: { drain_timeout: 45s }\n',
    });
    const host = loadSettings('host', {
      env: {},
      text: 'server: { token: t }\nresource_policy: { queue: { admission_window: 500ms } }\n',
    });
    expect(schedulerSettings(server, host.resource_policy.queue)).toEqual({
      admissionWindowMs: 500,
      drainMs: 45_000,
      wakeWindowMs: 300_000,
      startMs: 900_000,
      readyIdleMs: 300_000,
      parkedIdleMs: null,
    });
  });
});
