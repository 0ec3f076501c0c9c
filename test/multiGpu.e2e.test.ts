/**
 * Models on several GPUs (issue 36), over real processes: a server, a host agent with eight
 * simulated 8 GiB cards and one with a single 16 GiB card, each its own process, and simulated vLLM
 * engines that run one rank per visible device. A 5 GiB model fills most of a card; a tensor-parallel
 * model of 20 GiB holds 5 GiB on each of its four. What each card holds is read from the simulated
 * devices, as `nvidia-smi` would show it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiErrors } from '../domain/catalogue.js';
import { Cluster, type ClusterHost, gpuHolders } from './support/cluster.js';
import { simDeployment } from './support/lifecycle.js';

const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
const SINGLES = ['s1', 's2', 's3', 's4', 's5', 's6', 's7', 's8'];
/** 5 GiB on each of `gpus` cards, as a single model holds on one. */
const parallel = (name: string, flag: string, gpus: number) =>
  simDeployment(name, 'vllm', ['--sim-weights', `${4 * gpus}GiB`, '--sim-kv', `${gpus}GiB`, flag, String(gpus)]);

describe('models on several GPUs of a host', () => {
  let cluster: Cluster;
  let eight: ClusterHost;
  let one: ClusterHost;
  const ids = new Map<string, string>();
  /** Each card of the eight-card host: the models holding it. */
  const cards = async (): Promise<string[][]> => (await gpuHolders(eight, 8)).map((owners) => owners.sort());
  const cardsOf = (all: string[][], name: string): number[] =>
    all.flatMap((owners, gpu) => (owners.includes(`vllm sim/${name}`) ? [gpu] : []));

  beforeAll(async () => {
    cluster = await Cluster.start({ hosts: [{ gpuMemory: '8GiB', gpuCount: 8 }, { gpuMemory: '16GiB' }] });
    [eight, one] = cluster.hosts as [ClusterHost, ClusterHost];
    const deployed = await Promise.all([
      ...SINGLES.map((name) => cluster.deploy(simDeployment(name))),
      cluster.deploy(parallel('tp4', '--tensor-parallel-size', 4)),
      cluster.deploy(parallel('tp2', '-tp', 2)),
    ]);
    for (const d of deployed) ids.set(d.name, d.deployment_id);
  }, 240_000);

  afterAll(async () => {
    await cluster?.close();
  });

  it('eight single-GPU models are all ready at once on the eight-GPU host, one a card, none parked', async () => {
    for (const name of SINGLES) expect((await cluster.chat(name)).status, name).toBe(200);

    const all = await cards();
    expect(all).toEqual(expect.arrayContaining(SINGLES.map((name) => [`vllm sim/${name}`])));
    expect(all.every((owners) => owners.length === 1)).toBe(true);
    expect(await gpuHolders(one, 1)).toEqual([[]]);
    for (const name of SINGLES) expect((await cluster.status(name)).state, name).toBe('ready');
  }, 180_000);

  it('a TP=4 model parks four of them to start on their four cards; one of them wakes back by parking it whole, and so do the rest; then it wakes on its own four cards', async () => {
    const started = await cluster.capyctl(['start', 'deployment', 'tp4', '--evict', '--wait']);
    expect(started.code, started.stderr).toBe(0);
    const victims = [
      ...started.stdout.matchAll(
        /^victim: (s\d) \(deployment [^,]+, instance 0, GPU (\d)\) released: parked \(host RAM\)$/gm,
      ),
    ];
    expect(started.stdout).toMatch(new RegExp(`^tp4: ready\\nswitch_id: ${UUID} .*\\n(victim: .*\\n){4}$`));
    expect(victims).toHaveLength(4);
    const tpCards = victims.map((v) => Number(v[2])).sort();
    const parked = victims.map((v) => v[1]!);
    expect(cardsOf(await cards(), 'tp4')).toEqual(tpCards);
    expect((await cluster.chat('tp4')).status).toBe(200);

    // A parked single wakes on its own card: the one victim that frees it is tp4, all four cards at once.
    const [first, ...rest] = parked;
    const back = await cluster.capyctl(['start', 'deployment', first!, '--evict', '--wait']);
    expect(back.stdout).toMatch(
      new RegExp(
        `^${first}: ready\\nswitch_id: ${UUID} .*\\nvictim: tp4 \\(deployment ${ids.get('tp4')}, instance 0, GPUs ${tpCards.join(',')}\\) released: parked \\(host RAM\\)\\n$`,
      ),
    );
    for (const name of rest) expect((await cluster.chat(name)).status, name).toBe(200);
    const afterBack = await cards();
    expect(afterBack.every((owners) => owners.length === 1 && owners[0]!.startsWith('vllm sim/s'))).toBe(true);
    expect((await cluster.status('tp4')).state).toBe('parked');

    // tp4 wakes where its ranks were: the four singles on those cards park again.
    const again = await cluster.capyctlOk(['start', 'deployment', 'tp4', '--evict', '--wait']);
    expect(again).toMatch(/^tp4: ready\n/);
    expect([...again.matchAll(/GPU (\d)\) released: parked/g)].map((v) => Number(v[1])).sort()).toEqual(tpCards);
    expect(cardsOf(await cards(), 'tp4')).toEqual(tpCards);
    expect((await cluster.chat('tp4')).status).toBe(200);
  }, 240_000);

  it('a TP=2 model goes to the host with two cards for it, not to the one with more free memory on one card; more GPUs than any host has is refused at deploy', async () => {
    const reply = await cluster.chat('tp2');
    expect(reply.status, JSON.stringify(reply.body)).toBe(200);
    expect((await cluster.status('tp2')).hosts).toEqual([eight.hostId]);
    expect(cardsOf(await cards(), 'tp2')).toHaveLength(2);
    expect(await gpuHolders(one, 1)).toEqual([[]]);

    const refused = await cluster.api('POST', '/management/v1/deployments', {
      name: 'tp16',
      engine: 'vllm',
      model: 'sim/tp16',
      extra_args: ['--tensor-parallel-size', '16'],
    });
    const expected = apiErrors.needsMoreGpus('tp16', 16, { hostId: eight.hostId, gpus: 8 });
    expect([refused.status, refused.body]).toEqual([
      expected.status,
      { code: expected.code, message: expected.message, retryable: expected.retryable },
    ]);
  }, 180_000);
});
