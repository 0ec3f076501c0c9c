/**
 * The Temporal server itself, as a cluster runs it (frontend, history, matching and worker in one
 * process), on Postgres: its own two databases on the machine's Postgres (history and visibility),
 * through the steps README "A cluster by hand" gives: the schema by deploy/compose/temporal-schema.sh,
 * the server by deploy/temporal/server.sh (its release's config/docker.yaml, read from variables),
 * the namespace and capyctl's search attributes by deploy/compose/temporal-namespace.sh. It can be
 * stopped (SIGTERM or SIGKILL) and started again on the same databases and ports. The binaries come
 * from deploy/temporalServer.sh, deploy/temporalSqlTool.sh and deploy/temporal.sh.
 */
import { type ChildProcess, execFile } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { mkdtempSync, openSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Connection } from '@temporalio/client';
import pg from 'pg';
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

const SERVICES = ['FRONTEND', 'HISTORY', 'MATCHING', 'WORKER'] as const;

/** The variables of the server's config/docker.yaml that name its ports. */
export type TemporalPorts = Record<
  `${(typeof SERVICES)[number]}_${'GRPC' | 'MEMBERSHIP'}_PORT` | 'FRONTEND_HTTP_PORT',
  string
>;

/** Free ports for a Temporal server's services, as config/docker.yaml's variables. */
export async function freeTemporalPorts(): Promise<TemporalPorts> {
  const ports: Partial<TemporalPorts> = { FRONTEND_HTTP_PORT: String(await freePort()) };
  for (const service of SERVICES) {
    ports[`${service}_GRPC_PORT`] = String(await freePort());
    ports[`${service}_MEMBERSHIP_PORT`] = String(await freeMembershipPort());
  }
  return ports as TemporalPorts;
}

/**
 * What a server on a machine that other work shares needs besides its databases and ports: its
 * services on loopback, few shards and small connection pools (the machine's Postgres allows 100
 * connections in all, shared with every capyctl test), warnings only in its log.
 */
export const TEMPORAL_SMALL_SERVER = {
  BIND_ON_IP: '127.0.0.1',
  TEMPORAL_BROADCAST_ADDRESS: '127.0.0.1',
  NUM_HISTORY_SHARDS: String(HISTORY_SHARDS),
  SQL_MAX_CONNS: String(POOL.history),
  SQL_MAX_IDLE_CONNS: String(POOL.history),
  SQL_VIS_MAX_CONNS: String(POOL.visibility),
  SQL_VIS_MAX_IDLE_CONNS: String(POOL.visibility),
  LOG_LEVEL: 'warn',
};

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
    private readonly ports: TemporalPorts,
    private readonly binary: string,
  ) {}

  /** The frontend's address, for clients and workers. */
  get address(): string {
    return `127.0.0.1:${this.ports.FRONTEND_GRPC_PORT}`;
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
    const cluster = new TemporalCluster(
      options.postgresAdminUrl,
      { history: name, visibility: `${name}_visibility` },
      mkdtempSync(join(tmpdir(), 'capyctl-temporal-')),
      await freeTemporalPorts(),
      binary,
    );
    try {
      await cluster.setUpSchema(sqlTool);
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

  /** The variables deploy/compose/temporal-schema.sh and the server's config/docker.yaml read. */
  private get databaseVariables() {
    const url = new URL(this.postgresAdminUrl);
    return {
      DB: 'postgres12',
      POSTGRES_SEEDS: url.hostname,
      DB_PORT: url.port || '5432',
      POSTGRES_USER: decodeURIComponent(url.username),
      POSTGRES_PWD: decodeURIComponent(url.password),
      DBNAME: this.databases.history,
      VISIBILITY_DBNAME: this.databases.visibility,
    };
  }

  /**
   * The deploy's own step (deploy/compose/temporal-schema.sh, as Compose runs it) with the SQL tool
   * and the schema files of the server's release, from its Go module.
   */
  private async setUpSchema(sqlTool: string): Promise<void> {
    await runScript('compose/temporal-schema.sh', {
      PATH: `${dirname(sqlTool)}:${process.env.PATH}`,
      SCHEMA_DIR: join(await serverModuleDir(this.binary), 'schema', 'postgresql', 'v12'),
      ...this.databaseVariables,
    });
  }

  /** Starts the process and resolves once its frontend answers. */
  private async launch(): Promise<void> {
    const logStart = statSafe(this.logFile);
    const output = openSync(this.logFile, 'a');
    // deploy/temporal/server.sh replaces itself with the server: a signal to the child reaches it.
    const child = spawnEndingWithThisProcess(['bash', deployFile('temporal/server.sh')], {
      stdio: ['ignore', output, output],
      env: {
        ...process.env,
        CAPYCTL_TEMPORAL_SERVER_BIN: this.binary,
        DYNAMIC_CONFIG_FILE_PATH: DYNAMIC_CONFIG_FILE,
        ...this.databaseVariables,
        ...this.ports,
        ...TEMPORAL_SMALL_SERVER,
      },
    });
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
    await runScript('compose/temporal-namespace.sh', {
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

function deployFile(path: string): string {
  return fileURLToPath(new URL(`../../deploy/${path}`, import.meta.url));
}

/** A script of deploy/ with `env` besides this process's, failing with what it printed; its output. */
async function runScript(path: string, env: NodeJS.ProcessEnv, ...args: string[]): Promise<string> {
  const { stdout } = await run('bash', [deployFile(path), ...args], { env: { ...process.env, ...env } }).catch((e) => {
    throw new Error(`${path}: ${e.stderr || e.message}`);
  });
  return stdout;
}

/** Where the Go module of the server's release is (downloaded if the cache lacks it): its schema files. */
async function serverModuleDir(binary: string): Promise<string> {
  return (await runScript('temporal/moduleOf.sh', {}, binary)).trim();
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
