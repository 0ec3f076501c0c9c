/**
 * The registry beat (server/registryBeat.ts) alone: what a server learns every 2 s from the store
 * it shares with other servers, against a store given as ports, with the host directory and the
 * routing table it keeps current. No Temporal, no Postgres, no listener.
 */
import type { Logger } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Deployment, Host, Instance } from '../api/catalogue.js';
import { RoutingTable } from '../gateway/routingTable.js';
import { HostDirectory } from '../server/hostDirectory.js';
import { RegistryBeat } from '../server/registryBeat.js';
import { deploymentDocument } from '../settings/deploymentDocument.js';
import type { ServerRow } from '../store/servers.js';

const SELF: ServerRow = { id: 'main', taskQueue: 'capyctl-server-store-main' };

const deployment = (id: string, revision = 1): Deployment => ({
  id,
  name: id,
  revision,
  spec: deploymentDocument.parse({ name: id, engine: 'vllm', model: `sim/${id}` }),
  operatorStopped: false,
  checkpoint: null,
  measureFailure: null,
  startFailure: null,
  lastProblem: null,
  restarts: 0,
  recentEndings: [],
  createdAt: new Date(0),
  updatedAt: new Date(0),
});

const host = (id: string, settings: Record<string, unknown> = {}): Host => ({
  id,
  gpus: [],
  hostRamBytes: null,
  settings,
  draining: false,
  registeredAt: new Date(0),
  lastSeenAt: new Date(0),
});

const instance = (deploymentId: string, observedState: Instance['observedState']): Instance => ({
  deploymentId,
  index: 0,
  hostId: 'gpu-a',
  generation: 3,
  observedState,
  parkTier: null,
  gpuBytes: 0,
  residueBytes: null,
  hostRamBytes: 0,
  gpuIndexes: [],
  updatedAt: new Date(0),
});

/** What the store holds, as the other servers left it; each port call is counted. */
function fakeStore() {
  const held = {
    takenForGone: false,
    gone: [] as ServerRow[],
    hosts: [host('gpu-a')],
    secrets: new Map<string, string>(),
    deployments: [] as Deployment[],
    instances: [] as Instance[],
    fails: undefined as Error | undefined,
    /** While set, the store takes a heartbeat only once it settles: a slow store. */
    slow: undefined as Promise<void> | undefined,
  };
  const beats: ServerRow[] = [];
  const forgotten: string[] = [];
  const store = {
    servers: {
      markSeen: async (row: ServerRow) => {
        beats.push(row);
        await held.slow;
        if (held.fails) throw held.fails;
        return held.takenForGone;
      },
      takeGone: async () => held.gone.splice(0),
      forget: async (id: string) => void forgotten.push(id),
    },
    hosts: { hosts: async () => held.hosts, ingressSecrets: async () => held.secrets },
    catalogue: { deployments: async () => held.deployments, instances: async () => held.instances },
  };
  return { held, beats, forgotten, store };
}

function beatBench() {
  const { held, beats, forgotten, store } = fakeStore();
  const logger = { info: vi.fn(), warn: vi.fn(), error: vi.fn() } as unknown as Logger;
  const directory = new HostDirectory({
    hosts: { ...store.hosts, host: async () => undefined, markSeen: async () => {} },
    ownership: { refusal: () => undefined },
    downAfterMs: 15_000,
    onDown: async () => {},
    logger,
  });
  directory.know(host('gpu-a'), undefined);
  const table = new RoutingTable();
  const withdrawn: string[] = [];
  const stopped: Instance[] = [];
  let reported = 0;
  const beat = new RegistryBeat({
    self: SELF,
    store,
    directory,
    table,
    withdrawDemands: async (hostId, taskQueue) => void withdrawn.push(`${hostId} ${taskQueue}`),
    learnStopped: (i) => void stopped.push(i),
    reportAgain: () => void reported++,
    logger,
  });
  return { held, beats, forgotten, directory, table, withdrawn, stopped, reported: () => reported, beat, logger };
}

describe('the registry beat', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('learns what another server of the store changed: a host it registered, deployments saved, revised and deleted, an engine gone', async () => {
    const bench = beatBench();
    bench.table.putDeployment(deployment('chat-a', 1));
    bench.table.putDeployment(deployment('chat-b'));
    bench.held.hosts = [host('gpu-a'), host('gpu-b', { ingress_url: 'http://10.0.0.2:7080', queue: undefined })];
    bench.held.secrets = new Map([['gpu-b', 'secret-b']]);
    bench.held.deployments = [deployment('chat-a', 2), deployment('chat-c')];
    bench.held.instances = [instance('chat-a', 'stopped'), instance('chat-c', 'ready')];

    await bench.beat.beat();

    expect(bench.beats).toEqual([SELF]);
    expect(bench.directory.ids()).toEqual(['gpu-a', 'gpu-b']);
    expect(bench.directory.ingressOf('gpu-b')).toEqual({
      url: 'http://10.0.0.2:7080',
      headers: { 'capyctl-ingress-secret': 'secret-b' },
    });
    expect(bench.directory.liveness.stateOf('gpu-b', false)).toBe('ready');
    expect(bench.table.list().map((d) => `${d.name} r${d.revision}`)).toEqual(['chat-a r2', 'chat-c r1']);
    expect(bench.stopped).toEqual([instance('chat-a', 'stopped')]);
    expect(bench.withdrawn).toEqual([]);
    expect(bench.reported()).toBe(0);
  });

  it("withdraws a gone server's demands from every known host's scheduler, and reports its own again once taken for gone", async () => {
    const bench = beatBench();
    bench.directory.know(host('gpu-b'), undefined);
    bench.held.gone = [{ id: 'killed', taskQueue: 'capyctl-server-store-killed' }];
    bench.held.takenForGone = true;

    await bench.beat.beat();

    expect(bench.withdrawn).toEqual(['gpu-a capyctl-server-store-killed', 'gpu-b capyctl-server-store-killed']);
    expect(bench.reported()).toBe(1);
    await bench.beat.beat();
    expect(bench.withdrawn).toHaveLength(2);
  });

  it('logs a beat the store fails and goes on with the next', async () => {
    const bench = beatBench();
    bench.held.fails = new Error('connection refused');
    await bench.beat.beat();
    expect(bench.logger.warn).toHaveBeenCalledWith(
      { err: bench.held.fails },
      "the store did not take this server's heartbeat",
    );
    bench.held.fails = undefined;
    bench.held.deployments = [deployment('chat-a')];
    await bench.beat.beat();
    expect(bench.table.list().map((d) => d.name)).toEqual(['chat-a']);
  });

  it('beats every 2 s, one at a time while the store is slow, until it stops; then it leaves the list', async () => {
    vi.useFakeTimers();
    const bench = beatBench();
    let answer!: () => void;
    bench.held.slow = new Promise<void>((resolve) => (answer = resolve));
    bench.beat.start();
    await vi.advanceTimersByTimeAsync(2_000);
    expect(bench.beats).toHaveLength(1);
    // Two more periods pass while that beat waits for the store: neither starts beside it.
    await vi.advanceTimersByTimeAsync(4_000);
    expect(bench.beats).toHaveLength(1);
    bench.held.slow = undefined;
    answer();
    // Then they run, one after the other, before the next period.
    await vi.advanceTimersByTimeAsync(1);
    expect(bench.beats).toHaveLength(3);
    await bench.beat.stop();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(bench.beats).toHaveLength(3);
    await bench.beat.leave();
    expect(bench.forgotten).toEqual(['main']);
  });
});
