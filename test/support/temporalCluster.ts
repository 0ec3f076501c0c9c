/**
 * The Temporal server itself, as a cluster runs it (frontend, history, matching and worker in one
 * process), on Postgres: its own two databases on the machine's Postgres (history and visibility),
 * their schema set up by Temporal's SQL tool and the namespace and capyctl's search attributes by
 * the CLI's operator commands, both through the steps deploy/compose/ runs. It can be stopped
 * (SIGTERM or SIGKILL) and started again on the same databases and ports. The binaries come from
 * deploy/temporalServer.sh, deploy/temporalSqlTool.sh and deploy/temporal.sh.
 */
import { type ChildProcess, execFile } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Connection } from '@temporalio/client';
import pg from 'pg';
import { stringify } from 'yaml';
import { spawnEndingWithThisProcess } from '../../processes/endingWithThisProcess.js';
import { DYNAMIC_CONFIG_FILE, resolveTemporalCli } from '../../standalone/temporalDevServer.js';
import { deployTool } from '../../processes/deployTool.js';
import { freePort } from '../../processes/freePort.js';
import { searchAttributes } from '../../workflows/definitions.js';
import { until } from './until.js';

const run = promisify(execFile);

/** 4 shards: enough for a few workflows at once, and a start that acquires them in moments. */
const HISTORY_SHARDS = 4;
/** A frontend that does not serve within this is broken: a start on Postgres takes seconds. */
const READY_TIMEOUT_MS = 60_000;
/** A SIGTERM'd server that has not exited within this is killed: its graceful stop takes seconds. */
const STOP_GRACE_MS = 20_000;
const NAMESPACE = 'default';
/**
 * Connections per service and store (the process runs four services, each with its own pools): the
 * machine's Postgres allows 100 in all, shared with every capyctl test.
 */
const POOL = { history: 5, visibility: 2 };

const SERVICES = ['frontend', 'history', 'matching', 'worker'] as const;

export interface TemporalClusterOptions {
  /** `postgres://user[:password]@host:port/db`: where the server's databases are created. */
  postgresAdminUrl: string;
}

export class TemporalCluster {
  readonly namespace = NAMESPACE;
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();

  private constructor(
    private readonly postgresAdminUrl: string,
    readonly databases: { history: string; visibility: string },
    readonly dir: string,
    private readonly ports: Record<(typeof SERVICES)[number], { grpc: number; membership: number }> & { http: number },
    private readonly binary: string,
  ) {}

  /** The frontend's address, for clients and workers. */
  get address(): string {
    return `127.0.0.1:${this.ports.frontend.grpc}`;
  }

  get logFile(): string {
    return join(this.dir, 'temporal.log');
  }

  /**
   * Creates the databases and their schema, starts the server, and creates the namespace and the
   * search attributes: resolves once the frontend serves them.
   */
  static async start(options: TemporalClusterOptions): Promise<TemporalCluster> {
    const [binary, sqlTool] = await Promise.all([deployTool('temporalServer.sh'), deployTool('temporalSqlTool.sh')]);
    const name = `temporal_${randomBytes(4).toString('hex')}`;
    const databases = { history: name, visibility: `${name}_visibility` };
    const ports = { http: await freePort() } as TemporalCluster['ports'];
    for (const service of SERVICES) ports[service] = { grpc: await freePort(), membership: await freeMembershipPort() };
    const cluster = new TemporalCluster(
      options.postgresAdminUrl,
      databases,
      mkdtempSync(join(tmpdir(), 'capyctl-temporal-')),
      ports,
      binary,
    );
    try {
      await cluster.setUpSchema(sqlTool);
      cluster.writeConfig();
      await cluster.launch();
      await cluster.createNamespaceAndSearchAttributes();
    } catch (e) {
      await cluster.close();
      throw e;
    }
    return cluster;
  }

