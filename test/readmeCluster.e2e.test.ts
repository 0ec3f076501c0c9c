/**
 * README "A cluster by hand, step by step", as written: its blocks pasted in order into one shell,
 * in a checkout, on this machine's Postgres. Only the first block, the values, is the test's own
 * (free ports, databases of its own): it must name the same variables. Temporal's server and Web
 * UI, capyctl's server and a host agent come up; the request for chat-a is answered by its engine,
 * and the Web UI lists the workflows that started it.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { request } from 'undici';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { freePort } from '../processes/freePort.js';
import { readmeShBlocks, REPO, shell, type Shell } from './support/readme.js';
import { freeTemporalPorts, TEMPORAL_SMALL_SERVER } from './support/temporalCluster.js';
import { until } from './support/until.js';

/** The steps build nothing once the tools are there; the Temporal server, the UI and capyctl start in seconds each. */
const STEPS_TIMEOUT_MS = 240_000;
/** A SIGTERM'd piece that has not exited within this is killed: an idle server and agent stop in seconds. */
const STOP_GRACE_MS = 30_000;

/** The variables a line `export A=… B=…` sets, in order. */
const exported = (block: string) =>
  block
    .split('\n')
    .filter((line) => line.startsWith('export '))
    .flatMap((line) => [...line.matchAll(/(?:^export |\s)([A-Z_][A-Z0-9_]*)=/g)].map((m) => m[1]!));

/**
 * A checkout of this repository whose files are the repository's own (each top-level entry git
 * tracks, node_modules and the built tools, linked), so the steps' files (logs, server.yaml,
 * host.yaml, the agent's data) land in it and nowhere else.
 */
function checkout(dir: string): string {
  const tracked = execFileSync('git', ['ls-files'], { cwd: REPO, encoding: 'utf8' })
    .split('\n')
    .filter(Boolean)
    .map((path) => path.split('/')[0]!);
  // The tools a first run builds go where the repository's own go.
  mkdirSync(join(REPO, '.tools'), { recursive: true });
  mkdirSync(dir);
  for (const entry of new Set([...tracked, 'node_modules', '.tools'])) symlinkSync(join(REPO, entry), join(dir, entry));
  return dir;
}

/** Go's own folders, which a shell with its own HOME would otherwise look for under it (and fill again). */
const goFolders = () =>
  Object.fromEntries(
    ['GOPATH', 'GOMODCACHE', 'GOCACHE'].map((name) => [
      name,
      execFileSync('go', ['env', name], { encoding: 'utf8' }).trim(),
    ]),
  );

