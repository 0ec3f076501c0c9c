/**
 * Models on several GPUs, over real processes: a server and two host agents, one with eight
 * simulated 8 GiB cards and one with a single 16 GiB card. Eight single-GPU models (5 GiB each) are
 * all ready at once on the eight cards, with no park; a model with `--tensor-parallel-size 4`
 * (20 GiB, 5 GiB on each of four cards) parks four of them and takes their cards, they come back
 * in its place, and it wakes on its own four cards again; a `--tensor-parallel-size 2` model that
 * would fit the single card in bytes is placed on the host that has two cards. What each card
 * holds is read from the simulated devices, as `nvidia-smi` would show it.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gpuUsage } from '../hostAgent/simulatedGpu.js';
import { Cluster, type ClusterHost } from './support/cluster.js';
import { simDeployment } from './support/lifecycle.js';

const GiB = 2 ** 30;
const SINGLES = ['s0', 's1', 's2', 's3', 's4', 's5', 's6', 's7'];

/** Which models hold memory on each of the host's cards, and how much each holds there. */
async function cards(host: ClusterHost, count: number): Promise<Array<Record<string, number>>> {
  return Promise.all(
    Array.from({ length: count }, async (_, index) => {
      const { owners } = await gpuUsage(join(host.dataDir, 'sim-gpus'), index);
      const held = owners.filter((o) => o.gpuBytes > 0).map((o) => [o.label.replace(/^\w+ sim\//, ''), o.gpuBytes]);
      return Object.fromEntries(held.sort());
    }),
  );
}

describe('models on several GPUs', () => {
  let cluster: Cluster;
  let eightCards: ClusterHost;
  let oneCard: ClusterHost;

  const states = async (names: readonly string[]) =>
    Promise.all(names.map(async (name) => (await cluster.status(name)).state as string));

  beforeAll(async () => {
    cluster = await Cluster.start({ hosts: [{ gpuMemory: '8GiB', gpuCount: 8 }, { gpuMemory: '16GiB' }] });
    [eightCards, oneCard] = cluster.hosts as [ClusterHost, ClusterHost];
    const pinned = `hosts: [${eightCards.hostId}]\n`;
    await Promise.all([
      ...SINGLES.map((name) => cluster.deploy(simDeployment(name, 'vllm', [], pinned))),
      cluster.deploy(
        simDeployment(
          'tp4',
          'vllm',
          ['--sim-weights', '16GiB', '--sim-kv', '4GiB', '--tensor-parallel-size', '4'],
          pinned,
        ),
      ),
      cluster.deploy(simDeployment('tp2', 'vllm', ['--sim-weights', '8GiB', '--sim-kv', '2GiB', '-tp', '2'])),
    ]);
  }, 240_000);

  afterAll(async () => {
    await cluster?.close();
  });

  it('holds eight single-GPU models ready at once on eight cards, one on each, with no park', async () => {
    const replies = await Promise.all(SINGLES.map((name) => cluster.chat(name)));
    expect(replies.map((r) => r.status)).toEqual(SINGLES.map(() => 200));
    expect(await states(SINGLES)).toEqual(SINGLES.map(() => 'ready'));
    const held = await cards(eightCards, 8);
    expect(held.map((card) => Object.values(card))).toEqual(SINGLES.map(() => [5 * GiB]));
    expect(new Set(held.flatMap((card) => Object.keys(card))).size).toBe(8);
    const switches = (await cluster.api('GET', '/management/v1/switches?limit=50')).body.switches;
    expect(switches.flatMap((s: { victims: unknown[] }) => s.victims)).toEqual([]);
  }, 120_000);

  it('a four-GPU model parks four of them and takes their cards; they come back; it wakes on its own cards', async () => {
    expect((await cluster.chat('tp4')).status).toBe(200);
    const withTp4 = await cards(eightCards, 8);
    const tp4Cards = withTp4.flatMap((card, index) => (card.tp4 === undefined ? [] : [index]));
    expect(tp4Cards).toHaveLength(4);
    // Each of its cards holds its quarter and nothing else: the single that was there parked.
    expect(tp4Cards.map((index) => withTp4[index])).toEqual(tp4Cards.map(() => ({ tp4: 5 * GiB })));
    const parked = SINGLES.filter((name) => !withTp4.some((card) => card[name] !== undefined));
    expect(parked).toHaveLength(4);
    expect(await states(parked)).toEqual(parked.map(() => 'parked'));

    // The operator's start names every GPU each victim gave back.
    const back = await cluster.capyctl(['start', 'deployment', parked[0]!, '--evict', '--wait']);
    expect(back.code).toBe(0);
    expect(back.stdout).toMatch(
      new RegExp(`victim: tp4 \\(deployment \\w+, instance 0, GPUs ${tp4Cards.join(',')}\\) released: parked`),
    );
    const restReplies = await Promise.all(parked.slice(1).map((name) => cluster.chat(name)));
    expect(restReplies.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(await states([...SINGLES, 'tp4'])).toEqual([...SINGLES.map(() => 'ready'), 'parked']);

    expect((await cluster.chat('tp4')).status).toBe(200);
    const again = await cards(eightCards, 8);
    expect(again.flatMap((card, index) => (card.tp4 === undefined ? [] : [index]))).toEqual(tp4Cards);
    expect((await cluster.status('tp4')).state).toBe('ready');
  }, 180_000);

  it('a two-GPU model that one large card could hold in bytes is placed on the host with two cards', async () => {
    expect((await cluster.chat('tp2')).status).toBe(200);
    const status = await cluster.status('tp2');
    expect([status.state, status.hosts]).toEqual(['ready', [eightCards.hostId]]);
    const onEight = (await cards(eightCards, 8)).filter((card) => card.tp2 !== undefined);
    expect(onEight).toHaveLength(2);
    expect(onEight.map((card) => card.tp2)).toEqual([5 * GiB, 5 * GiB]);
    expect(await cards(oneCard, 1)).toEqual([{}]);
  }, 120_000);
});
