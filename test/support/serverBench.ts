/**
 * The end-to-end bench: the real server (`server/server.ts`: gateway, management API, workflow
 * worker) on real sockets, a real host agent in this process running simulator engines on a
 * simulated GPU, real Temporal and a fresh Postgres database. Settings come from the documents, as
 * an operator writes them. A benchmark outside vitest passes its own services.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { request } from 'undici';
import type { LoadReply } from '../../api/load.js';
import { sendCommand, startMeasurement } from '../../gateway/lifecycleClient.js';
import { type RunningHostAgent, startHostAgent } from '../../hostAgent/agent.js';
import { type RunningServer, startServer } from '../../server/server.js';
import { loadSettings } from '../../settings/load.js';
import type { SimState } from '../../simulator/engine.js';
import type { Db } from '../../store/db.js';
import { type Deployment, saveDeployment } from '../../store/deployments.js';
import { issueHostToken } from '../../store/hosts.js';
import { harnessServices, type LifecycleServices, simDeployment } from './lifecycle.js';
import { freshDatabase } from './postgres.js';
import { simHostYaml } from './simHost.js';

export const ADMIN_TOKEN = 'capy_admin_test';

export interface ServerBenchOptions {
  /** More lines of the server document (YAML), e.g. `switching: { drain_timeout: 1s }`. */
  serverYaml?: string;
  /** More lines of the host document (YAML), e.g. `resource_policy: { queue: { admission_window: 200ms } }`. */
  hostYaml?: string;
  /** The simulated card, e.g. "8GiB" (one 5 GiB simulator model at a time). */
  gpuMemory?: string;
  /** The host's `host_ram`, e.g. "7GiB": what parked copies may take. */
  hostRam?: string;
  /** The dev server and Postgres; the test harness's when absent. */
  services?: LifecycleServices;
}

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
  /** When the reply's head arrived and when its body ended, in ms since the epoch. */
  headAtMs: number;
  endAtMs: number;
}

export interface OpenStream {
  status: number;
  end(): void;
  rest(): Promise<string>;
}

export interface ServerBench {
  readonly server: RunningServer;
  readonly host: RunningHostAgent;
  hostId: string;
  /** Deploys a simulator model (`simDeployment`'s document unless `yaml` is given), measured and routable. */
  deploy(name: string, yaml?: string): Promise<Deployment>;
  /** A request through the inference listener, as a client sends it; the body is read whole. */
  post(path: string, body: unknown, signal?: AbortSignal): Promise<Reply>;
  /** A chat completion for the model. */
  chat(d: Deployment, more?: Record<string, unknown>, signal?: AbortSignal): Promise<Reply>;
  /**
   * A streamed chat completion left open: resolves once its head arrived (the gateway sends it with
   * the first output); `end()` hangs up, `rest()` reads it to its end.
   */
  stream(d: Deployment, more?: Record<string, unknown>): Promise<OpenStream>;
  /** `GET /management/v1/metrics/load` with the admin token. */
  load(query?: string): Promise<LoadReply>;
  /** The simulator engine of the deployment's first instance, read from the engine itself. */
  engine(d: Deployment): Promise<SimState>;
  /**
   * Asks the simulator engine of the deployment's first instance to fail (`/sim/faults`); a crash ends
   * it before it answers.
   */
  fault(d: Deployment, faults: Record<string, unknown>): Promise<void>;
  /** Sends an operator command to the host's scheduler. */
  command(update: 'start' | 'stop' | 'park', deploymentId: string): Promise<unknown>;
  /** The observed state of the deployment's first instance, as the gateway routes by it. */
  stateOf(d: Deployment): string | undefined;
  /** The catalogue, for a test that writes what a process stopped mid-way would have left. */
  db: Db;
  /** Stops the server and starts it again with the same ID, database and host; `serverYaml`: its document now. */
  restartServer(serverYaml?: string): Promise<void>;
  /** Stops the host agent (its engines stop with it) and starts it again: it registers anew. */
  restartHost(): Promise<void>;
  close(): Promise<void>;
}

