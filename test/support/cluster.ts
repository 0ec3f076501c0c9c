/**
 * A server and host agents as an operator runs them: `capyctl start server` and one
 * `capyctl start host` per host, each its own process with its own simulated GPU and data folder,
 * on the harness's Temporal dev server (or the Temporal `services` names, such as a TemporalCluster)
 * and a fresh Postgres database. Tests reach them only through
 * their listeners, the CLI and signals, as a user would.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { parse as parseYaml } from 'yaml';
import { gpuUsage } from '../../hostAgent/simulatedGpu.js';
import { type CliResult, CAPYCTL, capyctl } from './capyctl.js';
import { harnessServices, type LifecycleServices } from './lifecycle.js';
import { type FreshDatabase, freshDatabase } from './postgres.js';
import { type SimHost, simHostYaml } from './simHost.js';
import { until } from './until.js';

export const CLUSTER_ADMIN_TOKEN = 'capy_admin_cluster_test';

/** A capyctl process: its output kept for assertions and failure messages. */
export class CapyProcess {
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  private text = '';

  constructor(args: readonly string[], env: NodeJS.ProcessEnv) {
    this.child = spawn(process.execPath, [CAPYCTL, ...args], {
      env: { ...process.env, CAPYCTL_LOG_FORMAT: 'json', CAPYCTL_LOG_LEVEL: 'info', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child.stdout!.on('data', (d) => (this.text += d));
    this.child.stderr!.on('data', (d) => (this.text += d));
    this.exited = new Promise((resolve) => this.child.once('exit', (code) => resolve(code)));
  }

  output(): string {
    return this.text;
  }

  /** The first value `pattern`'s first group takes in the output, waiting for it. */
  awaitOutput(what: string, pattern: RegExp, timeoutMs = 60_000): Promise<string> {
    return until(
      what,
      () => {
        const found = pattern.exec(this.text)?.[1];
        if (found !== undefined) return found;
        if (this.child.exitCode !== null)
          throw new Error(`exited (${this.child.exitCode}) before ${what}:\n${this.text.slice(-4_000)}`);
        return undefined;
      },
      timeoutMs,
    );
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
    if (this.running) this.child.kill(signal);
    return this.exited;
  }

  /**
   * A teardown's stop: SIGTERM, and SIGKILL if it has not exited within `withinMs`, saying so with
   * the end of its output (a stop that hangs is a finding, not a reason to hold the suite).
   */
  async stopForTeardown(withinMs = TEARDOWN_STOP_MS): Promise<void> {
    if (!this.running) return;
    this.child.kill('SIGTERM');
    const exited = await Promise.race([
      this.exited.then(() => true),
      new Promise<false>((r) => setTimeout(() => r(false), withinMs).unref()),
    ]);
    if (exited) return;
    console.warn(
      `${this.child.spawnargs.slice(2, 4).join(' ')} did not stop within ${withinMs} ms of SIGTERM; killed. Its last output:\n${this.text.slice(-3_000)}`,
    );
    this.child.kill('SIGKILL');
    await this.exited;
  }
}

/** Above a server's stop bound with nothing running (its listeners, then its worker's tasks). */
const TEARDOWN_STOP_MS = 45_000;

export interface ClusterHostOptions {
  /** Each simulated card's memory; "8GiB" holds one 5 GiB simulator model at a time. */
  gpuMemory?: string;
  /** How many such cards; one unless said. */
  gpuCount?: number;
  /** The card's kind of memory; discrete unless said. */
  memoryKind?: 'discrete' | 'unified';
  /** The host RAM it offers parked models; 64 GiB unless said. */
  hostRam?: string;
  /** More lines of the host document (YAML). */
  yaml?: string;
  /** Where the agent reaches the server (a balancer in front of several); the server's own listener unless said. */
  serverUrl?: string;
  /** The host's ID; a fresh one unless said (another installation's host of the same ID, say). */
  hostId?: string;
  /** More of its engines' sections (simHost.ts). */
  engines?: SimHost['engines'];
}

export interface ClusterOptions {
  hosts?: ClusterHostOptions[];
  /** More lines of the server document (YAML). */
  serverYaml?: string;
  services?: LifecycleServices;
  /** The server's CAPYCTL_SERVER_ID; a fresh one unless said (another installation's, say). */
  serverId?: string;
  /** The inference listener's own token (CAPYCTL_INFERENCE_TOKEN), which `chat` then sends; none unless said. */
  inferenceToken?: string;
}

export interface ClusterHost {
  hostId: string;
  token: string;
  dataDir: string;
  file: string;
  process: CapyProcess;
}

/** Another server of the cluster: its process and its listeners. */
export interface ClusterServer {
  process: CapyProcess;
  managementUrl: string;
  inferenceUrl: string;
}

export interface ApiReply<T = any> {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: T;
}

/** What the host's simulated card holds now, as `nvidia-smi` would say. */
export const gpuUsed = async (host: ClusterHost): Promise<number> =>
  (await gpuUsage(join(host.dataDir, 'sim-gpus'), 0)).usedBytes;

/** What each engine holds on one of the host's simulated cards, in bytes, by its label ("vllm sim/m1"). */
export const gpuHeld = async (host: ClusterHost, index = 0): Promise<Map<string, number>> =>
  new Map(
    (await gpuUsage(join(host.dataDir, 'sim-gpus'), index)).owners
      .filter((o) => o.gpuBytes > 0)
      .map((o) => [o.label, o.gpuBytes]),
  );

/** Who holds memory on each of the host's first `count` simulated cards: the engines' labels ("vllm sim/m1"). */
export const gpuHolders = (host: ClusterHost, count: number): Promise<string[][]> =>
  Promise.all(Array.from({ length: count }, async (_, index) => [...(await gpuHeld(host, index)).keys()]));

export class Cluster {
  server!: CapyProcess;
  managementUrl = '';
  inferenceUrl = '';
  readonly hosts: ClusterHost[] = [];
  /** Servers started besides the first, on the same store and Temporal. */
  readonly otherServers: ClusterServer[] = [];
  readonly dir = mkdtempSync(join(tmpdir(), 'capyctl-cluster-'));

  private constructor(
    readonly services: LifecycleServices,
    readonly database: FreshDatabase,
    private readonly serverYaml: string,
    private readonly serverId: string,
    private readonly inferenceToken: string | undefined,
  ) {}

  static async start(options: ClusterOptions = {}): Promise<Cluster> {
    const services = options.services ?? (await harnessServices());
    const cluster = new Cluster(
      services,
      await freshDatabase(services.postgresAdminUrl),
      options.serverYaml ?? '',
      options.serverId ?? `cluster-${randomUUID().slice(0, 8)}`,
      options.inferenceToken,
    );
    try {
      await cluster.startServer();
      for (const host of options.hosts ?? []) await cluster.addHost(host);
    } catch (e) {
      await cluster.close();
      throw e;
    }
    return cluster;
  }

  /** Starts (or starts again) the server process on the same database and task queue. */
  async startServer(): Promise<void> {
    const file = join(this.dir, 'server.yaml');
    const listen = this.managementUrl
      ? `listen: { management: "${new URL(this.managementUrl).host}", inference: "${new URL(this.inferenceUrl).host}" }`
      : 'listen: { management: "127.0.0.1:0", inference: "127.0.0.1:0" }';
    writeFileSync(
      file,
      [`temporal: { address: "${this.services.temporalAddress}" }`, listen, this.serverYaml].join('\n'),
    );
    this.server = new CapyProcess(['start', 'server', '--file', file], this.serverEnv());
    this.managementUrl = await this.server.awaitOutput('the server to start', /"managementUrl":"([^"]+)"/);
    this.inferenceUrl = await this.server.awaitOutput('the server to start', /"inferenceUrl":"([^"]+)"/);
  }

  /**
   * Another `capyctl start server` on the same store and Temporal, as `serverId` (its own task
   * queue), on listeners of its own: what a second server behind a balancer is.
   */
  async startAnotherServer(serverId: string): Promise<ClusterServer> {
    const file = join(this.dir, `server-${serverId}.yaml`);
    writeFileSync(
      file,
      [
        `temporal: { address: "${this.services.temporalAddress}" }`,
        'listen: { management: "127.0.0.1:0", inference: "127.0.0.1:0" }',
        this.serverYaml,
      ].join('\n'),
    );
    const process = new CapyProcess(['start', 'server', '--file', file], {
      ...this.serverEnv(),
      CAPYCTL_SERVER_ID: `${this.serverId}-${serverId}`,
    });
    const server: ClusterServer = {
      process,
      managementUrl: await process.awaitOutput(`server ${serverId} to start`, /"managementUrl":"([^"]+)"/),
      inferenceUrl: await process.awaitOutput(`server ${serverId} to start`, /"inferenceUrl":"([^"]+)"/),
    };
    this.otherServers.push(server);
    return server;
  }

  /** What `capyctl start server` needs, for a test that runs another one. */
  serverEnv(): NodeJS.ProcessEnv {
    return {
      DATABASE_URL: this.database.url,
      CAPYCTL_ADMIN_TOKEN: CLUSTER_ADMIN_TOKEN,
      CAPYCTL_SERVER_ID: this.serverId,
      ...(this.inferenceToken === undefined ? {} : { CAPYCTL_INFERENCE_TOKEN: this.inferenceToken }),
    };
  }

  /** Issues a host token through `capyctl create host-token`, starts the agent, and waits for its registration. */
  async addHost(options: ClusterHostOptions = {}): Promise<ClusterHost> {
    const host = await this.startHost(options);
    await host.process.awaitOutput(`${host.hostId} to register`, /"msg":"host (registered)"/);
    return host;
  }

  /** Issues a host token through `capyctl create host-token` and starts the agent, without waiting for it. */
  async startHost(options: ClusterHostOptions = {}): Promise<ClusterHost> {
    const created = await this.capyctl(['create', 'host-token']);
    if (created.code !== 0) throw new Error(`capyctl create host-token: ${created.stderr}`);
    const hostId = options.hostId ?? `host-${this.hosts.length + 1}-${randomUUID().slice(0, 6)}`;
    const dataDir = join(this.dir, hostId);
    const file = join(this.dir, `${hostId}.yaml`);
    const token = created.stdout.trim();
    writeFileSync(
      file,
      simHostYaml({
        hostId,
        serverUrl: options.serverUrl ?? this.managementUrl,
        token,
        temporalAddress: this.services.temporalAddress,
        dataDir,
        gpuMemory: options.gpuMemory ?? '8GiB',
        gpuCount: options.gpuCount,
        memoryKind: options.memoryKind,
        hostRam: options.hostRam,
        extra: options.yaml,
        engines: options.engines,
      }),
    );
    const host: ClusterHost = { hostId, token, dataDir, file, process: this.startAgent(file) };
    this.hosts.push(host);
    return host;
  }

  /** Where the server reaches the host's ingress, as its agent's start line names it. */
  ingressUrl(host: ClusterHost): Promise<string> {
    return host.process.awaitOutput(`${host.hostId}'s ingress URL`, /"ingressUrl":"([^"]+)"/);
  }

  startAgent(file: string): CapyProcess {
    return new CapyProcess(['start', 'host', '--file', file], {});
  }

  /** Starts a host's agent again, on its document, and waits for its registration. */
  async restartHost(host: ClusterHost): Promise<void> {
    await host.process.stop();
    host.process = this.startAgent(host.file);
    await host.process.awaitOutput(`${host.hostId} to register again`, /"msg":"host (registered)"/);
  }

  /** `capyctl` against this server with its admin token. */
  capyctl(args: readonly string[]): Promise<CliResult> {
    return capyctl(args, { CAPYCTL_SERVER: this.managementUrl, CAPYCTL_ADMIN_TOKEN: CLUSTER_ADMIN_TOKEN });
  }

  /** `capyctl <args>`, which must succeed: what it printed. */
  async capyctlOk(args: readonly string[]): Promise<string> {
    const r = await this.capyctl(args);
    if (r.code !== 0) throw new Error(`capyctl ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
    return r.stdout;
  }

  /** A management route; `token` defaults to the admin token, `null` sends none. */
  async api<T = any>(
    method: 'GET' | 'POST' | 'DELETE',
    path: string,
    body?: unknown,
    token: string | null = CLUSTER_ADMIN_TOKEN,
  ): Promise<ApiReply<T>> {
    return call(
      `${this.managementUrl}${path}`,
      method,
      body,
      token === null ? {} : { authorization: `Bearer ${token}` },
    );
  }

  /** Deploys a document written as YAML (see `simDeployment`) and waits until its checkpoint is measured. */
  async deploy(yaml: string): Promise<{ deployment_id: string; name: string }> {
    const reply = await this.api('POST', '/management/v1/deployments', parseYaml(yaml));
    if (reply.status >= 300) throw new Error(`deploy answered ${reply.status}: ${JSON.stringify(reply.body)}`);
    const { deployment_id, name } = reply.body.deployment;
    await until(
      `${name}'s checkpoint to be measured`,
      async () => {
        const d = await this.api('GET', `/management/v1/deployments/${name}`);
        return d.body.checkpoint === 'measured' ? true : undefined;
      },
      60_000,
    );
    return { deployment_id, name };
  }

  /** A deployment as `GET /management/v1/deployments/<name>` shows it. */
  async status(name: string): Promise<any> {
    return (await this.api('GET', `/management/v1/deployments/${name}`)).body;
  }

  /** A non-streamed chat completion on the inference listener, with its token when it has one. */
  chat(model: string, maxTokens = 4, headers: Record<string, string> = {}): Promise<ApiReply> {
    const token: Record<string, string> =
      this.inferenceToken === undefined ? {} : { authorization: `Bearer ${this.inferenceToken}` };
    return chatAt(this.inferenceUrl, model, maxTokens, { ...token, ...headers });
  }

  async close(): Promise<void> {
    await Promise.all(this.hosts.map((h) => h.process.stopForTeardown()));
    await Promise.all(this.otherServers.map((s) => s.process.stopForTeardown()));
    await this.server?.stopForTeardown();
    await this.database.drop();
  }
}

/** A non-streamed chat completion on the inference listener at `inferenceUrl`. */
export function chatAt(
  inferenceUrl: string,
  model: string,
  maxTokens = 4,
  headers: Record<string, string> = {},
): Promise<ApiReply> {
  return call(
    `${inferenceUrl}/v1/chat/completions`,
    'POST',
    { model, messages: [{ role: 'user', content: 'hi' }], max_tokens: maxTokens },
    headers,
  );
}

async function call(
  url: string,
  method: 'GET' | 'POST' | 'DELETE',
  body: unknown,
  headers: Record<string, string>,
): Promise<ApiReply> {
  const reply = await request(url, {
    method,
    headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await reply.body.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Not JSON: the test sees the text.
  }
  return { status: reply.statusCode, headers: reply.headers, body: parsed };
}
