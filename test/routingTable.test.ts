import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { RoutingTable } from '../gateway/routingTable.js';
import { storePorts } from '../server/storePorts.js';
import { loadSettings } from '../settings/load.js';
import { type Deployment, saveDeployment, setOperatorStopped } from '../store/deployments.js';
import { issueHostToken, registerHost } from '../store/hosts.js';
import { saveInstance } from '../store/instances.js';
import { migrate } from '../store/migrate.js';
import { type FreshDatabase, freshDatabase } from './support/postgres.js';

const spec = (text: string) => loadSettings('deployment', { text });

describe('the routing table', () => {
  let fresh: FreshDatabase;
  let chatA: Deployment;
  let chatB: Deployment;
  let chatC: Deployment;

  beforeAll(async () => {
    fresh = await freshDatabase(inject('postgresAdminUrl'));
    const { db } = fresh;
    await migrate(db);
    for (const [id, activation] of [
      ['gpu-a', 'on_demand'],
      ['gpu-b', 'explicit'],
    ] as const) {
      const gpus = [{ index: 0, name: 'sim-0', memoryBytes: 2 ** 34, memoryKind: 'discrete' as const }];
      await registerHost(db, await issueHostToken(db), { id, gpus, hostRamBytes: 2 ** 36, settings: { activation } });
    }
    // chat-a may run only on gpu-a (on demand); chat-b may run anywhere, gpu-b included (explicit);
    // chat-c says explicit itself.
    chatA = (await saveDeployment(db, spec('name: chat-a\nengine: vllm\nmodel: Qwen3-4B\nhosts: [gpu-a]\n')))
      .deployment;
    chatB = (await saveDeployment(db, spec('name: chat-b\nengine: sglang\nmodel: Qwen3-8B\n'))).deployment;
    chatC = (
      await saveDeployment(
        db,
        spec('name: chat-c\nengine: vllm\nmodel: Qwen3-1.7B\nhosts: [gpu-a]\nlifecycle: { activation: explicit }\n'),
      )
    ).deployment;
    await setOperatorStopped(db, chatB.id, true);
    const instance = { parkTier: null, gpuBytes: 0, hostRamBytes: 0 };
    await saveInstance(db, {
      ...instance,
      deploymentId: chatA.id,
      index: 1,
      hostId: 'gpu-a',
      generation: 1,
      observedState: 'parked',
      parkTier: 'host_ram',
      // What its host measured its engine still holds after the park.
      residueBytes: 512 * 2 ** 20,
    });
    await saveInstance(db, {
      ...instance,
      deploymentId: chatA.id,
      index: 0,
      hostId: 'gpu-a',
      generation: 3,
      observedState: 'ready',
      gpuIndexes: [0, 1],
    });
    await saveInstance(db, {
      ...instance,
      deploymentId: chatB.id,
      index: 0,
      hostId: 'gpu-b',
      generation: 2,
      observedState: 'stopped',
    });
  });
  afterAll(() => fresh.drop());

  it('loads the store: deployments by name, their instances by index, activation folded with the hosts', async () => {
    const table = new RoutingTable();
    await table.loadFrom(storePorts(fresh.db));

    expect(table.list().map((d) => d.name)).toEqual(['chat-a', 'chat-b', 'chat-c']);
    expect(table.byModel('chat-a')).toStrictEqual({
      id: chatA.id,
      name: 'chat-a',
      revision: 1,
      spec: chatA.spec,
      operatorStopped: false,
      activation: 'on_demand',
      instances: [
        {
          index: 0,
          hostId: 'gpu-a',
          generation: 3,
          observedState: 'ready',
          parkTier: null,
          gpuIndexes: [0, 1],
          residueBytes: null,
        },
        // Its row does not say which GPUs: not known.
        {
          index: 1,
          hostId: 'gpu-a',
          generation: 1,
          observedState: 'parked',
          parkTier: 'host_ram',
          gpuIndexes: [],
          residueBytes: 512 * 2 ** 20,
        },
      ],
    });
    expect(table.byModel('chat-b')).toMatchObject({
      id: chatB.id,
      operatorStopped: true,
      activation: 'explicit',
      instances: [{ index: 0, hostId: 'gpu-b', generation: 2, observedState: 'stopped' }],
    });
    expect(table.byModel('chat-c')).toMatchObject({ id: chatC.id, activation: 'explicit', instances: [] });
    // Routing is by model name only; an ID is looked up with `get`.
    expect(table.byModel(chatA.id)).toBeUndefined();
    expect(table.get(chatA.id)?.name).toBe('chat-a');
  });

  it("takes the lifecycle's updates, never going back a generation", async () => {
    const table = new RoutingTable();
    await table.loadFrom(storePorts(fresh.db));

    table.setInstance({
      deploymentId: chatA.id,
      index: 0,
      hostId: 'gpu-a',
      generation: 3,
      observedState: 'draining',
      parkTier: null,
    });
    table.setInstance({
      deploymentId: chatA.id,
      index: 0,
      hostId: 'gpu-a',
      generation: 2,
      observedState: 'stopped',
      parkTier: null,
    });
    // Told without its GPUs (its waiters started before its row was written), it keeps those of its start.
    expect(table.byModel('chat-a')?.instances[0]).toStrictEqual({
      index: 0,
      hostId: 'gpu-a',
      generation: 3,
      observedState: 'draining',
      parkTier: null,
      gpuIndexes: [0, 1],
      residueBytes: null,
    });

    const starting = {
      deploymentId: chatC.id,
      index: 0,
      hostId: 'gpu-a',
      generation: 1,
      observedState: 'starting',
      parkTier: null,
    } as const;
    table.setInstance(starting);
    expect(table.byModel('chat-c')?.instances).toStrictEqual([
      {
        index: 0,
        hostId: 'gpu-a',
        generation: 1,
        observedState: 'starting',
        parkTier: null,
        gpuIndexes: [],
        residueBytes: null,
      },
    ]);
    // Told again what it holds (every server beat reads the stopped rows), the table keeps what requests read.
    const routed = table.byModel('chat-c');
    table.setInstance({ ...starting });
    expect(table.byModel('chat-c')).toBe(routed);
    table.setInstance({ ...starting, gpuIndexes: [3] });
    expect(table.byModel('chat-c')?.instances[0]?.gpuIndexes).toEqual([3]);
    // A new start is placed anew: the GPUs of the one before are not its own.
    table.setInstance({ ...starting, generation: 2 });
    expect(table.byModel('chat-c')?.instances[0]?.gpuIndexes).toEqual([]);

    table.setOperatorStopped(chatB.id, false);
    expect(table.byModel('chat-b')?.operatorStopped).toBe(false);

    // A new revision keeps the instances that run.
    table.putDeployment({ ...chatA, revision: 2 });
    expect(table.byModel('chat-a')).toMatchObject({ revision: 2, instances: [{ generation: 3 }, { generation: 1 }] });

    table.setHostActivation('gpu-a', 'explicit');
    expect(table.byModel('chat-a')?.activation).toBe('explicit');

    table.removeDeployment(chatA.id);
    expect(table.byModel('chat-a')).toBeUndefined();
    table.setInstance({
      deploymentId: chatA.id,
      index: 0,
      hostId: 'gpu-a',
      generation: 4,
      observedState: 'ready',
      parkTier: null,
    });
    expect(table.get(chatA.id)).toBeUndefined();
  });

  it('is rebuilt from the store on start, keeping nothing it guessed before', async () => {
    const table = new RoutingTable();
    table.putDeployment({
      id: 'GONE',
      name: 'gone',
      revision: 1,
      spec: spec('name: gone\nengine: vllm\nmodel: m\n'),
      operatorStopped: false,
    });
    table.setHostActivation('gpu-a', 'explicit');
    await table.loadFrom(storePorts(fresh.db));
    expect(table.byModel('gone')).toBeUndefined();
    expect(table.byModel('chat-a')?.activation).toBe('on_demand');
  });
});