export async function startServerBench(options: ServerBenchOptions = {}): Promise<ServerBench> {
  const services = options.services ?? (await harnessServices());
  const fresh = await freshDatabase(services.postgresAdminUrl);
  const serverId = randomUUID().slice(0, 8);
  const hostId = `gpu-box-${randomUUID().slice(0, 8)}`;
  // Fresh ports at first; a restart takes the same ones, as an operator's server does, so the host
  // agent's reports (its heartbeat) reach the new server without the agent starting again.
  const settingsOf = (serverYaml: string, listen = { management: '127.0.0.1:0', inference: '127.0.0.1:0' }) =>
    loadSettings('server', {
      env: {},
      text: [
        `listen: { management: "${listen.management}", inference: "${listen.inference}" }`,
        `temporal: { address: "${services.temporalAddress}" }`,
        serverYaml,
      ].join('\n'),
    });
  let serverYaml = options.serverYaml ?? 'switching: { drain_timeout: 5s, start_timeout: 60s }';
  const boot = (listen?: { management: string; inference: string }) =>
    startServer({
      settings: settingsOf(serverYaml, listen),
      serverId,
      adminToken: ADMIN_TOKEN,
      db: fresh.db,
      logger: pino({ level: 'warn' }),
    });
  let server = await boot();
  const [token, dataDir] = [
    await issueHostToken(fresh.db),
    join(mkdtempSync(join(tmpdir(), 'capyctl-server-')), 'host'),
  ];
  const startHost = () =>
    startHostAgent(
      loadSettings('host', {
        env: {},
        text: simHostYaml({
          hostId,
          serverUrl: server.managementUrl,
          token,
          temporalAddress: services.temporalAddress,
          dataDir,
          gpuMemory: options.gpuMemory ?? '8GiB',
          hostRam: options.hostRam,
          extra: options.hostYaml,
        }),
      }),
      pino({ level: 'warn' }),
    );
  let host = await startHost();

  const chatBody = (d: Deployment, more: Record<string, unknown>) => ({
    model: d.name,
    messages: [{ role: 'user', content: 'hello' }],
    max_tokens: 4,
    ...more,
  });
  const post = async (path: string, body: unknown, signal?: AbortSignal): Promise<Reply> => {
    const res = await request(`${server.inferenceUrl}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal,
    });
    const headAtMs = Date.now();
    const text = await res.body.text();
    const json = /json/.test(String(res.headers['content-type'])) ? JSON.parse(text) : text;
    return { status: res.statusCode, headers: res.headers, body: json, headAtMs, endAtMs: Date.now() };
  };

  return {
    get server() {
      return server;
    },
    get host() {
      return host;
    },
    hostId,
    db: fresh.db,
    async deploy(name, yaml = simDeployment(name)) {
      const { deployment } = await saveDeployment(fresh.db, loadSettings('deployment', { text: yaml }));
      server.table.putDeployment(deployment);
      const measuring = await startMeasurement(server.client, {
        deploymentId: deployment.id,
        revision: 1,
        hostId,
        serverTaskQueue: server.workflowTaskQueue,
      });
      await measuring.result();
      return deployment;
    },
    post,
    chat: (d, more = {}, signal) => post('/v1/chat/completions', chatBody(d, more), signal),
    async stream(d, more = {}) {
      const client = new AbortController();
      const body = JSON.stringify(chatBody(d, { stream: true, ...more }));
      const res = await request(`${server.inferenceUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        signal: client.signal,
      });
      return { status: res.statusCode, end: () => client.abort(), rest: () => res.body.text() };
    },
    async load(query = '') {
      const res = await request(`${server.managementUrl}/management/v1/metrics/load${query}`, {
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      });
      if (res.statusCode !== 200) throw new Error(`load endpoint answered ${res.statusCode}: ${await res.body.text()}`);
      return (await res.body.json()) as LoadReply;
    },
    async engine(d) {
      const res = await request(`${host.engineUrl({ deploymentId: d.id, instanceIndex: 0 })}/sim/state`);
      return (await res.body.json()) as SimState;
    },
    async fault(d, faults) {
      const reply = await request(`${host.engineUrl({ deploymentId: d.id, instanceIndex: 0 })}/sim/faults`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(faults),
      }).catch((e: unknown) => {
        if (faults.crash === true) return undefined;
        throw e;
      });
      await reply?.body.dump();
    },
    command: (update, deploymentId) =>
      update === 'start'
        ? sendCommand(server.client, server.schedulerRef(hostId), 'start', { deploymentId, evict: true })
        : sendCommand(server.client, server.schedulerRef(hostId), update, { deploymentId }),
    stateOf: (d) => server.table.get(d.id)?.instances[0]?.observedState,
    async restartServer(yaml = serverYaml) {
      const listen = { management: new URL(server.managementUrl).host, inference: new URL(server.inferenceUrl).host };
      await server.stop();
      serverYaml = yaml;
      server = await boot(listen);
    },
    async restartHost() {
      await host.stop();
      host = await startHost();
    },
    async close() {
      await host.stop();
      await server.stop();
      await fresh.drop();
    },
  };
}