describe('README "A cluster by hand, step by step"', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'capyctl-readme-cluster-'));
  const dir = checkout(join(scratch, 'capyctl'));
  const home = join(scratch, 'home');
  mkdirSync(home);
  const name = `readme_${randomBytes(4).toString('hex')}`;
  const databases = [name, `${name}_visibility`, `${name}_capyctl`];
  let steps: Shell | undefined;

  afterAll(async () => {
    if (steps) {
      // Every piece the steps started is in the shell's process group.
      const group = -steps.child.pid!;
      const alive = () => {
        try {
          process.kill(group, 0);
          return true;
        } catch {
          return false;
        }
      };
      if (alive()) {
        process.kill(group, 'SIGTERM');
        await until('the pieces the steps started to stop', () => (alive() ? undefined : true), STOP_GRACE_MS).catch(
          () => process.kill(group, 'SIGKILL'),
        );
      }
    }
    const admin = new pg.Client({ connectionString: inject('postgresAdminUrl') });
    await admin.connect();
    try {
      for (const db of databases) await admin.query(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
    } finally {
      await admin.end();
    }
    rmSync(scratch, { recursive: true, force: true });
  }, STOP_GRACE_MS + 30_000);

  it(
    'brings up Temporal, its Web UI, the server and a host agent, and answers a request for chat-a',
    { timeout: STEPS_TIMEOUT_MS + 30_000 },
    async () => {
      const [values, ...rest] = readmeShBlocks('### A cluster by hand, step by step');
      expect(rest.length).toBeGreaterThan(4);

      const postgres = new URL(inject('postgresAdminUrl'));
      const ports = await freeTemporalPorts();
      const [ui, inference, management, ingress] = [
        await freePort(),
        await freePort(),
        await freePort(),
        await freePort(),
      ];
      const ours: Record<string, string> = {
        DB: 'postgres12',
        POSTGRES_SEEDS: postgres.hostname,
        DB_PORT: postgres.port || '5432',
        POSTGRES_USER: decodeURIComponent(postgres.username),
        POSTGRES_PWD: decodeURIComponent(postgres.password),
        DBNAME: databases[0]!,
        VISIBILITY_DBNAME: databases[1]!,
        NAMESPACE: 'default',
        RETENTION: '24h',
        BIND_ON_IP: TEMPORAL_SMALL_SERVER.BIND_ON_IP,
        TEMPORAL_BROADCAST_ADDRESS: TEMPORAL_SMALL_SERVER.TEMPORAL_BROADCAST_ADDRESS,
        FRONTEND_GRPC_PORT: ports.FRONTEND_GRPC_PORT,
        TEMPORAL_UI_PORT: String(ui),
        TEMPORAL_ADDRESS: `127.0.0.1:${ports.FRONTEND_GRPC_PORT}`,
        CAPYCTL_DB: databases[2]!,
        CAPYCTL_ADMIN_TOKEN: randomBytes(32).toString('hex'),
        DATABASE_URL: `${postgres.protocol}//${postgres.username}:${postgres.password}@${postgres.host}/${databases[2]}`,
        INFERENCE: `127.0.0.1:${inference}`,
        MANAGEMENT: `127.0.0.1:${management}`,
        INGRESS: `127.0.0.1:${ingress}`,
      };
      // The README's values and the test's are the same variables.
      expect(exported(values!).sort()).toEqual(Object.keys(ours).sort());

      steps = shell(['set -e', ...rest].join('\n'), dir, {
        ...process.env,
        ...goFolders(),
        HOME: home,
        CAPYCTL_LOG_FORMAT: 'json',
        // This machine's other work: Temporal's other ports free ones, its pools small (its config/docker.yaml's variables).
        ...ports,
        ...TEMPORAL_SMALL_SERVER,
        ...ours,
      });
      const logs = () =>
        ['temporal-schema.log', 'temporal.log', 'temporal-ui.log', 'server.log', 'host.log']
          .map((log) => {
            try {
              return `--- ${log}\n${readFileSync(join(dir, log), 'utf8').split('\n').slice(-15).join('\n')}`;
            } catch {
              return `--- ${log}: none`;
            }
          })
          .join('\n');
      const code = await Promise.race([
        steps.exited,
        new Promise<string>((resolve) => setTimeout(() => resolve('still running'), STEPS_TIMEOUT_MS)),
      ]);
      expect(code, `${steps.output()}\n${logs()}`).toBe(0);

      // The last step's answer: chat-a's engine (the simulator) wrote it.
      const answer = JSON.parse(steps.output().trim().split('\n').pop()!);
      expect(answer).toMatchObject({ object: 'chat.completion', model: 'chat-a' });
      expect(answer.choices[0].message.content.split(' ')).toHaveLength(8);

      // The Web UI reads that Temporal: it lists the host's scheduler and the switch that started chat-a.
      const listed = await request(`http://127.0.0.1:${ui}/api/v1/namespaces/default/workflows`);
      expect(listed.statusCode).toBe(200);
      const { executions } = (await listed.body.json()) as { executions: Array<{ execution: { workflowId: string } }> };
      const ids = executions.map((e) => e.execution.workflowId);
      expect(ids).toContain('host-scheduler/gpu-1');
      expect(ids.some((id) => id.startsWith('switch/'))).toBe(true);
      const page = await request(`http://127.0.0.1:${ui}/`);
      expect(page.statusCode).toBe(200);
      expect(page.headers['content-type']).toMatch(/^text\/html/);
      await page.body.dump();
    },
  );
});