  /** Stops the server: SIGTERM lets it shut down, SIGKILL ends it at once, as a crash would. */
  async stop(signal: 'SIGTERM' | 'SIGKILL' = 'SIGTERM'): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    child.kill(signal);
    const killer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
    await this.exited;
    clearTimeout(killer);
  }

  /**
   * Stops the server and starts it again on the same databases and ports; resolves once it serves,
   * with how long it was away (from the signal to its frontend answering).
   */
  async restart(signal: 'SIGTERM' | 'SIGKILL'): Promise<number> {
    const began = Date.now();
    await this.stop(signal);
    await this.launch();
    return Date.now() - began;
  }

  /** Stops the server, drops its databases and removes its folder. */
  async close(): Promise<void> {
    await this.stop();
    const admin = new pg.Client({ connectionString: this.postgresAdminUrl });
    await admin.connect();
    try {
      for (const db of Object.values(this.databases)) await admin.query(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
    } finally {
      await admin.end();
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  private get postgres() {
    const url = new URL(this.postgresAdminUrl);
    return {
      host: url.hostname,
      port: Number(url.port || 5432),
      user: decodeURIComponent(url.username),
      password: decodeURIComponent(url.password),
    };
  }

  /**
   * The deploy's own step (deploy/compose/temporal-schema.sh, as Compose runs it) with the SQL tool
   * and the schema files of the server's release, from its Go module.
   */
  private async setUpSchema(sqlTool: string): Promise<void> {
    const { host, port, user, password } = this.postgres;
    await runScript('temporal-schema.sh', {
      PATH: `${dirname(sqlTool)}:${process.env.PATH}`,
      SCHEMA_DIR: join(await serverModuleDir(this.binary), 'schema', 'postgresql', 'v12'),
      DB: 'postgres12',
      POSTGRES_SEEDS: host,
      DB_PORT: String(port),
      POSTGRES_USER: user,
      POSTGRES_PWD: password,
      DBNAME: this.databases.history,
      VISIBILITY_DBNAME: this.databases.visibility,
    });
  }

  /** config/capyctl.yaml under the cluster's folder: the server reads `<root>/config/<env>.yaml`. */
  private writeConfig(): void {
    const { host, port, user, password } = this.postgres;
    const store = (databaseName: string, conns: number) => ({
      sql: {
        pluginName: 'postgres12',
        databaseName,
        connectAddr: `${host}:${port}`,
        connectProtocol: 'tcp',
        user,
        password,
        maxConns: conns,
        maxIdleConns: conns,
        maxConnLifetime: '1h',
      },
    });
    const rpc = (service: (typeof SERVICES)[number]) => ({
      rpc: {
        grpcPort: this.ports[service].grpc,
        membershipPort: this.ports[service].membership,
        bindOnIP: '127.0.0.1',
        ...(service === 'frontend' ? { httpPort: this.ports.http } : {}),
      },
    });
    const config = {
      log: { stdout: true, level: 'warn' },
      persistence: {
        defaultStore: 'history',
        // Postgres 12+ visibility is the advanced one: custom search attributes and list queries on them.
        visibilityStore: 'visibility',
        numHistoryShards: HISTORY_SHARDS,
        datastores: {
          history: store(this.databases.history, POOL.history),
          visibility: store(this.databases.visibility, POOL.visibility),
        },
      },
      global: { membership: { maxJoinDuration: '30s', broadcastAddress: '127.0.0.1' } },
      services: Object.fromEntries(SERVICES.map((s) => [s, rpc(s)])),
      clusterMetadata: {
        enableGlobalNamespace: false,
        failoverVersionIncrement: 10,
        masterClusterName: 'active',
        currentClusterName: 'active',
        clusterInformation: {
          active: {
            enabled: true,
            initialFailoverVersion: 1,
            rpcName: 'frontend',
            rpcAddress: this.address,
            httpAddress: `127.0.0.1:${this.ports.http}`,
          },
        },
      },
      dcRedirectionPolicy: { policy: 'noop' },
      dynamicConfigClient: { filepath: DYNAMIC_CONFIG_FILE, pollInterval: '60s' },
      archival: { history: { state: 'disabled' }, visibility: { state: 'disabled' } },
      namespaceDefaults: { archival: { history: { state: 'disabled' }, visibility: { state: 'disabled' } } },
    };
    mkdirSync(join(this.dir, 'config'), { recursive: true });
    writeFileSync(join(this.dir, 'config', 'capyctl.yaml'), stringify(config));
  }

  /** Starts the process and resolves once its frontend answers. */
  private async launch(): Promise<void> {
    const logStart = statSafe(this.logFile);
    const output = openSync(this.logFile, 'a');
    const args = ['--root', this.dir, '--config', 'config', '--env', 'capyctl', '--allow-no-auth', 'start'];
    const child = spawnEndingWithThisProcess([this.binary, ...args], { stdio: ['ignore', output, output] });
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    const deadline = Date.now() + READY_TIMEOUT_MS;
    let last: unknown;
    while (Date.now() < deadline) {
      if (child.exitCode !== null)
        throw new Error(`the Temporal server exited during start: ${lastLines(this.logFile, logStart)}`);
      try {
        const connection = await Connection.connect({ address: this.address, connectTimeout: 1_000 });
        try {
          await connection.workflowService.getSystemInfo({});
          return;
        } finally {
          await connection.close();
        }
      } catch (e) {
        last = e;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    await this.stop('SIGKILL');
    throw new Error(
      `the Temporal server at ${this.address} did not serve within ${READY_TIMEOUT_MS} ms: ${String(last)}`,
    );
  }

  /**
   * The deploy's own step (deploy/compose/temporal-namespace.sh: `temporal operator namespace create`
   * and `… search-attribute create`), then waits until the frontend lists the attributes.
   */
  private async createNamespaceAndSearchAttributes(): Promise<void> {
    const cli = await resolveTemporalCli();
    await runScript('temporal-namespace.sh', {
      PATH: `${dirname(cli)}:${process.env.PATH}`,
      TEMPORAL_ADDRESS: this.address,
      NAMESPACE,
      RETENTION: '24h',
    });
    const wanted = Object.values(searchAttributes).map((key) => key.name);
    await until(
      `the search attributes on ${this.address}`,
      async () => {
        const connection = await Connection.connect({ address: this.address });
        try {
          const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace: NAMESPACE });
          return wanted.every((name) => customAttributes && name in customAttributes) ? true : undefined;
        } finally {
          await connection.close();
        }
      },
      READY_TIMEOUT_MS,
    );
  }
}

/** A script of deploy/compose/ with `env` besides this process's, failing with what it printed. */
async function runScript(name: string, env: NodeJS.ProcessEnv): Promise<void> {
  const script = fileURLToPath(new URL(`../../deploy/compose/${name}`, import.meta.url));
  await run('bash', [script], { env: { ...process.env, ...env } }).catch((e) => {
    throw new Error(`${name}: ${e.stderr || e.message}`);
  });
}

/** Where the Go module of the server's release is (downloaded if the cache lacks it): its schema files. */
async function serverModuleDir(binary: string): Promise<string> {
  const { stdout: version } = await run(binary, ['--version']);
  const release = /(\d+\.\d+\.\d+)/.exec(version)?.[1];
  if (!release) throw new Error(`${binary} --version named no release: ${version}`);
  const { stdout } = await run('go', ['mod', 'download', '-json', `go.temporal.io/server@v${release}`]);
  return (JSON.parse(stdout) as { Dir: string }).Dir;
}

/**
 * Temporal keeps each service's membership port in a Postgres smallint, so it must be below 32768:
 * under the kernel's ephemeral range, where freePort's ports come from (and no other process's
 * ports come from by chance either).
 */
async function freeMembershipPort(): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = randomInt(20_000, 32_768);
    if (await canListen(port)) return port;
  }
  throw new Error('no free port between 20000 and 32767');
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

function statSafe(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}

/** The server's last few log lines since `from`: why it exited. */
function lastLines(file: string, from: number): string {
  const lines = readFileSync(file).subarray(from).toString('utf8').trim().split('\n');
  return lines.slice(-5).join(' | ') || '(it wrote nothing)';
}
